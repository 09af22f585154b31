#!/usr/bin/env bash
# Issue 4, run 30: launch-timed decode steps now run eagerly with stream event records when CUDA
# graphs are on (the default), instead of replaying a graph with event-record nodes. The 8B bf16
# batch-1 decode under the recorder, every launch of every step timed: three recordings with
# the defaults (d1-d3), one with --timed-steps-in-graphs (g1, the previous behaviour). Joined
# backwards and compared on the development machine with scripts/record/engine_vs_cupti.py.
# Issue 3: the engine's GPU tests (lever md5 now with bf16 Llama/Qwen3 at thresholds 4/8/16,
# the event-latency test in all three timing modes), and the cost of per-launch timing with the
# default 1-in-16 sampling (bf16 and Q8_0, npl 1 and 8, --timing off,launch in one process).
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/run30; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record; E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader | tee -a $log
.device/engine-gpu-tests --ignored --test-threads 1 > $R/gputests.txt 2>&1
echo "gpu tests rc=$?: $(grep 'test result' $R/gputests.txt)" | tee -a $log
grep -E "^test |panicked" $R/gputests.txt | tee -a $log
for r in d1 g1 d2 d3; do
  extra=""; [ "${r:0:1}" = g ] && extra="--timed-steps-in-graphs"
  $REC -o $R/traces/eng-rec$r.gst -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 32 --reps 1 \
    --timing launch --timing-sample 1 $extra -o $R/traces/eng$r.gst > $R/eng$r.txt 2>&1
  echo "rec $r rc=$?: $(grep -E 'event latency' $R/eng$r.txt | head -1)" | tee -a $log
done
for fmt in bf16 q8_0; do
  $E bench --config models/llama-3-8b.json --weights $fmt --npl 1,8 --npp 128 --ntg 128 --reps 3 --warmup 1 \
    --timing off,launch --json $R/overhead-$fmt.json > $R/overhead-$fmt.txt 2>&1
  echo "overhead $fmt rc=$?" | tee -a $log; grep -E "^timing=|^ +(1|8) " $R/overhead-$fmt.txt | tee -a $log
done
tar czf $OUT/run30.tgz -C $OUT run30 && rm -rf $R
