"""The CUDA discovery kernels compiled for the host (``cuda_sim.h``): ``SimKernels`` runs
``workers/discover/discover.cu`` on NumPy arrays through ctypes, lanes as threads, so the GPU code is tested
where there is no GPU.  Built once per source version with the system C++ compiler (skipped without one)."""
from __future__ import annotations

import ctypes
import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
KERNEL = HERE.parents[1] / "workers" / "discover" / "discover.cu"


def compiler() -> str | None:
    return shutil.which("g++") or shutil.which("c++")


def build() -> Path:
    src = [HERE / "cuda_sim.h", HERE / "discover_sim.cpp", KERNEL]
    tag = hashlib.sha256(b"".join(p.read_bytes() for p in src)).hexdigest()[:16]
    out = Path(tempfile.gettempdir()) / f"motifgrid-discover-sim-{tag}.so"
    if not out.exists():
        tmp = out.with_suffix(f".{np.random.randint(1 << 30)}.tmp")
        subprocess.run([compiler(), "-O2", "-std=c++20", "-pthread", "-shared", "-fPIC", "-o", str(tmp),
                        str(HERE / "discover_sim.cpp")], check=True, capture_output=True, text=True)
        tmp.replace(out)
    return out


class SimKernels:
    """Kernel launcher with the interface of ``workers.discover.gpu.CupyKernels`` on NumPy arrays."""

    xp = np

    def __init__(self):
        self.lib = ctypes.CDLL(str(build()))

    @staticmethod
    def _arg(a):
        if isinstance(a, np.ndarray):
            assert a.flags.c_contiguous, "kernel arrays must be C-contiguous"
            return ctypes.c_void_p(a.ctypes.data)
        if isinstance(a, np.int32):
            return ctypes.c_int(int(a))
        if isinstance(a, np.int64):
            return ctypes.c_longlong(int(a))
        if isinstance(a, np.uint64):
            return ctypes.c_ulonglong(int(a))
        if isinstance(a, np.float64):
            return ctypes.c_double(float(a))
        raise TypeError(f"unsupported kernel argument {type(a)}")

    def launch(self, name, grid, block, smem, *args):
        getattr(self.lib, f"sim_{name}")(ctypes.c_int(int(grid)), ctypes.c_int(int(block)), ctypes.c_long(int(smem)),
                                         *(self._arg(a) for a in args))
