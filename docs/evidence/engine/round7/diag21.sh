#!/usr/bin/env bash
# Round 7, call 6 (issue 3): three batch-1 Q8_0 entries picked by shape (K-split for rows <= K
# with K >= 8192, contiguous lane-pair loads for rows >= 2K, one block per lane otherwise)
# against the call-4 binary (K-split by occupancy, one block per lane elsewhere): selftest,
# kbench twice, decode npl 1,8 alternating, per-launch timing at npl 1 for both, levers md5,
# GPU tests.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/d21; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine; P=.device/gapscope-engine-prev
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
$E selftest --seed "$(date +%s%N)" --json $R/selftest.json > "$R/selftest.txt" 2>&1
say "selftest rc=$?: $(tail -n 1 "$R/selftest.txt")"
grep -iE "fail" "$R/selftest.txt" | head -n 12 | tee -a "$log"
for round in 1 2; do
  say "== kbench round $round"
  $E kbench --reps 30 --json $R/kbench-$round.json 2>&1 | grep -vE "^kernels:|^$" | tee -a $log
done
for round in 1 2; do
  for v in prev new; do
    bin=$E; [ $v = prev ] && bin=$P
    say "== decode 8B q8_0 npl 1,8 $v round $round"
    $bin bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1,8 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off \
      --json $R/b1-$v-$round.json 2>&1 | grep -E "^ +[0-9]+ |copy" | tee -a $log
  done
done
for v in prev new; do
  bin=$E; [ $v = prev ] && bin=$P
  $bin bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing launch \
    --json $R/b1-$v-launch.json > $R/b1-$v-launch.txt 2>&1
  say "launch timing $v: $(grep -E 'ms/step' $R/b1-$v-launch.txt | head -2)"
done
for spec in "llama-3.2-1b.json q8_0" "qwen3-0.6b.json q4_0"; do
  set -- $spec
  say "== levers $1 $2"
  $E levers --config "models/$1" --random-weights --weights "$2" --npl 1,8,16,32 --json "$R/levers-${1%.json}-$2.json" 2>&1 | grep -E "distinct|error" | tee -a "$log"
done
.device/engine-gpu-tests --ignored --test-threads 1 > "$R/gputests.txt" 2>&1
say "gpu tests rc=$?: $(grep 'test result' "$R/gputests.txt")"
tar czf $OUT/d21.tgz -C $OUT d21 && rm -rf $R
