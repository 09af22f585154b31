#!/usr/bin/env bash
# Peak resident memory of report, diff, gate and the explorer on the largest inputs the
# default limits accept (issue 31, class 10). Each figure: median of RUNS runs, with min and
# max, in MB (GNU time's "maximum resident set size"). Needs GNU time and, for the explorer,
# xvfb-run. Inputs are generated into WORK (a few hundred MB).
#
#   bash bench/memory/peak-rss.sh [WORK] [RUNS]      (release binaries in $TARGET/release)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
work=${1:-/var/tmp/gapscope-memory}
runs=${2:-3}
target=${CARGO_TARGET_DIR:-$repo/target}
gs=$target/release/gapscope
gui=$target/release/gapscope-gui
mkdir -p "$work"
n=2990000   # just under the default --max-events of 3,000,000
gen() { [ -s "$work/$1" ] || python3 "$here/make-large-trace.py" "$work/$1" --events $n "${@:2}"; }
gen decode.json.gz
gen hf-like.json.gz --like "$repo/traces/reference/hf-qwen3-0.6b-npl1.json.gz"
[ -s "$work/same-time.json.gz" ] || python3 - "$work/same-time.json.gz" $n <<'PY'
import gzip, sys
k = b'{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":1}'
with gzip.open(sys.argv[1], "wb", 6) as f:
    n = int(sys.argv[2]); f.write(b'{"traceEvents":[')
    for i in range(0, n, 100000):
        m = min(100000, n - i); f.write(b",".join([k] * m)); f.write(b"," if i + m < n else b"")
    f.write(b"]}")
PY
[ -s "$work/many-steps.json.gz" ] || python3 - "$work/many-steps.json.gz" $((n / 2)) <<'PY'
import gzip, sys
with gzip.open(sys.argv[1], "wt", 3) as f:
    f.write('{"traceEvents":[')
    for i in range(int(sys.argv[2])):
        t = 1000 + i * 10.0
        f.write(("," if i else "") + '{"ph":"X","cat":"gpu_user_annotation","name":"decode_step","pid":0,"tid":7,"ts":%.1f,"dur":9,"args":{"device":0,"stream":7}},{"ph":"X","cat":"kernel","name":"gemv","pid":0,"tid":7,"ts":%.1f,"dur":5,"args":{"device":0,"stream":7,"correlation":%d}}' % (t, t + 1, i + 1))
    f.write("]}")
PY
[ -d "$work/decode.gst" ] || "$gs" import -q "$work/decode.json.gz" -o "$work/decode.gst"

peak() { # prints the median, min and max peak RSS in MB of "$@" over $runs runs
  local v=()
  for _ in $(seq "$runs"); do
    /usr/bin/time -f "%M" -o "$work/rss" "$@" >/dev/null 2>"$work/err" || true
    v+=($(( $(tail -1 "$work/rss") / 1024 )))
  done
  printf '%s\n' "${v[@]}" | sort -n | awk '{a[NR]=$1} END {printf "%d (%d-%d)", a[int((NR+1)/2)], a[1], a[NR]}'
  grep -q 'error' "$work/err" && printf ' [%s]' "$(head -c 120 "$work/err")"
  return 0
}
echo "input | events | report MB | diff MB | gate MB | explorer MB"
echo "---|---:|---:|---:|---:|---:"
for f in same-time.json.gz decode.json.gz hf-like.json.gz many-steps.json.gz decode.gst; do
  p=$work/$f
  r=$(peak "$gs" report -q "$p")
  d=$(peak "$gs" diff -q "$p" "$p")
  g=$(peak "$gs" gate -q --baseline "$p" --current "$p")
  e=$(peak xvfb-run -a -s "-screen 0 1920x1080x24" "$gui" "$p" --view timeline --screenshot "$work/shot.png" --size 1600x900)
  echo "$f | $n | $r | $d | $g | $e"
done
