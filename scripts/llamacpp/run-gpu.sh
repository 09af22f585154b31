#!/usr/bin/env bash
# One GPU-machine call for the llama.cpp recordings: builds llama-batched-bench unless an
# earlier call on the same (warm) machine did, writes the models unless they exist, then
# records PHASE. Run from the repository root with .device carried (fetch.sh's tarball
# .device/llamacpp-src.tar.xz, gapscope-record and libgapscope_profiler.so in .device/).
#
#   smoke: Llama-3-8B shapes Q8_0, npl 1, 32 decode steps, graphs and FA on/off, once each
#   dense: Llama-3-8B shapes Q8_0, npl 1 and 32, 64 decode steps, graphs and FA on/off, 3x
#   reference: npl 1 and 32, 8 decode steps, graphs and FA on (the small traces in
#              traces/reference/)
#
# Results under $OUT: run.log and recordings-nplN.tar.gz (the .gst recordings, the jsonl of
# each plain and recorded run, their logs).
set -euo pipefail
phase=${1:-smoke}
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp/gapscope-out}
work=/tmp/gapscope-llamacpp
mkdir -p "$work" "$out"
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
run() {
  stamp "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  if [ ! -d "$work/src" ]; then
    tar xJf .device/llamacpp-src.tar.xz -C "$work" && mv "$work/llamacpp-src" "$work/src"
  fi
  stamp "llama.cpp $(head -1 "$work/src/COMMIT"); cmake $(cmake --version 2>/dev/null | head -1 || echo missing); $(nvcc --version 2>/dev/null | tail -1)"
  if [ ! -x "$work/build/bin/llama-batched-bench" ]; then
    stamp "build"
    bash scripts/llamacpp/build.sh "$work/src" "$work/build"
  fi
  stamp "models"
  [ -f "$work/models/llama3-8b-q8_0.gguf" ] || python3 scripts/llamacpp/make_models.py \
      --gguf-py "$work/src/gguf-py" --out "$work/models" --types q8_0
  rm -rf "$work/rec"
  local bench="$work/build/bin/llama-batched-bench" model="$work/models/llama3-8b-q8_0.gguf"
  case $phase in
    smoke) stamp "record smoke"; bash scripts/llamacpp/record.sh "$bench" "$model" "$work/rec" .device/gapscope-record "1" 32 1 ;;
    dense) stamp "record dense"; bash scripts/llamacpp/record.sh "$bench" "$model" "$work/rec" .device/gapscope-record "1 32" 64 3 ;;
    reference) stamp "record reference"; GRAPHS=on FA=on bash scripts/llamacpp/record.sh "$bench" "$model" "$work/rec" .device/gapscope-record "1 32" 8 1 ;;
    *) echo "unknown phase $phase" >&2; exit 2 ;;
  esac
  stamp "pack"
  # One tarball per npl (each returned file is at most 16 MiB).
  for npl in $(ls "$work/rec" | grep -o 'npl[0-9]*' | sort -u); do
    (cd "$work" && tar czf "$out/recordings-$npl.tar.gz" rec/*-"$npl"-*)
  done
  ls -la "$out"
  stamp "done"
}
run 2>&1 | tee "$out/run.log"
