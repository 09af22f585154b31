#!/usr/bin/env bash
# Round 6, call 5: separate k-major MMQ entries; decode A/B row-major (= previous machine code) vs k-major; HF same call.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/d14; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
$E selftest --seed "$(date +%s%N)" --json $R/selftest.json > "$R/selftest.txt" 2>&1
say "selftest rc=$?: $(tail -n 1 "$R/selftest.txt")"
grep -iE "fail" "$R/selftest.txt" | head -n 12 | tee -a "$log"
$E kbench --reps 30 --json $R/kbench.json 2>&1 | grep -vE "^kernels:|^$" | tee -a $log
for L in row k; do
  m=1; [ $L = row ] && m=100000
  say "== q8_0 layout $L"
  $E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1,8,16,24,32,48,64,128 --npp 128 --ntg 128 --reps 3 --warmup 1 --timing off \
    --mmq-k-major-min-batch $m --json $R/ab-$L.json 2>&1 | grep -E "^ +[0-9]+ |copy" | tee -a $log
done
say "== HF transformers eager"
python3 scripts/engine/hf_bench.py --config models/llama-3-8b.json --npl 1,8,16,24,32,48,64,128 --npp 128 --ntg 128 --reps 3 --warmup 1 \
  --json "$R/hf_bench.json" 2>&1 | tail -n 12 | tee -a "$log"
tar czf $OUT/d14.tgz -C $OUT d14 && rm -rf $R
