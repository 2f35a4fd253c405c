#!/usr/bin/env bash
# One call on the lent GPU machine for issues 15-17 (and 19 with ENRICH=1): every GPU test, then the GPU figures,
# each beside the CPU path of the same machine:
#   - the 26,454 dm3 promoters and 100,000 peak-like records (150-600 bp cut from chrX 1-70 Mb) scanned from FASTA
#     with 879 JASPAR 2024 vertebrates at p = 1e-4, the whole `motifgrid scan` command (cold, then warm thresholds);
#   - the composition seed workload (61,120 tests x ce2 chrX + dm3 promoters, counts end to end);
#   - Tomtom all pairs of JASPAR 2024 CORE (2,346^2): in-process and `motifgrid compare` end to end;
#   - with ENRICH=1: `motifgrid enrich` of the 100,000 peaks x 2,346 JASPAR CORE matrices.
# Carry: .whl .devdata   (.devdata/shared/{motifs,genomes}, .devdata/composition/genomes/{dm3_upstream2000,ce2_chrX}.fa.gz,
#         .devdata/genomes/hs37_chrX_1-70Mb.fa.gz; wheels from ../shared/tools/device-wheels.sh biopython)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
CORE=.devdata/shared/motifs/JASPAR2024_CORE_non-redundant.jaspar
PROM=.devdata/composition/genomes/dm3_upstream2000.fa.gz
python3 -c "import cupy, numba, zarr; print('cupy', cupy.__version__, 'numba', numba.__version__, 'zarr', zarr.__version__)"
if [ "${TESTS:-1}" = 1 ]; then
  timeout ${TESTS_TIMEOUT:-300} python3 -m pytest -q -p no:cacheprovider -m gpu tests/ 2>&1 | tail -25 | tee "$OUT/gpu-tests.txt"
fi
# PEAK_SET=0: the promoters only (.devdata/genomes not carried: the carry limit is 64 MiB)
[ "${PEAK_SET:-1}" = 1 ] && python3 -c "from benchmarks.peaks import peak_set; from pathlib import Path; print(peak_set(Path('.devdata/genomes'), 100000, Path('/tmp')))"
scan() {   # name fasta device phase
  rm -rf /tmp/h-$1-$3-$4
  /usr/bin/time -f "$1 $3 $4: %e s wall, %M KB peak RSS" python3 -m pipeline.cli scan $2 $J --out /tmp/h-$1-$3-$4 \
    --device $3 --no-progress 2>&1 | grep -E "wall|^done|q-values" | tee -a "$OUT/scans.txt"
}
if [ "${SCANS:-1}" = 1 ]; then
  for d in gpu cpu; do
    scan promoters $PROM $d cold; scan promoters $PROM $d warm
    [ "${PEAK_SET:-1}" = 1 ] && scan peaks /tmp/peaks100000.fa $d warm
    [ $d = gpu ] && rm -rf ~/.cache/motifgrid    # the CPU run computes its thresholds cold too
  done
fi
if [ "${COMPOSITION:-1}" = 1 ]; then
  timeout 300 python3 benchmarks/composition.py --device gpu --work /tmp/comp --genomes .devdata/composition/genomes \
    --parts counts --repeats 3 --json "$OUT/composition-gpu.jsonl" 2>&1 | tail -8
fi
if [ "${TOMTOM:-1}" = 1 ]; then
  timeout 200 python3 -c "import json; from benchmarks.identify import all_pairs; print(json.dumps(all_pairs('gpu')))" \
    2>&1 | tail -3 | tee "$OUT/tomtom.txt"
  rm -rf /tmp/cmp; /usr/bin/time -f "compare CORE x CORE gpu end to end: %e s" python3 -m pipeline.cli compare $CORE \
    --out /tmp/cmp --device gpu 2>&1 | tail -2 | tee -a "$OUT/tomtom.txt"
fi
if [ "${ENRICH:-0}" = 1 ]; then     # cold thresholds, then warm; then the CPU of the same machine
  for run in "gpu cold" "gpu warm" "gpu warm" "cpu warm"; do
    set -- $run
    rm -rf /tmp/enr; /usr/bin/time -f "enrich 100k peaks x 2,346 CORE on $1 ($2 thresholds): %e s, %M KB" \
      python3 -m pipeline.cli enrich /tmp/peaks100000.fa --motifs $CORE --out /tmp/enr --device $1 2>&1 | tail -4 \
      | tee -a "$OUT/enrich.txt"
    python3 -c "import json; s = json.load(open('/tmp/enr/_summary.json')); print('hits', s['hits'], 'scan thread-s',
      s.get('scan_thread_seconds'))" | tee -a "$OUT/enrich.txt"
  done
fi
