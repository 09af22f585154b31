#!/usr/bin/env bash
# Round 6, call 3: balanced grids for the grid-stride GEMV/MMVQ, MMQ layout table, vs base (3deb8b6).
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/d12; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine; B=.device/gapscope-engine-base
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
for round in 1 2; do for v in base new; do
  bin=$E; [ $v = base ] && bin=$B
  say "== kbench $v (round $round)"
  $bin kbench --reps 30 --json $R/kbench-$v-$round.json 2>&1 | grep -E "b1|MMQ|mmq_q8_0" | tee -a $log
done; done
common=(bench --config models/llama-3-8b.json --random-weights --weights bf16 --npl 1 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off)
for round in 1 2; do for v in new base; do
  bin=$E; [ $v = base ] && bin=$B
  say "== b1 bf16 $v r$round: $($bin "${common[@]}" --json $R/b1-$v-$round.json 2>&1 | grep -E "^ +1 ")"
done; done
for round in 1 2; do for v in new base; do
  bin=$E; [ $v = base ] && bin=$B
  say "== q8_0 npl 1,8 $v r$round:"; $bin bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1,8 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off --json $R/q8-$v-$round.json 2>&1 | grep -E "^ +(1|8) " | tee -a $log
done; done
$E selftest --seed "$(date +%s%N)" --json $R/selftest.json > "$R/selftest.txt" 2>&1
say "selftest rc=$?: $(tail -n 1 "$R/selftest.txt")"
grep -iE "fail" "$R/selftest.txt" | head -n 12 | tee -a "$log"
grep -c "bitwise" "$R/selftest.txt" | tee -a "$log"
.device/engine-gpu-tests --ignored --test-threads 1 > "$R/gputests.txt" 2>&1
say "gpu tests rc=$?: $(grep 'test result' "$R/gputests.txt")"
tar czf $OUT/d12.tgz -C $OUT d12 && rm -rf $R
