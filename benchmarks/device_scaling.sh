#!/usr/bin/env bash
# Scaling of the end-to-end GPU scan on one multi-GPU host: 3.1 Gb human-sized store x 879 JASPAR vertebrates,
# both strands, p = 1e-4, cold then warm threshold cache, on 1 and N GPU workers, with the hits written as zstd
# (default) and as lz4 Parquet.  Carry: .whl .devdata/shared
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
nproc
for codec in ${CODECS:-zstd lz4}; do
  for w in ${WORKERS:-1 4}; do
    DASK_MOTIFGRID__SCAN__COMPRESSION=$codec timeout ${E2E_TIMEOUT:-240} python3 -m pipeline.cli bench --parts e2e \
      --motifs $J --genome-size ${SIZE:-3.1e9} --pvalues 1e-4 --warm --work /tmp/e2e --workers $w \
      --threads ${THREADS:-12} --json "$OUT/e2e-$codec-$w.jsonl" 2>&1 | grep '"part"' \
      | python3 -c "import sys,json
for l in sys.stdin:
    r=json.loads(l)
    if r.get('part')=='e2e': print('$codec', r['workers'], r['thresholds'], round(r['seconds'],2), 's', r['hits'], 'hits', round(r['bytes_written']/1e9,2), 'GB', 'thr', round(r['seconds_thresholds'],2), 'tasks', round(r['seconds_tasks_wall'],2), 'scan', round(r['task_seconds_scan'],1), 'io', round(r['task_seconds_io'],1))
    else: print(r)"
  done
done
