#!/usr/bin/env bash
# One GPU-machine call for the llama.cpp recordings: builds llama-batched-bench unless an
# earlier call on the same (warm) machine did, writes the models unless they exist, then
# records PHASE. Run from the repository root with .device carried (fetch.sh's tarball
# .device/llamacpp-src.tar.xz, gapscope-record and libgapscope_profiler.so in .device/, and
# for `dense` gapscope-engine).
#
#   hybrid: Qwen3.5-9B shapes (models/qwen3.5-9b.json) Q4_0: the reference traces (npl 1 and
#           128, 8 decode steps, graphs and FA on), then npl 1, 32 and 128, 64 decode steps,
#           graphs on/off with FA on, and graphs off with FA off, 3x
#   dense:  Llama-3-8B shapes (models/llama-3-8b.json) Q8_0: npl 1 and 32 with graphs and FA
#           on/off, npl 128 with graphs on/off and FA on, 64 decode steps, 3x; the reference
#           traces (npl 1 and 32, 8 decode steps); gapscope-engine on the same shapes, Q8_0,
#           npl 1 and 32, recorded the same way (the cross-engine diff)
#   engine: only the gapscope-engine recordings of `dense`
#   smoke:  Llama-3-8B shapes in Q8_0, Q4_0 and bf16 load and generate (plain batched-bench,
#           npl 1, 16 decode steps; nothing recorded)
#   hybrid-fa-off: only the flash-attention-off recordings of `hybrid`
#   spec:   llama-speculative-simple (built on its own) on Llama-3.2-1B shapes Q8_0 with a draft
#           of its first 4 layers, k=4, greedy, 128 tokens, for each DEEP_SCALES (0.1 0.3):
#           graphs on; for the first scale also graphs off and the draft sampling on the host
#           (record-spec.sh); -> $OUT/recordings-spec.tar.xz
#
# The two phases reproduce every recording of the case study in two calls. No recording
# starts after 560 s (DEADLINE in record.sh): a call has 600 s, and what was recorded must
# come back. Results under $OUT: run-PHASE.log and recordings-*.tar.gz (the .gst recordings, the
# jsonl of each plain and recorded run, their logs; one tarball per npl, each under 16 MiB).
set -euo pipefail
phase=${1:-smoke}
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
out=${OUT:-/tmp/gapscope-out}
work=/tmp/gapscope-llamacpp
mkdir -p "$work" "$out"
t0=$(date +%s)
export DEADLINE=$(( t0 + ${BUDGET_S:-560} ))
stamp() { echo "[$(( $(date +%s) - t0 )) s] $*"; }
model() {  # model CONFIG TYPE: writes it unless it exists, prints its path
  local name path
  name=$(basename "$1" .json)
  path="$work/models/$name-$2.gguf"
  [ -f "$path" ] || python3 scripts/llamacpp/make-models.py --gguf-py "$work/src/gguf-py" \
      --out "$work/models" --config "$1" --types "$2" >&2
  echo "$path"
}
engine_runs() {  # gapscope-engine on the dense shapes, Q8_0, recorded by gapscope-record
  # like llama.cpp (CUDA graphs, no per-launch events: --timing off), for the cross-engine diff
  stamp "gapscope-engine"
  mkdir -p "$work/rec"
  for npl in 1 32; do
    if [ "$(date +%s)" -ge "$DEADLINE" ]; then echo "engine npl$npl: skipped (past the deadline)"; continue; fi
    local tag="$work/rec/engine-llama-3-8b-q8_0-npl$npl"
    .device/gapscope-record -o "$tag.gst" -- .device/gapscope-engine bench \
        --config models/llama-3-8b.json --weights q8_0 --npl "$npl" --npp 128 --ntg 64 \
        --reps 1 --warmup 0 --timing off --no-copy-bw > "$tag.txt" 2>&1 \
      || { echo "engine npl$npl failed"; tail -5 "$tag.txt"; }
    grep -E "^ +$npl " "$tag.txt" | head -1
  done
}
run() {
  stamp "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
  if [ ! -d "$work/src" ]; then
    tar xJf .device/llamacpp-src.tar.xz -C "$work" && mv "$work/llamacpp-src" "$work/src"
  fi
  stamp "llama.cpp $(head -1 "$work/src/COMMIT"); cmake $(cmake --version 2>/dev/null | head -1 || echo missing); $(nvcc --version 2>/dev/null | tail -1)"
  if [ "$phase" = spec ]; then
    if [ ! -x "$work/build/bin/llama-speculative-simple" ]; then
      stamp "build llama-speculative-simple"
      bash scripts/llamacpp/build.sh "$work/src" "$work/build" llama-speculative-simple
    fi
  elif [ "$phase" != engine ] && [ ! -x "$work/build/bin/llama-batched-bench" ]; then
    stamp "build"
    bash scripts/llamacpp/build.sh "$work/src" "$work/build"
  fi
  rm -rf "$work/rec" && mkdir -p "$work/rec"
  local bench="$work/build/bin/llama-batched-bench" rec=.device/gapscope-record m
  case $phase in
    smoke)
      # Each weight format of the dense shapes loads and generates (plain runs, no recording).
      for t in q8_0 q4_0 bf16; do
        m=$(model models/llama-3-8b.json $t)
        stamp "smoke $t: $("$bench" -m "$m" -c 512 -b 512 -ub 512 -npp 128 -ntg 16 -npl 1 -ngl 99 \
            --output-format jsonl 2>"$work/smoke-$t.log" | grep -o '"t_tg": [0-9.]*, "speed_tg": [0-9.]*' \
            || { echo "FAILED"; tail -3 "$work/smoke-$t.log"; })"
        rm -f "$m"
      done ;;
    hybrid)
      m=$(model models/qwen3.5-9b.json q4_0)
      stamp "record hybrid reference"
      GRAPHS=on FA=on bash scripts/llamacpp/record.sh "$bench" "$m" "$work/rec/ref" $rec "1 128" 8 1 || stamp "record failed"
      stamp "record hybrid"
      FA=on bash scripts/llamacpp/record.sh "$bench" "$m" "$work/rec" $rec "1 32 128" 64 3 || stamp "record failed"
      stamp "record hybrid, flash attention off"
      GRAPHS=off FA=off bash scripts/llamacpp/record.sh "$bench" "$m" "$work/rec" $rec "1 32 128" 64 3 || stamp "record failed" ;;
    hybrid-fa-off)
      m=$(model models/qwen3.5-9b.json q4_0)
      stamp "record hybrid, flash attention off"
      GRAPHS=off FA=off bash scripts/llamacpp/record.sh "$bench" "$m" "$work/rec" $rec "1 32 128" 64 3 || stamp "record failed" ;;
    dense)
      m=$(model models/llama-3-8b.json q8_0)
      stamp "record dense"
      bash scripts/llamacpp/record.sh "$bench" "$m" "$work/rec" $rec "1 32" 64 3 || stamp "record failed"
      FA=on bash scripts/llamacpp/record.sh "$bench" "$m" "$work/rec" $rec "128" 64 3 || stamp "record failed"
      stamp "record dense reference"
      GRAPHS=on FA=on bash scripts/llamacpp/record.sh "$bench" "$m" "$work/rec/ref" $rec "1 32" 8 1 || stamp "record failed"
      engine_runs ;;
    engine) engine_runs ;;
    spec)
      # Llama-3.2-1B shapes, Q8_0, and a draft of its first 4 layers; the target's layers 4..15
      # write to the residual stream at DEEP_SCALE (the draft's greedy token is then often the
      # target's); K=4, 128 tokens.
      local spec_bin="$work/build/bin/llama-speculative-simple" t d s scales=${DEEP_SCALES:-0.1 0.3}
      for s in $scales; do
        stamp "models, deep scale $s"
        mkdir -p "$work/models/s$s"
        python3 scripts/llamacpp/make-models.py --gguf-py "$work/src/gguf-py" --out "$work/models/s$s" \
          --config models/llama-3.2-1b.json --types q8_0 --draft-layers 4 --deep-scale "$s" >&2
        t="$work/models/s$s/llama-3.2-1b-q8_0.gguf"
        d="$work/models/s$s/llama-3.2-1b-q8_0-draft4.gguf"
        bash scripts/llamacpp/record-spec.sh "$spec_bin" "$t" "$d" "$work/rec" $rec "spec-s$s-graphs-on" || stamp "record failed"
        if [ "$s" = "${scales%% *}" ]; then
          GRAPHS=off bash scripts/llamacpp/record-spec.sh "$spec_bin" "$t" "$d" "$work/rec" $rec "spec-s$s-graphs-off" || stamp "record failed"
          BACKEND_SAMPLING=off bash scripts/llamacpp/record-spec.sh "$spec_bin" "$t" "$d" "$work/rec" $rec "spec-s$s-hostsampling" || stamp "record failed"
        fi
        rm -rf "$work/models/s$s"
      done ;;
    *) echo "unknown phase $phase" >&2; exit 2 ;;
  esac
  stamp "pack"
  # One tarball per npl (each returned file is at most 16 MiB), the reference traces apart.
  (cd "$work" && for npl in $(ls rec | grep -o 'npl[0-9]*' | sort -u); do
     tar czf "$out/recordings-$npl.tar.gz" rec/*-"$npl".* rec/*-"$npl"-* 2>/dev/null || true
   done
   if [ -d rec/ref ]; then tar czf "$out/recordings-ref.tar.gz" rec/ref; fi
   if ls rec/spec-* >/dev/null 2>&1; then tar cJf "$out/recordings-spec.tar.xz" rec/spec-*; fi)
  ls -la "$out"
  stamp "done"
}
run 2>&1 | tee "$out/run-$phase.log"
