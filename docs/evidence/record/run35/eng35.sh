#!/usr/bin/env bash
# Issue 4, run 35: the bench's default timing under the recorder: --timing launch with the
# default 1-in-16 sampling over 128 decode steps (8 launch-timed steps, eager, among graph
# replays), three recordings (s2-s4; run 34's s1 is the first). Joined with the join that
# leaves graph replays out, compared here with engine_vs_cupti.py.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/run35; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a $log
for r in s2 s3 s4; do
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 128 --reps 1 \
    --timing launch -o $R/traces/eng$r.gst > $R/eng$r.txt 2>&1
  echo "rec $r rc=$?: $(grep -E 'event latency' $R/eng$r.txt | head -1)" | tee -a $log
done
tar czf $OUT/run35.tgz -C $OUT run35 && rm -rf $R
