#!/usr/bin/env bash
# After the review-pass refactors (selftest launch helper; one kind-switching loop; Collect
# names in one table): engine selftest, and the recorder in each --collect mode on a short HF
# decode.
set -u
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
R=$OUT/check24; mkdir -p $R; log=$R/run.log
E=.device/gapscope-engine; REC=.device/gapscope-record
say() { echo "$@" | tee -a "$log"; }
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee -a $log
$E selftest --seed "$(date +%s%N)" --json $R/selftest.json > "$R/selftest.txt" 2>&1
say "selftest rc=$?: $(tail -n 1 "$R/selftest.txt")"
grep -iE "fail" "$R/selftest.txt" | head -n 12 | tee -a "$log"
for m in init range late; do
  $REC --capture-range cudaProfilerApi --collect $m -o $R/hf-$m.gst -- python3 scripts/record/hf_decode.py --mode plain --steps 4 > $R/rec-$m.txt 2>&1
  say "collect $m rc=$?: $(grep -E 'wrote' $R/rec-$m.txt)"
done
rm -rf $R/*.gst; tar czf $OUT/check24.tgz -C $OUT check24 && rm -rf $R
