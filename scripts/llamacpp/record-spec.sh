#!/usr/bin/env bash
# Records llama.cpp's speculative decoding (llama-speculative-simple: a draft model proposes up
# to K tokens, the target verifies them in one batch) with gapscope-record. Runs on the GPU
# machine. Greedy (temperature 0), the draft always proposes K (n-min 0, p-min 0), verbose so
# the log holds one `accepted A/D draft tokens` line per verify (the truth gapscope's steps are
# checked against) and the draft's `statistics` line.
#
# usage: scripts/llamacpp/record-spec.sh SPEC TARGET DRAFT OUTDIR RECORD TAG [K] [N_PREDICT]
#   GRAPHS=off disables CUDA graphs; BACKEND_SAMPLING=off keeps the draft's sampling on the
#   host (llama.cpp's default offloads it). DEADLINE as in record.sh.
set -euo pipefail
spec=$1 target=$2 draft=$3 out=$4 record=$5 tag=$6
k=${7:-4}
n=${8:-128}
mkdir -p "$out"
if [ -n "${DEADLINE:-}" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then
  echo "record-spec: $tag: skipped (past the call's deadline)"
  exit 0
fi
envs=()
[ "${GRAPHS:-on}" = off ] && envs=(GGML_CUDA_DISABLE_GRAPHS=1)
extra=()
[ "${BACKEND_SAMPLING:-on}" = off ] && extra=(--no-spec-draft-backend-sampling)
prompt="The speculative decoding benchmark reads this prompt of about sixty-four bytes."
args=(-m "$target" -md "$draft" -ngl 99 -ngld 99 -c 1024 -fa on --temp 0 --seed 1
      --spec-type draft-simple --spec-draft-n-max "$k" --spec-draft-n-min 0 --spec-draft-p-min 0 -n "$n" -p "$prompt" -v
      "${extra[@]}")
t0=$(date +%s%N)
env "${envs[@]}" "$record" -o "$out/$tag.gst" -- "$spec" "${args[@]}" > "$out/$tag.log" 2>&1 \
  || { echo "record-spec: $tag: failed" >&2; tail -15 "$out/$tag.log" >&2; exit 1; }
wall=$(( ($(date +%s%N) - t0) / 1000000 ))
steps=$(grep -c "accepted [0-9]*/[0-9]* draft tokens" "$out/$tag.log" || true)
echo "record-spec: $tag: $steps verify steps, wall $wall ms"
grep -E "n_drafted|n_accept|accept +=|statistics" "$out/$tag.log" | sed 's/^/  /' || true
