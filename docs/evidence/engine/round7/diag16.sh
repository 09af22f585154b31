#!/usr/bin/env bash
# Round 7, call 1. Issue 3: the batch-1 Q8_0 MMVQ tiled like gemv_bf16_b1 (8 warps split K, 4
# rows per tile, lane pairs per quant block), A/B against the previous binary and a variant
# at 3 blocks/SM (no spills), in one call. Issue 4: gapscope-record --collect range against
# late-attached torch.profiler, alternating, with one --collect init run for reference.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
R=$OUT/d16; mkdir -p $R/traces; log=$R/run.log
E=.device/gapscope-engine; B=.device/gapscope-engine-base; REC=.device/gapscope-record
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
run_v() { # variant, then engine arguments
  local v=$1; shift
  case $v in
    base) $B "$@" ;;
    new) $E "$@" ;;
    lb3) GAPSCOPE_KERNEL_DIR=.device/kvar/lb3 $E "$@" ;;
  esac
}
for v in new lb3; do
  run_v $v selftest --seed "$(date +%s%N)" --json $R/selftest-$v.json > "$R/selftest-$v.txt" 2>&1
  say "selftest $v rc=$?: $(tail -n 1 "$R/selftest-$v.txt")"
  grep -iE "fail|b1 vs" "$R/selftest-$v.txt" | head -n 16 | tee -a "$log"
done
for round in 1 2; do
  for v in base new lb3; do
    say "== kbench $v round $round"
    run_v $v kbench --reps 30 --json $R/kbench-$v-$round.json 2>&1 | grep -E "_b1 |copy" | tee -a $log
  done
done
for round in 1 2; do
  for v in base new lb3; do
    say "== decode 8B q8_0 npl 1 $v round $round"
    run_v $v bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off \
      --json $R/b1-$v-$round.json 2>&1 | grep -E "^ +[0-9]+ |copy" | tee -a $log
  done
done
say "== issue 4: HF eager decode, 16 steps: late torch.profiler vs gapscope-record --collect range"
for r in 1 2 3; do
  say "torchprof $r: $(python3 scripts/record/hf_decode.py --mode torchprof --steps 16 --trace $R/traces/hf-prof$r.json 2>&1 | tail -1)"
  say "rec-range $r: $($REC -q --capture-range cudaProfilerApi --collect range -o $R/traces/hf-range$r.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 16 2>&1 | tail -1)"
done
say "rec-init 1: $($REC -q --capture-range cudaProfilerApi -o $R/traces/hf-init1.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 16 2>&1 | tail -1)"
$REC --capture-range cudaProfilerApi --collect range -o $R/traces/hf-range-verbose.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 4 > $R/rec-range-verbose.txt 2>&1
say "rec-range verbose rc=$?: $(grep -E 'wrote|note' $R/rec-range-verbose.txt | head -5)"
.device/engine-gpu-tests --ignored --test-threads 1 > "$R/gputests.txt" 2>&1
say "gpu tests rc=$?: $(grep 'test result' "$R/gputests.txt")"
tar czf $OUT/d16.tgz -C $OUT d16 && rm -rf $R
