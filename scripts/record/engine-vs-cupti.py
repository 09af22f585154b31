#!/usr/bin/env python3
"""Engine event timing vs CUPTI, per bucket of the decode steps (issue 4, "Our engine").

  gapscope join eng.gst eng-rec.gst -o joined.gst
  python3 scripts/record/engine-vs-cupti.py --gapscope target/release/gapscope eng.gst joined.gst [eng2.gst joined2.gst ...]

Each pair is one recording: the engine's own trace (per-launch CUDA events, calibrated event
latency taken off) and the same run recorded by gapscope-record, with the engine's metadata
joined on. For both, `gapscope report --json` gives each decode bucket's mean ms per decode
step over the same steps; the script prints both, the difference in percent and a verdict
against --tol (default 5%). Buckets under --min-ms ms/step in both traces are listed but not
judged. Exit 0 when every judged bucket of every pair is within --tol, 1 otherwise, 2 on bad
input.
"""
import argparse
import json
import subprocess
import sys


def decode_buckets(gapscope: str, path: str) -> dict:
    out = subprocess.run([gapscope, "report", "--json", "-q", path], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"engine-vs-cupti.py: error: gapscope report {path}: {out.stderr.strip()}")
    rep = json.loads(out.stdout)["reports"][0]
    return {b["bucket"]: b["ms_per_step"]["mean"] for b in rep.get("buckets") or []}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("pairs", nargs="+", help="ENGINE.gst JOINED.gst, one pair per recording")
    p.add_argument("--gapscope", default="target/release/gapscope")
    p.add_argument("--tol", type=float, default=5.0, help="allowed |difference| in percent")
    p.add_argument("--min-ms", type=float, default=0.001, help="smallest bucket judged, ms/step")
    a = p.parse_args(argv)
    if len(a.pairs) % 2:
        print("engine-vs-cupti.py: error: traces must come in pairs (engine, joined)", file=sys.stderr)
        return 2
    ok = True
    for i in range(0, len(a.pairs), 2):
        eng, cup = decode_buckets(a.gapscope, a.pairs[i]), decode_buckets(a.gapscope, a.pairs[i + 1])
        print(f"## {a.pairs[i]} vs {a.pairs[i + 1]}")
        print(f"{'bucket':14s} {'engine':>9s} {'CUPTI':>9s} {'diff':>7s}  verdict (ms per decode step, mean)")
        for b in sorted(set(eng) | set(cup), key=lambda k: -cup.get(k, 0.0)):
            e, c = eng.get(b, 0.0), cup.get(b, 0.0)
            if max(e, c) < a.min_ms:
                continue
            d = 100.0 * (e - c) / c if c > 0 else float("inf")
            good = abs(d) <= a.tol
            ok &= good
            print(f"{b:14s} {e:9.4f} {c:9.4f} {d:+6.1f}%  {'within' if good else 'OUTSIDE'} {a.tol:g}%")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
