"""motifgrid variants against an independent float64 scorer of the extracted ref and alt haplotypes: every reported
(allele, motif) row — and only those — with its best windows, strands, exact p-values and call, on real human chrX
sequence with SNVs, MNVs, insertions, deletions at window edges, variants beside record ends, N nearby and
multi-allelic records; p-values of short motifs against enumeration of every word."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pipeline.motifs import pwm_from_motif, read_motifs
from tests.conftest import DATA

MOTIFS = str(DATA / "jaspar2024_subset.jaspar")
PVALUE = 1e-3
BG = np.full(4, 0.25)
IDX = {c: i for i, c in enumerate("ACGT")}


@pytest.fixture(scope="module")
def client():
    from pipeline.engine.cluster import get_client

    with get_client(n_workers=2, device="cpu", quiet=True) as (c, _):
        yield c


@pytest.fixture(scope="module")
def genome(tmp_path_factory, chrx_2mb):
    """Two records of real chrX: 4 kb, and 2 kb with a run of N planted (a known place for N beside a variant)."""
    a = chrx_2mb[100_000:104_000]
    b = chrx_2mb[200_000:202_000]
    b = b[:900] + "N" * 6 + b[906:]
    path = tmp_path_factory.mktemp("variants") / "genome.fa"
    path.write_text(f">r1\n{a}\n>r2\n{b}\n")
    return path, {"r1": a, "r2": b}


def _alleles(seqs: dict, seed: int = 7) -> list:
    """(chrom, pos, ref, alts) with the genome's REF: random SNVs, MNVs, insertions and deletions (VCF style, an anchor
    base), multi-allelic records, and the edge cases named in the module docstring."""
    rng = np.random.default_rng(seed)
    rec = []
    for chrom, s in seqs.items():
        n = len(s)
        picks = [1, 2, n, n - 1, n - 3, 896, 899, 903, 908] if chrom == "r2" else [1, 5, n, n - 2]
        picks += sorted(rng.choice(np.arange(10, n - 10), 150, replace=False).tolist())
        for k, pos in enumerate(sorted(set(picks))):
            ref1 = s[pos - 1]
            kind = k % 5
            other = [b for b in "ACGT" if b != ref1]
            if kind == 0 or pos > n - 3:
                rec.append((chrom, pos, ref1, [other[k % 3]]))
            elif kind == 1:                                     # MNV
                ref = s[pos - 1:pos + 1]
                rec.append((chrom, pos, ref, ["".join(rng.choice(list("ACGT"), 2))]))
            elif kind == 2:                                     # insertion
                rec.append((chrom, pos, ref1, [ref1 + "".join(rng.choice(list("ACGT"), 1 + k % 4))]))
            elif kind == 3:                                     # deletion of 1-3 bases
                d = 1 + k % 3
                rec.append((chrom, pos, s[pos - 1:pos + d], [ref1]))
            else:                                               # multi-allelic: SNVs and a deletion
                rec.append((chrom, pos, s[pos - 1:pos + 1], [other[0] + s[pos], other[1] + s[pos], ref1]))
    rec = [r for r in rec if "N" not in r[2] and all(set(a) <= set("ACGT") for a in r[3]) and r[3][0] != r[2]]
    return sorted(rec, key=lambda r: (r[0], r[1]))


def _write_vcf(path, records) -> None:
    lines = ["##fileformat=VCFv4.2", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    lines += [f"{c}\t{p}\tv{i}\t{r}\t{','.join(a)}\t.\t.\t." for i, (c, p, r, a) in enumerate(records)]
    path.write_text("\n".join(lines) + "\n")


def _rows_of(motif_file: str):
    """Each motif's + and - matrices (the scan's), independent of pipeline.variants."""
    from pipeline.motifs import minus_strand_pwm

    out = []
    for m in read_motifs(motif_file):
        w = pwm_from_motif(m, BG, 0.1)
        out.append((m.id, w, minus_strand_pwm(w, BG)))
    return out


def _best(h: str, lo: int, hi: int, w: np.ndarray):
    """(score, start) of the best window of ``w`` over haplotype ``h`` covering ``[lo, hi)`` (an empty edit: both
    bases beside ``lo``); float64 in column order; windows with N or outside ``h`` skipped; the leftmost on ties."""
    m = w.shape[0]
    best, at = -math.inf, -1
    for s in range(lo - m + 1, max(hi, lo + 1) if hi > lo else lo):
        if s < 0 or s + m > len(h) or "N" in h[s:s + m]:
            continue
        acc = 0.0
        for j in range(m):
            acc += w[j, IDX[h[s + j]]]
        if acc > best:
            best, at = acc, s
    return best, at


def _naive(seqs, chrom, pos, ref, alt, rows):
    """Per motif: ((ref +, ref -), (alt +, alt -)) best (score, genome start) on each strand."""
    k = 0
    while k < min(len(ref), len(alt)) and ref[k] == alt[k]:
        k += 1
    r, a = ref[k:], alt[k:]
    j = 0
    while j < min(len(r), len(a)) and r[-1 - j] == a[-1 - j]:
        j += 1
    r, a = r[:len(r) - j], a[:len(a) - j]
    p = pos - 1 + k
    g = seqs[chrom]
    alt_h = g[:p] + a + g[p + len(r):]
    out = []
    for _, plus, minus in rows:
        ref_s = [_best(g, p, p + len(r), w) for w in (plus, minus)]
        alt_s = [_best(alt_h, p, p + len(a), w) for w in (plus, minus)]
        alt_s = [(s, -1 if st < 0 else st if st <= p else p + min(st - p, len(r))) for s, st in alt_s]
        out.append((ref_s, alt_s))
    return out


def test_rows_equal_a_float64_scorer_of_both_haplotypes(genome, client, tmp_path):
    from pipeline.variants import VariantsSettings, read_variants, run_variants
    from workers.distribution import pvalue_of_score, pvalue_to_score

    fasta, seqs = genome
    records = _alleles(seqs)
    vcf = tmp_path / "v.vcf"
    _write_vcf(vcf, records)
    s = run_variants(str(vcf), str(fasta), MOTIFS, str(tmp_path / "out"), client,
                     VariantsSettings(pvalue=PVALUE, chunk=25))
    rows = _rows_of(MOTIFS)
    alpha = [[pvalue_to_score(w, BG, PVALUE).threshold for w in (pl, mi)] for _, pl, mi in rows]
    got = {(r["pos"], r["alt"], r["motif_id"]): r for r in read_variants(str(tmp_path / "out")).to_pylist()}
    expected = set()
    n_alleles = 0
    for chrom, pos, ref, alts in records:
        for alt in alts:
            n_alleles += 1
            for (mid, pl, mi), (ref_s, alt_s), al in zip(rows, _naive(seqs, chrom, pos, ref, alt, rows), alpha):
                reach_ref = any(sc >= t for (sc, _), t in zip(ref_s, al))
                reach_alt = any(sc >= t for (sc, _), t in zip(alt_s, al))
                if not (reach_ref or reach_alt):
                    continue
                expected.add((pos, alt, mid))
                r = got[(pos, alt, mid)]
                assert r["call"] == {(True, False): "loss", (False, True): "gain", (True, True): "both"}[
                    (reach_ref, reach_alt)]
                for side, best in (("ref", ref_s), ("alt", alt_s)):
                    strand = 0 if r[f"{side}_strand"] == "+" else 1
                    score, start = best[strand]
                    assert r[f"{side}_score"] == score and r[f"{side}_start"] == start, (chrom, pos, alt, mid, side)
                    w = (pl, mi)[strand]
                    exact = pvalue_of_score(w, BG, score)[0]
                    assert exact <= r[f"{side}_pvalue"] * (1 + 1e-9) <= exact * (1 + 2e-3)
                    other = best[1 - strand]
                    if math.isfinite(other[0]):         # the reported strand is the better one (by p-value)
                        assert pvalue_of_score((pl, mi)[1 - strand], BG, other[0])[0] * (1 + 2e-3) >= exact
                assert r["log10_ratio"] == pytest.approx(math.log10(r["ref_pvalue"] / r["alt_pvalue"]))
    assert set(got) == expected and len(expected) > 50
    assert s["alleles"] == n_alleles and s["tests"] == n_alleles * len(rows)
    calls = {r["call"] for r in got.values()}
    assert {"gain", "loss", "both"} <= calls


def test_pvalues_of_a_short_motif_equal_enumeration(genome, client, tmp_path):
    """A 6-column motif: every reported p-value against the mass of all 4^6 words scoring at least as well."""
    from pipeline.variants import VariantsSettings, read_variants, run_variants

    fasta, seqs = genome
    motif = tmp_path / "short.jaspar"
    motif.write_text(">M1 short\nA [ 8 1 0 9 1 2 ]\nC [ 1 8 1 0 1 3 ]\nG [ 0 1 9 0 7 3 ]\nT [ 1 0 0 1 1 2 ]\n")
    vcf = tmp_path / "v.vcf"
    _write_vcf(vcf, _alleles(seqs, seed=3))
    run_variants(str(vcf), str(fasta), str(motif), str(tmp_path / "out"), client,
                 VariantsSettings(pvalue=0.02, report_all=True))
    w = pwm_from_motif(read_motifs(str(motif))[0], BG, 0.1)
    words = np.array(list(itertools.product(range(4), repeat=6)))
    scores = np.zeros(len(words))
    for j in range(6):
        scores += w[j, words[:, j]]
    t = read_variants(str(tmp_path / "out")).to_pylist()
    assert len(t) > 100
    checked = 0
    for r in t:
        for side in ("ref", "alt"):
            sc = r[f"{side}_score"]
            if sc is None or math.isnan(sc):
                continue
            exact = float(np.count_nonzero(scores >= sc - 1e-9)) / len(words)
            assert exact <= r[f"{side}_pvalue"] * (1 + 1e-9) <= exact * (1 + 2e-3), (r, side)
            checked += 1
    assert checked > 200


def test_resume_redoes_only_the_missing_chunks_and_the_outputs_follow(genome, client, tmp_path):
    """Chunks removed from a finished run (their manifest entries and files) are redone by --resume: the rows, the
    TSV and the annotated VCF equal the first run's; ``motifgrid summary`` reads the folder."""
    import json
    import shutil

    from pipeline.cli.summary import summarize, summary_lines
    from pipeline.variants import VariantsSettings, plan_variants, read_variants, run_variants
    from pipeline.variants.run import execute_variants

    fasta, seqs = genome
    vcf = tmp_path / "v.vcf"
    _write_vcf(vcf, _alleles(seqs, seed=11))
    out = tmp_path / "out"
    settings = VariantsSettings(pvalue=PVALUE, chunk=30)
    first = run_variants(str(vcf), str(fasta), MOTIFS, str(out), client, settings)
    rows, tsv, annotated = read_variants(str(out)), (out / "variants.tsv").read_text(), (out / "variants.vcf").read_text()
    gone = sorted((out / "_manifest").glob("*.json"))[1::3]
    for entry in gone:
        for f in json.loads(entry.read_text())["files"]:
            (out / f).unlink()
        entry.unlink()
    for name in ("_summary.json", "variants.tsv", "variants.vcf"):
        (out / name).unlink()
    assert summarize(str(out))["next"].startswith("unfinished")
    job = plan_variants(str(vcf), str(fasta), MOTIFS, str(out), settings, resume=True)
    assert len(job.done) == len(job.staged.chunks) - len(gone) and len(gone) >= 2
    again = execute_variants(job, client)
    assert read_variants(str(out)).equals(rows) and again["rows"] == first["rows"]
    assert (out / "variants.tsv").read_text() == tsv and (out / "variants.vcf").read_text() == annotated
    s = summarize(str(out))
    assert (s["kind"], s["finished"], s["totals"]["rows"]) == ("variants", True, first["rows"])
    assert any(" of " in line and "log10(p_ref/p_alt)" in line for line in summary_lines(s))
    shutil.rmtree(out / "_genome.zarr")       # (the FASTA's store, kept for --resume)


