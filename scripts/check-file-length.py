#!/usr/bin/env python3
"""Fails when a Rust source file is longer than the limit without a recorded reason.

The limit and the reasons live in the workspace manifest, beside the clippy lints:

    [workspace.metadata.file-length]
    max-lines = 700
    [workspace.metadata.file-length.reasons]
    "analyzer/src/gate.rs" = "why this file is long"

A listed file that is no longer over the limit is an error too, so the list stays the list
of long files. `.ci/run` calls this script.
"""
import pathlib
import subprocess
import sys
import tomllib

root = pathlib.Path(__file__).resolve().parent.parent
meta = tomllib.loads((root / "Cargo.toml").read_text())["workspace"]["metadata"]["file-length"]
limit = meta["max-lines"]
reasons = meta.get("reasons", {})

files = subprocess.run(
    ["git", "ls-files", "*.rs"], cwd=root, capture_output=True, text=True, check=True
).stdout.split()
errors = []
long = set()
for f in files:
    if f.startswith("fuzz/") and "/target/" in f:
        continue
    if not (root / f).is_file():
        continue
    n = sum(1 for _ in open(root / f, encoding="utf-8", errors="replace"))
    if n > limit:
        long.add(f)
        if not reasons.get(f, "").strip():
            errors.append(f"{f}: {n} lines, over {limit}, and no reason in Cargo.toml "
                          "[workspace.metadata.file-length.reasons]: split it or say why not")
for f in sorted(set(reasons) - long):
    errors.append(f"{f}: listed as long in Cargo.toml but is not over {limit} lines "
                  "(or not tracked): remove it from the list")
for e in errors:
    print(f"check-file-length: {e}", file=sys.stderr)
if errors:
    sys.exit(1)
print(f"check-file-length: {len(files)} files, {len(long)} over {limit} lines, each with a reason")
