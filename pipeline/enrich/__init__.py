"""Motif enrichment (SEA's test): targets and controls read or made (``inputs``, ``controls``: shuffled, GC- and
length-matched genomic), one scan of both, Fisher's test, E- and q-values (``stats``), CentriMo's central enrichment
(``centrality``), clusters of the top motifs, sites and pictures (``outputs``, ``report``); ``run``: the job."""
from pipeline.enrich.run import EnrichSettings, execute_enrich, plan_enrich, run_enrich
from pipeline.enrich.stats import EnrichError, enrichment_table

__all__ = ["EnrichError", "EnrichSettings", "enrichment_table", "execute_enrich", "plan_enrich", "run_enrich"]