def test_annotated_vcf_and_tsv_say_what_the_rows_say(genome, client, tmp_path):
    """variants.tsv: the header the issue names and a line per row with its q-value (BH over every allele × motif
    test); variants.vcf: the input's lines, the INFO header once, MOTIFGRID on exactly the records with a call."""
    from pipeline.scan.qvalues import bh_qvalues
    from pipeline.variants import VariantsSettings, read_variants, run_variants

    fasta, seqs = genome
    vcf = tmp_path / "v.vcf"
    _write_vcf(vcf, _alleles(seqs, seed=2))
    out = tmp_path / "out"
    s = run_variants(str(vcf), str(fasta), MOTIFS, str(out), client, VariantsSettings(pvalue=PVALUE))
    t = read_variants(str(out)).to_pylist()
    lines = (out / "variants.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["chrom", "pos", "id", "ref", "alt", "motif_id", "motif_name", "ref_score",
                                    "alt_score", "score_diff", "ref_pvalue", "alt_pvalue", "log10_ratio", "call",
                                    "ref_start", "ref_strand", "alt_start", "alt_strand", "qvalue"]
    assert len(lines) == len(t) + 1
    p = np.array([min(r["ref_pvalue"], r["alt_pvalue"]) for r in t])
    order = np.argsort(p, kind="stable")
    values, counts = np.unique(p, return_counts=True)
    q = bh_qvalues(values, counts, s["tests"])[np.searchsorted(values, p)]
    assert np.allclose([r["qvalue"] for r in t], q, rtol=1e-12) and order.size
    src = vcf.read_text().splitlines()
    ann = (out / "variants.vcf").read_text().splitlines()
    assert sum(x.startswith("##INFO=<ID=MOTIFGRID") for x in ann) == 1 and len(ann) == len(src) + 1
    called = {r["vcf_line"] for r in t}
    body = [x for x in ann if not x.startswith("#")]
    src_body = [(n, x) for n, x in enumerate(src, 1) if not x.startswith("#")]
    by_line: dict = {}
    for r in t:
        if r["call"] != "none":
            by_line.setdefault(r["vcf_line"], []).append(r)
    for (n, before), after in zip(src_body, body):
        assert ("MOTIFGRID=" in after) == (n in called)
        assert after.split("\t")[:7] == before.split("\t")[:7]
        if n in by_line:                       # each row's note, in row order: motif|call|log10 ratio (3 digits)|ALT
            notes = after.split("\t")[7].split("MOTIFGRID=")[1].split(",")
            assert len(notes) == len(by_line[n])
            for note, r in zip(notes, by_line[n]):
                motif, call, ratio, alt = note.split("|")
                assert (motif, call, alt) == (r["motif_id"], r["call"], r["alt"])
                assert float(ratio) == pytest.approx(r["log10_ratio"], rel=5e-3, abs=1e-12)


