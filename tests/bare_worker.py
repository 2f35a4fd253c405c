"""``dask worker`` in a Python that cannot import motifgrid: its editable install (the path hook and finder that
pip's editable install adds, and the repository root ``HIDE_ROOT`` on ``sys.path``) hidden, at the top level so that
the nanny's worker process, which runs this file again as ``__mp_main__``, hides it too.

    HIDE_ROOT=/path/to/repo python tests/bare_worker.py --scheduler-file FILE [dask worker options]
"""
import os
import sys

root = os.environ["HIDE_ROOT"].rstrip("/")
sys.meta_path[:] = [f for f in sys.meta_path if not str(getattr(f, "__module__", "")).startswith("__editable__")]
sys.path[:] = [p for p in sys.path if p.rstrip("/") != root and p and not p.startswith("__editable__")]
sys.path_importer_cache.clear()

if __name__ == "__main__":
    from distributed.cli.dask_worker import main

    sys.argv[0] = "dask-worker"
    main()
