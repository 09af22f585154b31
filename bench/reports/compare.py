#!/usr/bin/env python3
"""Compares two captures of `gapscope report --json` (bench/reports/capture.sh), field by field.

Usage: python3 bench/reports/compare.py BEFORE AFTER [--markdown]

Every leaf of every report is compared: numbers within a relative 1e-9 (the JSON writer's
last digit), everything else exactly. Fields present on one side only are listed apart: a
redesign that turns prose into enums renames fields without changing a figure. The exit
status is 1 when any figure differs, so a run can gate on it.
"""
import json
import math
import os
import sys


def leaves(v, path=""):
    if isinstance(v, dict):
        for k, x in v.items():
            yield from leaves(x, f"{path}.{k}" if path else k)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from leaves(x, f"{path}[{i}]")
    else:
        yield path, v


def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if math.isnan(a) and math.isnan(b):
            return True
        return a == b or abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    return a == b


def load(d, name):
    with open(os.path.join(d, name)) as f:
        text = f.read()
    return json.loads(text) if text.strip() else None


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    markdown = "--markdown" in sys.argv
    before, after = args
    names = sorted(n for n in os.listdir(before) if n.endswith(".json"))
    figures_differ = 0
    rows = []
    for n in names:
        rc = [open(os.path.join(d, n[:-5] + ".rc")).read().strip() for d in (before, after)]
        a, b = load(before, n), load(after, n)
        la = dict(leaves(a)) if a is not None else {}
        lb = dict(leaves(b)) if b is not None else {}
        changed = [k for k in la if k in lb and not same(la[k], lb[k])]
        numeric = [k for k in changed if isinstance(la[k], (int, float)) and not isinstance(la[k], bool)]
        gone = [k for k in la if k not in lb]
        new = [k for k in lb if k not in la]
        if rc[0] != rc[1] or numeric:
            figures_differ += 1
        rows.append((n[:-5], rc, len(la), numeric, [k for k in changed if k not in numeric], gone, new))
    if markdown:
        print("| trace | exit before/after | fields | figures changed | text changed | only before | only after |")
        print("|---|---|---|---|---|---|---|")
    for name, rc, total, numeric, text, gone, new in rows:
        if markdown:
            print(f"| {name} | {rc[0]}/{rc[1]} | {total} | {len(numeric)} | {len(text)} | {len(gone)} | {len(new)} |")
        else:
            print(f"{name}: exit {rc[0]}/{rc[1]}, {total} fields, {len(numeric)} figures changed, "
                  f"{len(text)} texts changed, {len(gone)} only before, {len(new)} only after")
            for k in numeric[:20]:
                print(f"    figure {k}")
            for k in text[:20]:
                print(f"    text   {k}")
            for k in gone[:20]:
                print(f"    gone   {k}")
            for k in new[:20]:
                print(f"    new    {k}")
    print(f"\n{len(rows)} traces, {figures_differ} with a figure or exit code changed")
    return 1 if figures_differ else 0


if __name__ == "__main__":
    sys.exit(main())
