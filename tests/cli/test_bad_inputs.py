"""The bad-input corpus (tests/data/bad/CASES.tsv) through the real CLI entry point, one case each.

Every malformed input ends with exit status 2, one line on stderr naming the input and the problem, no
traceback, and nothing that looks finished: no `_summary.json`, no genome store (`zarr.json`), no output
file, no temporary or partial file.  Cases marked OK are awkward but valid inputs that must work, checked
against an independent reading of the file.
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import dask.config
import distributed  # noqa: F401  (its config defaults must exist before dask.config.set touches them)
import pytest

from pipeline.io.genome import GenomeStore, decode, ingest
from tests.conftest import DATA

BAD = DATA / "bad"
MOTIFS = str(DATA / "jaspar2024_subset.jaspar")


def _cases():
    out = []
    for line in (BAD / "CASES.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        cid, inp, command, expect = line.split("\t")
        out.append(pytest.param(inp, command, expect, id=cid))
    return out


CASES = _cases()
_INDEX_EXTS = (".fai", ".gzi")         # beside a corpus FASTA: an index of an earlier version of it (stale)


def test_corpus_size():
    """The issue asks for at least 30 malformed inputs; README's reliability section reports the count."""
    files = [p for p in BAD.rglob("*") if p.is_file() and p.parent != BAD]
    assert len(files) >= 30
    assert len(CASES) >= 60
    used = {c.values[0] for c in CASES}
    used |= {u + ext for u in used for ext in _INDEX_EXTS}          # a FASTA's stale index travels with it
    assert {str(p.relative_to(BAD)) for p in files} <= used          # every file in the corpus is exercised
    assert f"{len(CASES)} bad inputs" in (BAD.parents[2] / "README.md").read_text()


@pytest.fixture(scope="module")
def good(tmp_path_factory, chrx_slice):
    """A valid FASTA and its store (halo 40 >= the longest test motif - 1), shared read-only by the cases."""
    d = tmp_path_factory.mktemp("good")
    fa = d / "good.fa"
    fa.write_text(">chrA\n" + "\n".join(chrx_slice[i:i + 60] for i in range(0, 6000, 60)) + "\n")
    return fa, ingest(fa, d / "good.zarr", block_size=2000, halo=40)


def _damaged_store(kind: str, good_store: GenomeStore, dest: Path) -> Path:
    shutil.copytree(good_store.path, dest)
    meta = dest / "zarr.json"
    chunk = next(p for p in sorted((dest / "blocks" / "c").rglob("*")) if p.is_file())   # the first chunk (shard)
    if kind == "broken_json":
        meta.write_text("{broken")
    elif kind == "future_version":
        m = json.loads(meta.read_text())
        m["attributes"]["format_version"] = 999
        meta.write_text(json.dumps(m))
    elif kind == "plain_zarr":
        meta.write_text(json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}}))
    elif kind == "missing_chunk":
        chunk.unlink()
    elif kind == "corrupt_chunk":
        chunk.write_bytes(os.urandom(200))
    else:
        raise ValueError(kind)
    return dest


def _prepare_input(inp: str, good, inputs: Path) -> str:
    """The case's input, copied into ``inputs`` (the corpus folder stays untouched: pyfaidx writes .fai files)."""
    fa, store = good
    inputs.mkdir()
    if inp == "-":
        return ""
    if inp == "dir:":
        d = inputs / "a_folder"
        d.mkdir()
        (d / "something.txt").write_text("not for us\n")
        return str(d)
    if inp.startswith("store:"):
        return str(_damaged_store(inp[6:], store, inputs / f"{inp[6:]}.zarr"))
    if inp == "hits:unfinished":                 # a scan claimed with p = 1e-3, never run
        from pipeline.scan.plan import plan_scan

        plan_scan(store.path, MOTIFS, str(inputs / "hits"), pvalue=1e-3)
        return str(inputs / "hits")
    src = (BAD / inp).resolve()
    dst = inputs / src.name
    shutil.copyfile(src, dst)
    for ext in _INDEX_EXTS:            # an index left beside the FASTA, copied after it: it looks newer (current)
        if src.with_name(src.name + ext).exists():
            shutil.copyfile(src.with_name(src.name + ext), dst.with_name(dst.name + ext))
    return str(dst)


def _run(args) -> int:
    from pipeline.cli.command import main

    try:
        return main(args)
    except SystemExit as e:                      # argparse errors
        return e.code


def _naive_fasta(path: Path) -> dict:
    """An independent FASTA reading (``tests.reference.fasta_records``): records as upper-case text, N for any byte
    other than A/C/G/T."""
    from tests.reference import fasta_records

    return {name: decode(codes) for name, codes in fasta_records(path)}


def _nothing_finished(work: Path, inputs: Path, outputs: list[Path]) -> None:
    for p in work.rglob("*"):
        assert p.name != "_summary.json", f"{p} looks finished"
        assert ".tmp" not in p.name and not p.name.endswith(".partial") and not p.name.startswith(".motifgrid-"), \
            f"temporary file left: {p}"
        if not p.is_relative_to(inputs):
            assert p.name != "zarr.json", f"a genome store was left: {p}"
    for o in outputs:
        assert not o.exists() or (o.is_dir() and not (o / "_summary.json").exists()), f"{o} was written"


