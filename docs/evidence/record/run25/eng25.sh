#!/usr/bin/env bash
# Issue 4, run 25: how the event latency depends on a kernel's launch shape. The engine's 8B
# bf16 batch-1 decode under the recorder (--collect init), every launch of every step timed,
# with `--event-latency-by-shape` (the calibration probe in the decode kernels' grid/block
# shapes), twice. The traces are joined and compared on the development machine.
# Issue 3: the bf16 batch-1 weight-read floor, three rounds with timing off.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/run25; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a $log
for r in 1 2; do
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 32 --reps 1 \
    --timing launch --timing-sample 1 --event-latency-by-shape -o $R/traces/eng$r.gst > $R/eng$r.txt 2>&1
  echo "rec $r rc=$?: $(grep -E 'event latency' $R/eng$r.txt | head -3)" | tee -a $log
done
for r in 1 2 3; do
  $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 128 --reps 3 --timing off \
    --json $R/b1-bf16-$r.json > $R/b1-bf16-$r.txt 2>&1
  echo "b1 bf16 round $r rc=$?" | tee -a $log; grep -E "^ +1 |D2D" $R/b1-bf16-$r.txt | tee -a $log
done
tar czf $OUT/run25.tgz -C $OUT run25 && rm -rf $R
