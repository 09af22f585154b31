#!/usr/bin/env python3
"""Per-bucket GPU time of two groups of traces of the same workload, with the run-to-run
spread of each group, judged the way the seeds judged every figure: a difference counts only
when it is larger than the spread.

  python3 scripts/record/compare-buckets.py --steps 16 \
      --a hf-rec1.gst hf-rec2.gst hf-rec3.gst --b hf-prof1.json.gz hf-prof2.json.gz hf-prof3.json.gz

For each trace, `gapscope report --json` gives every bucket's total kernel time over the
whole trace (decode and prefill steps together, so step detection cannot move time between
them); divided by --steps it is ms per decode step. Per bucket the script prints each
group's median, min and max over its traces, the difference of the medians, and the spread
(the larger of the two groups' max - min). Verdict per bucket: "agree" when |difference| <=
spread, else "DIFFER". Exit 0 when every bucket with at least --min-ms ms/step agrees, 1
otherwise, 2 on bad input. --gapscope names the binary (default: target/release/gapscope).
"""
import argparse
import json
import os
import subprocess
import sys


def bucket_totals(gapscope: str, path: str) -> dict:
    out = subprocess.run([gapscope, "report", "--json", "-q", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"compare-buckets.py: error: gapscope report {path}: {out.stderr.strip()}")
    rep = json.loads(out.stdout)["reports"][0]
    tot = {}
    for sect in ("buckets", "prefill_buckets"):
        for b in rep.get(sect) or []:
            s = b["ms_per_step"]
            tot[b["bucket"]] = tot.get(b["bucket"], 0.0) + s["mean"] * s["n"]
    return tot


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--a", nargs="+", required=True, help="traces of group A")
    p.add_argument("--b", nargs="+", required=True, help="traces of group B")
    p.add_argument("--steps", type=int, required=True, help="decode steps each trace holds")
    p.add_argument("--min-ms", type=float, default=0.005, help="buckets below this ms/step are listed but not judged")
    p.add_argument("--gapscope", default=os.environ.get("GAPSCOPE", "target/release/gapscope"))
    p.add_argument("--names", default="A,B", help="labels of the two groups")
    a = p.parse_args(argv)
    na, nb = a.names.split(",")
    ga = [bucket_totals(a.gapscope, t) for t in a.a]
    gb = [bucket_totals(a.gapscope, t) for t in a.b]
    buckets = sorted({k for g in ga + gb for k in g}, key=lambda k: -max(g.get(k, 0) for g in ga + gb))
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print(f"ms per decode step (total kernel time / {a.steps}); spread = larger max-min of the two groups")
    print(f"{'bucket':<16} {na+' median':>12} {'(min-max)':>19} {nb+' median':>12} {'(min-max)':>19} {'diff':>9} {'spread':>9}  verdict")
    ok = True
    for k in buckets:
        xa = [g.get(k, 0.0) / a.steps for g in ga]
        xb = [g.get(k, 0.0) / a.steps for g in gb]
        d = med(xa) - med(xb)
        spread = max(max(xa) - min(xa), max(xb) - min(xb))
        judged = max(med(xa), med(xb)) >= a.min_ms
        v = ("agree" if abs(d) <= spread else "DIFFER") if judged else "(too small to judge)"
        ok &= (not judged) or abs(d) <= spread
        print(f"{k:<16} {med(xa):12.4f} ({min(xa):8.4f}-{max(xa):8.4f}) {med(xb):12.4f} ({min(xb):8.4f}-{max(xb):8.4f}) {d:+9.4f} {spread:9.4f}  {v}")
    print("verdict:", "all judged buckets agree within the run-to-run spread" if ok else "some buckets differ by more than the spread")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