def test_the_command_refuses_a_finished_folder_and_overwrites_it(genome, tmp_path):
    """``motifgrid variants`` through the console entry: one line for a finished folder, --overwrite replaces it
    (variants.tsv and variants.vcf are the dataset's own files)."""
    import subprocess
    import sys

    from tests.conftest import ROOT, subprocess_env

    fasta, seqs = genome
    vcf = tmp_path / "v.vcf"
    _write_vcf(vcf, _alleles(seqs, seed=4)[:30])
    args = [sys.executable, "-m", "pipeline.cli", "variants", str(vcf), "--genome", str(fasta), "--motifs", MOTIFS,
            "--out", str(tmp_path / "out"), "--device", "cpu", "--no-progress", "--pvalue", "1e-3"]

    def run(*extra):
        return subprocess.run(args + list(extra), capture_output=True, text=True, env=subprocess_env(), cwd=ROOT)

    first = run()
    assert first.returncode == 0 and "rows (gain" in first.stderr, first.stderr
    again = run()
    assert again.returncode == 2 and again.stderr.strip().splitlines()[-1].endswith(
        "holds a finished variants run; pass --overwrite to replace it with a new one, or choose another output")
    over = run("--overwrite")
    assert over.returncode == 0, over.stderr
    assert (tmp_path / "out" / "variants.tsv").read_text().count("\n") > 1


