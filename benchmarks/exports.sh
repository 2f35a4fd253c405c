#!/usr/bin/env bash
# Exports beside the scan they export (issue 46): human chrX 1-70 Mb x 879 JASPAR 2024 vertebrates at p = 1e-4
# (14.8 M hits), the whole `motifgrid scan` command, then each export, timed from outside in one run.
#   bash benchmarks/exports.sh [GENOMES_DIR (../shared/data/get-genomes.sh output; default /work/genomes)] [WORK_DIR]
set -euo pipefail
genomes=${1:-/work/genomes}
work=${2:-$(mktemp -d)}
motifs=${MOTIFS:-$(cd "$(dirname "$0")/.." && pwd)/../shared/data/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar}
cd "$work"
[ -d x.zarr ] || motifgrid ingest "$genomes/hs37_chrX_1-70Mb.fa.gz" x.zarr > /dev/null
rm -rf h h.bed h.gff3 h.fimo h.fimo.txt
t() { local name=$1; shift; /usr/bin/time -f "$name %e s %M KB" "$@" > /dev/null 2> "$name.err" || { cat "$name.err"; exit 1; }
      tail -1 "$name.err"; }
t scan motifgrid scan x.zarr "$motifs" --pvalue 1e-4 --out h --no-progress
t bed motifgrid export h --format bed -o h.bed
t gff3 motifgrid export h --format gff3 -o h.gff3
t fimo motifgrid export h --format fimo -o h.fimo
t fimo-unsorted motifgrid export h --format fimo --sort none -o h.fimo.txt
/usr/bin/time -f "fimo-unsorted-first-lines %e s" bash -c "motifgrid export h --format fimo --sort none -o - 2>/dev/null | head -2 > /dev/null"
wc -l h.bed | cut -d' ' -f1 | sed 's/^/hits+0 /'
