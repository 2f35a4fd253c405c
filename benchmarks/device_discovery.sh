#!/usr/bin/env bash
# One call on the lent GPU machine: install the carried wheels, run the discovery tests (GPU == CPU included),
# then the planted (l, d) benchmark on the GPU and the CTCF peaks check.
# Carry: .whl .devdata/shared   (.whl from ../shared/tools/device-wheels.sh; .devdata/shared holds copies of
# shared/data/benchmarks/chipseq_peaks/Gm12878.CTCF.top500.w200.fa, benchmarks/classic_sets/crp0.fa and
# motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar under the same relative paths)
# Knobs: N (instances per set, default 20), SETS, BASELINE=1 (also the likelihood-only ranking), CTCF=0 to skip.
set -uo pipefail
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || exit 1
export PYTHONPATH=/tmp/site:$PWD MOTIFGRID_SHARED_DATA=$PWD/.devdata/shared
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import cupy, numba; print('cupy', cupy.__version__, 'cuda', cupy.cuda.runtime.runtimeGetVersion(), 'numba', numba.__version__)"
if [ "${TESTS:-1}" = 1 ]; then
  timeout 300 python3 -m pytest -q -s -p no:cacheprovider -p no:logging tests/test_discover.py 2>&1 | tail -25 \
    | tee "$OUT/discover-tests.txt"
fi
B=""; [ "${BASELINE:-0}" = 1 ] && B="--baseline"
C="--ctcf"; [ "${CTCF:-1}" = 0 ] && C=""
timeout ${BENCH_TIMEOUT:-480} python3 benchmarks/discovery.py --device gpu --sets ${SETS:-15,4 16,5 18,6 z15,4} \
  --instances ${N:-20} $B $C --json "$OUT/discovery.jsonl" 2>&1 | grep -v '^{"set"' | tail -30
