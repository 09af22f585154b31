#!/usr/bin/env bash
# Issue 19's reference captures on a GPU machine, in one go (point 7 of the issue):
#
#   hf-llama3.2-1b-npl8-stack-cudnn.json.gz  Llama-3.2-1B shapes, 8 sequences, 128-token prompt,
#                                            4 warm-up + 16 traced decode steps, torch.profiler
#                                            with_stack + with_modules, SDPA as torch picks it
#                                            (cuDNN attention on H100/H200 with torch 2.11)
#   hf-llama3.2-1b-npl8-stack-math.json.gz   the same with SDPA pinned to the math backend
#   hf-qwen3next-small-npl1.json.gz          Qwen3-Next-shaped hybrid (gated DeltaNet + full
#                                            attention + MoE), random weights, batch 1, 32-token
#                                            prompt, 4 warm-up + 16 traced steps, with_stack +
#                                            with_modules; transformers' PyTorch DeltaNet path
#                                            unless flash-linear-attention is installed (logged)
#   cupti-qwen3next-small-npl1.gst.tgz       the same script under gapscope-record
#                                            (--capture-range cudaProfilerApi, CUPTI from CUDA
#                                            init), NVTX ranges per step and per nn.Module call
#   cupti-qwen3next-small-npl1-late.gst.tgz  the same under gapscope-record --collect late (CUPTI
#                                            attaches at cudaProfilerStart, as torch.profiler
#                                            does), no NVTX
#   capture-issue19.log                      devices, versions, exact commands, tok/s, event
#                                            counts, SDPA ops, which DeltaNet path ran
#
# Usage (repository root, on a machine with an NVIDIA GPU, CUDA 13.0, torch, transformers):
#   scripts/capture/run-gpu-issue19.sh [OUTDIR]    # OUTDIR defaults to $OUT, else ./capture-out
# gapscope-record and libgapscope_profiler.so are taken from $GAPSCOPE_RECORD's folder, default
# .device/ (build: cargo build --release -p gapscope-profiler --bins). PARTS=llama,qwen,rec
# picks parts (default all); PARTS=spread runs REPEATS (default 3) torch.profiler and
# NVTX-recorded Qwen3-Next runs alternately, for the run-to-run spread. Every capture gets at most CAPTURE_TIMEOUT seconds (default 200),
# and the whole script stops starting captures DEADLINE_S seconds (default 540) after it began.
# One failed capture is logged and the others still run; the exit status is the number of
# failed captures.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="${REPO:-$(pwd)}" # run from the repository root (the script may sit in a staged copy)
OUT_DIR="${1:-${OUT:-$REPO/capture-out}}"
PY="${PYTHON:-python3}"
TRACE_PY="$HERE/hf-decode-trace.py"
REC="${GAPSCOPE_RECORD:-$REPO/.device/gapscope-record}"
PARTS="${PARTS:-llama,qwen,rec}"
CAPTURE_TIMEOUT="${CAPTURE_TIMEOUT:-200}"
DEADLINE_S="${DEADLINE_S:-540}"
MAX_GZ_BYTES=16000000 # what comes back from the GPU machine, per file
export PYTHONUNBUFFERED=1
export LD_LIBRARY_PATH="/usr/local/cuda/targets/x86_64-linux/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
START=$(date +%s)

mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/capture-issue19.log"
: >"$LOG"

log() { echo "$*" | tee -a "$LOG"; }
logrun() {
  log "+ $*"
  local rc=0
  "$@" 2>&1 | tee -a "$LOG" || rc=$?
  return "$rc"
}
has_part() { [[ ",$PARTS," == *",$1,"* ]]; }
# seconds a capture may still take: CAPTURE_TIMEOUT, cut to what is left before the deadline
budget() {
  local left=$((DEADLINE_S - ($(date +%s) - START) - 15))
  ((left > CAPTURE_TIMEOUT)) && left=$CAPTURE_TIMEOUT
  echo "$left"
}

log "# gapscope issue 19 reference captures"
log "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
log "host: $(uname -srm)"
log "script: scripts/capture/run-gpu-issue19.sh (parts $PARTS)"
log "repo commit: $(git -C "$REPO" rev-parse --verify -q HEAD 2>/dev/null || echo none)"
log "hf-decode-trace.py: $TRACE_PY (md5 $(md5sum "$TRACE_PY" | cut -d' ' -f1))"
log "## nvidia-smi"
logrun nvidia-smi -L || log "nvidia-smi -L failed"
logrun nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv ||
  log "nvidia-smi query failed"
