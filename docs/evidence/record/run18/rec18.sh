#!/usr/bin/env bash
# Issue 4, run 18: gapscope-record --collect late (CUPTI attached at cudaProfilerStart through
# the preloaded interposer, as torch.profiler attaches at profile()) against late-attached
# torch.profiler, alternating three times; then the engine selftest and a first kbench read of
# two batch-1 MMVQ variants (issue 3) while the machine is warm.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
R=$OUT/rec18; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
$REC --capture-range cudaProfilerApi --collect late -o $R/traces/hf-late-verbose.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 4 > $R/rec-late-verbose.txt 2>&1
say "rec-late verbose rc=$?: $(grep -E 'wrote|note' $R/rec-late-verbose.txt | head -6)"
for r in 1 2 3; do
  say "torchprof $r: $(python3 scripts/record/hf_decode.py --mode torchprof --steps 16 --trace $R/traces/hf-prof$r.json 2>&1 | tail -1)"
  say "rec-late $r: $($REC -q --capture-range cudaProfilerApi --collect late -o $R/traces/hf-late$r.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 16 2>&1 | tail -1)"
done
$E selftest --seed "$(date +%s%N)" --json $R/selftest.json > "$R/selftest.txt" 2>&1
say "selftest rc=$?: $(tail -n 1 "$R/selftest.txt")"
grep -iE "fail" "$R/selftest.txt" | head -n 12 | tee -a "$log"
for v in cur pair pair9; do
  say "== kbench $v"
  if [ $v = cur ]; then $E kbench --reps 30 2>&1 | grep -E "_b1|copy" | tee -a $log
  else GAPSCOPE_KERNEL_DIR=.device/kvar/$v $E kbench --reps 30 2>&1 | grep -E "_b1|copy" | tee -a $log; fi
done
tar czf $OUT/rec18.tgz -C $OUT rec18 && rm -rf $R
