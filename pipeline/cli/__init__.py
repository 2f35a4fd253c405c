"""The ``motifgrid`` command: arguments (``args``), the local-cluster choice (``local``), where commands write
(``outputs``), the verbs (``scan_verbs``: ingest, scan, thresholds, export, summary; ``analysis_verbs``: composition,
compare, discover, enrich; ``demo``), ``summary`` (any output folder summarised), ``bench``; ``command``: ``main``,
``entry`` (the console script) and the errors' one line."""
from pipeline.cli.command import entry, main

__all__ = ["entry", "main"]