@pytest.mark.parametrize("inp,command,expect", CASES)
def test_bad_input(inp, command, expect, good, tmp_path, capfd):
    if "JASPAR20" in command:
        pytest.importorskip("pyjaspar")          # without it the message is "pyjaspar is not installed" (also exit 2)
    fa, store = good
    work = tmp_path / "w"
    work.mkdir()
    inputs = work / "in"
    src = _prepare_input(inp, good, inputs)
    out = work / "result"
    args = [a.format(input=src, store=store.path, motifs=MOTIFS, out=out, tmp=work, fasta=fa)
            for a in shlex.split(command)]
    capfd.readouterr()
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        rc = _run(args)
    _, err = capfd.readouterr()
    assert "Traceback" not in err, err
    if expect == "OK":
        assert rc == 0, err
        want = _naive_fasta(Path(src))
        g = GenomeStore(args[2])
        assert g.records.names == list(want)
        for name, seq in want.items():
            assert decode(g.fetch(name, 0, len(seq))) == seq
        return
    assert rc == 2, err
    # the scan prints a banner once its cluster is up; the error is then the one line after it
    lines = [x for x in err.splitlines() if x.strip() and not x.startswith(f"motifgrid {args[0]} on ")]
    assert len(lines) == 1, err
    line = lines[0]
    assert line.startswith(f"motifgrid {args[0]}: error: ") and expect in line, line
    if src and inp != "hits:unfinished":
        assert Path(src).name in line, f"the message does not name the input: {line}"
    _nothing_finished(work, inputs, [out, Path(f"{out}.zarr"), Path(f"{out}.bed"), Path(f"{out}.vcf"),
                                     work / "nodir"])


@pytest.mark.parametrize("argv,tail", [
    (["scan", "g.zarr", MOTIFS, "--out", "h"], "interrupted; finished blocks are kept (rerun with --resume)"),
    (["scan", "g.zarr", MOTIFS, "--out", "none"], "interrupted"),     # stopped before its output was claimed
    (["composition", "t.fa", "g.zarr", "--out", "o"], "interrupted; finished blocks are kept (rerun with --resume)"),
    (["demo"], "interrupted; finished blocks are kept (run the demo again to finish)"),
    (["compare", MOTIFS, "--out", "o"], "interrupted"),
    (["enrich", "t.fa", "--motifs", MOTIFS, "--out", "o"], "interrupted"),
    (["discover", "s.fa", "-w", "8", "--out", "o"], "interrupted"),
    (["thresholds", MOTIFS], "interrupted"),
    (["export", "h", "--format", "bed", "-o", "h.bed"], "interrupted"),
    (["ingest", "g.fa", "g.zarr"], "interrupted"),
])
def test_interrupted_commands_point_to_resume_only_where_it_exists(argv, tail, monkeypatch, capsys, tmp_path):
    """Ctrl-C ends every command with exit 130 and one line; only scan and composition have ``--resume``, and only
    once their output folder holds a run."""
    from pipeline.cli import command as cli

    monkeypatch.chdir(tmp_path)
    for claimed in ("h", "o"):
        os.makedirs(claimed)
        open(os.path.join(claimed, "_run.json"), "w").write("{}")

    def interrupted(a, *rest):
        raise KeyboardInterrupt

    monkeypatch.setitem(cli.COMMANDS, argv[0], interrupted)
    assert cli.main(argv) == 130
    assert capsys.readouterr().err == f"motifgrid {argv[0]}: {tail}\n"


@pytest.mark.parametrize("command", [
    "scan {fasta} {motifs} --out {out} --device gpu",
    "enrich {fasta} --motifs {motifs} --out {out} --device gpu",
    "discover {fasta} -w 8 --out {out} --device gpu",
    "composition {fasta} {fasta} --out {out} --device gpu",
])
def test_device_gpu_without_a_gpu_is_one_line(command, good, tmp_path, capfd, monkeypatch):
    """``--device gpu`` where no GPU answers (CuPy missing): one line, before any output is claimed (it was
    CuPy's ModuleNotFoundError traceback, after an unfinished output folder was made)."""
    import pipeline.engine.cluster

    monkeypatch.setattr(pipeline.engine.cluster, "gpu_available", lambda: False)
    seq = "".join(decode(r) for r in [good[1].fetch("chrA", 0, 2000)])
    fa = tmp_path / "two.fa"                     # (discover needs two sequences)
    fa.write_text(f">a\n{seq[:1000]}\n>b\n{seq[1000:]}\n")
    out = tmp_path / "result"
    args = [a.format(fasta=fa, motifs=MOTIFS, out=out) for a in shlex.split(command)]
    capfd.readouterr()
    rc = _run(args)
    err = capfd.readouterr().err
    assert rc == 2 and "Traceback" not in err, err
    assert err.strip() == f"motifgrid {args[0]}: error: --device gpu: no GPU answers here " \
                          "(CuPy and a CUDA device are needed: pip install -e \".[gpu]\"); --device cpu or auto scans " \
                          "on the CPU", err
    assert not out.exists()
