#!/usr/bin/env bash
# Issue 4: is the recorder's longer short-kernel time due to the libcupti build? Record the HF
# eager decode with the toolkit's libcupti and with the one torch loads, against torch.profiler,
# alternating, with the SM clock logged.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
R=$OUT/rec16; mkdir -p $R/traces; log=$R/run.log
REC=.device/gapscope-record
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
TC=$(python3 - <<'PY'
import glob, os, sys
for p in sys.path:
    g = glob.glob(os.path.join(p, 'nvidia', '*', 'lib', 'libcupti.so*'))
    if g:
        print(sorted(g)[0]); break
PY
)
say "torch's libcupti: $TC"; ls -la $TC /usr/local/cuda/targets/x86_64-linux/lib/libcupti.so* 2>&1 | tee -a $log
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)" | tee -a $log
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $R/clocks.csv &
SMI=$!
for r in 1 2; do
  say "$(date -u +%T.%N) rec-toolkit $r"; $REC -q --capture-range cudaProfilerApi -o $R/traces/hf-rec$r.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 16 2>&1 | tail -1 | tee -a $log
  say "$(date -u +%T.%N) rec-torchcupti $r"; $REC -q --cupti-lib "$TC" --capture-range cudaProfilerApi -o $R/traces/hf-tc$r.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 16 2>&1 | tail -1 | tee -a $log
  say "$(date -u +%T.%N) torchprof $r"; python3 scripts/record/hf_decode.py --mode torchprof --steps 16 --trace $R/traces/hf-prof$r.json 2>&1 | tail -1 | tee -a $log
done
say "$(date -u +%T.%N) end"
kill $SMI
ls -la $R/traces | tee -a $log
tar czf $OUT/rec16.tgz -C $OUT rec16 && rm -rf $R
