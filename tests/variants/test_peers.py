"""motifgrid variants against the published outputs of its peers, under their conventions.

motifBreakR (``method = "ic"``, uniform background; R/scoreMotif.R ``preparePWM``, ``scoreSeqWindows``): the motif
is scored with ``M = pc * IC``, ``pc = (ppm * N + 0.25) / (N + 1)`` (``N``: MotifDb's sequenceCount), each column
weighted by its information content ``sum_b pc log2(pc / 0.25)``, no logarithm in the score; an allele's score is
its best window overlapping the SNV, either strand.  motifgrid given ``M`` as a log-odds matrix (used as is) finds the
same windows: the scores of the rs1006140 example (motifBreakR's current code, ``inst/extdata``) are reproduced.
Its p-values are TFMPvalue's ``TFMsc2pv`` on ``M`` floored to a grid of 1e-6: flooring lowers every word's score a
little, and words that tie with the observed score exactly drop below it, so motifgrid's exact ``P(S >= score)`` on
``M`` itself is never below motifBreakR's — within 1 % here, except IKZF1_f1's alt allele (8 columns: 6 of 4^8 words
reach the score exactly, TFMPvalue counts 5; motifgrid 1.2x)."""
from __future__ import annotations

import csv

import numpy as np
import pytest

from tests.conftest import SHARED
from tests.variants.test_variants import client  # noqa: F401

MBR = SHARED / "variants" / "motifbreakr"
#: MotifDb's sequenceCount of the 15 HOCOMOCO v10 motifs, absent from the exported PFMs: each solved from one
#: published scoreRef (every solution an integer), then every other score and p-value of the example follows from it
SEQ_COUNT = dict(EGR1_f2=1973, EGR2_si=21, EGR4_f1=6, EPAS1_si=12, KLF1_f1=11, RREB1_si=26, SP1_f2=3045, SP1_f1=3500,
                 SP2_si=31, SP3_f1=415, ZBTB4_si=19, SP4_f1=23, ZN350_f1=15, ZN148_si=34, IKZF1_f1=61)


def _ic_matrix(ppm: np.ndarray, n: int) -> np.ndarray:
    """motifBreakR's ``preparePWM(method = "ic")`` of an (L, 4) probability matrix, uniform background."""
    pc = (ppm * n + 0.25) / (n + 1)
    return pc * (pc * np.log2(pc / 0.25)).sum(axis=1, keepdims=True)


def _read(name: str) -> list:
    with open(MBR / name) as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.mark.skipif(not MBR.exists(), reason="../shared/data absent")
@pytest.mark.filterwarnings("ignore:.*log-odds matrix only")  # the peers' matrices, as intended
def test_motifbreakr_rs1006140_scores_under_its_conventions(client, tmp_path):
    from pipeline.variants import VariantsSettings, read_variants, run_variants
    from workers.distribution import pvalue_of_score

    example = [r for r in _read("example_pvalue_rs1006140_hg19.tsv") if "inst/extdata" in r["source"]]
    ppm: dict = {}
    for r in _read("hocomoco_v10_pwms_from_motifbreakR.tsv"):
        if r["providerName"] in SEQ_COUNT:
            ppm.setdefault(r["providerName"], []).append([float(r[b]) for b in "ACGT"])
    meme = ["MEME version 4", "", "ALPHABET= ACGT", "", "strands: + -", ""]
    for name, rows in ppm.items():
        m = _ic_matrix(np.array(rows), SEQ_COUNT[name])
        meme += [f"MOTIF {name}", f"log-odds matrix: alength= 4 w= {len(m)}"]
        meme += [" ".join(f"{x:.17g}" for x in row) for row in m] + [""]
    (tmp_path / "mbr.meme").write_text("\n".join(meme))
    flank = {r["alt"]: r for r in _read("flanks_from_seqMatch_hg19.tsv")}
    (tmp_path / "ctx.fa").write_text(f">rs1006140\n{flank['C']['ref_seq']}\n")       # 20 bp, the SNV, 21 bp
    (tmp_path / "v.vcf").write_text("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
                                    "rs1006140\t21\trs1006140\tA\tC,G,T\t.\t.\t.\n")
    run_variants(str(tmp_path / "v.vcf"), str(tmp_path / "ctx.fa"), str(tmp_path / "mbr.meme"), str(tmp_path / "out"),
                 client, VariantsSettings(pvalue=1e-4, background="uniform", report_all=True))
    got = {(r["alt"], r["motif_id"]): r for r in read_variants(str(tmp_path / "out")).to_pylist()}
    assert len(example) == 16
    for e in example:
        r = got[(e["ALT"], e["providerName"])]
        assert r["ref_score"] == pytest.approx(float(e["scoreRef"]), abs=1e-9)
        assert r["alt_score"] == pytest.approx(float(e["scoreAlt"]), abs=1e-9)
        for side, theirs in (("ref", e["Refpvalue"]), ("alt", e["Altpvalue"])):
            w = _ic_matrix(np.array(ppm[e["providerName"]]), SEQ_COUNT[e["providerName"]])
            exact = pvalue_of_score(w, np.full(4, 0.25), r[f"{side}_score"])[0]
            assert exact * (1 - 1e-3) <= r[f"{side}_pvalue"] <= exact * (1 + 2e-3)   # the tail table's precision
            ratio = r[f"{side}_pvalue"] / float(theirs)
            assert 1 - 1e-3 <= ratio < (1.21 if e["providerName"] == "IKZF1_f1" and side == "alt" else 1.01), ratio
