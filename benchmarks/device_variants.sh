#!/usr/bin/env bash
# Variant effects on the lent GPU: the variants GPU tests (CPU = GPU), then benchmarks/variants.py on the GPU:
# VARIANTS (default 200,000) SNVs and indels on GRCh37 chrX 1-70 Mb × 2,346 JASPAR 2024 CORE and × 879 vertebrates.
# Carry: .whl .devdata (.devdata/shared = ../shared/data; .devdata/genomes/hs37_chrX_1-70Mb.fa.gz from get-genomes.sh)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
timeout 300 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=short -m gpu tests/variants/ > "$OUT/variants-gpu-tests.txt" 2>&1; grep -E "^E |Error|passed|failed" "$OUT/variants-gpu-tests.txt" | head -30
G=.devdata/genomes/hs37_chrX_1-70Mb.fa.gz
for M in JASPAR2024_CORE_non-redundant.jaspar JASPAR2024_CORE_vertebrates_non-redundant.jaspar; do
  timeout 240 python3 benchmarks/variants.py --device gpu --genome $G --motifs .devdata/shared/motifs/$M \
    --variants "${VARIANTS:-200000}" --peers "" --out "/tmp/vb-$M" 2>&1 | tail -3 | tee -a "$OUT/variants-bench.txt"
done
