"""The Dask runtime the capabilities run on: ``cluster`` (the one place that yields a client: a running scheduler's,
a LocalCUDACluster, a LocalCluster, or this process's threads through ``thread_client``), ``dataset`` (``TaskRun``:
the context scattered once, tasks submitted, results as they come, cancel on the first error; ``open_run``,
manifests, atomic Parquet parts), ``progress`` (a scan's progress on the scheduler, for any client to follow),
``warmup`` (the worker plugin that loads the kernels), ``cost`` (``--device auto``'s model)."""
from pipeline.engine.cluster import ClusterError, get_client
from pipeline.engine.dataset import TaskRun, open_run
from pipeline.engine.progress import connect, follow, read_progress

__all__ = ["ClusterError", "TaskRun", "connect", "follow", "get_client", "open_run", "read_progress"]
