"""Variant effects: which variants of a VCF make or break a motif's site.  ``vcf`` (the VCF streamed, checked),
``stage`` (its alleles checked against the genome, in chunks), ``alleles`` (edits and their contexts), ``task`` (one
chunk scored on a worker), ``run`` (``plan_variants``, ``execute_variants``, ``run_variants``), ``outputs``
(q-values, ``variants.tsv``, the annotated VCF; ``read_variants``), ``export`` (``motifgrid export``: BED, TSV)."""
from pipeline.variants.outputs import read_variants
from pipeline.variants.run import VariantsSettings, execute_variants, plan_variants, run_variants
from pipeline.variants.stage import VariantsError
from pipeline.variants.vcf import VcfError, read_vcf

__all__ = ["VariantsError", "VariantsSettings", "VcfError", "execute_variants", "plan_variants", "read_variants",
           "read_vcf", "run_variants"]
