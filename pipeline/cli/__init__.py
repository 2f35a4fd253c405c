"""The `motifgrid` command."""
from pipeline.cli.command import entry, main

__all__ = ["entry", "main"]
