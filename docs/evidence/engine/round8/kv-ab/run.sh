#!/usr/bin/env bash
# Round 8, call 3: A/B of gemv.cu variants through GAPSCOPE_KERNEL_DIR (the binary embeds the
# source of commit 9849552, the unpipelined tensor-core GEMV: "embedded"). u4 = the
# software-pipelined kernel as landed (groups of 4 steps, 2 for gemm_bf16_small's 16 columns);
# u2 = the same with groups of 2. .device/kv/u4/gemv.cu and u2/gemv.cu held those sources.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/kv; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
GAPSCOPE_KERNEL_DIR=.device/kv/u4 $E selftest --json $R/selftest-u4.json > $R/selftest-u4.txt 2>&1
echo "selftest u4 rc=$?: $(tail -n1 $R/selftest-u4.txt)" | tee -a $log
grep -i fail $R/selftest-u4.txt | head | tee -a $log
for round in 1 2; do
for v in embedded u4 u2; do
  if [ $v = embedded ]; then unset GAPSCOPE_KERNEL_DIR; else export GAPSCOPE_KERNEL_DIR=.device/kv/$v; fi
  $E bench --config models/llama-3-8b.json --random-weights --weights bf16 --npl 2,8,16 --npp 128 --ntg 128 --reps 3 --warmup 1 \
    --timing off --json $R/b-$v-$round.json > $R/b-$v-$round.txt 2>&1
  echo "== $v round $round rc=$?" | tee -a $log
  grep -E "^ +(2|8|16) " $R/b-$v-$round.txt | tee -a $log
done
done
unset GAPSCOPE_KERNEL_DIR
tar czf $OUT/kv.tgz -C $OUT kv && rm -rf $R
