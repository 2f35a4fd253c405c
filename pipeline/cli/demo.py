"""``motifgrid demo``: the bundled genome slice ingested and scanned with JASPAR 2024 CORE vertebrates, the numba
kernels compiled (or loaded) beside it, where the time went."""
from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

from pipeline.cli.outputs import make_console
from pipeline.cli.scan_verbs import cmd_scan


def cmd_demo(a) -> int:
    from pipeline.io.genome import GenomeStore, ingest  # noqa: PLC0415

    t0 = time.perf_counter()
    warm = _KernelWarmup.start(a)
    console = make_console()
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    fasta = Path(__file__).parents[1] / "data" / "hs37_chrX_20-22Mb.fa.gz"
    store = d / "genome.zarr"
    t_ingest = None
    if not store.exists():
        console.print(f"ingesting the bundled genome slice {fasta.name} (human GRCh37 chrX:20,000,001-22,000,000) → {store}")
        t_ingest = time.perf_counter()
        ingest(fasta, store, block_size=262_144)
        t_ingest = time.perf_counter() - t_ingest
    else:
        GenomeStore(store)
    hits = d / "hits"
    a.store, a.out, a.background, a.pseudocount = str(store), str(hits), "uniform", 0.1
    a.resume, a.no_progress = True, False
    console.print(f"scanning with {a.motifs}, p < {a.pvalue}, both strands")
    cmd_scan(a, console=console, before_scan=warm.announce if warm else None)
    _demo_report(hits, console)
    _demo_times(hits, console, warm, t_ingest, time.perf_counter() - t0)
    return 0


def _workers_dispatchers() -> list:
    """The numba kernels of the ``workers`` modules imported so far."""
    from numba.core.dispatcher import Dispatcher  # noqa: PLC0415

    return [v for name, mod in list(sys.modules.items()) if name.startswith("workers.") and mod is not None
            for v in list(vars(mod).values()) if isinstance(v, Dispatcher)]


class _KernelWarmup:
    """The demo's first seconds on a new machine are numba compiling the kernels (17-21 s on the 2-core VM, a helper
    process compiling half of them: ``workers.warmup``; cached on disk after that, next to the sources or, where those
    are read-only, in numba's user cache folder; NUMBA_CACHE_DIR chooses).  For a local CPU cluster (threads of this
    process) they are compiled or loaded here, in a thread started before the genome is ingested, the motifs read
    and the cluster started: the workers find them ready (``workers.warmup.warm`` runs once per process)."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.seconds = None
        self.thread = threading.Thread(target=self._run, name="motifgrid-demo-warmup", daemon=True)
        self.thread.start()

    @classmethod
    def start(cls, a):
        """A running warm-up, or None where the workers are other processes or machines (they warm up themselves)."""
        if a.scheduler or a.scheduler_file or a.processes or a.device == "gpu":
            return None
        from workers.backend import gpu_available  # noqa: PLC0415

        return cls() if a.device == "cpu" or not gpu_available() else None

    def _run(self):
        from workers.warmup import warm  # noqa: PLC0415

        try:
            warm("cpu")
        except Exception:          # noqa: BLE001 - the scan's own tasks will say what is wrong
            pass
        self.seconds = time.perf_counter() - self.t0

    def compiled(self) -> int:
        """Kernels compiled so far in this process because numba's disk cache had none (0: loaded from the cache)."""
        return sum(sum(d.stats.cache_misses.values()) for d in _workers_dispatchers())

    def announce(self, job) -> None:
        if self.thread.is_alive() and self.compiled():
            make_console().print(f"first run on this machine: compiling the scan and threshold kernels (numba; under a "
                             f"minute on 2 cores), then the thresholds of {len(job.mset.ids)} motifs; both are cached for "
                             "later runs …")


def _demo_times(hits: Path, console, warm, t_ingest, total: float) -> None:
    """Where the demo's time went: ingest, kernels (compiled or loaded, in the background), motifs and cluster,
    thresholds, blocks (from the scan's ``_summary.json``)."""
    import json  # noqa: PLC0415

    s = json.loads((hits / "_summary.json").read_text())
    parts = [] if t_ingest is None else [f"ingest {t_ingest:.1f} s"]
    if s.get("blocks_this_run"):
        rest = s["seconds"] - s["seconds_thresholds"] - s["seconds_tasks_wall"]
        parts += [f"thresholds {s['seconds_thresholds']:.1f} s", f"scanning the blocks {s['seconds_tasks_wall']:.1f} s",
                  f"the rest of the scan (reading the motifs, starting the workers, q-values, summaries) {rest:.1f} s"]
    line = f"time: {total:.1f} s in all" + (f" — {', '.join(parts)}" if parts else "")
    if warm is not None:                   # beside the above, on a thread of its own
        warm.thread.join()
        how = "compiled (first run; cached now)" if warm.compiled() else "loaded from numba's cache"
        line += f"; numba's kernels {how} in the background, ready {warm.seconds:.1f} s after the start"
    console.print(line, soft_wrap=True)


def _demo_report(hits: Path, console) -> None:
    import pyarrow.compute as pc  # noqa: PLC0415

    from pipeline.scan.read import read_hits  # noqa: PLC0415

    t = read_hits(str(hits), columns=["chrom", "start", "end", "strand", "motif_name", "score", "pvalue"])
    best = t.take(pc.sort_indices(t, sort_keys=[("pvalue", "ascending")])[:3])
    for r in best.to_pylist():
        console.print(f"  strongest: {r['motif_name']} at {r['chrom']}:{r['start']:,}-{r['end']:,} ({r['strand']}) "
                      f"score {r['score']:.2f} p={r['pvalue']:.2g}")
    # pyarrow is a dependency (pandas is not: a plain install has no pandas)
    console.print("look at them: python -c \"import pyarrow.parquet as pq; print(pq.read_table('"
                  f"{hits}').slice(0, 5).to_pylist())\"  ·  motifgrid export {hits} --format bed -o hits.bed")
