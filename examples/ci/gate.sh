#!/usr/bin/env bash
# The gate step of a CI job (examples/ci/github-actions.yml runs it; so can any CI):
#
#   gate.sh BASELINE CURRENT OUT_DIR
#
# writes into OUT_DIR
#   gate.md      the gate's Markdown summary (appended to $GITHUB_STEP_SUMMARY when set)
#   junit.xml    the gate's JUnit report, for the CI's test view
#   diff.md      where the step-time gap between the two traces lives, by bucket
#   diff.html    the same as a self-contained page, to upload as an artifact
#   report.html  the current trace's report page
# and exits as the gate does: 0 pass, 1 regression, 2 error or inconclusive. The diff and the
# report are written whatever the verdict, so a failed job still shows why.
# GAPSCOPE (default: gapscope on the PATH) is the command to run.
set -uo pipefail
if [ $# -ne 3 ]; then
  echo "usage: gate.sh BASELINE CURRENT OUT_DIR" >&2
  exit 2
fi
baseline=$1 current=$2 out=$3
gapscope=${GAPSCOPE:-gapscope}
mkdir -p "$out" || exit 2

"$gapscope" gate -q --baseline "$baseline" --current "$current" \
  --markdown --junit "$out/junit.xml" > "$out/gate.md"
verdict=$?
# A diff of traces the gate could not compare may be refused too; say so and go on.
if ! "$gapscope" diff -q "$baseline" "$current" --markdown --html "$out/diff.html" > "$out/diff.md"; then
  echo "gate.sh: no diff (see above)" >&2
fi
"$gapscope" report -q "$current" --html "$out/report.html" > /dev/null || echo "gate.sh: no report page" >&2

if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
  { cat "$out/gate.md"; echo; cat "$out/diff.md" 2>/dev/null; } >> "$GITHUB_STEP_SUMMARY"
fi
echo "gate.sh: gate exited $verdict; outputs in $out"
exit "$verdict"
