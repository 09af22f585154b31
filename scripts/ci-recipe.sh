#!/usr/bin/env bash
# Runs the CI recipe's gate step (examples/ci/gate.sh) on bundled traces, as the workflow
# examples/ci/github-actions.yml would: an A/A run must pass (exit 0), a run whose launch
# gaps grew must fail (exit 1), and both must leave their summary, JUnit report, diff and
# report pages, with the summary appended to $GITHUB_STEP_SUMMARY.
# GAPSCOPE: the command to run (default: the release build in $CARGO_TARGET_DIR).
set -uo pipefail
cd "$(dirname "$0")/.."
export GAPSCOPE=${GAPSCOPE:-${CARGO_TARGET_DIR:-target}/release/gapscope}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ref=traces/reference
fail() { echo "ci-recipe: FAILED: $*" >&2; exit 1; }

check_outputs() {
  local dir=$1
  for f in gate.md junit.xml diff.md diff.html report.html; do
    [ -s "$dir/$f" ] || fail "$dir/$f is missing or empty"
  done
  python3 -c "import sys, xml.dom.minidom as m; m.parse(sys.argv[1])" "$dir/junit.xml" \
    || fail "$dir/junit.xml is not XML"
}

export GITHUB_STEP_SUMMARY="$tmp/summary.md"
base=$ref/hf-llama3.2-1b-npl8-stack-math.json.gz
slow=$ref/hf-llama3.2-1b-npl8-stack-cudnn.json.gz

bash examples/ci/gate.sh "$base" "$base" "$tmp/aa"
rc=$?
[ "$rc" -eq 0 ] || fail "the A/A gate exited $rc, not 0"
check_outputs "$tmp/aa"

bash examples/ci/gate.sh "$base" "$slow" "$tmp/regression"
rc=$?
[ "$rc" -eq 1 ] || fail "the gate on a slower run exited $rc, not 1"
check_outputs "$tmp/regression"
grep -q "launch gaps" "$tmp/regression/gate.md" || fail "the regression summary does not name the launch gaps"
grep -q "failure" "$tmp/regression/junit.xml" || fail "the regression's JUnit report has no failure"

[ "$(grep -c "^## gapscope gate" "$GITHUB_STEP_SUMMARY")" -eq 2 ] \
  || fail "the step summary does not hold both gates"
echo "ci-recipe: ok (A/A passes, the slower run fails with its outputs written)"
