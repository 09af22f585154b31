#!/usr/bin/env bash
# One device call for gapscope-engine's speculative mode. Builds nothing: expects the release
# binary at .device/gapscope-engine (cargo build --release --locked -p gapscope-engine --bins,
# then copy it there). Arguments are `spec` settings, passed through, e.g.
#   scripts/engine/spec-gpu.sh --setting k=4,accept=argmax \
#       --setting k=4,accept=0.8,0.6,0.4,0.2 --setting k=2,accept=0.9,0.7,draft_layers=4
# (no arguments: --k 4 --accept argmax). Environment: CONFIG (models/llama-3-8b.json: memory
# bound at batch 1 on an H200, seeded random bf16 weights, no download), WEIGHTS (bf16), NPP (64),
# NTG (128), REPS (5), WARMUP (1), DRAFT_LAYERS (8), EXTRA (more flags, e.g. --no-graphs).
# Writes under $OUT (or ./gpu-out): spec.json (the report), spec.txt (the run's output),
# traces.tar.xz (plain.gst and one spec-*.gst per setting; split into traces.tar.xz.part-*
# when over 15 MiB). The table is printed last.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
E=.device/gapscope-engine
[ -x "$E" ] || { echo "spec-gpu.sh: no executable $E (build it here, copy it there)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader \
  | tee "$OUT/spec.txt"
# shellcheck disable=SC2086 # EXTRA is a list of flags
"$E" spec --config "${CONFIG:-models/llama-3-8b.json}" --random-weights \
  --weights "${WEIGHTS:-bf16}" --npp "${NPP:-64}" --ntg "${NTG:-128}" --reps "${REPS:-5}" \
  --warmup "${WARMUP:-1}" --draft-layers "${DRAFT_LAYERS:-8}" ${EXTRA:-} \
  --trace-dir "$work/traces" --json "$OUT/spec.json" "$@" >"$work/table.txt" 2>>"$OUT/spec.txt"
rc=$?
cat "$work/table.txt" >>"$OUT/spec.txt"
if [ -d "$work/traces" ]; then
  tar -C "$work" -cJf "$OUT/traces.tar.xz" traces
  if [ "$(stat -c %s "$OUT/traces.tar.xz")" -gt $((15 << 20)) ]; then
    split -b 15M -d "$OUT/traces.tar.xz" "$OUT/traces.tar.xz.part-"
    rm "$OUT/traces.tar.xz"
  fi
fi
ls -l "$OUT"
tail -n 3 "$OUT/spec.txt" | grep -i error
echo "spec rc=$rc"
cat "$work/table.txt"
exit "$rc"
