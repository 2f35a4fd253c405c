"""Device resolution, the array module, and the per-device caches every GPU module uses.

Every worker function takes ``device=None | "cpu" | "gpu"`` and resolves it here, once.
``None`` means: the GPU when CuPy and a CUDA device are usable, else the CPU.  Nothing
defaults to CUDA by accident, and CuPy is imported only when a GPU is asked for or probed.

Two caches serve every GPU module (the way cuCIM memoizes its kernels per device): :func:`cuda_kernels`
compiles a ``.cu`` file (kept beside the module that launches it) once per device and keeps its kernels;
:func:`on_device` keeps what a plan uploads to a device (its tables as CuPy arrays) for as long as the
plan lives, once per device, so a worker that scans thousands of blocks with one plan uploads it once.
Nothing of either travels when a plan is pickled.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
import weakref
from pathlib import Path

import numpy as np

DEVICES = ("cpu", "gpu")


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


@functools.lru_cache(maxsize=1)
def gpu_available() -> bool:
    """Whether this process can compute on a GPU.

    Returns
    -------
    bool
        True when CuPy imports and at least one CUDA device answers (never with ``MOTIFGRID_NO_GPU`` set);
        probed once per process.
    """
    if os.environ.get("MOTIFGRID_NO_GPU"):
        return False
    try:
        import cupy  # noqa: PLC0415

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # ImportError, CUDARuntimeError, missing driver
        return False


def resolve_device(device: str | None) -> str:
    """The device a worker function computes on.

    Parameters
    ----------
    device : {"cpu", "gpu", "auto", None}
        None and "auto": the GPU when one is usable (:func:`gpu_available`), else the CPU.

    Returns
    -------
    str
        "cpu" or "gpu".  "gpu" without a usable GPU raises RuntimeError; any other name ValueError.
    """
    if device in (None, "auto"):
        return "gpu" if gpu_available() else "cpu"
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES} or None, not {device!r}")
    if device == "gpu" and not gpu_available():
        raise RuntimeError("device='gpu' was asked for, but CuPy or a CUDA device is not available")
    return device


def array_module(device: str | None):
    """The array module of a device.

    Parameters
    ----------
    device : {"cpu", "gpu", "auto", None}
        Resolved by :func:`resolve_device`.

    Returns
    -------
    module
        ``numpy`` for "cpu", ``cupy`` for "gpu".
    """
    if resolve_device(device) == "gpu":
        import cupy  # noqa: PLC0415

        return cupy
    return np


def to_numpy(a) -> np.ndarray:
    """An array on the host.

    Parameters
    ----------
    a : numpy.ndarray or cupy.ndarray, any shape and dtype

    Returns
    -------
    numpy.ndarray
        ``a`` copied from the device (CuPy), or ``a`` itself (NumPy; array-likes through ``numpy.asarray``).
    """
    if type(a).__module__.startswith("cupy"):
        return a.get()
    return np.asarray(a)


_blas_limit = {"n": None}
_blas_lock = threading.Lock()


def limit_blas_threads(n: int = 1) -> None:
    """Pin BLAS to ``n`` threads in this process (one per Dask thread); once per process.

    Environment variables cover libraries that are not loaded yet; threadpoolctl, when present,
    covers the ones already loaded.  Only the first call (per ``n``) does the work: threadpoolctl walks
    every loaded shared library through ctypes callbacks, each taking the GIL again, which beside busy
    worker threads costs up to seconds (docs/benchmarks.md, "threadpoolctl once per process").

    Parameters
    ----------
    n : int
        Threads per BLAS call.
    """
    if _blas_limit["n"] == n:
        return
    with _blas_lock:
        if _blas_limit["n"] == n:
            return
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(n)
        try:
            from threadpoolctl import threadpool_limits  # noqa: PLC0415

            threadpool_limits(n)
        except ImportError:
            pass
        _blas_limit["n"] = n


#: CUDA's context scheduling flags (CU_CTX_SCHED_*): how a thread waits for the device
GPU_SYNC = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}


def set_gpu_sync(policy: str) -> bool:
    """How this process's threads wait for its GPUs (every visible device's primary context, the one CuPy uses).

    CUDA's default (``auto``) spins while a process has fewer contexts than the machine has cores: a GPU
    worker's threads each hold a core busy while their block is on the device, the cores its other threads
    need for the hits' host work (Arrow tables, Parquet).  ``blocking`` sleeps in the driver until the device
    is done (a wake-up of some microseconds).  Set before or after the context exists (driver API, CUDA 11+).

    Parameters
    ----------
    policy : {"auto", "spin", "yield", "blocking"}

    Returns
    -------
    bool
        True when every device took it; False without a CUDA driver (nothing changed).
    """
    import ctypes  # noqa: PLC0415

    if policy not in GPU_SYNC:
        raise ValueError(f"GPU sync policy must be one of {', '.join(GPU_SYNC)}, not {policy!r}")
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    set_flags = getattr(cuda, "cuDevicePrimaryCtxSetFlags_v2", None) or cuda.cuDevicePrimaryCtxSetFlags
    n = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(n)) != 0:
        return False
    ok = n.value > 0
    for i in range(n.value):
        dev, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        if cuda.cuDeviceGet(ctypes.byref(dev), i) or cuda.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags),
                                                                                    ctypes.byref(active)):
            ok = False
            continue
        ok &= set_flags(dev, ctypes.c_uint((flags.value & ~0x7) | GPU_SYNC[policy])) == 0
    return ok


def gc_threshold_setting(setting=None) -> tuple | None:
    """The garbage-collector thresholds a setting asks for.

    Parameters
    ----------
    setting : int or sequence of int, optional
        Default: ``motifgrid.cluster.gc-threshold`` of ``dask.config`` (read here, on the caller's process).

    Returns
    -------
    tuple of int or None
        One to three thresholds (the first > 0, none negative; ValueError otherwise), or None for Python's own.
    """
    if setting is None:
        import dask.config  # noqa: PLC0415

        setting = dask.config.get("motifgrid.cluster.gc-threshold", default=None)
    if not setting:
        return None
    try:
        values = tuple(int(v) for v in (setting if isinstance(setting, (list, tuple)) else [setting]))
    except (TypeError, ValueError):
        values = ()
    if not 1 <= len(values) <= 3 or values[0] <= 0 or any(v < 0 for v in values):
        raise ValueError(f"motifgrid.cluster.gc-threshold: one to three integers (the first > 0), got {setting!r}")
    return values


def set_gc_threshold(setting=None) -> tuple | None:
    """``gc.set_threshold`` as ``setting`` asks.

    Python collects its youngest generation every 700 net allocations of container objects.  Start-up
    allocates millions (the modules of dask, distributed, numba, bokeh; numba's registries) and each
    collection that reaches the older generations walks them all again, with the GIL held (docs/benchmarks.md,
    "GC thresholds").  With a first threshold of 50,000 the same garbage is found, in fewer, larger passes.

    Parameters
    ----------
    setting : int or sequence of int, optional
        As :func:`gc_threshold_setting`.

    Returns
    -------
    tuple of int or None
        The thresholds set, or None (Python's own kept).
    """
    import gc  # noqa: PLC0415

    values = gc_threshold_setting(setting)
    if values:
        gc.set_threshold(*values)
    return values


def retain_freed_memory(enabled: bool = True) -> bool:
    """Keep memory that glibc's ``free`` returns for reuse in this process, instead of giving it back to the OS.

    A scan task allocates its hits' columns anew for every block (a human genome at p = 1e-4: 31 GB of them in
    a run); glibc serves large arrays with fresh ``mmap`` pages or trims its heap after each block, so every
    block page-faults its columns in again (the Arrow table of a 2.4 M-hit block: 13,700 faults, 56 MB), and
    the faults of a process's threads queue on one lock.  With ``M_MMAP_THRESHOLD`` 1 GiB and
    ``M_TRIM_THRESHOLD`` 2 GiB the pages stay mapped and are reused: one H200, 3.1 Gb × 879 at 1e-4, 4 worker
    processes, the run 14.2-14.6 → 13.05 s (table 28-31 → 22 thread-s, store reads 21-22 → 18, docs/benchmarks.md).
    A process's resident memory then stays near its high-water mark until it ends.

    Parameters
    ----------
    enabled : bool
        False: nothing is changed (``pipeline.engine.cluster`` passes ``motifgrid.cluster.retain-freed-memory``, whose
        ``auto`` is GPU workers only).

    Returns
    -------
    bool
        Whether it is in effect (False where the C library has no ``mallopt``: musl, macOS).
    """
    return enabled and _mallopt_retain()


@functools.lru_cache(maxsize=1)
def _mallopt_retain() -> bool:
    """Set the two thresholds once per process (glibc's ``malloc.h``: M_TRIM_THRESHOLD -1, M_MMAP_THRESHOLD -3)."""
    import ctypes  # noqa: PLC0415

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return mallopt(-3, 1 << 30) == 1 and mallopt(-1, (1 << 31) - 1) == 1


class _NoBlasProbe:
    """A meta-path finder refusing ``scipy.linalg`` to numba's BLAS probe only (see :func:`skip_numba_blas_probe`)."""

    def find_spec(self, name, path=None, target=None):
        if name != "scipy.linalg":
            return None
        arraymath = sys.modules.get("numba.np.arraymath")
        if arraymath is None or hasattr(arraymath, "_HAVE_BLAS"):
            return None                          # not numba's probe, or the probe is over
        frame = sys._getframe(1)
        while frame is not None:                 # only an import made while numba.np.arraymath's body runs
            if frame.f_globals.get("__name__") == "numba.np.arraymath":
                raise ModuleNotFoundError("scipy.linalg skipped for numba's BLAS probe", name=name)
            frame = frame.f_back
        return None


def skip_numba_blas_probe() -> None:
    """Spare this process the import of ``scipy.linalg`` that numba's first compilation or cache load makes.

    ``numba.np.arraymath`` imports ``scipy.linalg.cython_blas`` at its import only to learn whether
    ``np.correlate`` and ``np.convolve`` may call BLAS (``_HAVE_BLAS``); scipy.linalg then imports
    ``numpy.f2py`` and more through scipy's array-API shim: 0.19-0.23 s of a 1.5 s scan of 300 peaks on the
    2-core VM (docs/benchmarks.md, issue 16).  No kernel of this package calls either function, and numba's
    ``np.dot``, ``np.linalg`` and the others still import scipy when first compiled.  Installed by the console
    script and in worker processes of their own (:func:`workers.warmup.start`), never by importing this package:
    a library user's process is left as it is.  With another numba the probe may differ: then the finder refuses
    nothing, or numba finds no BLAS for those two functions.
    """
    if "scipy.linalg" not in sys.modules and not any(isinstance(f, _NoBlasProbe) for f in sys.meta_path):
        sys.meta_path.insert(0, _NoBlasProbe())


# ------------------------------------------------------------------------------------ per-device caches
#: Dynamic shared memory a kernel asks for at most, in bytes (H100/H200 allow 227 kB per block).
SHARED_MEMORY_LIMIT = 200 * 1024
#: Options of every NVRTC compilation.
CUDA_OPTIONS = ("-std=c++17",)

_kernels: dict = {}
_kernel_locks: dict = {}
_kernels_lock = threading.Lock()


def cuda_kernels(source: Path, names: tuple, instantiate: tuple = ()) -> dict:
    """Kernels of a CUDA source file, compiled for the current device (once per device; CuPy also keeps the
    binary on disk).

    Parameters
    ----------
    source : pathlib.Path
        The ``.cu`` file.
    names : tuple of str
        The kernels wanted: ``extern "C"`` names, or C++ name expressions listed in ``instantiate``.
    instantiate : tuple of str, optional
        Template instantiations to compile (``"scan_mma<4,2>"``); each distinct tuple is its own module, so a
        worker compiles only the instantiations its plans need.

    Returns
    -------
    dict of str to cupy.RawKernel
        ``names[i]`` → its kernel on the current device.  A worker's threads share them; the first thread to
        ask compiles while the others wait (the compilation of another source does not wait).
    """
    import cupy  # noqa: PLC0415

    key = (cupy.cuda.Device().id, str(source), tuple(names), tuple(instantiate))
    found = _kernels.get(key)
    if found is None:
        with _kernels_lock:
            lock = _kernel_locks.setdefault(key, threading.Lock())
        with lock:
            found = _kernels.get(key)
            if found is None:
                module = cupy.RawModule(code=Path(source).read_text(), options=CUDA_OPTIONS,
                                        name_expressions=tuple(instantiate) or None)
                found = _kernels[key] = {name: module.get_function(name) for name in names}
    return found


_uploads: dict = {}
_upload_owners: set = set()
_uploads_lock = threading.RLock()        # an upload may ask for another owner's


def on_device(owner, upload, device: int | None = None):
    """``upload(owner)`` for a CUDA device, made once per (owner, device) and kept while ``owner`` lives.

    Parameters
    ----------
    owner : object
        A plan (``ScanPlan``, ``CompositionPlan``, ``CompareRows``): read-only, weak-referenceable; what is
        kept belongs to this very object, so a pickled copy on a worker uploads its own.
    upload : callable
        ``upload(owner)`` builds the device-side object (CuPy arrays on the current device).
    device : int, optional
        Device id; default the current CUDA device.

    Returns
    -------
    object
        What ``upload`` returned, the first time it was asked for on this device.  A worker's threads share it;
        one builds it while the others wait.
    """
    if device is None:
        import cupy  # noqa: PLC0415

        device = cupy.cuda.Device().id
    key = (id(owner), int(device))
    found = _uploads.get(key)
    if found is None:
        with _uploads_lock:
            found = _uploads.get(key)
            if found is None:
                found = _uploads[key] = upload(owner)
                if key[0] not in _upload_owners:
                    _upload_owners.add(key[0])
                    weakref.finalize(owner, _forget_uploads, key[0])
    return found


def _forget_uploads(owner_id: int) -> None:
    with _uploads_lock:
        for key in [k for k in _uploads if k[0] == owner_id]:
            del _uploads[key]
        _upload_owners.discard(owner_id)
