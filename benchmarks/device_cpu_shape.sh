#!/usr/bin/env bash
# The local CPU cluster's shape on a many-core host (the lent GPU machine's 16 cores): the 26,454 dm3 promoters x 879
# JASPAR vertebrates, the whole `motifgrid scan` command with warm thresholds, for each SHAPES entry ("default", or
# the CLI's cluster options joined by commas, e.g. "--processes,--workers,4,--threads,4"), then the GPU path; each
# run's wall clock and the steps of its _summary.json.  Carry: .whl .devdata/shared .devdata/composition
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
PROM=.devdata/composition/genomes/dm3_upstream2000.fa.gz
nproc
run() {   # label device options...
  local label=$1 dev=$2; shift 2
  rm -rf /tmp/hs; /usr/bin/time -f "$label: %e s wall, %M KB peak RSS (this process)" python3 -m pipeline.cli scan $PROM $J \
    --out /tmp/hs --device $dev --no-progress "$@" 2>&1 | grep -E "wall|worker|rror"
  python3 -c "import json; s = json.load(open('/tmp/hs/_summary.json')); print('  in command', round(s['seconds'], 2),
    'thresholds', round(s['seconds_thresholds'], 2), 'tasks', round(s['seconds_tasks_wall'], 2), 'region counts',
    round(s['seconds_region_counts'], 2), 'q-values', round(s['qvalues']['seconds'], 2), '| thread-s scan',
    round(s['task_seconds_scan'], 1), 'io', round(s['task_seconds_io'], 1),
    {k: round(v, 1) for k, v in s['task_seconds_by_step'].items()})"
}
run warm-up cpu >/dev/null            # thresholds into the cache, kernels compiled
for shape in ${SHAPES:-default}; do
  opts=(); [ "$shape" != default ] && IFS=, read -ra opts <<< "$shape"
  run "cpu $shape" cpu "${opts[@]}"
done
[ "${GPU:-1}" = 1 ] && run "gpu default" gpu
