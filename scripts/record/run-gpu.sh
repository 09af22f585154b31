#!/usr/bin/env bash
# gapscope-record acceptance suite for the GPU machine. Run from the repository root with the
# thin binaries staged in .device/ (see scripts/record/README.md):
#   .device/gapscope-record  .device/libgapscope_profiler.so  .device/gapscope-engine
# Writes to ${OUT:-/tmp/record-out}: run.log (everything), results.jsonl (one JSON line per
# measurement) and traces.tgz (the recorded traces and torch.profiler's). Each step goes on
# after a failure so one run gives the whole picture.
set -u
OUT=${OUT:-/tmp/record-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/targets/x86_64-linux/lib:${LD_LIBRARY_PATH:-}
export PYTHONUNBUFFERED=1
W=/tmp/rec; rm -rf "$W"; mkdir -p "$W/traces"
R=.device/gapscope-record; E=.device/gapscope-engine
RES="$OUT/results.jsonl"; : > "$RES"
exec > >(tee -a "$OUT/run.log") 2>&1
step() { echo; echo "=== $* ($(date -u +%T))"; }
res() { echo "$1" >> "$RES"; echo "RESULT $1"; }
STEPS=${STEPS:-all}
want() { [ "$STEPS" = all ] || [[ ",$STEPS," == *",$1,"* ]]; }

step "device"; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader

if want layout; then
  step "layout: cupti_activity.h offsets vs the decoder's"
  gcc -O0 -I/usr/local/cuda/include scripts/record/layout_check.c -L/usr/local/cuda/targets/x86_64-linux/lib -lcupti -o "$W/layout_check" && "$W/layout_check" > "$W/layout_c.txt"
  $R --print-layout > "$W/layout_rs.txt"
  if diff <(grep -v -i version "$W/layout_c.txt" | sort) <(sort "$W/layout_rs.txt"); then echo "layout: identical ($(wc -l < "$W/layout_rs.txt") fields)"; res '{"check":"layout","ok":true}'; else res '{"check":"layout","ok":false}'; fi
  grep -i version "$W/layout_c.txt"
fi

if want plain; then
  step "plain CUDA program"
  nvcc -O2 -o "$W/plain" scripts/record/plain_cuda.cu || echo "nvcc failed"
  $R --keep-spool -o "$W/traces/plain.gst" -- "$W/plain" normal; echo "exit $?"
  cp "$W"/traces/.plain.gst.spool-*/*.spool "$OUT/plain-cuda13.0.spool" 2>/dev/null
  $R --capture-range cudaProfilerApi -o "$W/traces/plain-range.gst" -- "$W/plain" normal; echo "exit $?"
  $R --keep-spool -o "$W/traces/abort.gst" -- "$W/plain" abort 1000; res "{\"check\":\"abort_exit\",\"code\":$?}"
  cp "$W"/traces/.abort.gst.spool-*/*.spool "$OUT/abort-cuda13.0.spool" 2>/dev/null
  rm -rf "$W"/traces/.*.spool-*
  $R -o "$W/traces/segv.gst" -- "$W/plain" segv 1000; res "{\"check\":\"segv_exit\",\"code\":$?}"
  $R -o "$W/traces/nocuda.gst" -- "$W/plain" nocuda; res "{\"check\":\"nocuda_exit\",\"code\":$?}"
  $R --cupti-lib /nonexistent/libcupti.so.13 -o "$W/x.gst" -- "$W/plain" normal; res "{\"check\":\"missing_cupti_exit\",\"code\":$?}"
  $R -o "$W/x.gst" -- /nonexistent/program; res "{\"check\":\"not_found_exit\",\"code\":$?}"
  $R -o "$W/x.gst" -- sh -c 'exit 7'; res "{\"check\":\"shell_exit\",\"code\":$?}"
  step "two CUDA processes under one shell: one trace each"
  $R -o "$W/traces/multi.gst" -- sh -c "$W/plain normal >/dev/null && $W/plain normal >/dev/null"; res "{\"check\":\"multi_exit\",\"code\":$?}"
  ls -d "$W"/traces/multi*
fi

if want multigpu; then
  step "several GPUs in one process"
  nvcc -O2 -o "$W/plain" scripts/record/plain_cuda.cu || echo "nvcc failed"
  $R -o "$W/traces/multigpu.gst" -- "$W/plain" multigpu; res "{\"check\":\"multigpu_exit\",\"code\":$?}"
fi

if want hf; then
  HFSTEPS=${HFSTEPS:-16}
  step "HF eager decode ($HFSTEPS steps): plain, recorded, torch.profiler (alternating, 3 rounds)"
  for r in 1 2 3; do
    python3 scripts/record/hf-decode.py --mode plain --steps $HFSTEPS | tail -1 | sed "s/^/RESULT_HF_PLAIN$r /"
    $R --capture-range cudaProfilerApi -o "$W/traces/hf-rec$r.gst" -- python3 scripts/record/hf-decode.py --mode plain --steps $HFSTEPS | tail -1 | sed "s/^/RESULT_HF_REC$r /"
    $R -q --api runtime --capture-range cudaProfilerApi -o "$W/traces/hf-rt$r.gst" -- python3 scripts/record/hf-decode.py --mode plain --steps $HFSTEPS | tail -1 | sed "s/^/RESULT_HF_RECRT$r /"
    python3 scripts/record/hf-decode.py --mode torchprof --steps $HFSTEPS --trace "$W/traces/hf-prof$r.json" | tail -1 | sed "s/^/RESULT_HF_PROF$r /"
  done
fi

if want engine; then
  step "engine: batch-1 decode under the recorder, engine event timing on every step"
  $R -o "$W/traces/eng-rec.gst" -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 32 --reps 1 --timing launch --timing-sample 1 -o "$W/traces/eng.gst" 2>&1 | tail -15
fi

if want overhead; then
  step "overhead: engine 8B bf16 batch-1 decode, recorder off/on alternating (timing off)"
  for r in 1 2 3; do
    $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 128 --reps 3 --timing off 2>&1 | grep -E "^\s*\|?\s*1\s" | sed "s/^/RESULT_ENG_OFF$r /"
    $R -q --nvml-interval-ms 100 -o "$W/eng-ovh$r.gst" -- $E bench --config models/llama-3-8b.json --weights bf16 --npl 1 --npp 128 --ntg 128 --reps 3 --timing off 2>&1 | grep -E "^\s*\|?\s*1\s" | sed "s/^/RESULT_ENG_REC$r /"
  done
fi

if want selftest; then
  step "engine selftest (issue 3: the host-side refactor on the GPU)"
  $E selftest 2>&1 | tail -25
fi

step "pack"
( cd "$W" && tar czf "$OUT/traces.tgz" traces ) && ls -la "$OUT"
