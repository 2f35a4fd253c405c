#!/usr/bin/env bash
# On the lent GPU machine: deploy/node/run-node.sh with the real `dask cuda worker` (one worker per GPU), its
# dataset compared with a local CPU scan of the same store, plus the deploy/security/bad-input tests.
# Carry: .whl (wheels of the project's dependencies, dask-cuda and CuPy among them). Prints what it finds.
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
W=/tmp/deploy; rm -rf "$W"; mkdir -p "$W"
J=tests/data/jaspar2024_subset.jaspar
python3 -m pipeline.cli ingest pipeline/data/hs37_chrX_20-22Mb.fa.gz "$W/g.zarr" --block-size 262144 2>&1 | tail -1
SECONDS=0
MOTIFGRID_RUN_DIR="$W/run" MOTIFGRID="python3 -m pipeline.cli" DASHBOARD=127.0.0.1:0 timeout 400 \
  bash deploy/node/run-node.sh "$W/g.zarr" "$J" "$W/hits-node" --pvalue 1e-4 --no-progress 2>&1 | tail -4 \
  | tee "$OUT/node.txt"
echo "node script rc=${PIPESTATUS[0]}, ${SECONDS} s including scheduler and worker start" | tee -a "$OUT/node.txt"
tail -5 "$W/run/workers.log" > "$OUT/workers-tail.txt"
python3 -m pipeline.cli scan "$W/g.zarr" "$J" --out "$W/hits-cpu" --pvalue 1e-4 --no-progress --device cpu 2>&1 | tail -2
python3 - "$W" <<'PY' | tee "$OUT/compare.txt"
import sys
from pipeline.scan import read_hits
from tests.scan.test_scan_pipeline import table_rows
w = sys.argv[1]
a, b = table_rows(read_hits(f"{w}/hits-node")), table_rows(read_hits(f"{w}/hits-cpu"))
print(f"node (dask cuda worker) {len(a)} hits, local CPU {len(b)} hits, identical: {a == b}")
PY
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/engine/test_deploy.py tests/engine/test_security.py tests/cli/test_bad_inputs.py \
  2>&1 | tail -15 | tee "$OUT/tests.txt"
