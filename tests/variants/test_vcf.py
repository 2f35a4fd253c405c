"""The VCF reader on real files (1000 Genomes chr22 from VariantAnnotation, a samtools VCF, motifBreakR's prostate
cancer SNPs) against a plain reading of their columns, and the motifBreakR SNPs' REF against GRCh37 chrX."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from pipeline.variants.vcf import Skipped, read_vcf
from tests.conftest import NO_SHARED, ROOT, SHARED

pytestmark = pytest.mark.skipif(SHARED is None, reason=NO_SHARED)


def _plain(path: Path) -> list:
    """(line, chrom, pos, ref, alt) of every ALT, by splitting the text (no checks)."""
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt") as f:
        for n, line in enumerate(f, 1):
            if line.startswith("#"):
                continue
            c = line.rstrip("\n").split("\t")
            out += [(n, c[0], int(c[1]), c[3].upper(), a.upper()) for a in c[4].split(",")]
    return out


@pytest.mark.parametrize("name", ["vcf/chr22_VariantAnnotation.vcf.gz", "vcf/samtools_pyvcf.vcf",
                                  "motifbreakr/pca_enhancer_snps_chrX_lt70Mb_GRCh37.vcf"])
def test_real_vcfs_read_as_their_columns_say(name):
    path = SHARED / "variants" / name
    sk = Skipped()
    got = [(ln, c, p, r, a) for b in read_vcf(str(path), batch=1000, skipped=sk)
           for ln, c, p, r, a in zip(b.line, b.chrom, b.pos, b.ref, b.alt)]
    assert got == _plain(path) and sk.total() == 0
    assert len(got) == {"vcf/chr22_VariantAnnotation.vcf.gz": 10376, "vcf/samtools_pyvcf.vcf": 15}.get(name, 15)


def _chrx() -> Path | None:
    d = Path(os.environ.get("MOTIFGRID_GENOMES") or ROOT.parent / "genomes")
    p = d / "hs37_chrX_1-70Mb.fa.gz"
    return p if p.exists() else None


@pytest.mark.skipif(_chrx() is None, reason="GRCh37 chrX 1-70 Mb not built (bash ../shared/data/get-genomes.sh "
                    "../genomes, or MOTIFGRID_GENOMES)")
def test_motifbreakr_snps_match_grch37_chrx(tmp_path):
    """motifBreakR's 15 alleles on chrX: every REF is the genome's (MANIFEST: 15/15), staged, none skipped."""
    from pipeline.io.genome import GenomeStore, ingest
    from pipeline.variants.stage import stage

    store = ingest(_chrx(), tmp_path / "x.zarr")
    st = stage(str(SHARED / "variants" / "motifbreakr" / "pca_enhancer_snps_chrX_lt70Mb_GRCh37.vcf"),
               GenomeStore(store.path), str(tmp_path / "out"), 100, 0.0)
    assert (st.alleles, st.checked, st.mismatched, st.absent) == (15, 15, 0, {})
