#!/usr/bin/env bash
# Issue 4, run 27: engine per-launch timing with plain stream events (--no-graphs) vs CUPTI,
# three more recordings of the 8B bf16 batch-1 decode (run 26 had one), every launch of every
# step timed, with `--event-latency-by-shape`. Joined (backwards, see docs/CLI.md) and compared
# on the development machine with scripts/record/engine_vs_cupti.py.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/run27; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a $log
for r in e2 e3 e4; do
  extra=""; [ "${r:0:1}" = e ] && extra="--no-graphs"
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 32 --reps 1 \
    --timing launch --timing-sample 1 --event-latency-by-shape $extra -o $R/traces/eng$r.gst > $R/eng$r.txt 2>&1
  echo "rec $r rc=$?: $(grep -E 'event latency' $R/eng$r.txt | head -3)" | tee -a $log
done
tar czf $OUT/run27.tgz -C $OUT run27 && rm -rf $R
