#!/usr/bin/env bash
# Issue 49 on the lent GPU machine, one call: every row of the issue's table as whole commands timed from outside,
# each with its phases (benchmarks/whole.py, MOTIFGRID_TRACE): the 3.1 Gb store x 879 at 1e-4 and 1e-5 (cold, warm),
# enrich 100k peaks x 2,346 (GPU cold/warm, CPU warm), P. falciparum 23.3 Mb x 100 / x 1,019, 200 kb x 879 and the
# 26,454 promoters on gpu, cpu and auto.  ROWS (default all: genome,enrich,small,200kb,promoters), REPEAT (default 1);
# SETTINGS: one line of VAR=VALUE ... per pass over the rows (default one pass, no settings; ROWS=...: that pass's rows);
# TESTS="pytest args": GPU tests first (e.g. "tests/scan/test_scan_gpu.py").
# Carry: .whl .devwhole (JASPAR2024_CORE{,_vertebrates}_non-redundant.jaspar, hs37_chrX_1-70Mb.fa.gz,
# dm3_upstream2000.fa.gz, Pfalciparum_3D7_genome.fa.gz: ../shared/data/get-genomes.sh)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
[ -d .devwhole/shared ] && export MOTIFGRID_SHARED_DATA=$PWD/.devwhole/shared     # (a copy of ../shared/data, for TESTS)
nproc
# numba and CuPy compile (or load) their kernels here, out of the timed runs (a fresh machine compiles ~10 s); a user's
# second command finds them in the disk caches
timeout 200 python3 -m pipeline.cli bench --parts kernel,cpu --motifs .devwhole/JASPAR2024_CORE_vertebrates_non-redundant.jaspar \
  --cpu-positions 65536 2>&1 | grep -E '"part"|Error' | cut -c1-160
if [ -n "${TESTS:-}" ]; then
  timeout 300 python3 -m pytest -q -p no:cacheprovider -o faulthandler_timeout=120 -m gpu $TESTS -s 2>&1 \
    | grep -E "passed|failed|error|==|GPU|Error" | tail -30 | tee "$OUT/gpu-tests.txt"
fi
while read -r settings; do
  rows=${ROWS:-small,200kb,promoters,enrich,genome}; envs=()
  for kv in $settings; do [[ $kv == ROWS=* ]] && rows=${kv#ROWS=} || envs+=(--env "$kv"); done   # ROWS=: this line's
  python3 benchmarks/whole.py --data .devwhole --work /tmp/whole --rows "$rows" \
    --repeat "${REPEAT:-1}" --json "$OUT/whole.jsonl" "${envs[@]}"
done <<< "${SETTINGS:-}"
