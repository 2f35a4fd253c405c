#!/usr/bin/env bash
# Byte-identical outputs of the CLI before and after a refactor (issue 15): run it on the branch point and on the
# branch, from the SAME checkout path and with the same OUT (paths and the command line are written into the
# outputs' metadata), then compare the two md5 lists (`diff`).
#
#   bash benchmarks/refactor_check.sh [OUT]  > md5-before.txt     # OUT default /tmp/motifgrid-refactor-check
#
# Runs, from `python -m pipeline.cli` on small real inputs: the demo (ingest of the bundled chrX slice + scan with
# JASPAR 2024 CORE vertebrates), `export` bed/fimo/gff3 of its hits, `thresholds` (exact and bucket), `compare`
# (within a 12-motif JASPAR subset with --cluster, and the ARNT MEME file against it), `discover` (crp0, fixed
# --seed, --compare-to; and a planted (11, 2) instance with --mutations) and `composition` (hits against the demo
# store; counts only against the FASTA, which is ingested into OUT/_reference.zarr).  Everything on CPU workers
# with the threshold cache off, so every number is computed by the code under test.
#
# Normalised (not compared byte for byte): JSON files lose their timing keys (every key holding `seconds`, and
# discover's per-phase `task_phases`) and the scan's random `scan_id`; everything else (Parquet parts with their key-value metadata, manifests, TSV/BED/
# GFF3, MEME/JASPAR, the Zarr store's files) is hashed as written.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/motifgrid-refactor-check}
export PYTHONPATH=$PWD MOTIFGRID_NO_CACHE=1 MOTIFGRID_NO_GPU=1
rm -rf "$OUT"
mkdir -p "$OUT"
SH=/work/shared/data
CLI=(python -m pipeline.cli)
CL=(--workers 2 --device cpu)
DB=tests/data/jaspar2024_subset.jaspar
log() { echo "== $*" >&2; }

log demo
"${CLI[@]}" demo --dir "$OUT/demo" "${CL[@]}" >/dev/null
for f in bed fimo gff3; do
  log "export $f"
  "${CLI[@]}" export "$OUT/demo/hits" --format $f -o "$OUT/export.$f" >&2
done
log thresholds
"${CLI[@]}" thresholds "$DB" --pvalue 1e-3 1e-4 1e-5 --method exact -o "$OUT/thresholds.exact.tsv" "${CL[@]}"
"${CLI[@]}" thresholds "$DB" --pvalue 1e-4 1e-6 --method bucket -o "$OUT/thresholds.bucket.tsv" "${CL[@]}"
log compare
"${CLI[@]}" compare "$DB" --out "$OUT/compare_aa" --method occurrence --cluster 0.5 "${CL[@]}" >/dev/null
"${CLI[@]}" compare tests/data/motifs/formats/arnt.meme "$DB" --out "$OUT/compare_ab" --method occurrence --pairs-per-task 5 "${CL[@]}" >/dev/null
log discover
"${CLI[@]}" discover "$SH/benchmarks/classic_sets/crp0.fa" --width 16 --both-strands --seed 0 --chains 1024 \
  --compare-to "$DB" --out "$OUT/discover_crp0" "${CL[@]}" >/dev/null
python -c "
from tests.planted import planted_instance
planted_instance(11, 2, t=20, n=400, seed=3).write('$OUT/planted.fa')"
"${CLI[@]}" discover "$OUT/planted.fa" --width 11 --mutations 2 --model oops --seed 5 --chains 512 \
  --out "$OUT/discover_planted" "${CL[@]}" >/dev/null
log composition
python - "$OUT" <<'EOF'
import gzip, sys
import numpy as np
seq = "".join(l.strip() for l in gzip.open("pipeline/data/hs37_chrX_20-22Mb.fa.gz", "rt") if not l.startswith(">"))
rng = np.random.default_rng(7)
with open(f"{sys.argv[1]}/tests.fa", "w") as f:
    k = 0
    while k < 40:
        n = int(rng.integers(20, 61))
        s = int(rng.integers(0, len(seq) - n))
        w = seq[s:s + n].upper()
        if set(w) <= set("ACGT"):
            f.write(f">t{k}_{s}\n{w}\n")
            k += 1
EOF
"${CLI[@]}" composition "$OUT/tests.fa" "$OUT/demo/genome.zarr" --min-similarity 0.95 --both-strands \
  --out "$OUT/composition_hits" --no-progress "${CL[@]}" 2>/dev/null
"${CLI[@]}" composition "$OUT/tests.fa" pipeline/data/hs37_chrX_20-22Mb.fa.gz --min-similarity 0.9 --counts-only \
  --block-size 262144 --out "$OUT/composition_counts" --no-progress "${CL[@]}" 2>/dev/null

log md5
python - "$OUT" <<'EOF'
import hashlib, json, os, sys
root = sys.argv[1]

def drop_timings(x):
    if isinstance(x, dict):
        return {k: drop_timings(v) for k, v in x.items()
                if not ("seconds" in k or k in ("scan_id", "task_phases"))}
    if isinstance(x, list):
        return [drop_timings(v) for v in x]
    return x

for d, _, files in sorted(os.walk(root)):
    for name in sorted(files):
        p = os.path.join(d, name)
        data = open(p, "rb").read()
        if name.endswith(".json") and not name == "zarr.json":
            data = json.dumps(drop_timings(json.loads(data)), sort_keys=True).encode()
        print(hashlib.md5(data).hexdigest(), os.path.relpath(p, root))
EOF
