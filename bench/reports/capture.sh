#!/usr/bin/env bash
# Writes `gapscope report --json` of every reference and corpus trace into DIR, one file each.
# Usage: bash bench/reports/capture.sh GAPSCOPE_BINARY DIR
# Compare two captures with: python3 bench/reports/compare.py BEFORE AFTER
set -euo pipefail
bin=${1:?usage: capture.sh GAPSCOPE_BINARY DIR}
out=${2:?usage: capture.sh GAPSCOPE_BINARY DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
traces=()
for t in "$root"/traces/reference/* "$root"/traces/reference/*/*.gst "$root"/traces/corpus/*; do
  case "$t" in
    *.gst|*.json.gz|*.json|*.sqlite) traces+=("$t") ;;
  esac
done
for t in "${traces[@]}"; do
  name=$(basename "$t")
  parent=$(basename "$(dirname "$t")")
  case "$parent" in reference|corpus) ;; *) name="$parent-$name" ;; esac
  # A trace the tool refuses is part of the comparison too: its exit code and error line.
  set +e
  "$bin" report --json --allow-truncated "$t" >"$out/$name.json" 2>"$out/$name.err"
  echo $? >"$out/$name.rc"
  set -e
done
echo "${#traces[@]} traces -> $out"
