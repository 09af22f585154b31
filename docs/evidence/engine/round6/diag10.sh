#!/usr/bin/env bash
# Round 6, call 2: MMQ on k-major activations (new) vs the previous revision (base), same call.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/d10; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine; B=.device/gapscope-engine-base
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
if [ "${STAGE:-a}" = a ]; then
  for round in 1 2; do for v in base new; do
    bin=$E; [ $v = base ] && bin=$B
    say "== kbench $v (round $round)"
    $bin kbench --reps 30 --json $R/kbench-$v-$round.json 2>&1 | grep -E "mmvq|MMQ" | tee -a $log
  done; done
  timeout 120 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section ComputeWorkloadAnalysis \
    -k regex:mmq_q8_0 --launch-skip 310 --launch-count 1 $E kbench --reps 30 > $R/ncu-mmq128-new.txt 2>&1
  say "ncu rc=$?"; grep -E "Duration|L1/TEX Cache|L2 Cache Throughput|Compute \(SM\)|Issue Slots" $R/ncu-mmq128-new.txt | tee -a $log
  $E selftest --seed "$(date +%s%N)" --json $R/selftest.json > "$R/selftest.txt" 2>&1
  say "selftest rc=$?: $(tail -n 1 "$R/selftest.txt")"
  grep -iE "fail|kmajor|mmq vs" "$R/selftest.txt" | grep -iE "fail|kmajor|mmq vs mmvq_q8_0 512" | head -n 12 | tee -a "$log"
  .device/engine-gpu-tests --ignored --test-threads 1 > "$R/gputests.txt" 2>&1
  say "gpu tests rc=$?: $(grep 'test result' "$R/gputests.txt")"
  for spec in "llama-3.2-1b.json q8_0" "qwen3-0.6b.json q4_0" "llama-3.2-1b.json bf16"; do
    set -- $spec
    say "== levers $1 $2"
    $E levers --config "models/$1" --random-weights --weights "$2" --npl 1,8,16 --json "$R/levers-${1%.json}-$2.json" 2>&1 | grep -E "distinct|error" | tee -a "$log"
  done
fi
if [ "${STAGE:-a}" = b ]; then
  say "== sweep 8B q8_0 new"
  $E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1,8,16,32,64,128 --npp 128 --ntg 128 \
    --reps 3 --warmup 1 --timing off,launch --json "$R/sweep-q8_0.json" 2>&1 | tee "$R/sweep-q8_0.txt" | grep -vE "^step|^\s*$|rep [0-9]" | tail -n 20 | tee -a "$log"
  say "== sweep 8B q8_0 base, npl 16,128 (A/B)"
  $B bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 16,128 --npp 128 --ntg 128 \
    --reps 3 --warmup 1 --timing off --json "$R/sweep-q8_0-base.json" 2>&1 | grep -E "^ +(16|128) " | tee -a "$log"
  say "== HF transformers eager"
  python3 scripts/engine/hf_bench.py --config models/llama-3-8b.json --npl 1,8,16,32,64,128 --npp 128 --ntg 128 --reps 3 --warmup 1 \
    --json "$R/hf_bench.json" 2>&1 | tail -n 12 | tee -a "$log"
fi
tar czf $OUT/d10${STAGE:-a}.tgz -C $OUT d10 && rm -rf $R
