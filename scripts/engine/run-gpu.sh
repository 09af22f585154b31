#!/usr/bin/env bash
# One device call for the engine (issue 3). Binaries come from .device/ (see scripts/engine/README.md):
#   gapscope-engine        the build under test
#   gapscope-engine-base   optional: the previous revision, for side-by-side A/B in the same call
#   engine-gpu-tests       the engine's tests/gpu.rs binary (ignored tests run here)
# STEPS picks what runs (default: all of them, in this order):
#   selftest  kernels and whole-model logits vs the CPU reference, fresh seed
#   gputests  the ignored GPU tests
#   kbench    single kernels (base and new when the base binary is there)
#   b1        Llama-3-8B bf16 batch 1, timing off: new, new --no-pdl, new --no-fusion, base, alternated
#   levers    greedy md5 over every lever setting (Llama-3.2-1B and Qwen3-0.6B bf16 at
#             thresholds 4/8/16, Llama-3.2-1B Q8_0 and Qwen3-0.6B Q4_0 at 0/4/8/16/256)
#   sweep     npl 1..128 for 8B bf16 and Q8_0 (and the base binary at BASE_NPL when set), then
#             HF transformers eager, same call
#   hflogits  tiny random Llama/Qwen3/Qwen2 built and run by HF transformers (bf16 eager), the
#             engine's teacher-forced logits compared (strict top-1, with exact HF ties counted,
#             and with the engine's logits rounded to bf16 like HF's); then the same logits with
#             --numerics hf-bf16 (HF's roundings) from the CUDA and the CPU backend, strict top-1
# Results go to $OUT (or ./gpu-out); the console summary is the last thing printed.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
E=.device/gapscope-engine
B=.device/gapscope-engine-base
STEPS=${STEPS:-selftest,gputests,kbench,b1,levers,sweep,hflogits}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
log="$OUT/run.log"
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a "$log"

if has selftest; then
  $E selftest --seed "$(date +%s%N)" --json "$OUT/selftest.json" > "$OUT/selftest.txt" 2>&1
  say "selftest rc=$?: $(tail -n 1 "$OUT/selftest.txt")"
  grep -i "fail" "$OUT/selftest.txt" | head -n 20 | tee -a "$log"
fi
if has gputests; then
  .device/engine-gpu-tests --ignored --test-threads 1 > "$OUT/gputests.txt" 2>&1
  say "gpu tests rc=$?: $(grep 'test result' "$OUT/gputests.txt")"
fi
if has kbench; then
  for bin in "$B" "$E"; do
    [ -x "$bin" ] || continue
    say "== kbench $(basename "$bin")"
    $bin kbench --reps 30 --json "$OUT/kbench-$(basename "$bin").json" 2>&1 | tee -a "$log"
  done
fi
if has b1; then
  common=(bench --config models/llama-3-8b.json --random-weights --weights bf16 --npl 1 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off)
  for round in ${B1_ROUNDS:-1}; do
    say "== b1 round $round: new (PDL)"
    $E "${common[@]}" --json "$OUT/b1-new-$round.json" 2>&1 | grep -E "^ +1 |copy|TPOT" | tee -a "$log"
    say "== b1 round $round: new --no-pdl"
    $E "${common[@]}" --no-pdl --json "$OUT/b1-nopdl-$round.json" 2>&1 | grep -E "^ +1 |copy|TPOT" | tee -a "$log"
    say "== b1 round $round: new --no-fusion"
    $E "${common[@]}" --no-fusion --json "$OUT/b1-nofusion-$round.json" 2>&1 | grep -E "^ +1 |copy|TPOT" | tee -a "$log"
    if [ -x "$B" ]; then
      say "== b1 round $round: base"
      $B "${common[@]}" --json "$OUT/b1-base-$round.json" 2>&1 | grep -E "^ +1 |copy|TPOT" | tee -a "$log"
    fi
  done
fi
if has levers; then
  # bf16 at the thresholds of the determinism goal (0 and 256 move batch 1 and the prefill
  # to other kernels); the quantized formats at every threshold the command knows.
  for spec in "llama-3.2-1b.json bf16 4,8,16" "qwen3-0.6b.json bf16 4,8,16" \
              "llama-3.2-1b.json q8_0 0,4,8,16,256" "qwen3-0.6b.json q4_0 0,4,8,16,256"; do
    set -- $spec
    say "== levers $1 $2 thresholds $3"
    $E levers --config "models/$1" --random-weights --weights "$2" --npl ${LEVER_NPL:-1,8,16} --thresholds "$3" \
      --json "$OUT/levers-${1%.json}-$2.json" > "$OUT/levers-${1%.json}-$2.txt" 2>&1
    say "rc=$?"; grep -E "distinct|error" "$OUT/levers-${1%.json}-$2.txt" | tee -a "$log"
  done
