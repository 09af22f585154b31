#!/usr/bin/env bash
# Round 6, call 6: the landed MMQ layout policy; decode sweep Q8_0 vs HF eager in the same call.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/d15; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
if [ "${STAGE:-a}" = a ]; then
$E selftest --seed "$(date +%s%N)" --json $R/selftest.json > "$R/selftest.txt" 2>&1
say "selftest rc=$?: $(tail -n 1 "$R/selftest.txt")"
grep -iE "fail" "$R/selftest.txt" | head -n 12 | tee -a "$log"
say "== sweep 8B q8_0 (policy)"
$E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1,8,16,24,32,48,64,128 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off \
  --json $R/sweep-q8_0.json 2>&1 | tee $R/sweep-q8_0.txt | grep -E "^ +[0-9]+ |copy" | tee -a $log
say "== HF transformers eager"
python3 scripts/engine/hf_bench.py --config models/llama-3-8b.json --npl 1,8,16,24,32,48,64,128 --npp 128 --ntg 128 --reps 3 --warmup 1 \
  --json "$R/hf_bench.json" 2>&1 | tail -n 12 | tee -a "$log"
else
say "== sweep 8B q8_0 (policy with the 17:47 band), npl 16,24,32, timing off"
$E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 16,24,32 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off \
  --json $R/sweep-q8_0-band.json 2>&1 | grep -E "^ +[0-9]+ " | tee -a $log
say "== sweep 8B q8_0 (policy), per-launch timing"
$E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1,8,16,24,32,48,64,128 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing launch \
  --json $R/sweep-q8_0-launch.json 2>&1 | tee $R/sweep-q8_0-launch.txt | grep -E "^ +[0-9]+ |ms/step" | tee -a $log
for spec in "llama-3.2-1b.json q8_0" "qwen3-0.6b.json q4_0"; do
  set -- $spec
  say "== levers $1 $2"
  $E levers --config "models/$1" --random-weights --weights "$2" --npl 1,8,16,32 --json "$R/levers-${1%.json}-$2.json" 2>&1 | grep -E "distinct|error" | tee -a "$log"
done
.device/engine-gpu-tests --ignored --test-threads 1 > "$R/gputests.txt" 2>&1
say "gpu tests rc=$?: $(grep 'test result' "$R/gputests.txt")"
fi
tar czf $OUT/d15${STAGE:-a}.tgz -C $OUT d15 && rm -rf $R
