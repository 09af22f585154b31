#!/usr/bin/env bash
# Capture gapscope's reference PyTorch-profiler (Kineto) traces on a GPU machine, in one go.
#
# Usage (from the repository root, on a machine with an NVIDIA GPU, torch and transformers):
#   scripts/capture/run-gpu.sh [OUTDIR]        # OUTDIR defaults to $OUT, else ./capture-out
#
# Writes into OUTDIR:
#   hf-qwen3-0.6b-npl1.json.gz     qwen3-0.6b, npl 1, npp 64, 4 warm-up, 16 traced steps (README demo)
#   hf-llama3.2-1b-cpuonly.json.gz llama3.2-1b, npl 1, npp 64, 2 warm-up, 4 traced steps, CPU activities only
#   hf-llama3-8b-npl1.json.gz      llama3-8b, npl 1, npp 128, 4 warm-up, 32 traced steps, record_shapes
#   capture.log                    devices, versions, exact commands, tok/s, event counts
#
# One failed capture is logged and the others still run; the exit status is the number of
# failed captures (0 when all succeeded).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT_DIR="${1:-${OUT:-$REPO/capture-out}}"
PY="${PYTHON:-python3}"
CAPTURE_TIMEOUT="${CAPTURE_TIMEOUT:-360}"
MAX_GZ_BYTES=16000000   # keep each trace under 16 MiB (what comes back from the GPU machine)
export PYTHONUNBUFFERED=1

mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/capture.log"
: >"$LOG"

log() { echo "$*" | tee -a "$LOG"; }

# Run a command, echoing it and its output into the log; never aborts the script.
logrun() {
  log "+ $*"
  local rc=0
  "$@" 2>&1 | tee -a "$LOG" || rc=$?
  return "$rc"
}

log "# gapscope reference trace capture"
log "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
log "host: $(uname -srm)"
log "repo commit: $(git -C "$REPO" rev-parse --verify -q HEAD 2>/dev/null || echo none)"
log "## nvidia-smi -L"
logrun nvidia-smi -L || log "nvidia-smi -L failed"
logrun nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv \
  || log "nvidia-smi query failed"
log "## versions"
logrun "$PY" -c 'import sys, torch, transformers; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "cudnn", torch.backends.cudnn.version()); print("transformers", transformers.__version__); print("device", torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0).multi_processor_count, "SMs")' \
  || log "version query failed"

FAILED=0
FAILED_NAMES=()

# capture NAME ARGS... : run hf-decode-trace.py --out OUT_DIR/NAME ARGS...
capture() {
  local name="$1"
  shift
  log ""
  log "## capture $name"
  log "command: python3 scripts/capture/hf-decode-trace.py $* --out \$OUT/$name"
  local t0 rc=0
  t0=$(date +%s)
  logrun timeout "$CAPTURE_TIMEOUT" "$PY" "$HERE/hf-decode-trace.py" "$@" --out "$OUT_DIR/$name" || rc=$?
  log "capture $name: rc=$rc, wall $(( $(date +%s) - t0 )) s"
  if [[ $rc -ne 0 ]]; then
    log "FAILED: $name (rc=$rc)"
    rm -f "$OUT_DIR/$name"
    return 1
  fi
  local size
  size=$(stat -c %s "$OUT_DIR/$name")
  log "size $name: $size bytes"
  if (( size > MAX_GZ_BYTES )); then
    log "TOO LARGE: $name is $size bytes (> $MAX_GZ_BYTES)"
    return 2
  fi
  return 0
}

# a. README demo trace: small.
capture hf-qwen3-0.6b-npl1.json.gz --preset qwen3-0.6b --npl 1 --npp 64 --warmup 4 --steps 16 \
  || { FAILED=$((FAILED + 1)); FAILED_NAMES+=(hf-qwen3-0.6b-npl1); }

# c. CPU activities only: a real trace with no GPU events.
capture hf-llama3.2-1b-cpuonly.json.gz --preset llama3.2-1b --npl 1 --npp 64 --warmup 2 --steps 4 --cpu-only \
  || { FAILED=$((FAILED + 1)); FAILED_NAMES+=(hf-llama3.2-1b-cpuonly); }

# b. Large trace with shapes (~340k events). If it comes out too large, retry with fewer steps.
rc8=0
capture hf-llama3-8b-npl1.json.gz --preset llama3-8b --npl 1 --npp 128 --warmup 4 --steps 32 --record-shapes \
  || rc8=$?
if [[ $rc8 -eq 2 ]]; then
  log "retrying hf-llama3-8b-npl1 with 24 traced steps and gzip level 9"
  rc8=0
  capture hf-llama3-8b-npl1.json.gz --preset llama3-8b --npl 1 --npp 128 --warmup 4 --steps 24 \
    --record-shapes --gzip-level 9 || rc8=$?
fi
if [[ $rc8 -ne 0 ]]; then
  FAILED=$((FAILED + 1))
  FAILED_NAMES+=(hf-llama3-8b-npl1)
fi

log ""
log "## summary"
"$PY" - "$LOG" <<'EOF' 2>&1 | tee -a "$LOG.summary" || log "summary failed"
import json, sys
rows = []
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    if line.startswith("RESULT "):
        r = json.loads(line[len("RESULT "):])
        rows.append(r)
fmt = "{:<34} {:>9} {:>9} {:>8} {:>7} {:>10} {:>10} {:>9}"
print(fmt.format("file", "gz_MiB", "events", "kernels", "steps", "tok/s", "tok/s_prof", "step_ms"))
for r in rows:
    name = r["out"].rsplit("/", 1)[-1]
    print(fmt.format(name, f"{r['gz_bytes'] / 2**20:.2f}", r["events"], r["kernels"], r["steps"],
                     r["untraced_tok_s"], r["traced_tok_s"], r["traced_step_ms"]))
EOF
cat "$LOG.summary" >>"$LOG"
rm -f "$LOG.summary"
log "failed captures: $FAILED ${FAILED_NAMES[*]:-}"
ls -l "$OUT_DIR" | tee -a "$LOG"
exit "$FAILED"
