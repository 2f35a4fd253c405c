#!/usr/bin/env bash
# Scaling of the end-to-end GPU scan on one multi-GPU host: 3.1 Gb human-sized store x 879 JASPAR vertebrates,
# both strands, cold then warm threshold cache, on 1 and N GPU workers.  Environment: CODECS (default auto: lz4 on GPUs),
# WORKERS (default "1 4"), THREADS (threads per GPU worker process; default: motifgrid's, the cores shared among
# the processes), CORES_PER_GPU (instead of THREADS: each GPU's processes share this many cores, the processes per
# GPU from DASK_MOTIFGRID__CLUSTER__GPU_PROCESSES or motifgrid's auto, 4 // GPUs), PVALUES (default 1e-4).  Prints one line per run, with the task timeline (first task after the
# start, utilisation of the worker threads, tail).  Carry: .whl .devdata/shared
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
nproc
WORKERS=${WORKERS:-1 4}
for p in ${PVALUES:-1e-4}; do
for codec in ${CODECS:-auto}; do
  for w in ${WORKERS//,/ }; do
    threads=()
    [ -n "${THREADS:-}" ] && threads=(--threads "$THREADS")
    if [ -n "${CORES_PER_GPU:-}" ]; then
      k=${DASK_MOTIFGRID__CLUSTER__GPU_PROCESSES:-$((4 / w))}; k=$((k < 1 ? 1 : k))
      [ -z "${DASK_MOTIFGRID__CLUSTER__GPU_PROCESSES:-}" ] && [ $((CORES_PER_GPU / 4)) -lt $k ] && k=$((CORES_PER_GPU / 4 < 1 ? 1 : CORES_PER_GPU / 4))
      threads=(--threads $((CORES_PER_GPU / k)))
    fi
    DASK_MOTIFGRID__SCAN__COMPRESSION=$codec timeout ${E2E_TIMEOUT:-240} python3 -m pipeline.cli bench --parts e2e \
      --motifs $J --genome-size ${SIZE:-3.1e9} --pvalues $p --warm --work /tmp/e2e --workers $w \
      "${threads[@]}" --json "$OUT/e2e-$codec-$w-$p-${THREADS:-auto}.jsonl" 2>&1 | grep '"part"' \
      | python3 -c "import sys,json
for l in sys.stdin:
    r=json.loads(l)
    if r.get('part')=='e2e': print('$codec', 'p', r['pvalue'], 'gpus', r.get('gpus'), 'processes', r['workers'], 'threads', r['threads'], r['thresholds'], round(r['seconds'],2), 's', r['hits'], 'hits', round(r['bytes_written']/1e9,2), 'GB', 'thr', round(r['seconds_thresholds'],2), 'tasks', round(r['seconds_tasks_wall'],2), 'q', r.get('seconds_qvalues') and round(r['seconds_qvalues'],2), 'scan', round(r['task_seconds_scan'],1), 'io', round(r['task_seconds_io'],1), 'task', round(r['task_seconds_total'],1), 'first', r.get('first_task_s'), 'util', r.get('utilisation'), 'tail', r.get('tail_s'), 'busy', r.get('busy_thread_s'))
    else: print(r)"
  done
done
done
