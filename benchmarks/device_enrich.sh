#!/usr/bin/env bash
# Issue 19 on the lent GPU machine, one call: `motifgrid enrich` of 100,000 peak-like records (150-600 bp cut from
# human chrX 1-70 Mb, benchmarks/peaks.py's set) x 2,346 JASPAR 2024 CORE matrices on the GPU, the whole command timed
# from outside: cold thresholds, then warm twice, for each source tree of SRCS (interleaved) (default "."; e.g. ".base ." runs an
# earlier commit unpacked by `git archive COMMIT pipeline workers | tar -x -C .base`, carried: the baseline in the
# same call).  RUNS: device:phase of each run (default "gpu:cold gpu:warm gpu:warm"; "warm" keeps the threshold
# cache of the runs before it; each tree has its own cache, which its "cold" run empties).  CPU=1 adds the warm run
# on the CPU workers of the same machine.  SETTINGS: environment settings tried side by side, interleaved like the
# trees (space-separated; each a comma-separated list of VAR=VALUE, or "-" for none; default "-"), e.g.
# SETTINGS="DASK_MOTIFGRID__CLUSTER__GPU_PROCESSES=1 DASK_MOTIFGRID__CLUSTER__GPU_PROCESSES=4".
# SPY=1 adds one warm GPU run of this tree under py-spy (the command's process, every thread, idle frames kept:
# $OUT/enrich-spy.txt, raw; py-spy's wheel from .devdata/tools); SPY_FLAGS="--gil" samples only the thread holding
# the GIL instead.
# Carry: .whl .devdata (.devdata/shared/motifs, .devdata/genomes/hs37_chrX_1-70Mb.fa.gz) [.base]
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
ROOT=$PWD
CORE=$ROOT/.devdata/shared/motifs/JASPAR2024_CORE_non-redundant.jaspar
python3 -c "from benchmarks.peaks import peak_set; from pathlib import Path; print(peak_set(Path('.devdata/genomes'), 100000, Path('/tmp')))"
runs=${RUNS:-gpu:cold gpu:warm gpu:warm}; [ "${CPU:-0}" = 1 ] && runs="$runs cpu:warm"
for run in $runs; do                 # the trees interleaved run by run: a baseline beside each run of the other
  for src in ${SRCS:-.}; do
  for setting in ${SETTINGS:--}; do
    d=${run%%:*}; phase=${run##*:}
    cache=/tmp/thresholds-cache-${src//[^A-Za-z0-9]/_}-${setting//[^A-Za-z0-9]/_}   # one per tree and setting
    [ $phase = cold ] && rm -rf "$cache"
    rm -rf /tmp/enr
    env_set=(); [ "$setting" != - ] && IFS=, read -ra env_set <<< "$setting"
    (cd "$ROOT/$src" && env "${env_set[@]}" DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR=$cache/thresholds \
      DASK_MOTIFGRID__MOTIFS__CACHE_DIR=$cache/motifs PYTHONPATH=/tmp/site:$ROOT/$src \
      /usr/bin/time -f "enrich [$src $setting] 100k peaks x 2,346 CORE on $d ($phase thresholds): %e s, %M KB" \
      python3 -m pipeline.cli enrich /tmp/peaks100000.fa --motifs $CORE --out /tmp/enr --device $d 2>&1) | tail -1 \
      | tee -a "$OUT/enrich.txt"
    python3 -c "import json; s = json.load(open('/tmp/enr/_summary.json')); st = s.get('seconds_steps') or {}
print('  steps', {k: round(v, 2) for k, v in st.items()}); print('  scan thread-s', s.get('scan_thread_seconds'))" | tee -a "$OUT/enrich.txt"
  done
  done
done
if [ "${SPY:-0}" = 1 ]; then
  python3 -m pip install -q --no-index --no-deps --target /tmp/spy .devdata/tools/py_spy-*.whl 2>&1 | tail -1
  rm -rf /tmp/enr
  DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR=/tmp/thresholds-cache-_-_/thresholds DASK_MOTIFGRID__MOTIFS__CACHE_DIR=/tmp/thresholds-cache-_-_/motifs \
    timeout 90 /tmp/spy/bin/py-spy record -r 200 --threads ${SPY_FLAGS:---idle} -f raw -o "$OUT/enrich-spy.txt" -- python3 -m pipeline.cli \
    enrich /tmp/peaks100000.fa --motifs $CORE --out /tmp/enr --device gpu --no-progress 2>&1 | tail -1
fi
