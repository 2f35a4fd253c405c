"""Composition search: short test sequences × reference windows with a similar nucleotide histogram (``run``:
``plan_composition``, ``execute_composition``, ``read_matches``)."""
from pipeline.composition.run import CompositionError, execute_composition, plan_composition, read_matches, run_composition

__all__ = ["CompositionError", "execute_composition", "plan_composition", "read_matches", "run_composition"]
