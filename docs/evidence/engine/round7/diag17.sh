#!/usr/bin/env bash
# Round 7, call 2 (issue 3): the K-split batch-1 Q8_0 MMVQ as its own entry, picked by shape.
# kbench times both b1 entries side by side (and a variant of the one-warp-per-row entry that
# issues a warp's next loads before the row's reduction, from .device/kvar/pf); decode npl 1
# with the split on (default), off, and the previous binary, alternating; levers md5.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/d17; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine; B=.device/gapscope-engine-base
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
$E selftest --seed "$(date +%s%N)" --json $R/selftest.json > "$R/selftest.txt" 2>&1
say "selftest rc=$?: $(tail -n 1 "$R/selftest.txt")"
grep -iE "fail|bitwise" "$R/selftest.txt" | grep -iE "fail|b1" | head -n 20 | tee -a "$log"
for round in 1 2; do
  say "== kbench round $round"
  $E kbench --reps 30 --json $R/kbench-$round.json 2>&1 | grep -E "_b1|copy" | tee -a $log
  say "== kbench pf round $round"
  GAPSCOPE_KERNEL_DIR=.device/kvar/pf $E kbench --reps 30 --json $R/kbench-pf-$round.json 2>&1 | grep -E "_b1|copy" | tee -a $log
done
for round in 1 2; do
  for v in base split nosplit pf; do
    extra=(); kdir=
    case $v in
      base) bin=$B ;;
      split) bin=$E ;;
      nosplit) bin=$E; extra=(--mmvq-b1-k-split-min-k 18446744073709551615) ;;
      pf) bin=$E; kdir=.device/kvar/pf ;;
    esac
    say "== decode 8B q8_0 npl 1,8 $v round $round"
    env ${kdir:+GAPSCOPE_KERNEL_DIR=$kdir} $bin bench "${extra[@]}" --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1,8 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off \
      --json $R/b1-$v-$round.json 2>&1 | grep -E "^ +[0-9]+ |copy" | tee -a $log
  done
done
say "== per-launch timing, npl 1, split vs nosplit"
$E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing launch \
  --json $R/b1-split-launch.json > $R/b1-split-launch.txt 2>&1
$E bench --mmvq-b1-k-split-min-k 18446744073709551615 --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing launch \
  --json $R/b1-nosplit-launch.json > $R/b1-nosplit-launch.txt 2>&1
for spec in "llama-3.2-1b.json q8_0" "qwen3-0.6b.json q4_0"; do
  set -- $spec
  say "== levers $1 $2"
  $E levers --config "models/$1" --random-weights --weights "$2" --npl 1,8,16,32 --json "$R/levers-${1%.json}-$2.json" 2>&1 | grep -E "distinct|error" | tee -a "$log"
done
.device/engine-gpu-tests --ignored --test-threads 1 > "$R/gputests.txt" 2>&1
say "gpu tests rc=$?: $(grep 'test result' "$R/gputests.txt")"
tar czf $OUT/d17.tgz -C $OUT d17 && rm -rf $R
