#!/usr/bin/env bash
# Round 8, call 5 (.device/kv/{x4,x6}/gemv.cu = kernels/cuda/gemv.cu with gemv-{x4,x6}.patch applied): can the bf16 tensor-core linears keep more weight bytes in flight? Variants
# through GAPSCOPE_KERNEL_DIR against the landed gemv.cu ("embedded"): x4 = only the weights
# software-pipelined (the activations, L1/L2 hits, loaded at their MMA), groups of 4 steps at
# 8 and at 16 columns; x6 = the same with groups of 6 at 8 columns. Same bits by construction
# (the k order does not change); the md5 column checks it. Two alternated rounds.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/xab; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
for round in 1 2; do
for v in embedded x4 x6; do
  if [ $v = embedded ]; then unset GAPSCOPE_KERNEL_DIR; else export GAPSCOPE_KERNEL_DIR=.device/kv/$v; fi
  $E bench --config models/llama-3-8b.json --random-weights --weights bf16 --npl 2,8,16 --npp 128 --ntg 128 --reps 3 --warmup 1 \
    --timing off --json $R/b-$v-$round.json > $R/b-$v-$round.txt 2>&1
  echo "== $v round $round rc=$?" | tee -a $log
  grep -E "^ +(2|8|16) " $R/b-$v-$round.txt | tee -a $log
done
done
unset GAPSCOPE_KERNEL_DIR
GAPSCOPE_KERNEL_DIR=.device/kv/x4 $E selftest --json $R/selftest-x4.json > $R/selftest-x4.txt 2>&1
echo "selftest x4 rc=$?: $(tail -n1 $R/selftest-x4.txt)" | tee -a $log
tar czf $OUT/xab.tgz -C $OUT xab && rm -rf $R
