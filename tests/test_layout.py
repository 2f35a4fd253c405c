"""The shape of the code: no import cycles among the project's modules (function-local imports included, so
none can hide a circle), workers/ never importing pipeline/ nor Dask at import time, and every module
importable on a machine without CuPy."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, subprocess_env

PACKAGES = ("pipeline", "workers")


def project_modules(root: Path, packages=PACKAGES) -> dict:
    """``{dotted name: path}`` of every module of ``packages`` under ``root`` (a package by its ``__init__``)."""
    mods = {}
    for pkg in packages:
        for p in sorted((root / pkg).rglob("*.py")):
            parts = list(p.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = p
    return mods


def imports_of(name: str, path: Path, mods: dict) -> set:
    """The project modules that module ``name`` imports anywhere in its source (top level or in a function).
    ``from pkg import x`` counts as importing ``pkg.x`` when that is a module, else ``pkg``."""
    def resolve(dotted):
        while dotted and dotted not in mods:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {resolve(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                base = ".".join(pkg[:len(pkg) - node.level + 1] + ([base] if base else []))
            out |= {f"{base}.{a.name}" if f"{base}.{a.name}" in mods else resolve(base) for a in node.names}
    return out - {None, name}


def import_cycles(mods: dict) -> list:
    """Strongly connected components of more than one module in the import graph (Tarjan)."""
    graph = {m: imports_of(m, p, mods) for m, p in mods.items()}
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_the_cycle_finder_sees_a_circle_held_by_a_function_local_import(tmp_path):
    (tmp_path / "workers").mkdir()
    (tmp_path / "workers" / "__init__.py").write_text("")
    (tmp_path / "workers" / "a.py").write_text("from workers.b import B\n\nA = 1\n")
    (tmp_path / "workers" / "b.py").write_text("def f():\n    from workers.a import A\n    return A\n\nB = 2\n")
    (tmp_path / "workers" / "c.py").write_text("from workers import a, b\n")
    assert import_cycles(project_modules(tmp_path, ("workers",))) == [["workers.a", "workers.b"]]


def test_no_import_cycles():
    assert import_cycles(project_modules(ROOT)) == []


def import_time_nodes(tree):
    """Every node that runs when the module is imported: all but the bodies of functions (class bodies and
    module-level ``try``/``if`` blocks run)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            todo.extend(ast.iter_child_nodes(node))


def test_workers_never_import_pipeline_nor_dask_at_import_time():
    mods = project_modules(ROOT, ("workers",))
    for name, path in mods.items():
        assert not any(m.startswith("pipeline") for m in imports_of(name, path, project_modules(ROOT))), name
        for node in import_time_nodes(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            assert not any(n.split(".")[0] in ("dask", "distributed", "cupy", "cupyx") for n in names), \
                f"{name} imports {names} at import time"


def test_no_private_name_is_imported_across_modules():
    """A name another module of pipeline/ or workers/ needs is public: ``from pipeline.scan.graph import _x`` is refused
    (main imported _thresholds_table, _sniff_fasta, _prepare, _lattice, _kernel and _tables across modules)."""
    mods = project_modules(ROOT)
    found = []
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                found += [(name, node.module, a.name) for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")
                          and f"{node.module}.{a.name}" not in mods]
    assert found == []


def test_every_module_imports_without_cupy():
    """Each module alone (project modules dropped from ``sys.modules`` before each import), with ``cupy``,
    ``cupyx`` and ``dask_cuda`` made unimportable: the GPU modules load, and only fail when a GPU is asked for."""
    names = sorted(project_modules(ROOT))
    code = """
import importlib, sys
for blocked in ("cupy", "cupyx", "dask_cuda"):
    sys.modules[blocked] = None
failed = []
for name in sys.argv[2:]:
    for m in [m for m in sys.modules if m.split(".")[0] in sys.argv[1].split(",")]:
        del sys.modules[m]
    try:
        importlib.import_module(name)
    except Exception as e:
        failed.append(f"{name}: {type(e).__name__}: {e}")
print("\\n".join(failed))
sys.exit(1 if failed else 0)
"""
    # two interpreters at once, each importing every other module (one core each: 5 s for all in one)
    procs = [subprocess.Popen([sys.executable, "-c", code, ",".join(PACKAGES), *names[k::2]], cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env())
             for k in range(2)]
    for p in procs:
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stdout + stderr
    assert sum(len(names[k::2]) for k in range(2)) == len(names) > 50


def module_names(path: Path) -> set:
    """Names a module binds when imported: its top-level functions, classes, assignments and imports (those inside
    module-level ``if``/``try``/``with`` blocks too)."""
    names, todo = set(), list(ast.parse(path.read_text()).body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {a.asname or a.name for a in node.names}
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            todo += [n for part in ("body", "orelse", "finalbody", "handlers") for n in getattr(node, part, [])]
        elif isinstance(node, ast.ExceptHandler):
            todo += node.body
    return names


def test_every_import_of_the_project_resolves():
    """Every import of a project module, function-local ones included (they run late, so importing each module
    does not try them), names a module that exists and a name it binds: pipeline/enrich/stats.py kept importing
    ``workers.tomtom`` after it moved to ``workers/compare/tomtom.py``, found only when an enrichment ran."""
    mods = project_modules(ROOT)
    bound = {}
    broken = []
    files = [p for d in ("pipeline", "workers", "tests", "benchmarks") for p in sorted((ROOT / d).rglob("*.py"))]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                broken += [(path.name, a.name) for a in node.names
                           if a.name.split(".")[0] in PACKAGES and a.name not in mods]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                    and node.module.split(".")[0] in PACKAGES:
                if node.module not in mods:
                    broken.append((path.name, node.module))
                    continue
                if node.module not in bound:
                    bound[node.module] = module_names(mods[node.module])
                broken += [(path.name, f"{node.module}.{a.name}") for a in node.names
                           if a.name not in bound[node.module] and f"{node.module}.{a.name}" not in mods]
    assert broken == []
