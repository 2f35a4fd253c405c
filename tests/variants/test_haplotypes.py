"""``--samples`` and ``--haplotypes``: the alleles samples carry, and nearby variants of one phased haplotype scored
together — each combined row against the float64 scorer of the haplotype built here by applying its edits to the
genome text; the combinations themselves against a clustering of the genotypes written here."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from pipeline.motifs import read_motifs
from tests.conftest import SHARED
from tests.variants.test_variants import BG, MOTIFS, PVALUE, _naive, _rows_of, client, genome  # noqa: F401
from workers.distribution import pvalue_to_score

SAMPLES = ["S1", "S2", "S3"]


def _design(seqs: dict) -> list:
    """(chrom, pos, ref, alt, [GT of S1, S2, S3]) sorted: pairs and a triple of nearby SNVs on one haplotype, the same
    pair on two haplotypes (no combination), an unphased heterozygote, homozygous alternatives, an insertion beside an
    SNV, a deletion over a later SNV of its haplotype (a conflict) and variants a motif width apart."""
    g = seqs["r1"]
    out = []

    def snv(pos, gts):
        b = g[pos - 1]
        out.append(("r1", pos, b, "ACGT"[("ACGT".index(b) + 1) % 4], gts))

    snv(300, ["1|0", "1|0", "0/1"])           # S1 hap 1: 300 + 306 (+ 312: a run of three); S2: 300 hap1, 306 hap2
    snv(306, ["1|0", "0|1", "0/1"])
    snv(312, ["1|0", "0|0", "0|0"])
    snv(800, ["0|1", "1/1", "0|0"])           # S1 hap2 800 + 808; S2 homozygous: both haplotypes, both alleles
    snv(808, ["0|1", "1/1", "0|0"])
    out.append(("r1", 1500, g[1499], g[1499] + "TT", ["1|0", "0|0", "0|0"]))      # insertion then an SNV 4 bp on
    snv(1505, ["1|0", "0|0", "0|0"])
    out.append(("r1", 2000, g[1999:2006], g[1999], ["0|1", "0|0", "0|0"]))        # deletion of 6 over 2003: conflict
    snv(2003, ["0|1", "0|0", "0|0"])
    snv(2030, ["0|1", "0|0", "0|0"])          # 2030 joins the deletion's run (inside a motif width of its end)
    snv(3000, ["1|0", "0|0", "0|0"])          # far from any other: no combination
    snv(3100, ["1|0", "0|0", "0|0"])
    snv(600, ["0|0", "0|0", "0|0"])           # carried by none: dropped by --samples
    return sorted(out, key=lambda r: r[1])


def _write(path, design) -> None:
    lines = ["##fileformat=VCFv4.2", "\t".join(["#CHROM", "POS", "ID", "REF", "ALT", "QUAL", "FILTER", "INFO",
                                               "FORMAT", *SAMPLES])]
    lines += [f"{c}\t{p}\tv{p}\t{r}\t{a}\t.\t.\t.\tGT\t" + "\t".join(gts) for c, p, r, a, gts in design]
    path.write_text("\n".join(lines) + "\n")


def _expected(seqs, design, flank: int) -> dict:
    """{(pos, ref, alt): label} of the combined alleles: per haplotype, its carried edits split where the next
    starts ``flank`` or more after the last one's end, runs of two or more applied to the genome text."""
    g = seqs["r1"]
    runs: dict = {}
    for slot in range(2 * len(SAMPLES)):
        s, k = divmod(slot, 2)
        mine = []
        for _, pos, ref, alt, gts in design:
            gt = gts[s]
            if "|" in gt or gt == "1/1":
                if gt.replace("/", "|").split("|")[k] == "1":
                    mine.append((pos, ref, alt))
        run: list = []
        for v in mine + [None]:
            edit = None if v is None else _edit(*v)
            if run and edit is not None and edit[0] < run[-1][1]:
                continue                                  # overlaps its haplotype's last edit
            if run and (edit is None or edit[0] - run[-1][1] >= flank):
                if len(run) > 1:
                    lo, hi = run[0][0], run[-1][1]
                    h = g[lo:hi]
                    for a, b, core in reversed(run):
                        h = h[:a - lo] + core + h[b - lo:]
                    runs.setdefault((lo + 1, g[lo:hi], h), []).append(f"{SAMPLES[s]}:{k + 1}")
                run = []
            if edit is not None:
                run.append(edit)
    return {key: ",".join(sorted(v)) for key, v in runs.items()}


def _edit(pos, ref, alt):
    k = 0
    while k < min(len(ref), len(alt)) and ref[k] == alt[k]:
        k += 1
    r, a = ref[k:], alt[k:]
    return pos - 1 + k, pos - 1 + k + len(r), a


