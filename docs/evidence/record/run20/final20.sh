#!/usr/bin/env bash
# Final call of the session (issues 3 and 4) on the code as it lands: engine selftest (with the
# partial-tile/bias/accumulate checks of the batch-1 Q8_0 entries), kbench, the GPU tests; then
# gapscope-record --collect late after the review fixes (forward first, one lock) against late
# torch.profiler, two of each alternating.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
R=$OUT/run20; mkdir -p $R/traces; log=$R/run.log
E=.device/gapscope-engine; REC=.device/gapscope-record
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
$E selftest --seed "$(date +%s%N)" --json $R/selftest.json > "$R/selftest.txt" 2>&1
say "selftest rc=$?: $(tail -n 1 "$R/selftest.txt")"
grep -iE "fail" "$R/selftest.txt" | head -n 12 | tee -a "$log"
$E kbench --reps 30 --json $R/kbench.json 2>&1 | grep -vE "^kernels:|^$" | tee -a $log
.device/engine-gpu-tests --ignored --test-threads 1 > "$R/gputests.txt" 2>&1
say "gpu tests rc=$?: $(grep 'test result' "$R/gputests.txt")"
for r in 1 2; do
  say "torchprof $r: $(python3 scripts/record/hf_decode.py --mode torchprof --steps 16 --trace $R/traces/hf-prof$r.json 2>&1 | tail -1)"
  say "rec-late $r: $($REC --capture-range cudaProfilerApi --collect late -o $R/traces/hf-late$r.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 16 2>$R/rec-late$r.err | tail -1)"
  grep -E "wrote|note" $R/rec-late$r.err | head -4 | tee -a $log
done
tar czf $OUT/run20.tgz -C $OUT run20 && rm -rf $R
