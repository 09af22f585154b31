#!/usr/bin/env bash
# Records llama-batched-bench decode with gapscope-record, and runs it unrecorded too (the
# recorder's cost), for each npl, CUDA graphs on/off and flash attention on/off. Runs on the
# GPU machine. Each configuration is its own process, so each recording holds one prefill
# and NTG decode steps (per sequence batch).
#
# usage: scripts/llamacpp/record.sh BENCH MODEL OUTDIR RECORD [NPL_LIST] [NTG] [REPEATS]
#   BENCH: llama-batched-bench; RECORD: gapscope-record; NPL_LIST default "1 32".
#   GRAPHS and FA (environment) narrow the matrix: default "on off" each.
#   DEADLINE (environment, epoch seconds): no configuration starts after it; the ones left
#   are listed as skipped (a device call has a hard time limit, and what was recorded
#   must still come back).
set -euo pipefail
bench=$1
model=$2
out=$3
record=$4
npls=${5:-"1 32"}
ntg=${6:-64}
repeats=${7:-1}
mkdir -p "$out"
name=$(basename "$model" .gguf)
for npl in $npls; do
  for graphs in ${GRAPHS:-on off}; do
    for fa in ${FA:-on off}; do
      for r in $(seq 1 "$repeats"); do
        tag="$name-npl$npl-graphs-$graphs-fa-$fa-r$r"
        if [ -n "${DEADLINE:-}" ] && [ "$(date +%s)" -ge "$DEADLINE" ]; then
          echo "record: $tag: skipped (past the call's deadline)"
          continue
        fi
        envs=()
        [ "$graphs" = off ] && envs=(GGML_CUDA_DISABLE_GRAPHS=1)
        args=(-m "$model" -c $(( npl * (128 + ntg) + 256 )) -b 2048 -ub 512
              -npp 128 -ntg "$ntg" -npl "$npl" -ngl 99 -fa "$fa" --output-format jsonl)
        # Unrecorded first, then recorded: the same process image, the same settings.
        env "${envs[@]}" "$bench" "${args[@]}" > "$out/$tag.plain.jsonl" 2> "$out/$tag.plain.log" \
          || { echo "record: $tag: llama-batched-bench failed" >&2; tail -5 "$out/$tag.plain.log" >&2; exit 1; }
        env "${envs[@]}" "$record" -o "$out/$tag.gst" -- "$bench" "${args[@]}" \
          > "$out/$tag.rec.jsonl" 2> "$out/$tag.rec.log" \
          || { echo "record: $tag: recording failed" >&2; tail -5 "$out/$tag.rec.log" >&2; exit 1; }
        echo "record: $tag: plain $(grep -o '"t_tg": [0-9.]*' "$out/$tag.plain.jsonl" | head -1), recorded $(grep -o '"t_tg": [0-9.]*' "$out/$tag.rec.jsonl" | head -1)"
      done
    done
  done
done
