#!/usr/bin/env bash
# One multi-GPU node: a Dask scheduler on 127.0.0.1, one dask-cuda worker per GPU, then the scan.
#
#   deploy/node/run-node.sh STORE MOTIFS OUT [more `motifgrid scan` options, e.g. --pvalue 1e-5]
#
# Environment (all optional):
#   MOTIFGRID_RUN_DIR   folder for scheduler.json and the logs (default: ./motifgrid-node)
#   DASK_WORKER         worker command (default: "dask cuda worker": one worker process per visible GPU;
#                       "dask worker --nworkers 4 --nthreads 1" gives CPU workers)
#   WORKER_THREADS      threads per worker (default: the node's cores shared among the GPUs; each thread takes
#                       one block at a time, so one block's host work (p-values, Parquet) overlaps the others' GPU work)
#   CUDA_VISIBLE_DEVICES  which GPUs (dask cuda worker starts one worker for each)
#   DASHBOARD           scheduler dashboard address (default 127.0.0.1:8787; reach it with ssh -L 8787:127.0.0.1:8787)
#   MOTIFGRID           the motifgrid command (default: motifgrid)
#   TLS_CA TLS_CERT TLS_KEY  PEM files: scheduler, workers and scan all speak TLS (see deploy/README.md)
#
# Everything listens on 127.0.0.1 only. The scheduler and workers are stopped when the scan ends
# (or fails, or the script is interrupted); the scan's exit status is the script's.
set -euo pipefail

if [ $# -lt 3 ]; then
    sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
store=$1 motifs=$2 out=$3
shift 3

run_dir=${MOTIFGRID_RUN_DIR:-$PWD/motifgrid-node}
mkdir -p "$run_dir"
sched_file=$run_dir/scheduler.json
rm -f "$sched_file"

tls_dask=() tls_scan=() protocol=tcp
if [ -n "${TLS_CA:-}${TLS_CERT:-}${TLS_KEY:-}" ]; then
    : "${TLS_CA:?TLS needs TLS_CA, TLS_CERT and TLS_KEY}" "${TLS_CERT:?}" "${TLS_KEY:?}"
    tls_dask=(--tls-ca-file "$TLS_CA" --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY")
    tls_scan=(--tls-ca "$TLS_CA" --tls-cert "$TLS_CERT" --tls-key "$TLS_KEY")
    protocol=tls
fi

pids=()
start() {                         # "$@" in the background, in its own process group (worker children included)
    setsid "$@" &
    pids+=($!)
}
cleanup() {                       # workers first, then the scheduler; SIGKILL what is left after 10 s
    local i pid alive
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM -- "-${pids[i]}" 2>/dev/null || true; done
    for _ in $(seq 1 100); do
        alive=0
        for pid in "${pids[@]}"; do kill -0 -- "-$pid" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && return 0
        sleep 0.1
    done
    for pid in "${pids[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start dask scheduler --protocol "$protocol" --host 127.0.0.1 --port 0 --dashboard-address "${DASHBOARD:-127.0.0.1:8787}" \
    --scheduler-file "$sched_file" "${tls_dask[@]}" >"$run_dir/scheduler.log" 2>&1
for _ in $(seq 1 600); do                     # up to 60 s for the scheduler to write its file
    [ -s "$sched_file" ] && break
    kill -0 "${pids[0]}" 2>/dev/null || { echo "run-node: the scheduler failed; see $run_dir/scheduler.log" >&2; exit 1; }
    sleep 0.1
done
[ -s "$sched_file" ] || { echo "run-node: no scheduler file after 60 s; see $run_dir/scheduler.log" >&2; exit 1; }

read -r -a worker_cmd <<<"${DASK_WORKER:-dask cuda worker}"
if [ -z "${WORKER_THREADS:-}" ]; then
    if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
        ngpu=$(tr ',' '\n' <<<"$CUDA_VISIBLE_DEVICES" | grep -c .)
    else
        ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
    fi
    WORKER_THREADS=$(( $(nproc) / (ngpu > 0 ? ngpu : 1) ))
    [ "$WORKER_THREADS" -ge 2 ] || WORKER_THREADS=2
fi
start "${worker_cmd[@]}" --scheduler-file "$sched_file" --host 127.0.0.1 --nthreads "$WORKER_THREADS" \
    --dashboard-address 127.0.0.1:0 --local-directory "$run_dir/workers" "${tls_dask[@]}" \
    >"$run_dir/workers.log" 2>&1

# the scan waits for the first worker (motifgrid.cluster.wait-for-workers, 120 s by default)
read -r -a scan_cmd <<<"${MOTIFGRID:-motifgrid}"
"${scan_cmd[@]}" scan "$store" "$motifs" --out "$out" --scheduler-file "$sched_file" "${tls_scan[@]}" "$@"
