#!/usr/bin/env bash
# Issue 4 on the lent GPU machine: GPU tests of BUCKETSCOREDISTRIBUTION / COMPARE (and the scan's, since
# pipeline/scan/graph.py changed), the bucket GPU-vs-CPU benchmark and the all-pairs COMPARE of JASPAR vertebrates.
# Carry: .whl .devdata/shared   (see benchmarks/device_run.sh)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
nproc
if [ "${TESTS:-1}" = 1 ]; then
  timeout 300 python3 -m pytest -q -p no:cacheprovider -m gpu ${TEST_ARGS:-tests/distribution/test_bucket.py tests/compare/test_compare.py tests/scan/test_scan_gpu.py tests/scan/test_scan_worker.py} 2>&1 \
    | tail -30 | tee "$OUT/gpu-tests.txt"
fi
if [ "${BUCKET:-1}" = 1 ]; then
  timeout 240 python3 benchmarks/bucket_compare.py bucket --device gpu,cpu --lengths ${LENGTHS:-20,30,40} \
    --json "$OUT/bucket.jsonl" 2>&1 | tail -12
fi
if [ "${COMPARE:-1}" = 1 ]; then
  timeout ${COMPARE_TIMEOUT:-500} python3 benchmarks/bucket_compare.py compare ${COMPARE_MOTIFS:-$J} --device gpu \
    --cluster 0.5 --json "$OUT/compare.jsonl" 2>&1 | tail -5
fi
