#!/usr/bin/env bash
# One call on the lent GPU machine (see ../.library/device): install the carried wheels, run the GPU tests,
# the kernel benchmark and, with E2E=SIZE, the end-to-end scan of a SIZE-bp human-like store.
# Carry: .whl .devdata/shared   (made by ../shared/tools/device-wheels.sh biopython, and a copy of
# shared/data/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar + genomes/hs37_chrX_20-30Mb.fa.gz*)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
python3 -c "import cupy, numba; print('cupy', cupy.__version__, 'cuda', cupy.cuda.runtime.runtimeGetVersion(), 'numba', numba.__version__)"
if [ "${TESTS:-1}" = 1 ]; then
  timeout 400 python3 -m pytest -q -s -p no:cacheprovider ${TEST_ARGS:-tests/scan/test_scan_gpu.py tests/scan/test_scan_worker.py} 2>&1 \
    | tail -40 | tee "$OUT/gpu-tests.txt"
fi
if [ "${KERNEL:-1}" = 1 ]; then
  timeout 300 python3 -m pipeline.cli bench --parts ${PARTS:-kernel,baseline,cpu} --motifs $J \
    --fasta .devdata/shared/genomes/hs37_chrX_20-30Mb.fa.gz --json "$OUT/bench.jsonl" 2>&1 | tail -20
fi
if [ -n "${E2E:-}" ]; then
  for w in ${E2E_WORKERS:-1}; do    # GPU workers (1 per GPU); the store is generated once in /tmp/e2e
    timeout ${E2E_TIMEOUT:-500} python3 -m pipeline.cli bench --parts e2e --motifs $J --genome-size "$E2E" \
      --pvalues ${PVALUES:-1e-4 1e-5} --work /tmp/e2e --workers $w --json "$OUT/e2e-$w.jsonl" ${E2E_ARGS:-} 2>&1 | tail -20
  done
fi
