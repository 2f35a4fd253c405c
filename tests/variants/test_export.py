"""``motifgrid export DIR`` of a variants folder (pipeline/variants/export.py): a real run on two slices of human chrX
with JASPAR motifs (SNVs, MNVs, insertions, deletions, IDs missing), then BED lines against the rows expanded per
allele side (ends from the motif file's column counts, read here; each REF window rescored on the genome), the
filters against pyarrow's filtering of ``read_variants``, TSV against ``variants.tsv``, and the command line."""
from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from tests.conftest import DATA, ROOT, subprocess_env

MOTIFS = str(DATA / "jaspar2024_subset.jaspar")
BG = np.full(4, 0.25)
IDX = {c: i for i, c in enumerate("ACGT")}


@pytest.fixture(scope="module")
def run(tmp_path_factory, chrx_2mb):
    """A finished variants run (p <= 1e-3, chunks of 20 alleles): ``(folder, {record: sequence})``."""
    from pipeline.engine.cluster import get_client
    from pipeline.variants import VariantsSettings, run_variants

    seqs = {"r1": chrx_2mb[300_000:304_000], "r2": chrx_2mb[400_000:402_500]}
    base = tmp_path_factory.mktemp("variants_export")
    (base / "genome.fa").write_text("".join(f">{k}\n{v}\n" for k, v in seqs.items()))
    rng = np.random.default_rng(5)
    lines = ["##fileformat=VCFv4.2", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    for chrom, s in seqs.items():
        for i, pos in enumerate(sorted(rng.choice(np.arange(10, len(s) - 10), 70, replace=False).tolist())):
            r = s[pos - 1]
            kind = i % 4
            if kind == 0:                                           # SNV
                ref, alt = r, [b for b in "ACGT" if b != r][i % 3]
            elif kind == 1:                                         # MNV
                ref, alt = s[pos - 1:pos + 1], "".join(rng.choice(list("ACGT"), 2))
            elif kind == 2:                                         # insertion
                ref, alt = r, r + "".join(rng.choice(list("ACGT"), 1 + i % 3))
            else:                                                   # deletion
                ref, alt = s[pos - 1:pos + 1 + i % 2], r
            if ref == alt or "N" in ref:
                continue
            lines.append(f"{chrom}\t{pos}\t{'.' if i % 5 == 0 else f'rs{chrom}{i}'}\t{ref}\t{alt}\t.\t.\t.")
    (base / "v.vcf").write_text("\n".join(lines) + "\n")
    out = base / "out"
    with get_client(n_workers=2, device="cpu", quiet=True, threads_only=True) as (client, _):
        run_variants(str(base / "v.vcf"), str(base / "genome.fa"), MOTIFS, str(out), client,
                     VariantsSettings(pvalue=1e-3, chunk=20))
    return out, seqs


def _jaspar_lengths(path: str) -> dict:
    """Motif id → its columns, counted in the JASPAR file's ``A [ ... ]`` line (independent of the readers)."""
    out, mid = {}, None
    for line in open(path):
        if line.startswith(">"):
            mid = line[1:].split()[0]
        elif line.startswith("A") and mid is not None:
            out[mid] = len(re.findall(r"[-\d.eE+]+", line.split("[", 1)[1].split("]")[0]))
            mid = None
    return out


def _bed_score(p: float) -> int:
    return 1000 if p <= 0 else max(0, min(1000, int(math.floor(-10 * math.log10(p) + 0.5))))


def _expected_bed(rows: list, lengths: dict) -> list:
    """The BED lines' fields (as parsed by :func:`_parse_bed`) of rows of ``read_variants``: per row REF then ALT,
    sides without a window left out."""
    out = []
    for r in rows:
        variant = f"{r['chrom']}:{r['pos']}:{r['ref']}:{r['alt']}"
        ident = r["id"] if r["id"] not in (None, ".") else variant
        for side in ("ref", "alt"):
            start = r[f"{side}_start"]
            if start is None:
                continue
            name = f"{r['motif_id']}|{side}|{r['call']}|{ident}"
            out.append((r["chrom"], start, start + lengths[r["motif_id"]], name, _bed_score(r[f"{side}_pvalue"]),
                        r[f"{side}_strand"], r[f"{side}_score"], r[f"{side}_pvalue"], r["motif_name"], variant))
    return out


def _parse_bed(text: str) -> list:
    rows = []
    for line in text.splitlines():
        p = line.split("\t")
        assert len(p) == 10, line
        rows.append((p[0], int(p[1]), int(p[2]), p[3], int(p[4]), p[5], float(p[6]), float(p[7]), p[8], p[9]))
    return rows


def _same_lines(got: list, want: list) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g[:6] == w[:6] and g[8:] == w[8:], (g, w)
        assert g[6] == pytest.approx(w[6], rel=1e-5, abs=1e-9) and g[7] == pytest.approx(w[7], rel=1e-3), (g, w)


def _window_score(seq: str, start: int, strand: str, motif) -> float:
    from pipeline.motifs import minus_strand_pwm, pwm_from_motif

    w = pwm_from_motif(motif, BG, 0.1)
    w = w if strand == "+" else minus_strand_pwm(w, BG)
    return float(sum(w[j, IDX[seq[start + j]]] for j in range(w.shape[0])))


def test_bed_lines_are_the_rows_windows_per_allele(run, tmp_path):
    """Every row's REF and ALT windows, in file order, with ends from the motif file; each REF window (and each ALT
    window starting left of the edit) rescored on its haplotype gives the row's score."""
    from pipeline.motifs import read_motifs
    from pipeline.variants import read_variants
    from pipeline.variants.export import export_variants

    out, seqs = run
    rows = read_variants(str(out)).to_pylist()
    lengths = _jaspar_lengths(MOTIFS)
    n = export_variants(str(out), "bed", str(tmp_path / "v.bed"))
    got = _parse_bed((tmp_path / "v.bed").read_text())
    want = _expected_bed(rows, lengths)
    _same_lines(got, want)
    assert n == len(got) and len(rows) > 30 and len(got) > len(rows)
    assert {r["ref_strand"] for r in rows} == {"+", "-"} and any(len(r["ref"]) < len(r["alt"]) for r in rows)
    assert any(len(r["ref"]) > len(r["alt"]) for r in rows) and any(r["ref_start"] != r["alt_start"] for r in rows)
    ids = [x[3].split("|")[3] for x in got]
    assert any(i == x[9] for i, x in zip(ids, got)) and any(i.startswith("rs") for i in ids)   # ID ".": the variant
    motifs = {m.id: m for m in read_motifs(MOTIFS)}
    checked = 0
    for r in rows:
        g = seqs[r["chrom"]]
        k = 0
        while k < min(len(r["ref"]), len(r["alt"])) and r["ref"][k] == r["alt"][k]:
            k += 1
        p = r["pos"] - 1 + k
        hap = g[:r["pos"] - 1] + r["alt"] + g[r["pos"] - 1 + len(r["ref"]):]
        on_hap = r["alt_start"] is not None and (r["alt_start"] < p or len(r["alt"]) <= len(r["ref"]))
        sides = [("ref", g)] + ([("alt", hap)] if on_hap else [])    # where alt_start is the haplotype's index
        for side, seq in sides:
            start = r[f"{side}_start"]
            assert _window_score(seq, start, r[f"{side}_strand"], motifs[r["motif_id"]]) == pytest.approx(
                r[f"{side}_score"], abs=1e-9)
            checked += 1
    assert checked > len(rows)


def _filtered(out, qmax, calls) -> list:
    from pipeline.variants import read_variants

    t = read_variants(str(out))
    mask = pa.array(np.ones(t.num_rows, bool))
    if qmax is not None:
        mask = pc.and_(mask, pc.less_equal(t.column("qvalue"), qmax))
    if calls is not None:
        mask = pc.and_(mask, pc.is_in(t.column("call"), value_set=pa.array(calls)))
    return t.filter(mask).to_pylist(), np.asarray(mask.to_pylist())


@pytest.mark.parametrize("calls", [None, ["gain", "loss"], ["both"]])
def test_filters_keep_what_pyarrow_keeps(run, tmp_path, calls):
    """--max-qvalue (q <= Q, on read_variants' q-values) and --calls, alone and together, in BED and TSV."""
    from pipeline.variants import read_variants
    from pipeline.variants.export import export_variants

    out, _ = run
    q = np.unique(read_variants(str(out), columns=["qvalue"]).column("qvalue").to_numpy())
    assert q.size >= 3
    lines = (out / "variants.tsv").read_text().splitlines()
    kept = []
    for qmax in (None, float(q[q.size // 2]), float(q[0])):
        rows, mask = _filtered(out, qmax, calls)
        kept.append(len(rows))
        n = export_variants(str(out), "bed", str(tmp_path / "f.bed"), max_qvalue=qmax, calls=calls)
        got = _parse_bed((tmp_path / "f.bed").read_text())
        _same_lines(got, _expected_bed(rows, _jaspar_lengths(MOTIFS)))
        assert n == len(got)
        n = export_variants(str(out), "tsv", str(tmp_path / "f.tsv"), max_qvalue=qmax,
                            calls=",".join(calls) if calls else None)
        assert n == len(rows)
        assert (tmp_path / "f.tsv").read_text().splitlines() == [lines[0]] + [x for x, k in zip(lines[1:], mask) if k]
    assert len(lines) - 1 == mask.size and (calls is None) == (kept[0] == mask.size)        # proper subsets
    assert kept[0] > kept[1] > 0 and kept[1] > kept[2]


def test_tsv_equals_variants_tsv(run, tmp_path):
    from pipeline.variants.export import export_variants

    out, _ = run
    n = export_variants(str(out), "tsv", str(tmp_path / "all.tsv"))
    text = (out / "variants.tsv").read_text()
    assert (tmp_path / "all.tsv").read_text() == text and n == text.count("\n") - 1


def test_command_writes_bed_to_standard_output(run, tmp_path, capsys):
    """``motifgrid export DIR --format bed -o -`` (and with --calls, --max-qvalue) through ``main``: the lines of
    :func:`export_variants`, the count on stderr."""
    from pipeline.cli.command import main
    from pipeline.variants import read_variants
    from pipeline.variants.export import export_variants

    out, _ = run
    assert main(["export", str(out), "--format", "bed", "-o", "-"]) == 0
    cap = capsys.readouterr()
    n = export_variants(str(out), "bed", str(tmp_path / "v.bed"))
    assert cap.out == (tmp_path / "v.bed").read_text() and f"wrote {n:,} BED lines to standard output" in cap.err
    qmax = float(np.median(read_variants(str(out), columns=["qvalue"]).column("qvalue").to_numpy()))
    assert main(["export", str(out), "--format", "bed", "-o", "-", "--calls", "gain,loss",
                 "--max-qvalue", repr(qmax)]) == 0
    cap = capsys.readouterr()
    export_variants(str(out), "bed", str(tmp_path / "f.bed"), max_qvalue=qmax, calls=["gain", "loss"])
    assert cap.out == (tmp_path / "f.bed").read_text() and cap.out.count("\n") > 0
    assert main(["export", str(out), "--format", "tsv", "-o", str(tmp_path / "v.tsv")]) == 0
    assert (tmp_path / "v.tsv").read_text() == (out / "variants.tsv").read_text()


def test_command_refuses_formats_a_folder_does_not_have(run, tmp_path, capsys):
    """fimo, gff3 and matrix of a variants folder, tsv and --calls of a scan's folder: one line naming the folder,
    exit status 2, nothing written; a bad --calls is a usage error."""
    from pipeline.cli.command import main

    out, _ = run
    for fmt in ("fimo", "gff3", "matrix"):
        assert main(["export", str(out), "--format", fmt, "-o", str(tmp_path / f"x.{fmt}")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(f"motifgrid export: error: {out}: a variants folder exports as --format bed or tsv")
        assert len(err.splitlines()) == 1 and not (tmp_path / f"x.{fmt}").exists()
    scan = tmp_path / "hits"
    scan.mkdir()
    (scan / "_run.json").write_text(json.dumps({"hits_format": 1}))
    assert main(["export", str(scan), "--format", "tsv", "-o", str(tmp_path / "x.tsv")]) == 2
    assert f"{scan}: not a variants folder; --format tsv" in capsys.readouterr().err
    assert main(["export", str(scan), "--format", "bed", "-o", str(tmp_path / "x.bed"), "--calls", "gain"]) == 2
    assert f"{scan}: not a variants folder; --calls" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main(["export", str(out), "--format", "bed", "-o", "-", "--calls", "gain,lost"])
    assert e.value.code == 2 and "--calls" in capsys.readouterr().err


def test_unfinished_run_and_changed_motifs_are_refused(run, tmp_path):
    """A run without _summary.json has no q-values yet; BED needs the motif source the run read (its checksum),
    TSV does not."""
    from pipeline.scan.export import ExportError
    from pipeline.variants.export import export_variants

    out, _ = run
    unfinished = tmp_path / "unfinished"
    shutil.copytree(out, unfinished, ignore=shutil.ignore_patterns("_genome.zarr"))
    (unfinished / "_summary.json").unlink()
    with pytest.raises(ExportError, match="unfinished variants run"):
        export_variants(str(unfinished), "bed", str(tmp_path / "x.bed"))
    changed = tmp_path / "changed"
    shutil.copytree(out, changed, ignore=shutil.ignore_patterns("_genome.zarr"))
    params = json.loads((changed / "_run.json").read_text())
    (changed / "_run.json").write_text(json.dumps({**params, "motifs_checksum": "0" * 64}))
    with pytest.raises(ExportError, match="has changed since the run"):
        export_variants(str(changed), "bed", str(tmp_path / "x.bed"))
    assert not (tmp_path / "x.bed").exists()
    assert export_variants(str(changed), "tsv", str(tmp_path / "x.tsv")) > 0
    with pytest.raises(ExportError, match="choose among"):
        export_variants(str(out), "bed", str(tmp_path / "x.bed"), calls=["gained"])
    with pytest.raises(ExportError, match="exports as bed or tsv"):
        export_variants(str(out), "fimo", str(tmp_path / "x.bed"))


def test_a_closed_pipe_ends_the_command_quietly(run):
    """``motifgrid export DIR -o - | head``: the reader gone, status 0 and nothing on stderr."""
    out, _ = run
    for fmt in ("bed", "tsv"):
        p = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "export", str(out), "--format", fmt, "-o", "-"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env(), cwd=ROOT)
        p.stdout.close()
        err = p.stderr.read().decode()
        assert p.wait() == 0 and err == "", err
