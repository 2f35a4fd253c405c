#!/usr/bin/env bash
# Issue 18 on a multi-GPU host, one call: 1 GPU vs all GPUs, each GPU given the same host threads (THREADS, default
# the cores / GPUs), for the 3.1 Gb human-sized scan (cold then warm thresholds), then discovery (planted (18,6)
# instances) and the composition seed workload (counts) on 1 and on all GPUs (GPU_COUNTS="1 2 4": each on each).
# GPU_PROCS: worker processes per GPU (default: motifgrid's auto).
# Carry: .whl .devdata
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
J=.devdata/shared/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar
G=$(nvidia-smi -L | wc -l); C=$(nproc)
# worker processes per GPU: GPU_PROCS, else motifgrid's auto for each GPU count (4 // GPUs, >= 1); threads per
# process: every GPU gets C / G cores whatever the GPU count
[ -n "${GPU_PROCS:-}" ] && export DASK_MOTIFGRID__CLUSTER__GPU_PROCESSES=$GPU_PROCS
echo "gpus $G cores $C worker processes per GPU ${GPU_PROCS:-auto}"
timeout 200 python3 -m pipeline.cli bench --parts kernel --motifs $J 2>&1 | grep '"part"' | cut -c1-160
if [ "${SCAN:-1}" = 1 ]; then
  WORKERS="${GPU_COUNTS:-1 $G}" CORES_PER_GPU=$((C / G)) PVALUES=${PVALUES:-1e-4} E2E_TIMEOUT=${E2E_TIMEOUT:-240} bash "$(dirname "$0")/device_scaling.sh"
fi
if [ "${DISCOVER:-1}" = 1 ]; then
  for w in ${GPU_COUNTS:-1 $G}; do
    timeout 200 python3 benchmarks/discovery.py --device gpu --workers $w --sets 18,6 --instances ${N:-4} \
      --json "$OUT/discovery-$w.jsonl" 2>&1 | grep -v '^{"set"' | tail -4
  done
fi
if [ "${COMPOSITION:-1}" = 1 ]; then
  for w in ${GPU_COUNTS:-1 $G}; do
    timeout 240 python3 benchmarks/composition.py --device gpu --workers $w --work /tmp/comp \
      --genomes .devdata/composition/genomes --parts counts --repeats 3 --json "$OUT/composition-$w.jsonl" 2>&1 \
      | grep '"part"' | cut -c1-240
  done
fi
