#!/usr/bin/env bash
# One call on the lent GPU machine: install the carried wheels, run the discovery tests (GPU == CPU included),
# optionally the GPU profile (benchmarks/profile_discovery.py), then the planted (l, d) benchmark on the GPU and
# the CTCF peaks check.
# Carry: .whl .devdata/shared   (.whl from ../shared/tools/device-wheels.sh; .devdata/shared holds copies of
# shared/data/benchmarks/chipseq_peaks/Gm12878.CTCF.top500.w200.fa, benchmarks/classic_sets/crp0.fa and
# motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar under the same relative paths)
# Knobs: N (instances per set, default 20), SETS, BASELINE=1 (also the likelihood-only ranking), CTCF=0 to skip,
# TESTS=0|gpu|1 (none, the GPU-marked discovery tests, all discovery tests), PROFILE=1 (+ PROFILE_ARGS),
# BENCH=0 to skip the benchmark.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
python3 -c "import cupy, numba; print('cupy', cupy.__version__, 'cuda', cupy.cuda.runtime.runtimeGetVersion(), 'numba', numba.__version__)"
T=${TESTS:-1}
if [ "$T" != 0 ]; then
  M=""; [ "$T" = gpu ] && M="-m gpu"
  timeout 300 python3 -m pytest -q -p no:cacheprovider -p no:logging $M tests/discover/test_discover.py \
    tests/discover/test_discover_kernels.py 2>&1 | tail -25 | tee "$OUT/discover-tests.txt"
fi
if [ "${PROFILE:-0}" = 1 ]; then
  timeout ${PROFILE_TIMEOUT:-240} python3 benchmarks/profile_discovery.py ${PROFILE_ARGS:-} --json "$OUT/profile.jsonl" \
    2>&1 | grep -v "^$" | tail -40
fi
if [ "${BENCH:-1}" = 1 ]; then
  B=""; [ "${BASELINE:-0}" = 1 ] && B="--baseline"
  C="--ctcf"; [ "${CTCF:-1}" = 0 ] && C=""
  timeout ${BENCH_TIMEOUT:-480} python3 benchmarks/discovery.py --device gpu --sets ${SETS:-15,4 16,5 18,6 z15,4} \
    --instances ${N:-20} $B $C ${BENCH_ARGS:-} --json "$OUT/discovery.jsonl" 2>&1 | grep -v '^{"set"' | tail -30
fi
