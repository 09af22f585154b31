#!/usr/bin/env bash
# The Python package in CI (docs/PYTHON.md): build the wheel the way `pip install .` does,
# install it into a fresh virtual environment, run pytest over the API against the
# cargo-built `gapscope` binary, check the installed `gapscope` command, and execute the
# example notebook. Needs CARGO_TARGET_DIR (the build cache .ci/run uses) and a release
# build of the CLI there.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${CARGO_TARGET_DIR:?set CARGO_TARGET_DIR to the build cache}"
bin="$CARGO_TARGET_DIR/release/gapscope"
[ -x "$bin" ] || { echo "ci-python: $bin is missing: build the CLI first" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
py="$tmp/venv/bin/python"
"$py" -m pip install -q --no-cache-dir --upgrade pip

t0=$(date +%s)
# `pip wheel .` builds exactly what `pip install .` builds (maturin through PEP 517).
"$py" -m pip wheel -q --no-cache-dir --no-deps -w "$tmp/wheels" .
t1=$(date +%s)
wheel=$(ls "$tmp"/wheels/gapscope-*.whl)
echo "ci-python: built $(basename "$wheel") in $((t1 - t0)) s"

"$py" -m pip install -q --no-cache-dir "$wheel" pytest polars pandas altair nbclient nbformat ipykernel
"$tmp/venv/bin/gapscope" --help > /dev/null
"$py" -c "import gapscope; r = gapscope.report('traces/reference/hf-qwen3-0.6b-npl1.json.gz', quiet=True); print('ci-python: tpot median', r.steps.tpot_ms.median)"

GAPSCOPE_BIN="$bin" "$py" -m pytest -q -p no:cacheprovider python/tests
"$py" scripts/run-notebook.py examples/gapscope.ipynb
GAPSCOPE_BIN="$bin" "$py" -m pytest -q -p no:cacheprovider scripts/numerics
