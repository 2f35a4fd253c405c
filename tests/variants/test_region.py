"""``--region``: only the records of a bgzipped, indexed VCF overlapping a region are scored and copied."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.variants.test_variants import MOTIFS, PVALUE, _alleles, _write_vcf, client, genome  # noqa: F401

pytestmark = pytest.mark.skipif(shutil.which("bgzip") is None or shutil.which("tabix") is None,
                                reason="htslib's bgzip/tabix not installed")


def test_a_region_scores_the_records_overlapping_it(genome, client, tmp_path):
    from pipeline.variants import VariantsSettings, read_variants, run_variants
    from pipeline.variants.vcf import VcfError

    fasta, seqs = genome
    records = _alleles(seqs, seed=5)
    plain = tmp_path / "v.vcf"
    _write_vcf(plain, records)
    vcf = tmp_path / "v.vcf.gz"
    with open(vcf, "wb") as f:
        subprocess.run(["bgzip", "-c", str(plain)], stdout=f, check=True)
    with pytest.raises(VcfError, match=r"--region r1:1000-2000: .*tabix -p vcf"):
        run_variants(str(vcf), str(fasta), MOTIFS, str(tmp_path / "none"), client,
                     VariantsSettings(pvalue=PVALUE, region="r1:1000-2000"))
    subprocess.run(["tabix", "-p", "vcf", str(vcf)], check=True)
    run_variants(str(vcf), str(fasta), MOTIFS, str(tmp_path / "full"), client, VariantsSettings(pvalue=PVALUE))
    full = read_variants(str(tmp_path / "full"))
    s = run_variants(str(vcf), str(fasta), MOTIFS, str(tmp_path / "part"), client,
                     VariantsSettings(pvalue=PVALUE, region="r1:1000-2000"))
    inside = {(c, p, a) for c, p, r, alts in records for a in alts
              if c == "r1" and p <= 2000 and p + len(r) - 1 >= 1000}
    assert s["alleles"] == len(inside) and len(inside) > 20
    key = ("chrom", "pos", "alt", "motif_id", "ref_score", "alt_score", "ref_pvalue", "alt_pvalue", "call")
    want = {tuple(r[k] for k in key) for r in full.to_pylist() if (r["chrom"], r["pos"], r["alt"]) in inside}
    got = {tuple(r[k] for k in key) for r in read_variants(str(tmp_path / "part")).to_pylist()}
    assert got == want and len(got) > 10
    copied = [x for x in (tmp_path / "part" / "variants.vcf").read_text().splitlines() if not x.startswith("#")]
    tabix = subprocess.run(["tabix", str(vcf), "r1:1000-2000"], capture_output=True, text=True, check=True)
    assert [x.split("\t")[:7] for x in copied] == [x.split("\t")[:7] for x in tabix.stdout.splitlines()]
    assert any("MOTIFGRID=" in x for x in copied)