def test_combined_haplotypes_equal_a_float64_scorer_of_the_haplotype(genome, client, tmp_path):
    from pipeline.variants import VariantsSettings, read_variants, run_variants

    fasta, seqs = genome
    design = _design(seqs)
    vcf = tmp_path / "v.vcf"
    _write(vcf, design)
    flank = max(m.length for m in read_motifs(MOTIFS)) - 1
    want = _expected(seqs, design, flank)
    assert len(want) == 4          # the triple, S1 hap 2 = S2 homozygous (one combination), the insertion, the deletion
    s = run_variants(str(vcf), str(fasta), MOTIFS, str(tmp_path / "out"), client,
                     VariantsSettings(pvalue=PVALUE, haplotypes=True, report_all=True))
    t = read_variants(str(tmp_path / "out")).to_pylist()
    combined = [r for r in t if r["haplotype"] is not None]
    got = {(r["pos"], r["ref"], r["alt"]): r["haplotype"] for r in combined}
    assert got == want
    assert s["staged"]["combined"] == len(want) and s["staged"]["haplotype_conflicts"] == 1
    assert s["staged"]["skipped"]["unphased"] == 2                   # S3's 0/1 at 300 and 306
    rows = _rows_of(MOTIFS)
    alpha = [[pvalue_to_score(w, BG, PVALUE).threshold for w in (pl, mi)] for _, pl, mi in rows]
    by = {(r["pos"], r["alt"], r["motif_id"]): r for r in combined}
    for pos, ref, alt in want:
        for (mid, _, _), (ref_s, alt_s), al in zip(rows, _naive(seqs, "r1", pos, ref, alt, rows), alpha):
            r = by[(pos, alt, mid)]
            for side, best in (("ref", ref_s), ("alt", alt_s)):
                strand = 0 if r[f"{side}_strand"] in ("+", None) else 1
                assert r[f"{side}_score"] == best[strand][0] and r[f"{side}_start"] == best[strand][1]
            reach = (any(sc >= a for (sc, _), a in zip(ref_s, al)), any(sc >= a for (sc, _), a in zip(alt_s, al)))
            assert r["call"] == {(False, False): "none", (True, False): "loss", (False, True): "gain",
                                 (True, True): "both"}[reach]
    singles = [r for r in t if r["haplotype"] is None]
    assert len({(r["pos"], r["alt"]) for r in singles}) == len(design)    # the single alleles as ever
    tsv = (tmp_path / "out" / "variants.tsv").read_text().splitlines()
    assert tsv[0].split("\t")[-2:] == ["haplotype", "qvalue"] and len(tsv) == len(t) + 1
    vcf_out = (tmp_path / "out" / "variants.vcf").read_text()
    assert all(f"|{a}" not in vcf_out for _, _, a in want)              # combined alleles stay out of the VCF


def test_samples_keep_the_alleles_they_carry_and_unknown_names_are_refused(genome, client, tmp_path):
    from pipeline.variants import VariantsSettings, read_variants, run_variants
    from pipeline.variants.vcf import VcfError

    fasta, seqs = genome
    design = _design(seqs)
    vcf = tmp_path / "v.vcf"
    _write(vcf, design)
    s = run_variants(str(vcf), str(fasta), MOTIFS, str(tmp_path / "out"), client,
                     VariantsSettings(pvalue=PVALUE, samples=["S2"], report_all=True))
    carried = {p for _, p, _, _, gts in design if "1" in gts[1]}
    assert {r["pos"] for r in read_variants(str(tmp_path / "out")).to_pylist()} == carried
    assert s["alleles"] == len(carried) and s["staged"]["not_carried"] == len(design) - len(carried)
    with pytest.raises(VcfError, match=r"sample\(s\) NA1 not in the VCF \(its samples: S1, S2, S3\)"):
        run_variants(str(vcf), str(fasta), MOTIFS, str(tmp_path / "out2"), client,
                     VariantsSettings(samples=["NA1"]))


def test_genotypes_of_a_real_phased_vcf():
    """1000 Genomes chr22 (5 phased samples): each ALT's haplotypes equal the GT text read here field by field."""
    from pipeline.variants.vcf import read_vcf

    path = SHARED / "variants" / "vcf" / "chr22_VariantAnnotation.vcf.gz"
    if not path.exists():
        pytest.skip("../shared/data absent")
    want = []
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.startswith("#"):
                continue
            cols = line.rstrip("\n").split("\t")
            gi = cols[8].split(":").index("GT")
            gts = [c.split(":")[gi] for c in cols[9:]]
            for n, alt in enumerate(cols[4].split(","), 1):
                if set(alt) <= set("ACGTN"):
                    want.append(tuple(2 * s + k for s, gt in enumerate(gts)
                                      for k, a in enumerate(gt.split("|")) if a == str(n)))
    got = [x for b in read_vcf(str(path), samples="all") for x in b.slots]
    assert got == want and sum(map(len, got)) > 5000
    assert np.mean([len(x) > 0 for x in got]) > 0.2