log "## versions"
logrun "$PY" -c 'import sys, torch, transformers; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version()); print("transformers", transformers.__version__); print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).multi_processor_count, "SMs")' ||
  log "version query failed"
logrun "$PY" -c 'import importlib.util as u; print({p: u.find_spec(p) is not None for p in ("fla", "causal_conv1d", "kernels", "triton", "flash_attn")})' ||
  log "package query failed"
log "+ pip list | grep torch|transformers|triton|flash|fla|causal|kernels|nvidia-cudnn|nvidia-cupti"
"$PY" -m pip list 2>/dev/null | grep -i -E '^(torch|transformers|triton|flash|fla|causal|kernels|nvidia-cu(dnn|pti))' | tee -a "$LOG" || true
if [[ -x "$REC" ]]; then
  log "gapscope-record: $REC ($(stat -c %s "$REC") bytes; injection library $(stat -c %s "$(dirname "$REC")/libgapscope_profiler.so" 2>/dev/null || echo missing) bytes)"
else
  log "gapscope-record: $REC not found; the recorded captures will fail"
fi

FAILED=0
FAILED_NAMES=()
fail() {
  FAILED=$((FAILED + 1))
  FAILED_NAMES+=("$1")
}

# begin KIND NAME SECONDS : the log heading of a capture; fails, logging SKIPPED, when SECONDS
# (its budget) is under 30
begin() {
  log ""
  log "## $1 $2"
  if (($3 < 30)); then
    log "SKIPPED: $2 (only ${3}s left before the deadline)"
    return 1
  fi
}

# capture NAME ARGS... : hf-decode-trace.py ARGS... --out OUT_DIR/NAME under torch.profiler
capture() {
  local name="$1"
  shift
  local t rc=0 t0
  t=$(budget)
  begin capture "$name" "$t" || return 1
  log "command: python3 scripts/capture/hf-decode-trace.py $* --out \$OUT/$name"
  t0=$(date +%s)
  logrun timeout "$t" "$PY" "$TRACE_PY" "$@" --out "$OUT_DIR/$name" || rc=$?
  log "capture $name: rc=$rc, wall $(($(date +%s) - t0)) s"
  if [[ $rc -ne 0 ]]; then
    log "FAILED: $name (rc=$rc)"
    rm -f "$OUT_DIR/$name"
    return 1
  fi
  local size
  size=$(stat -c %s "$OUT_DIR/$name")
  log "size $name: $size bytes"
  if ((size > MAX_GZ_BYTES)); then
    log "TOO LARGE: $name is $size bytes (> $MAX_GZ_BYTES); removed"
    rm -f "$OUT_DIR/$name"
    return 2
  fi
  return 0
}

