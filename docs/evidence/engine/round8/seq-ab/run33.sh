#!/usr/bin/env bash
# Round 8, call 6: gemm_bf16_small running its 8-column groups one after another on each row
# tile (the second group's weight reads hit L2; each group keeps the one-tile registers and the
# 4-step pipeline), against the landed 16-column tile ("embedded"). The variant's source is
# .device/kv/seq/gemv.cu = kernels/cuda/gemv.cu with seq.patch applied, through
# GAPSCOPE_KERNEL_DIR. Same bits by construction; the md5 column and the selftest check it.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/seq; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
GAPSCOPE_KERNEL_DIR=.device/kv/seq $E selftest --json $R/selftest-seq.json > $R/selftest-seq.txt 2>&1
echo "selftest seq rc=$?: $(tail -n1 $R/selftest-seq.txt)" | tee -a $log
for round in 1 2; do
for v in embedded seq; do
  if [ $v = embedded ]; then unset GAPSCOPE_KERNEL_DIR; else export GAPSCOPE_KERNEL_DIR=.device/kv/$v; fi
  $E bench --config models/llama-3-8b.json --random-weights --weights bf16 --npl 8,12,16 --npp 128 --ntg 128 --reps 3 --warmup 1 \
    --timing off --json $R/b-$v-$round.json > $R/b-$v-$round.txt 2>&1
  echo "== $v round $round rc=$?" | tee -a $log
  grep -E "^ +(8|12|16) " $R/b-$v-$round.txt | tee -a $log
done
done
unset GAPSCOPE_KERNEL_DIR
tar czf $OUT/seq.tgz -C $OUT seq && rm -rf $R
