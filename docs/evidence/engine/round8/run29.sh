#!/usr/bin/env bash
# Round 8, one device call: the batch-invariant bf16 linears of 2-16 rows (gemv_bf16 as a
# tensor-core kernel, gemm_bf16_small above the threshold up to 16 rows).
#  1. selftest, lever md5 (bf16 Llama-3.2-1B and Qwen3-0.6B at thresholds 4/8/16; Q8_0/Q4_0 at
#     0/4/8/16/256), the 8B bf16 sweep with the previous revision at npl 8 and 16 and HF eager,
#     all through scripts/engine/run-gpu.sh;
#  2. an A/B of gemm_bf16_small's group depth (3 and 4 steps at one block per SM, against the
#     landed 2 steps) at npl 16 through GAPSCOPE_KERNEL_DIR, alternated over two rounds.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
STEPS=selftest,levers,sweep FMTS=bf16 BASE_NPL=8,16 bash scripts/engine/run-gpu.sh
E=.device/gapscope-engine; log=$OUT/run.log
for round in 1 2; do
  for v in embedded w3 w4; do
    if [ $v = embedded ]; then unset GAPSCOPE_KERNEL_DIR; else export GAPSCOPE_KERNEL_DIR=.device/kv/$v; fi
    $E bench --config models/llama-3-8b.json --random-weights --weights bf16 --npl 16 --npp 128 --ntg 128 --reps 3 --warmup 1 \
      --timing off --json $OUT/ab-$v-$round.json > $OUT/ab-$v-$round.txt 2>&1
    echo "== A/B $v round $round rc=$?: $(grep -E '^ +16 ' $OUT/ab-$v-$round.txt)" | tee -a $log
  done
done
unset GAPSCOPE_KERNEL_DIR
tmp=$(mktemp -d) && tar czf $tmp/run29.tgz -C $OUT . && rm -rf "${OUT:?}"/* && mv $tmp/run29.tgz $OUT/
