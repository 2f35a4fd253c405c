"""The shape of the code: no import cycles among the project's modules (function-local imports included, so
none can hide a circle), each package importing only packages on floors below its own, no module over 800 lines and
no function over 90, workers/ never importing pipeline/ nor Dask at import time, and every module importable on a
machine without CuPy."""
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


#: the packages of pipeline/ and workers/ by floor: a package imports only packages on lower floors (the top
#: package's ``__init__``, floor 0, below all).  A new capability takes a floor here (tests/test_layout.py refuses a
#: package without one): pipeline/variants/ and workers/variants/, say, beside the analyses built on the scan.
FLOORS = {
    "pipeline": {"cli": 7, "discover": 6, "enrich": 6, "variants": 6, "compare": 5, "composition": 5, "scan": 4,
                 "distribution": 3, "motifs": 2, "engine": 2, "io": 1},
    "workers": {"preload": 4, "warmup": 3, "scan": 2, "compare": 2, "composition": 2, "discover": 2, "enrich": 2,
                "variants": 2,
                "distribution": 1, "backend": 0, "fasta_numba": 0, "trace": 0},
}


def floor_of(module: str, floors=FLOORS):
    """``(top package, package, floor)`` of a dotted module name; the top package's ``__init__`` is floor 0."""
    parts = module.split(".")
    if len(parts) == 1:
        return parts[0], "", 0
    return parts[0], parts[1], floors[parts[0]].get(parts[1])


def floor_breaches(mods: dict, floors=FLOORS) -> list:
    """``(importer, imported)`` of every import, function-local ones included, from one package of a top package
    to another on the same floor or a higher one; a package without a floor is a breach of itself."""
    found = []
    for name, path in sorted(mods.items()):
        top, pkg, floor = floor_of(name, floors)
        if floor is None:
            found.append((name, "no floor"))
            continue
        for other in sorted(imports_of(name, path, mods)):
            otop, opkg, ofloor = floor_of(other, floors)
            if otop == top and opkg != pkg and (ofloor is None or ofloor >= floor):
                found.append((name, other))
    return found


def test_the_floor_check_sees_an_import_upwards_and_a_package_without_a_floor(tmp_path):
    for pkg in ("low", "high", "new"):
        (tmp_path / "workers" / pkg).mkdir(parents=True)
        (tmp_path / "workers" / pkg / "__init__.py").write_text("")
    (tmp_path / "workers" / "__init__.py").write_text("")
    (tmp_path / "workers" / "high" / "a.py").write_text("from workers.low.b import B\n")
    (tmp_path / "workers" / "low" / "b.py").write_text("def f():\n    from workers.high import a\n    return a\n\nB = 1\n")
    floors = {"workers": {"high": 2, "low": 1}}
    assert floor_breaches(project_modules(tmp_path, ("workers",)), floors) == [
        ("workers.low.b", "workers.high.a"), ("workers.new", "no floor")]


def test_each_package_imports_only_lower_floors():
    """pipeline/: cli → discover, enrich → compare, composition → scan → distribution → motifs, engine → io; workers/:
    preload → warmup → the capabilities → distribution → backend."""
    assert floor_breaches(project_modules(ROOT)) == []


def long_definitions(root: Path, packages=PACKAGES, module_lines: int = 800, function_lines: int = 90) -> list:
    """Modules over ``module_lines`` lines and functions (methods and nested ones included) over ``function_lines``."""
    found = []
    for name, path in sorted(project_modules(root, packages).items()):
        text = path.read_text()
        if text.count("\n") > module_lines:
            found.append((name, text.count("\n")))
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                span = node.end_lineno - min([node.lineno] + [d.lineno for d in node.decorator_list]) + 1
                if span > function_lines:
                    found.append((f"{name}.{node.name}", span))
    return found


def test_no_module_over_800_lines_and_no_function_over_90():
    """A module a newcomer reads in one sitting, a function on a screen or so (cli.py had 1,184 lines and scan.py's
    _execute_scan 118 before pipeline/ took the capabilities' packages)."""
    assert long_definitions(ROOT) == []


def test_the_length_check_counts_modules_and_functions(tmp_path):
    (tmp_path / "workers").mkdir()
    (tmp_path / "workers" / "__init__.py").write_text("")
    body = "".join(f"    x{i} = {i}\n" for i in range(91))
    (tmp_path / "workers" / "long.py").write_text(f"def f():\n{body}\n\ndef g():\n    return 1\n")
    assert long_definitions(tmp_path, ("workers",)) == [("workers.long.f", 92)]
    (tmp_path / "workers" / "long.py").write_text("x = 1\n" * 801)
    assert long_definitions(tmp_path, ("workers",)) == [("workers.long", 801)]


def hidden_modules(mods: dict) -> list:
    """``(package, name)`` where a package's ``__init__`` binds a name of one of its modules to something else."""
    found = []
    for name, path in sorted(mods.items()):
        if path.name != "__init__.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ImportFrom):
                found += [(name, a.asname or a.name) for a in node.names if f"{name}.{a.asname or a.name}" in mods
                          and not (node.module == name and a.name == (a.asname or a.name))]
    return found


def test_no_package_face_hides_a_module(tmp_path):
    """``from pipeline.scan.export import export`` in ``pipeline/scan/__init__.py`` would make ``import
    pipeline.scan.export as m`` (and monkeypatch's dotted paths) find the function, not the module."""
    assert hidden_modules(project_modules(ROOT)) == []
    (tmp_path / "workers" / "scan").mkdir(parents=True)
    (tmp_path / "workers" / "__init__.py").write_text("")
    (tmp_path / "workers" / "scan" / "__init__.py").write_text(
        "from workers.scan import plan\nfrom workers.scan.export import export\n")
    (tmp_path / "workers" / "scan" / "export.py").write_text("def export():\n    pass\n")
    (tmp_path / "workers" / "scan" / "plan.py").write_text("")
    assert hidden_modules(project_modules(tmp_path, ("workers",))) == [("workers.scan", "export")]


def test_each_package_face_names_its_api():
    """Every package of pipeline/ has a docstring and ``__all__``, each name of which it binds."""
    for name, path in project_modules(ROOT, ("pipeline",)).items():
        if path.name != "__init__.py" or name == "pipeline":
            continue
        tree = ast.parse(path.read_text())
        assert ast.get_docstring(tree), name
        names = module_names(path)
        assert "__all__" in names, name
        listed = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets))
        assert set(listed) <= names, (name, set(listed) - names)


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
