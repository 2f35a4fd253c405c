#!/usr/bin/env bash
# One call on the lent GPU machine: install the carried wheels, run the composition tests (GPU ones included)
# and the composition benchmark on the GPU (benchmarks/composition.py --device gpu), print the figures.
#
# Carry: .whl  and  .devdata/composition  holding either
#   workload.tar.gz  (the built workload: made here with
#        python benchmarks/composition.py --parts none --work .devdata/composition/work &&
#        tar czf .devdata/composition/workload.tar.gz -C .devdata/composition/work tests.fa reference.zarr ce2_chrX.zarr ingest.json)
#   or genomes/{dm3_upstream2000,ce2_chrX}.fa.gz  (from ../shared/data/get-genomes.sh; the workload is then built on the
#        device: the ingest of 26,455 contigs takes minutes of CPU time there).
# Environment: TESTS=0 skips the tests; PARTS (default counts,kernel,refusal,hits); REPEATS (default 3); SIM (0.9).
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
python3 -c "import cupy, numba; print('cupy', cupy.__version__, 'cuda', cupy.cuda.runtime.runtimeGetVersion(), 'numba', numba.__version__)"
WORK=${WORK:-/tmp/composition-bench}
mkdir -p "$WORK"
if [ -f .devdata/composition/workload.tar.gz ] && [ ! -d "$WORK/reference.zarr" ]; then
  tar xzf .devdata/composition/workload.tar.gz -C "$WORK"
fi
if [ "${TESTS:-1}" = 1 ]; then
  timeout 300 python3 -m pytest -q -p no:cacheprovider tests/composition/test_composition.py 2>&1 | tail -15 | tee "$OUT/composition-tests.txt"
fi
timeout ${BENCH_TIMEOUT:-480} python3 benchmarks/composition.py --device gpu --work "$WORK" \
  --genomes .devdata/composition/genomes --parts ${PARTS:-counts,kernel,refusal,hits} --repeats ${REPEATS:-3} \
  --similarity ${SIM:-0.9} --json "$OUT/composition-gpu.jsonl" 2>&1 | tail -30
