#!/usr/bin/env bash
# Round 7, call 4. Issue 4: --collect late with the driver's device facts (the GPU line and NVML
# samples that run 18 lacked). Issue 3: the batch-1 Q8_0 MMVQ with contiguous lane-pair loads
# (.device/kvar/pair: no register bound, 6 blocks/SM; pair9: bounded to 9 blocks/SM, small
# spill) against the landed entry, kbench and decode npl 1 alternating.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
R=$OUT/d19; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine; REC=.device/gapscope-record
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
$REC --capture-range cudaProfilerApi --collect late -o $R/hf-late-verbose.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 4 > $R/rec-late-verbose.txt 2>&1
say "rec-late verbose rc=$?: $(grep -E 'wrote|note' $R/rec-late-verbose.txt | head -6)"
for round in 1 2; do
  for v in cur pair; do
    say "== kbench $v round $round"
    env GAPSCOPE_KERNEL_DIR=.device/kvar/$v $E kbench --reps 30 2>&1 | grep -E "_b1|copy" | tee -a $log
  done
done
for round in 1 2; do
  for v in cur pair pair9; do
    say "== decode 8B q8_0 npl 1 $v round $round"
    env GAPSCOPE_KERNEL_DIR=.device/kvar/$v $E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off \
      --json $R/b1-$v-$round.json 2>&1 | grep -E "^ +[0-9]+ |copy" | tee -a $log
  done
done
tar czf $OUT/d19.tgz -C $OUT d19 && rm -rf $R
