#!/usr/bin/env bash
# Variant effects on the lent GPU: the variants GPU tests (CPU = GPU kernels, runs and atSNP tails), then
# benchmarks/variants.py on the GPU: VARIANTS (default 1,000,000) SNVs and indels on GRCh37 chrX 1-70 Mb × 2,346
# JASPAR 2024 CORE (issue 48: <= 30 s), and ATSNP_VARIANTS (default 100,000) × 879 vertebrates with --atsnp.
# Carry: .whl .devdata (.devdata/shared = ../shared/data; .devdata/genomes/hs37_chrX_1-70Mb.fa.gz from get-genomes.sh)
set -uo pipefail
source "$(dirname "$0")/device_env.sh"
timeout 300 python3 -m pytest -q -p no:cacheprovider -p no:logging --tb=short -m gpu tests/variants/ > "$OUT/variants-gpu-tests.txt" 2>&1; grep -E "^E |Error|passed|failed" "$OUT/variants-gpu-tests.txt" | head -30
G=.devdata/genomes/hs37_chrX_1-70Mb.fa.gz
M=.devdata/shared/motifs
timeout 300 python3 benchmarks/variants.py --device gpu --genome $G --motifs $M/JASPAR2024_CORE_non-redundant.jaspar \
  --variants "${VARIANTS:-1000000}" --peers "" --out /tmp/vb-core 2>&1 | tail -3 | tee -a "$OUT/variants-bench.txt"
timeout 240 python3 benchmarks/variants.py --device gpu --genome $G --motifs $M/JASPAR2024_CORE_vertebrates_non-redundant.jaspar \
  --variants "${ATSNP_VARIANTS:-100000}" --peers "" --atsnp --out /tmp/vb-atsnp 2>&1 | tail -3 | tee -a "$OUT/variants-bench.txt"
