#!/usr/bin/env bash
# Issue 4, run 21: --collect late against late torch.profiler again, three of each alternating
# (run 18 had three each, run 20 two each), on the landed code.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
R=$OUT/rec21; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
for r in 1 2 3; do
  say "torchprof $r: $(python3 scripts/record/hf_decode.py --mode torchprof --steps 16 --trace $R/traces/hf-prof$r.json 2>&1 | tail -1)"
  say "rec-late $r: $($REC -q --capture-range cudaProfilerApi --collect late -o $R/traces/hf-late$r.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 16 2>&1 | tail -1)"
done
tar czf $OUT/rec21.tgz -C $OUT rec21 && rm -rf $R
