#!/usr/bin/env bash
# (Ran at commit f1bf064, whose in-step calibration and --no-in-step-calibration flag were then
# reverted: see engine-vs-cupti-run37.txt and docs/BENCHMARKS.md §9 "Run 37".)
# Issue 4, run 37: the in-step event-latency calibration (two 2 us timing probes end each
# launch-timed decode step; each repeat is corrected by their latency). Under the recorder:
# i1-i3 every launch of 32 decode steps timed (--timing-sample 1), j1-j3 the default 1-in-16
# sampling over 128 steps, n1 as i1 with --no-in-step-calibration (the start-up value only).
# Then the per-launch timing cost without the recorder (timing off vs launch, bf16 npl 1 and 8).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/run37; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a $log
for r in i1 j1 n1 i2 j2 i3 j3; do
  case $r in
    i*) args="--ntg 32 --timing-sample 1" ;;
    j*) args="--ntg 128 --timing-sample 16" ;;
    n*) args="--ntg 32 --timing-sample 1 --no-in-step-calibration" ;;
  esac
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 $args --reps 1 \
    --timing launch -o $R/traces/eng$r.gst --json $R/eng$r.json > $R/eng$r.txt 2>&1
  echo "rec $r rc=$?: $(grep -E '^event latency' $R/eng$r.txt | head -1 | cut -c1-40) | $(grep -oE 'in-step event latency [0-9.]+ us' $R/eng$r.txt | head -1)" | tee -a $log
done
$E bench --config models/llama-3-8b.json --weights bf16 --npl 1,8 --npp 128 --ntg 128 --reps 3 --warmup 1 \
  --timing off,launch --json $R/overhead-bf16.json > $R/overhead-bf16.txt 2>&1
echo "overhead bf16 rc=$?" | tee -a $log; grep -E "^timing=|^ +(1|8) " $R/overhead-bf16.txt | tee -a $log
tar czf $OUT/run37.tgz -C $OUT run37 && rm -rf $R
