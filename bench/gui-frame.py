#!/usr/bin/env python3
"""Explorer frame benchmark: runs the headless `frame` bench REPEATS times on one trace and
prints each run's JSON line, then the median and min-max over runs of: open to first frame,
open to kernel table, per-frame median at full / mid / deep zoom, peak RSS.

usage: gui-frame.py TRACE [--repeats 5] [--frames 60] [--kernels] [--bench PATH]
(--kernels: also the kernel table's frames, steady and with the filter or sort changed)
(build the bench first: cargo bench -p gapscope-gui --bench frame --no-run)
"""
import argparse
import glob
import json
import os
import statistics
import subprocess
import sys


def newest_bench():
    target = os.environ.get("CARGO_TARGET_DIR", "target")
    c = [p for p in glob.glob(f"{target}/release/deps/frame-*") if not p.endswith(".d")]
    if not c:
        sys.exit("no frame bench binary: cargo bench -p gapscope-gui --bench frame --no-run")
    return max(c, key=os.path.getmtime)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--kernels", action="store_true")
    ap.add_argument("--bench")
    a = ap.parse_args()
    bench = a.bench or newest_bench()
    runs = []
    for _ in range(a.repeats):
        extra = ["--kernels"] if a.kernels else []
        out = subprocess.run([bench, a.trace, "--frames", str(a.frames)] + extra, check=True,
                             capture_output=True, text=True).stdout
        print(out.strip(), flush=True)
        runs.append(json.loads(out))

    def line(name, vals, unit, fmt="{:.3f}"):
        print(f"{name:28} {fmt.format(statistics.median(vals))} {unit} "
              f"({fmt.format(min(vals))}-{fmt.format(max(vals))}, n={len(vals)})")

    print(f"\n{runs[0]['kernels']:,} kernels, {runs[0]['steps']:,} steps, {runs[0]['size']}")
    line("open to first frame", [r["open_to_first_frame_s"] for r in runs], "s")
    line("open to kernel table", [r["open_to_kernel_table_s"] for r in runs], "s")
    for z in ("full", "mid", "deep"):
        line(f"frame median, {z} zoom", [r[z]["median_ms"] for r in runs], "ms")
        line(f"frame p90, {z} zoom", [r[z]["p90_ms"] for r in runs], "ms")
    if a.kernels:
        print(f"kernel table: {runs[0]['kernel_names']:,} names")
        for mode in ("steady", "filter", "sort"):
            line(f"kernels frame, {mode}", [r[f"kernels_{mode}"]["median_ms"] for r in runs], "ms")
    line("peak RSS", [r["peak_rss_mib"] for r in runs], "MiB", "{:.0f}")


if __name__ == "__main__":
    main()
