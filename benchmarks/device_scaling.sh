#!/usr/bin/env bash
# Scaling of the end-to-end GPU scan on one multi-GPU host: 3.1 Gb human-sized store x 879 JASPAR vertebrates,
# both strands, cold then warm threshold cache, on 1 and N GPU workers.  Environment: CODECS (default auto: lz4 on GPUs),
# WORKERS (default "1 4"), THREADS (threads per GPU worker; default: motifgrid's, the cores shared among the
# workers), PVALUES (default 1e-4).  Prints one line per run, with the task timeline (first task after the
# start, utilisation of the worker threads, tail).  Carry: .whl .devdata/shared
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
nproc
WORKERS=${WORKERS:-1 4}
threads=()
[ -n "${THREADS:-}" ] && threads=(--threads "$THREADS")
for p in ${PVALUES:-1e-4}; do
for codec in ${CODECS:-auto}; do
  for w in ${WORKERS//,/ }; do
    DASK_MOTIFGRID__SCAN__COMPRESSION=$codec timeout ${E2E_TIMEOUT:-240} python3 -m pipeline.cli bench --parts e2e \
      --motifs $J --genome-size ${SIZE:-3.1e9} --pvalues $p --warm --work /tmp/e2e --workers $w \
      "${threads[@]}" --json "$OUT/e2e-$codec-$w-$p-${THREADS:-auto}.jsonl" 2>&1 | grep '"part"' \
      | python3 -c "import sys,json
for l in sys.stdin:
    r=json.loads(l)
    if r.get('part')=='e2e': print('$codec', 'p', r['pvalue'], 'gpus', r['workers'], 'threads', r['threads'], r['thresholds'], round(r['seconds'],2), 's', r['hits'], 'hits', round(r['bytes_written']/1e9,2), 'GB', 'thr', round(r['seconds_thresholds'],2), 'tasks', round(r['seconds_tasks_wall'],2), 'q', r.get('seconds_qvalues') and round(r['seconds_qvalues'],2), 'scan', round(r['task_seconds_scan'],1), 'io', round(r['task_seconds_io'],1), 'task', round(r['task_seconds_total'],1), 'first', r.get('first_task_s'), 'util', r.get('utilisation'), 'tail', r.get('tail_s'), 'busy', r.get('busy_thread_s'))
    else: print(r)"
  done
done
done
