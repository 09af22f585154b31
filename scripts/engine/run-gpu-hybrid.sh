#!/usr/bin/env bash
# One device call for the hybrid (gated DeltaNet) engine work of issue 22.
#
# Binaries in .device/ (stripped; see scripts/engine/README.md): gapscope-engine, engine-gpu-tests.
# STEPS picks what runs (default: all, in this order):
#   selftest  every kernel (the gated_delta family included) and whole-model logits (the hybrid
#             family under its lever settings) vs the CPU reference, fresh seed
#             (SELFTEST_ONLY=gated_delta,hybrid runs those families)
#   gputests  the ignored GPU tests (the hybrid levers' greedy md5 included; GPU_TESTS=hybrid
#             filters by name)
#   hflogits  tiny-qwen35 (Qwen3_5ForCausalLM, built by HF transformers in bf16) against the
#             engine's teacher-forced logits, CUDA and CPU backends
#   sweep     Qwen3.5-9B shapes (random weights): bench --hybrid-sweep, one trace per setting
#             (slow, each lever alone, all) and npl (SWEEP_FORMATS, SWEEP_NPL, SWEEP_NTG,
#             SWEEP_REPS), for the what-if predictions
# Results go to $OUT (at most 8 files come back: the log, and one archive of the rest).
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
D=.device
E=$D/gapscope-engine
STEPS=${STEPS:-selftest,gputests,hflogits,sweep}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
log="$OUT/hybrid.log"
say() { echo "$@" | tee -a "$log"; }
verdict=()
record() { verdict+=("$(printf '%-44s %-5s %s' "$1" "$([ "$2" = 0 ] && echo ok || echo FAIL)" "$3")"); }
W=$OUT/work
mkdir -p "$W"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee -a "$log"

if has selftest; then
  seed=$(date +%s%N)
  # SELFTEST_ONLY: a comma list of families (default: every check).
  rc=0
  for fam in $(echo "${SELFTEST_ONLY:-all}" | tr , ' '); do
    only=$([ "$fam" = all ] || echo "--only $fam")
    $E selftest --seed "$seed" $only --json "$W/selftest-$fam.json" >> "$W/selftest.txt" 2>&1 || rc=1
  done
  grep -E "FAIL|hybrid|gated|delta|conv|partial|sigmoid" "$W/selftest.txt" | head -n 80 >> "$log"
  say "selftest rc=$rc: $(tail -n 1 "$W/selftest.txt")"
  record "selftest (seed $seed)" $rc "$(tail -n 1 "$W/selftest.txt")"
fi
if has gputests; then
  # GPU_TESTS: a test-name filter (default: every ignored GPU test).
  $D/engine-gpu-tests --ignored --test-threads 1 ${GPU_TESTS:-} > "$W/gputests.txt" 2>&1
  rc=$?
  grep -E "^test |panicked|changed the greedy" "$W/gputests.txt" | head -n 40 >> "$log"
  say "gpu tests rc=$rc: $(grep 'test result' "$W/gputests.txt")"
  record "gpu tests" $rc "$(grep -o '[0-9]* passed; [0-9]* failed' "$W/gputests.txt")"
fi
if has hflogits; then
  H=$W/hf
  python3 scripts/engine/hf-tiny-models.py --out "$H" --seed 0 --only tiny-qwen35 --f32-reference > "$W/hf_tiny.log" 2>&1
  rc=$?
  tail -n 3 "$W/hf_tiny.log" | tee -a "$log"
  record "hf-tiny-models tiny-qwen35" $rc ""
  m=$H/tiny-qwen35
  if [ -d "$m" ]; then
    for be in cuda cpu; do
      $E logits --model "$m" --tokens "$m/tokens.json" --backend $be --out "$m/engine-$be.f32" 2>&1 | tail -n 1 | tee -a "$log"
      python3 scripts/engine/compare-logits.py "$m" --engine "$m/engine-$be.f32" --min-top1 0.95 --max-rel-err 0.05 --json "$W/cmp-$be.json" 2>&1 | tee -a "$log"
      rc=${PIPESTATUS[0]}
      python3 scripts/engine/compare-logits.py "$m" --engine "$m/engine-$be.f32" --engine-bf16 --json "$W/cmp-$be-bf16.json" 2>&1 | tee -a "$log"
      record "tiny-qwen35 logits $be vs HF bf16" $rc "$(python3 -c "import json;d=json.load(open('$W/cmp-$be.json'));print('top1',d.get('top1_agreement'),'max_rel',d.get('max_rel_err'))" 2>/dev/null)"
    done
    # The same rows against HF in float32: a reference without HF's bf16 activation roundings.
    f=$H/tiny-qwen35-f32
    mkdir -p "$f" && cp "$m/tokens.json" "$m/config.json" "$f/" && cp "$m/hf_logits_f32.f32" "$f/hf_logits.f32"
    for be in cuda cpu; do
      python3 scripts/engine/compare-logits.py "$f" --engine "$m/engine-$be.f32" --min-top1 0.95 --max-rel-err 0.05 --json "$W/cmp-f32-$be.json" 2>&1 | tee -a "$log"
      rc=${PIPESTATUS[0]}
      record "tiny-qwen35 logits $be vs HF float32" $rc "$(python3 -c "import json;d=json.load(open('$W/cmp-f32-$be.json'));print('top1',d.get('top1_agreement'),'max_rel',d.get('max_rel_err'))" 2>/dev/null)"
    done
    cp "$m/config.json" "$W/tiny-qwen35-config.json"
    cp "$m/hf_meta.json" "$W/tiny-qwen35-hf_meta.json"
  fi
fi
if has sweep; then
  # The hybrid levers one at a time from the all-slow setting (bench --hybrid-sweep), then the
  # what-if predictions from each slow trace against the measured ones (gapscope diff, run on
  # the host: the traces come back in the archive).
  for fmt in ${SWEEP_FORMATS:-q8_0 bf16}; do
    $E bench --config models/qwen3.5-9b.json --weights $fmt --npl ${SWEEP_NPL:-1,32,128} --npp 128 \
      --ntg ${SWEEP_NTG:-64} --reps ${SWEEP_REPS:-5} --hybrid-sweep -o "$W/sweep-$fmt" \
      --json "$W/sweep-$fmt.json" > "$W/sweep-$fmt.txt" 2>&1
    rc=$?
    grep -E "^timing=|^ +[0-9]+ " "$W/sweep-$fmt.txt" >> "$log"
    record "hybrid sweep qwen3.5-9b $fmt" $rc "$(grep -c '^timing=' "$W/sweep-$fmt.txt") runs"
  done
fi
say ""
say "== verdict ($(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1))"
for v in "${verdict[@]}"; do say "$v"; done
rm -rf "$W/hf"
# At most 8 files of 16 MiB come back: each sweep's traces in an archive of their own.
for d in "$W"/sweep-*/; do
  [ -d "$d" ] || continue
  n=$(basename "$d")
  tar cJf "$OUT/$n.tar.xz" -C "$W" "$n" && rm -rf "$d"
done
tar cJf "$OUT/hybrid.tar.xz" -C "$OUT" work && rm -rf "$W"
ls -la "$OUT"
