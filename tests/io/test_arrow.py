"""pipeline.io.arrow: the arrays equal pa.array's, and a whole scan never imports pandas (0.2-0.3 s of start-up)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

from pipeline.io import arrow
from tests.conftest import DATA, ROOT, subprocess_env


@pytest.mark.parametrize("values,typ", [
    (np.arange(-5, 7, dtype=np.int64), None),
    (np.arange(10, dtype=np.int32)[::3], None),                  # strided: copied contiguous
    (np.linspace(-1, 1, 9).astype(np.float32), None),
    ([1.5, float("inf"), -0.0], pa.float64()),
    ([3, 1, 2], pa.int32()),
    ([True, False, True, True, False, False, False, False, True], pa.bool_()),
    (np.array([True, False, True]), None),
    (["MA0001.1", "", "Ünïcödé", "a" * 300], pa.string()),
    (np.array(["x", "yz"]), None),
    (np.array(["x", "yz"], dtype=object), pa.string()),
    ([], pa.string()),
    (np.zeros(0, np.float64), None),
])
def test_column_equals_pa_array(values, typ):
    got = arrow.column(values, typ)
    want = pa.array(values, typ) if typ is not None else pa.array(values)
    if pa.types.is_large_string(want.type):       # NumPy unicode arrays: pa.array picks large_string
        want = want.cast(pa.string())
    got.validate(full=True)
    assert got.type == want.type and got.equals(want)


def test_to_numpy_equals_pyarrows():
    """arrow.to_numpy (no pandas probe) = pyarrow's to_numpy: slices, several chunks, dictionary indices."""
    a = pa.array(np.arange(20, dtype=np.float64) / 3)
    for arr in (a, a.slice(5, 9), pa.chunked_array([a.slice(0, 4), a.slice(11)]), pa.chunked_array([], pa.float64()),
                pa.array(["x", "y", "x"]).dictionary_encode().indices):
        want = arr.to_numpy() if isinstance(arr, pa.Array) else np.asarray(arr.to_pylist(), dtype=np.float64)
        got = arrow.to_numpy(arr)
        assert got.dtype == want.dtype and np.array_equal(got, want)
    with pytest.raises(TypeError, match="without nulls"):
        arrow.to_numpy(pa.array([1.0, None]))


def test_dictionary_and_table():
    ids = arrow.strings(["A", "B", "C"])
    idx = np.array([2, 0, 0, 1], np.int32)
    d = arrow.dictionary(idx, ids)
    assert d.equals(pa.DictionaryArray.from_arrays(pa.array(idx), pa.array(["A", "B", "C"])))
    schema = pa.schema([("n", pa.int64()), ("x", pa.float64()), ("id", pa.dictionary(pa.int32(), pa.string()))])
    t = arrow.table({"n": np.arange(4), "x": [0.5, 1, 2, 3], "id": d}, schema=schema)
    assert t.schema == schema and t.column("id").to_pylist() == ["C", "A", "A", "B"]
    with pytest.raises(TypeError, match="dictionary-typed"):
        arrow.table({"n": np.arange(4), "x": np.ones(4), "id": [1, 2, 3, 4]}, schema=schema)
    with pytest.raises(ValueError, match="1-d"):
        arrow.column(np.zeros((2, 2)))


def _scan_code(tmp_path) -> str:
    return f"""
import sys
from pipeline.io.genome import ingest
from pipeline.scan.graph import run_scan
from pipeline.engine.cluster import get_client
fa = {str(tmp_path / 'g.fa')!r}
store = ingest(fa, {str(tmp_path / 'g.zarr')!r}, block_size=20_000, halo=40)
with get_client(n_workers=2, device='cpu', quiet=True) as (client, dev):
    res = run_scan(store.path, {str(DATA / 'jaspar2024_subset.jaspar')!r}, {str(tmp_path / 'hits')!r}, pvalue=1e-3,
                   client=client, progress=False)
assert res.hits > 0, res
print('pandas' in sys.modules)
"""


def _enrich_code(tmp_path) -> str:
    return f"""
import sys
from pipeline.enrich.run import EnrichSettings, run_enrich
from pipeline.engine.cluster import get_client
with get_client(n_workers=1, device='cpu', quiet=True, dashboard=False) as (client, dev):
    res = run_enrich({str(DATA / 'ctcf_gm12878_top500.fa.gz')!r}, {str(DATA / 'jaspar2024_subset.jaspar')!r},
                     {str(tmp_path / 'enr')!r}, client, EnrichSettings(seed=1))
assert res['clusters'], res
print(res['seconds_steps']['preload_wait'] < 60, 'scipy.cluster.hierarchy' in sys.modules, 'pandas' in sys.modules)
"""


@pytest.fixture(scope="module")
def fresh_runs(tmp_path_factory, chrx_slice) -> dict:
    """The scan and the enrichment below, each in a fresh process, both started at once (each is mostly one core's
    imports and start-up): ``{name: (returncode, stdout, stderr)}``."""
    scan_dir, enrich_dir = tmp_path_factory.mktemp("fresh-scan"), tmp_path_factory.mktemp("fresh-enrich")
    (scan_dir / "g.fa").write_text(">chrX\n" + chrx_slice[:60_000] + "\n")
    procs = {name: subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True, env=subprocess_env(), cwd=ROOT)
             for name, code in (("scan", _scan_code(scan_dir)), ("enrich", _enrich_code(enrich_dir)))}
    out = {}
    try:
        for name, p in procs.items():
            stdout, stderr = p.communicate(timeout=300)
            out[name] = (p.returncode, stdout, stderr)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    return out


def test_scan_never_imports_pandas(fresh_runs):
    """A whole scan (local cluster with dashboard, thresholds, Parquet parts and summaries) in a fresh process:
    pandas stays unimported (pyarrow would import it on the first ``pa.array``)."""
    rc, stdout, stderr = fresh_runs["scan"]
    assert rc == 0, stderr
    assert stdout.strip().splitlines()[-1] == "False", stdout


def test_enrich_never_imports_pandas(fresh_runs):
    """A whole enrichment (shuffled controls, clusters, sites of the top motifs, pictures) in a fresh process: pandas
    stays unimported, and what writing the outputs needs was loaded beside the scan (``enrich_outputs.preload``)."""
    rc, stdout, stderr = fresh_runs["enrich"]
    assert rc == 0, stderr
    assert stdout.strip().splitlines()[-1] == "True True False", stdout


def test_nullable_equals_pa_array():
    """arrow.nullable (None entries are nulls) = pa.array of the same list, strings and integers, with and without
    nulls, empty."""
    for values, typ in ((["a", None, "ccc", None, "", "dd", "e", "f", "g"], pa.string()),
                        ([3, None, -1, 7, None, 0, 1, 2, 3, 4], pa.int32()),
                        ([1, 2], pa.int64()), ([None, None], pa.string()), ([], pa.int32())):
        got = arrow.nullable(values, typ)
        assert got.equals(pa.array(values, type=typ)), (values, got)
        assert got.null_count == sum(v is None for v in values)