@pytest.mark.gpu
def test_gpu_kernels_equal_the_cpu_ones(genome):
    """The filter's marks and the exact best windows (scores to the bit, starts) of every (context, row) pair, on
    alleles of every kind."""
    from pipeline.scan.motif_set import MotifSet
    from pipeline.variants.alleles import contexts
    from workers.distribution import pvalue_to_score
    from workers.variants import Rows, best_of, reaching

    _, seqs = genome
    recs = [r for r in _alleles(seqs, seed=9) if r[0] == "r1"]
    pos = [p for _, p, _, alts in recs for _ in alts]
    ref = [r for _, _, r, alts in recs for _ in alts]
    alt = [a for _, _, _, alts in recs for a in alts]
    mset = MotifSet.load(MOTIFS, BG, 0.1)
    pwms, _, _ = mset.rows()
    rows = Rows(pwms, np.array([pvalue_to_score(w, BG, 1e-3).threshold for w in pwms]))
    g = np.frombuffer(seqs["r1"].encode(), np.uint8)
    code = np.full(256, 4, np.uint8)
    code[list(b"ACGT")] = range(4)
    cx = contexts(code[g], 0, len(g), pos, ref, alt, mset.max_length - 1)
    assert (reaching(cx.codes, cx.starts, cx.e0, cx.e1, rows, "gpu")
            == reaching(cx.codes, cx.starts, cx.e0, cx.e1, rows, "cpu")).all()
    n, R = 2 * len(pos), len(pwms)
    ctx, row = np.repeat(np.arange(n), R), np.tile(np.arange(R), n)
    for a, b in zip(best_of(cx.codes, cx.starts, cx.e0, cx.e1, rows, ctx, row, "gpu"),
                    best_of(cx.codes, cx.starts, cx.e0, cx.e1, rows, ctx, row, "cpu")):
        assert np.array_equal(a, b)


@pytest.mark.gpu
def test_gpu_run_equals_cpu_run(genome, tmp_path):
    """The same VCF on a GPU worker and on CPU workers: identical rows."""
    from pipeline.engine.cluster import get_client
    from pipeline.variants import VariantsSettings, read_variants, run_variants

    fasta, seqs = genome
    vcf = tmp_path / "v.vcf"
    _write_vcf(vcf, _alleles(seqs, seed=13))
    out = {}
    for device in ("cpu", "gpu"):
        with get_client(device=device, quiet=True) as (c, dev):
            assert dev == device
            run_variants(str(vcf), str(fasta), MOTIFS, str(tmp_path / device), c, VariantsSettings(pvalue=PVALUE),
                         device=dev)
        out[device] = read_variants(str(tmp_path / device))
    assert out["gpu"].num_rows > 50 and out["gpu"].equals(out["cpu"])
