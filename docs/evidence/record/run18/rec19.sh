#!/usr/bin/env bash
# Issue 4, run 19: cost on HF eager decode (launch-bound), plain vs gapscope-record --collect late
# vs torch.profiler, alternating three times in one call; then (issue 3) the HF tiny-model logits
# against the current engine (scripts/engine/run-gpu.sh STEPS=hflogits).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
R=$OUT/rec19; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
for r in 1 2 3; do
  say "plain $r: $(python3 scripts/record/hf_decode.py --mode plain --steps 16 2>&1 | tail -1)"
  say "rec-late $r: $($REC -q --capture-range cudaProfilerApi --collect late -o $R/traces/hf-late$r.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 16 2>&1 | tail -1)"
  say "torchprof $r: $(python3 scripts/record/hf_decode.py --mode torchprof --steps 16 --trace $R/traces/hf-prof$r.json 2>&1 | tail -1)"
done
OUT=$R/hflogits STEPS=hflogits bash scripts/engine/run-gpu.sh > $R/hflogits.txt 2>&1
say "hflogits rc=$?"; grep -E "top1|agreement|rel" $R/hflogits/run.log | head -20 | tee -a $log
tar czf $OUT/rec19.tgz -C $OUT rec19 && rm -rf $R
