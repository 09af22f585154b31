#!/usr/bin/env bash
# Issue 4, run 36: the join of sampled timing without graphs (--no-graphs, default 1-in-16
# sampling): untraced eager steps between and after the traced ones. n1: npl 1, one repeat;
# n2: npl 1 and 2, two repeats each (four runs, so run boundaries too). Joined and compared here.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/run36; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a $log
for r in n1 n2; do
  if [ $r = n1 ]; then args="--npl 1 --reps 1"; else args="--npl 1,2 --reps 2"; fi
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 $args --npp 128 --ntg 128 \
    --no-graphs --timing launch -o $R/traces/eng$r.gst > $R/eng$r.txt 2>&1
  echo "rec $r rc=$?: $(grep -E 'event latency' $R/eng$r.txt | head -1)" | tee -a $log
done
tar czf $OUT/run36.tgz -C $OUT run36 && rm -rf $R
