#!/usr/bin/env bash
# Issue 3 check on a multi-GPU host in one call: compile/warm-up (the kernel benchmark on one block, so that
# numba and CuPy compilation is out of the timed runs), then the 1-GPU / N-GPU end-to-end scaling
# (benchmarks/device_scaling.sh; RUNS: lines of "VAR=value ..." settings for it, one scaling run each,
# e.g. "WORKERS=1,2 THREADS=12").
# GPU tests: benchmarks/device_gpu_tests.sh (a second call).  Carry: .whl .devdata/shared
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
timeout 120 python3 -m pipeline.cli bench --parts kernel --motifs $J 2>&1 | grep '"part"' | tee "$OUT/kernel.txt"
while read -r settings; do
  [ -z "$settings" ] && continue
  echo "== $settings"
  env $settings bash "$(dirname "$0")/device_scaling.sh"
done <<< "${RUNS:-WORKERS=1,4}"
