#!/usr/bin/env bash
# Issue 18 on the lent GPU machine, one call: the 3.1 Gb human-sized store x 879 JASPAR vertebrates to Parquet
# (`motifgrid bench --parts e2e`, cold thresholds) at the p-values of PVALUES, with the thread-seconds of every step
# of the tasks and of the end of the run, for each setting of RUNS (one line of VAR=value each, e.g.
# "DASK_MOTIFGRID__CLUSTER__GPU_PROCESSES=2"; PV=1e-4,1e-4: that line's p-values, run in one cluster; W=N: its GPUs
# (else WORKERS); T=N: its threads per worker process (else motifgrid's: the cores shared); SRC=DIR runs
# that line with the code of DIR, e.g. an earlier commit unpacked by `git archive COMMIT pipeline workers | tar -x -C .base`, carried: the baseline in the same call);
# WORKERS GPUs (default 1).  Then, with PEAKS=1, the promoter set
# through the whole `scan` command on the GPU and on the CPU of the same machine; CROSS="SIZES": --device auto's
# crossover (whole commands on synthetic stores; E2E=0 skips the 3.1 Gb runs); WHOLE=1: the whole `motifgrid scan`
# command on the 3.1 Gb store (cold thresholds; also with the code of SRC_WHOLE=DIR; once per line of
# WHOLE_SETTINGS).  Carry: .whl .devdata
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
nproc
# numba and CuPy compile (or load) their kernels here, out of the timed runs (a fresh machine compiles ~10 s)
timeout 200 python3 -m pipeline.cli bench --parts kernel,cpu --motifs $J --cpu-positions 65536 2>&1 | grep -E '"part"|Error' | cut -c1-200
ROOT=$PWD
run=0
[ "${E2E:-1}" = 1 ] && while read -r settings; do
  run=$((run + 1)); echo "== run $run: ${settings:-defaults}"
  src=$ROOT; [[ " $settings " =~ \ SRC=([^ ]+) ]] && src=$ROOT/${BASH_REMATCH[1]}   # SRC=DIR: that source tree's code
  pv=${PVALUES:-1e-4 1e-5}; [[ " $settings " =~ \ PV=([^ ]+) ]] && pv=${BASH_REMATCH[1]//,/ }   # PV=P1,P2: this line's
  w=${WORKERS:-1}; [[ " $settings " =~ \ W=([^ ]+) ]] && w=${BASH_REMATCH[1]}    # W=N: this line's GPUs
  thr=(); [[ " $settings " =~ \ T=([^ ]+) ]] && thr=(--threads "${BASH_REMATCH[1]}")  # T=N: threads per process
  (cd "$src" && env $settings PYTHONPATH=/tmp/site:$src timeout ${E2E_TIMEOUT:-300} python3 -m pipeline.cli bench --parts e2e \
    --motifs $ROOT/$J --genome-size ${SIZE:-3.1e9} \
    --pvalues $pv --work /tmp/e2e --workers $w "${thr[@]}" --json "$OUT/e2e-$run.jsonl" 2>&1) | grep -E '"part"|Error' \
    | python3 -c "import sys, json
for l in sys.stdin:
    if not l.startswith('{'):
        print(l.rstrip()); continue
    r = json.loads(l)
    if r.get('part') != 'e2e':
        print(r); continue
    st = {k: round(v, 1) for k, v in (r.get('task_seconds_by_step') or {}).items()}
    print('p', r['pvalue'], 'gpus', r.get('gpus'), 'processes', r['workers'], 'threads', r['threads'], 'total', round(r['seconds'], 2), 's;',
          r['hits'], 'hits', round(r['bytes_written'] / 1e9, 2), 'GB; thresholds', round(r['seconds_thresholds'], 2),
          'tasks', round(r['seconds_tasks_wall'], 2), 'qvalues', r.get('seconds_qvalues') and round(r['seconds_qvalues'], 2),
          'region counts', r.get('seconds_region_counts') and round(r['seconds_region_counts'], 2),
          '| q-value tasks', r.get('qvalues_tasks'), 'kept pairs not used:', r.get('qvalues_fallback'), {k: round(v, 1) for k, v in (r.get('qvalues_task_seconds_by_step') or {}).items()},
          'phases', {k: round(v, 2) for k, v in (r.get('qvalues_phases') or {}).items()},
          'rows (pieces, steps)', r.get('qvalues_rows'),
          '| run phases', {k: round(v, 2) for k, v in (r.get('phases') or {}).items()},
          '| first tasks (mean)', {k: round(sum(t.get(k, 0) for t in r.get('first_tasks') or []) / max(1, len(r.get('first_tasks') or [])), 3)
                                   for k in ('task', 'scan', 'table', 'pvalues', 'parquet', 'pinned', 'faults')},
          '| thread-s: scan', round(r['task_seconds_scan'], 1), 'io', round(r['task_seconds_io'], 1), st,
          '| first task', r.get('first_task_s'), 'util', r.get('utilisation'), 'tail', r.get('tail_s'),
          '| task groups [start, stop, thread-s, tasks, longest]', r.get('task_groups'), 'warm-ups done', r.get('warm_done_s'))"
done <<< "${RUNS:-}"
if [ "${WHOLE:-0}" = 1 ]; then    # the whole `motifgrid scan` command on the e2e store, cold thresholds, this tree and SRC_WHOLE,
  while read -r wset; do          # once per line of WHOLE_SETTINGS (VAR=value ...; default: one line of defaults)
    for src in $ROOT ${SRC_WHOLE:+$ROOT/$SRC_WHOLE}; do
      for i in 1 2; do
        rm -rf /tmp/hw /tmp/wc; (cd $src && env $wset DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR=/tmp/wc PYTHONPATH=/tmp/site:$src \
          /usr/bin/time -f "whole ${wset:-defaults} ${src#$ROOT} run $i: %e s wall, %M KB" python3 -m pipeline.cli scan \
          /tmp/e2e/genome.zarr $ROOT/$J --out /tmp/hw --device gpu --no-progress 2>&1 | grep -E "whole|done|Error")
        python3 -c "import json; d = json.load(open('/tmp/hw/_summary.json')); print('  in command', round(d['seconds'], 2),
'thresholds', round(d['seconds_thresholds'], 2), 'tasks', round(d['seconds_tasks_wall'], 2), 'qvalues',
round((d.get('qvalues') or {}).get('seconds', 0), 2))" 2>/dev/null
      done
    done
  done <<< "${WHOLE_SETTINGS:-}"
fi
if [ -n "${CROSS:-}" ]; then      # --device auto's crossover: whole `motifgrid scan` commands, GPU vs CPU, by size
  for size in $CROSS; do
    python3 -c "import numpy as np; from pipeline.cli.bench import synthesize_store
synthesize_store('/tmp/x$size.zarr', float('$size'), np.array([0.2952, 0.2048, 0.2048, 0.2952]), 1 << 20, 127)" >/dev/null
    for d in gpu cpu auto; do
      rm -rf /tmp/hx; /usr/bin/time -f "cross $size bp $d: %e s" python3 -m pipeline.cli scan /tmp/x$size.zarr $J \
        --out /tmp/hx --device $d --no-progress 2>&1 | grep -E "cross|device auto"
    done
  done
fi
if [ "${PEAKS:-0}" = 1 ]; then
  for d in gpu cpu; do
    rm -rf /tmp/h-$d; /usr/bin/time -f "promoters $d: %e s wall, %M KB peak RSS" python3 -m pipeline.cli scan \
      .devdata/composition/genomes/dm3_upstream2000.fa.gz $J --out /tmp/h-$d --device $d --no-progress 2>&1 | grep "wall"
  done
fi