# record NAME RECORDER-ARGS -- SCRIPT-ARGS... : the script under gapscope-record, the trace
# directory (and any per-process siblings) packed as OUT_DIR/NAME.tgz
record() {
  local name="$1"
  shift
  local rargs=()
  while [[ $# -gt 0 && "$1" != "--" ]]; do
    rargs+=("$1")
    shift
  done
  shift # --
  local t rc=0 t0 dir="$OUT_DIR/rec-$name"
  t=$(budget)
  begin record "$name" "$t" || return 1
  log "command: gapscope-record ${rargs[*]} -o $name -- python3 scripts/capture/hf-decode-trace.py $*"
  rm -rf "$dir"
  mkdir -p "$dir"
  t0=$(date +%s)
  logrun timeout "$t" "$REC" "${rargs[@]}" -o "$dir/$name" -- "$PY" "$TRACE_PY" "$@" || rc=$?
  log "record $name: rc=$rc, wall $(($(date +%s) - t0)) s"
  if [[ ! -d "$dir/$name" ]]; then
    log "FAILED: $name (rc=$rc, no trace directory)"
    rm -rf "$dir"
    return 1
  fi
  log "trace files:"
  (cd "$dir" && find . -type f -printf '%s\t%p\n' | sort -k2) | tee -a "$LOG"
  if [[ -f "$dir/$name/manifest.json" ]]; then
    log "manifest:"
    cat "$dir/$name/manifest.json" >>"$LOG"
    echo >>"$LOG"
  fi
  tar czf "$OUT_DIR/$name.tgz" -C "$dir" . && rm -rf "$dir"
  log "size $name.tgz: $(stat -c %s "$OUT_DIR/$name.tgz") bytes"
  [[ $rc -eq 0 ]] || {
    log "FAILED: $name (rc=$rc)"
    return 1
  }
  return 0
}

LLAMA=(--preset llama3.2-1b --npl 8 --npp 128 --warmup 4 --steps 16 --with-stack --with-modules --gzip-level 9)
QWEN=(--preset qwen3-next-small --npl 1 --npp 32 --warmup 4 --steps 16)

# capture_fit NAME ARGS... : capture, and once more with 8 traced steps if the trace came out
# larger than what comes back
capture_fit() {
  local name="$1" rc=0
  shift
  capture "$name" "$@" || rc=$?
  if [[ $rc -eq 2 ]]; then
    log "retrying $name with 8 traced steps"
    rc=0
    capture "$name" "$@" --steps 8 || rc=$?
  fi
  [[ $rc -eq 0 ]] || fail "${name%.json.gz}"
}

if has_part llama; then
  capture_fit hf-llama3.2-1b-npl8-stack-cudnn.json.gz "${LLAMA[@]}" --sdpa-backend default
  capture_fit hf-llama3.2-1b-npl8-stack-math.json.gz "${LLAMA[@]}" --sdpa-backend math
fi
if has_part qwen; then
  capture_fit hf-qwen3next-small-npl1.json.gz "${QWEN[@]}" --with-stack --with-modules --gzip-level 9
fi
# spread: REPEATS (default 3) alternating pairs of the Qwen3-Next decode under torch.profiler
# and under gapscope-record with NVTX module ranges, for the run-to-run spread of each bucket
# that the "recording and torch.profiler agree" check needs (the two cannot share one process:
# both drive CUPTI).
if has_part spread; then
  for i in $(seq 1 "${REPEATS:-3}"); do
    capture_fit "hf-qwen3next-small-npl1-run$i.json.gz" "${QWEN[@]}" --with-stack --with-modules --gzip-level 9
    record "cupti-qwen3next-small-npl1-run$i.gst" --capture-range cudaProfilerApi -- \
      "${QWEN[@]}" --no-profiler --nvtx modules || fail "cupti-qwen3next-small-npl1-run$i"
  done
fi
if has_part rec; then
  record cupti-qwen3next-small-npl1.gst --capture-range cudaProfilerApi -- \
    "${QWEN[@]}" --no-profiler --nvtx modules || fail cupti-qwen3next-small-npl1
  record cupti-qwen3next-small-npl1-late.gst --capture-range cudaProfilerApi --collect late -- \
    "${QWEN[@]}" --no-profiler --nvtx none || fail cupti-qwen3next-small-npl1-late
fi

log ""
log "## summary"
"$PY" - "$LOG" <<'EOF' 2>&1 | tee "$LOG.summary" || log "summary failed"
import json, sys
rows = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if line.startswith("RESULT "):
        rows.append(json.loads(line[len("RESULT "):]))
fmt = "{:<42} {:>7} {:>8} {:>7} {:>8} {:>6} {:>8} {:>8} {:>8} {:>9} {:>8}"
print(fmt.format("capture", "gz_MiB", "events", "kernels", "py_func", "steps", "tok/s", "tok/s_tr",
                 "step_ms", "gap_ms", "busy%"))
for r in rows:
    name = (r.get("out") or "(no profiler) " + r.get("model", "?") + " nvtx=" + r.get("nvtx", "?"))
    name = name.rsplit("/", 1)[-1]
    g = r.get("step_gaps") or {}
    cells = [name[:42], f"{r['gz_bytes'] / 2**20:.2f}" if "gz_bytes" in r else "-",
             r.get("events", "-"), r.get("kernels", "-"), r.get("python_function", "-"),
             r.get("decode_step_gpu", r.get("steps", "-")), r.get("untraced_tok_s", "-"),
             r.get("traced_tok_s", "-"), r.get("traced_step_ms", "-"),
             g.get("max_gap_ms_median", "-"), g.get("gpu_busy_pct_median", "-")]
    print(fmt.format(*(str(c) for c in cells)))
    if r.get("sdpa_ops"):
        print("    sdpa ops:", json.dumps(r["sdpa_ops"]))
    if r.get("linear_attn_paths"):
        print("    DeltaNet path:", json.dumps(r["linear_attn_paths"], sort_keys=True))
    if r.get("deltanet_python_functions"):
        print("    DeltaNet python functions:", json.dumps(r["deltanet_python_functions"]))
EOF
cat "$LOG.summary" >>"$LOG"
rm -f "$LOG.summary"
log "gapscope-record: gapscope-record runs the script without torch.profiler; its RESULT lines are above"
log "failed captures: $FAILED ${FAILED_NAMES[*]:-}"
log "total wall: $(($(date +%s) - START)) s"
ls -l "$OUT_DIR" | tee -a "$LOG"
exit "$FAILED"