fi
if has sweep; then
  for fmt in ${FMTS:-bf16 q8_0}; do
    say "== sweep 8B $fmt"
    $E bench --config models/llama-3-8b.json --random-weights --weights $fmt --npl ${NPL:-1,8,16,32,64,128} --npp 128 --ntg 128 \
      --reps ${REPS:-3} --warmup 1 --timing ${TIMING:-off,launch} --json "$OUT/sweep-$fmt.json" 2>&1 | tee "$OUT/sweep-$fmt.txt" | grep -vE "^step|^\s*$" | tail -n 40 | tee -a "$log"
  done
  if [ -x "$B" ] && [ -n "${BASE_NPL:-}" ]; then
    # The previous revision at the batches a kernel change touched, same call, for an A/B.
    for fmt in ${FMTS:-bf16 q8_0}; do
      say "== sweep 8B $fmt, base binary"
      $B bench --config models/llama-3-8b.json --random-weights --weights $fmt --npl "$BASE_NPL" --npp 128 --ntg 128 \
        --reps ${REPS:-3} --warmup 1 --timing off --json "$OUT/sweep-base-$fmt.json" 2>&1 | tee "$OUT/sweep-base-$fmt.txt" | grep -vE "^step|^\s*$" | tail -n 12 | tee -a "$log"
    done
  fi
  if [ -z "${NO_HF:-}" ]; then
    say "== HF transformers eager"
    python3 scripts/engine/hf-bench.py --config models/llama-3-8b.json --npl ${NPL:-1,8,16,32,64,128} --npp 128 --ntg 128 --reps 3 --warmup 1 \
      --json "$OUT/hf_bench.json" 2>&1 | tail -n 12 | tee -a "$log"
  fi
fi
if has hflogits; then
  # HF_SEEDS="0 1 2" builds the tiny models from several seeds (the first one keeps the
  # unsuffixed file names).
  for seed in ${HF_SEEDS:-0}; do
    D=$(mktemp -d)
    sfx=$([ "$seed" = 0 ] && echo "" || echo "-s$seed")
    say "== HF tiny models (seed $seed) vs the engine"
    python3 scripts/engine/hf-tiny-models.py --out "$D" --seed "$seed" > "$OUT/hf_tiny$sfx.log" 2>&1
    say "hf-tiny-models.py rc=$?"
    for m in tiny-llama tiny-qwen3 tiny-qwen2; do
      [ -d "$D/$m" ] || continue
      $E logits --model "$D/$m" --tokens "$D/$m/tokens.json" --out "$D/$m/engine.f32" 2>&1 | tail -n 1 | tee -a "$log"
      cp "$D/$m/hf_meta.json" "$OUT/$m$sfx-hf_meta.json"
      python3 scripts/engine/compare-logits.py "$D/$m" --engine "$D/$m/engine.f32" --json "$OUT/$m$sfx-cmp.json" 2>&1 | tee -a "$log"
      python3 scripts/engine/compare-logits.py "$D/$m" --engine "$D/$m/engine.f32" --tie-tol 0 --json "$OUT/$m$sfx-cmp-tie.json" 2>&1 | tee -a "$log"
      python3 scripts/engine/compare-logits.py "$D/$m" --engine "$D/$m/engine.f32" --engine-bf16 --json "$OUT/$m$sfx-cmp-bf16.json" 2>&1 | tee -a "$log"
      python3 scripts/engine/hf-op-fidelity.py "$D/$m" --json "$OUT/$m$sfx-fidelity.json" 2>&1 | tee -a "$log"
      for be in cuda cpu; do
        say "-- $m --numerics hf-bf16 --backend $be"
        $E logits --model "$D/$m" --tokens "$D/$m/tokens.json" --backend $be --numerics hf-bf16 --out "$D/$m/engine-hf-$be.f32" 2>&1 | tail -n 1 | tee -a "$log"
        python3 scripts/engine/compare-logits.py "$D/$m" --engine "$D/$m/engine-hf-$be.f32" --json "$OUT/$m$sfx-cmp-hf-$be.json" 2>&1 | tee -a "$log"
      done
    done
    rm -rf "$D"
  done
fi
# The device tool brings back at most 8 files: pack everything into one archive.
if [ -n "${PACK:-}" ]; then
  tmp=$(mktemp -d) && tar czf "$tmp/engine-gpu-$PACK.tgz" -C "$OUT" . && rm -rf "${OUT:?}"/* && mv "$tmp/engine-gpu-$PACK.tgz" "$OUT/"
fi
