#!/usr/bin/env bash
# Round 6, call 4: MMQ layout A/B inside the decode (same binary, --mmq-k-major-min-batch), per-op traces at npl 32.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/d13; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
for round in 1 2; do for L in k row; do
  m=1; [ $L = row ] && m=100000
  say "== q8_0 layout $L r$round"
  $E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 16,24,32,48,64,128 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off \
    --mmq-k-major-min-batch $m --json $R/ab-$L-$round.json 2>&1 | grep -E "^ +[0-9]+ " | tee -a $log
done; done
for L in k row; do
  m=1; [ $L = row ] && m=100000
  $E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 32 --npp 128 --ntg 32 --reps 1 --warmup 1 --timing launch \
    --mmq-k-major-min-batch $m -o $R/trace-$L.gst 2>&1 | grep -E "ms/step" | tee -a $log
done
ls -la $R | tee -a $log
tar czf $OUT/d13.tgz -C $OUT d13 && rm -rf $R
