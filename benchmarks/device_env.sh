# Sourced by every benchmarks/device_*.sh on the lent GPU machine: the carried wheels (.whl, from
# ../shared/tools/device-wheels.sh) installed once into /tmp/site, the environment, and the card named in $OUT.
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WHEELS=$(ls .whl | md5sum | cut -c1-12)        # installed again when the carried wheels change
if [ "$(cat /tmp/site/.motifgrid-installed 2>/dev/null)" != "$WHEELS" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || exit 1
  # byte-compiled as a pip install would (--no-compile above; this machine sets PYTHONDONTWRITEBYTECODE=1, so until
  # 2026-11-27 every run compiled dask, distributed, zarr... anew: `import distributed` 1.2 s instead of 0.9)
  python3 -m compileall -q -j 0 /tmp/site > /dev/null 2>&1
  echo "$WHEELS" > /tmp/site/.motifgrid-installed
fi
# a user's Python writes the project's bytecode on its first run; this machine's environment would forbid it
unset PYTHONDONTWRITEBYTECODE
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH MOTIFGRID_SHARED_DATA=$PWD/.devdata/shared PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
