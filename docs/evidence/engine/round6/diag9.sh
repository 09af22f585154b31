#!/usr/bin/env bash
# Round 6, call 1: MMQ/MMVQ summation groups (QGROUP=4) vs HEAD, kernel variants via GAPSCOPE_KERNEL_DIR.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/d9; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a $log
if [ "${STAGE:-a}" = a ]; then
for v in head g4 g4lb4; do
  say "== kbench $v"
  GAPSCOPE_KERNEL_DIR=$PWD/.device/kvar/$v $E kbench --reps 30 --json $R/kbench-$v.json 2>&1 | grep -vE "^kernels:|^$" | tee -a $log
done
fi
best=${BEST:-}
[ -n "$best" ] || best=$(python3 - "$R" <<'PY'
import json,sys
r=sys.argv[1]; best=None
for v in ["g4","g4lb4"]:
    d=json.load(open(f"{r}/kbench-{v}.json")); t=dict((b,m) for b,m,_,_ in d["mmq_vs_mmvq"])[128]
    if best is None or t<best[1]: best=(v,t)
print(best[0])
PY
)
say "chosen variant: $best"
K=$PWD/.device/kvar/$best
if [ "${STAGE:-a}" = a ]; then
if command -v ncu >/dev/null; then
  for v in head $best; do
    timeout 120 ncu --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section Occupancy --section MemoryWorkloadAnalysis --section InstructionStats \
      -k regex:mmq_q8_0 --launch-skip 310 --launch-count 1 env GAPSCOPE_KERNEL_DIR=$PWD/.device/kvar/$v $E kbench --reps 30 > $R/ncu-mmq128-$v.txt 2>&1
    say "ncu mmq $v rc=$?"
  done
  timeout 120 ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats \
    -k regex:mmvq_q8_0_b1 --launch-skip 20 --launch-count 1 env GAPSCOPE_KERNEL_DIR=$K $E kbench --reps 30 > $R/ncu-mmvq-b1-$best.txt 2>&1
  say "ncu mmvq rc=$?"
  grep -E "Duration|Memory Throughput|DRAM Throughput|Compute \(SM\)|Achieved Occupancy|Registers Per" $R/ncu-*.txt | tee -a $log
fi
GAPSCOPE_KERNEL_DIR=$K $E selftest --seed "$(date +%s%N)" > "$R/selftest.txt" 2>&1
say "selftest ($best) rc=$?: $(tail -n 1 "$R/selftest.txt")"
grep -iE "fail|bitwise\)" "$R/selftest.txt" | grep -iE "fail|mmq vs" | head -n 12 | tee -a "$log"
.device/engine-gpu-tests --ignored --test-threads 1 > "$R/gputests.txt" 2>&1
say "gpu tests (landed tree kernels) rc=$?: $(grep 'test result' "$R/gputests.txt")"
for spec in "llama-3.2-1b.json q8_0" "qwen3-0.6b.json q4_0"; do
  set -- $spec
  say "== levers $1 $2 ($best)"
  GAPSCOPE_KERNEL_DIR=$K $E levers --config "models/$1" --random-weights --weights "$2" --npl 1,8,16 --json "$R/levers-${1%.json}-$2.json" 2>&1 | grep -E "distinct|error|md5" | tail -n 8 | tee -a "$log"
done
fi
if [ "${STAGE:-a}" = b ]; then
say "== sweep 8B q8_0 ($best)"
GAPSCOPE_KERNEL_DIR=$K $E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 1,8,16,32,64,128 --npp 128 --ntg 128 \
  --reps 3 --warmup 1 --timing off,launch --json "$R/sweep-q8_0.json" 2>&1 | tee "$R/sweep-q8_0.txt" | grep -vE "^step|^\s*$|rep [0-9]" | tail -n 30 | tee -a "$log"
say "== sweep 8B q8_0 head, npl 8,128 (A/B)"
GAPSCOPE_KERNEL_DIR=$PWD/.device/kvar/head $E bench --config models/llama-3-8b.json --random-weights --weights q8_0 --npl 8,128 --npp 128 --ntg 128 \
  --reps 3 --warmup 1 --timing off --json "$R/sweep-q8_0-head.json" 2>&1 | grep -E "^ +(8|128) " | tee -a "$log"
say "== HF transformers eager"
python3 scripts/engine/hf_bench.py --config models/llama-3-8b.json --npl 1,8,16,32,64,128 --npp 128 --ntg 128 --reps 3 --warmup 1 \
  --json "$R/hf_bench.json" 2>&1 | tail -n 12 | tee -a "$log"
fi
tar czf $OUT/d9${STAGE:-a}.tgz -C $OUT d9 && rm -rf $R
