from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

# Python's bytecode cache for this process and every one it starts (CLI runs, Dask worker processes, notebook
# kernels): with PYTHONDONTWRITEBYTECODE set (this VM and CI set it) each of the suite's ~200 Python processes
# compiled the project's sources and the tests' rewritten asserts again, ~0.5 s apiece (docs/benchmarks.md)
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# the tests (and the CLI subprocesses they start) keep their threshold cache to themselves
os.environ["DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR"] = tempfile.mkdtemp(prefix="motifgrid-test-cache-")
os.environ["DASK_MOTIFGRID__MOTIFS__CACHE_DIR"] = tempfile.mkdtemp(prefix="motifgrid-test-motifs-")
import dask.config  # noqa: E402

dask.config.refresh()

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data"


def shared_data() -> Path | None:
    env = os.environ.get("MOTIFGRID_SHARED_DATA")
    for p in ([Path(env)] if env else []) + [ROOT.parent / "shared" / "data"]:
        if p.is_dir():
            return p
    return None


SHARED = shared_data()
#: why a test that needs the shared real data skips where it is missing, and how to point at it
NO_SHARED = ("../shared/data is not present (MOTIFGRID_SHARED_DATA=/path/to/shared/data selects it: the project's real "
             "data, as laid beside the repository)")
needs_shared = pytest.mark.skipif(SHARED is None, reason=NO_SHARED)


def _gpu() -> bool:
    from workers.backend import gpu_available

    return gpu_available()


def pytest_collection_modifyitems(config, items):
    if _gpu():
        return
    skip = pytest.mark.skip(reason="no CUDA GPU / CuPy here")
    for it in items:
        if "gpu" in it.keywords:
            it.add_marker(skip)


@pytest.fixture(params=["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def device(request):
    """Run a test on the CPU and, where present, the GPU."""
    return request.param


@pytest.fixture(params=[("cpu", "slices"), ("cpu", "blas"), pytest.param(("gpu", None), marks=pytest.mark.gpu)],
                ids=["cpu-slices", "cpu-blas", "gpu"])
def backend(request):
    """(device, CPU method): every scan implementation, the GPU one where present."""
    return request.param


@pytest.fixture(scope="session")
def chrx_2mb() -> str:
    """The bundled 2 Mb of real human chrX (demo slice), as text."""
    import gzip

    with gzip.open(ROOT / "pipeline" / "data" / "hs37_chrX_20-22Mb.fa.gz", "rt") as f:
        f.readline()
        return "".join(line.strip() for line in f)


@pytest.fixture(scope="session")
def chrx_slice(chrx_2mb) -> str:
    """300 kb of real human chrX."""
    return chrx_2mb[:300_000]


def subprocess_env(**extra) -> dict:
    """Environment for a CLI subprocess: this checkout first on PYTHONPATH, the caller's entries kept (the GPU
    machine installs the dependencies into a PYTHONPATH folder)."""
    path = os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    return dict(os.environ, PYTHONPATH=path, **extra)
