#!/usr/bin/env bash
# Issue 4, run 22: the engine's 8B bf16 batch-1 decode under the recorder (--collect init; the
# engine starts no profiler range), engine event timing on every launch of every step, twice,
# on the landed code; joined and compared with CUPTI on the development machine.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/eng22; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
for r in 1 2; do
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 32 --reps 1 \
    --timing launch --timing-sample 1 -o $R/traces/eng$r.gst > $R/eng$r.txt 2>&1
  echo "run $r rc=$?: $(grep -E 'event latency|wrote' $R/eng$r.txt | head -3)" | tee -a $log
done
tar czf $OUT/eng22.tgz -C $OUT eng22 && rm -rf $R
