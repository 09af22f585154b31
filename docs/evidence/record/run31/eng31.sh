#!/usr/bin/env bash
# Issue 4, run 31: does the event latency a launch sees depend on the memory traffic of the
# kernel before it? The 8B bf16 batch-1 decode under the recorder, defaults (launch-timed
# steps eager, stream event records), every launch timed, with --event-latency-after-load
# (the calibration probe after a 528x256 kernel that spins or streams a 256 MB buffer), twice.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/run31; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a $log
for r in d4 d5; do
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 32 --reps 1 \
    --timing launch --timing-sample 1 --event-latency-after-load -o $R/traces/eng$r.gst > $R/eng$r.txt 2>&1
  echo "rec $r rc=$?" | tee -a $log; grep -E "event latency" $R/eng$r.txt | tee -a $log
done
$E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 32 --reps 1 --timing launch --timing-sample 1 \
  --event-latency-after-load > $R/eng-norec.txt 2>&1
echo "no recorder rc=$?" | tee -a $log; grep -E "event latency" $R/eng-norec.txt | tee -a $log
tar czf $OUT/run31.tgz -C $OUT run31 && rm -rf $R
