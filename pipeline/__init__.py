"""motifgrid: genome-scale TF motif analysis on Dask (orchestration, I/O, CLI)."""
from __future__ import annotations

import os

import dask.config
import yaml

__version__ = "0.1.0"


class MotifgridError(Exception):
    """An error in the user's input or environment: the CLI prints it as one line (no traceback)."""

_defaults = os.path.join(os.path.dirname(__file__), "motifgrid.yaml")
with open(_defaults) as _f:
    dask.config.update_defaults(yaml.safe_load(_f))
