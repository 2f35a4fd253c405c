#!/usr/bin/env bash
# Every GPU-marked test of the suite on the lent GPU machine, then the composition benchmark's end-to-end counts.
# Carry: .whl .devdata/shared .devdata/composition   (see device_run.sh, device_composition.sh)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
# faulthandler: a test that stops moving prints every thread's stack (session 21: once, on a fresh machine, the suite
# stopped after 15 tests until the limit, and the next two calls passed)
timeout 420 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 -m gpu tests/ 2>&1 | tail -60 | tee "$OUT/gpu-tests.txt"
if [ "${COMPOSITION:-1}" = 1 ]; then
  TESTS=0 PARTS=counts REPEATS=3 bash benchmarks/device_composition.sh 2>&1 | grep '"part"' | tee "$OUT/composition.txt"
fi
