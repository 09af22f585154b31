#!/usr/bin/env bash
# Issue 4, run 26: does the event latency depend on the length of the step-like sequence the
# probes sit in (a decode step has ~200 timed launches; the calibration had 2)? The engine's
# 8B bf16 batch-1 decode under the recorder (--collect init), every launch of every step
# timed, with `--event-latency-by-shape` (launch shapes, then 2/8/32/200 probes per
# sequence): twice with CUDA graphs, once without. Joined and compared on the development
# machine.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/run26; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a $log
for r in g1 g2 e1; do
  extra=""; [ "${r:0:1}" = e ] && extra="--no-graphs"
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 32 --reps 1 \
    --timing launch --timing-sample 1 --event-latency-by-shape $extra -o $R/traces/eng$r.gst > $R/eng$r.txt 2>&1
  echo "rec $r rc=$?: $(grep -E 'event latency' $R/eng$r.txt | head -3)" | tee -a $log
done
tar czf $OUT/run26.tgz -C $OUT run26 && rm -rf $R
