#!/usr/bin/env bash
# Issue 4, run 34: more recordings of the default (launch-timed decode steps eager, stream
# event records) for the engine-vs-CUPTI per-bucket figures: three with every launch of 32
# steps timed (d6-d8), and one with the default 1-in-16 sampling over 128 steps (s1: 8 timed
# steps, eager, among graph replays). Joined and compared here with engine_vs_cupti.py.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/run34; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a $log
for r in d6 d7 d8 s1; do
  if [ $r = s1 ]; then args="--ntg 128 --timing-sample 16"; else args="--ntg 32 --timing-sample 1"; fi
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 $args --reps 1 \
    --timing launch -o $R/traces/eng$r.gst > $R/eng$r.txt 2>&1
  echo "rec $r rc=$?: $(grep -E 'event latency' $R/eng$r.txt | head -1)" | tee -a $log
done
tar czf $OUT/run34.tgz -C $OUT run34 && rm -rf $R
