#!/usr/bin/env bash
# A new machine's kernel compile on the lent GPU host: workers.warmup.warm("cpu") into an empty numba cache, the
# current tree against a copy of an earlier one (.bench/head: its pipeline/ and workers/), interleaved; then every
# GPU-marked test (its first kernels compiled on this fresh machine too).
# Carry: .whl .devdata/shared .bench/head
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
nproc | tee "$OUT/cores.txt"
code='import time; t=time.perf_counter(); from workers.warmup import warm; warm("cpu"); print(round(time.perf_counter()-t, 2))'
for i in ${PAIRS:-1 2}; do
  for tree in .bench/head .; do
    rm -rf /tmp/nbc
    s=$(cd "$tree" && PYTHONPATH=/tmp/site:$PWD NUMBA_CACHE_DIR=/tmp/nbc python3 -c "$code" 2>&1 | tail -1)
    echo "warm cpu, empty cache, $tree: $s s" | tee -a "$OUT/warmup.txt"
  done
done
if [ "${TESTS:-1}" = 1 ]; then
  COMPOSITION=0 bash "$(dirname "$0")/device_gpu_tests.sh"
fi
