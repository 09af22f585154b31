#!/usr/bin/env bash
# Issue 4: does torch.profiler attached before the model is built (CUDA modules loading while
# CUPTI is on, as under gapscope-record) see the recorder's longer short kernels?
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
R=$OUT/rec17; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
for r in 1 2; do
  say "torchprof-early $r: $(python3 scripts/record/hf_decode.py --mode torchprof-early --steps 16 --trace $R/traces/hf-early$r.json 2>&1 | tail -1)"
  say "torchprof $r: $(python3 scripts/record/hf_decode.py --mode torchprof --steps 16 --trace $R/traces/hf-prof$r.json 2>&1 | tail -1)"
  say "rec $r: $($REC -q --capture-range cudaProfilerApi -o $R/traces/hf-rec$r.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 16 2>&1 | tail -1)"
done
tar czf $OUT/rec17.tgz -C $OUT rec17 && rm -rf $R
