#!/usr/bin/env python3
"""Per-kernel duration table of a batch-1 decode recorded with gapscope-record.

Export the recording first, then run this on the JSON:

  gapscope export run.gst --chrome run.json
  python3 scripts/engine/kernel-durations.py run.json [--tail 0.3]

Kernels are taken in start order; the last --tail fraction of them (decode steps only, after
the prefill and warm-up) is summarised. A GEMV is labelled by the kernel before it, which tells
the projections apart in a decode step (q|k|v after a norm, o_proj after attention, down_proj
after the SwiGLU GEMV). Prints p10 / median / p90 in microseconds, and the span and busy time.
Standard library only.
"""
import argparse
import collections
import json
import statistics
import sys


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", help="Chrome trace JSON written by `gapscope export --chrome`")
    p.add_argument("--tail", type=float, default=0.3, help="fraction of kernels summarised (default 0.3)")
    a = p.parse_args()
    try:
        with open(a.trace, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        print(f"kernel-durations.py: cannot read {a.trace}: {e}", file=sys.stderr)
        return 2
    ev = d["traceEvents"] if isinstance(d, dict) else d
    ks = sorted((e for e in ev if e.get("ph") == "X" and str(e.get("cat", "")).startswith("kernel")),
                key=lambda e: e["ts"])
    if not ks:
        print(f"kernel-durations.py: {a.trace} holds no kernels", file=sys.stderr)
        return 2
    sel = ks[-max(1, int(len(ks) * a.tail)):]
    span = sel[-1]["ts"] + sel[-1]["dur"] - sel[0]["ts"]
    busy = sum(e["dur"] for e in sel)
    print(f"{a.trace}: {len(sel)} of {len(ks)} kernels, span {span / 1000:.3f} ms, busy {busy / 1000:.3f} ms")
    lab = collections.defaultdict(list)
    for prev, e in zip(sel, sel[1:]):
        n = e["name"]
        if n.startswith("gemv"):
            n = f"{n} after {prev['name']}"
        lab[n].append(e["dur"])
    for n, v in sorted(lab.items(), key=lambda kv: -sum(kv[1])):
        v.sort()
        print(f"  {n:58s} n={len(v):5d} p10={v[len(v) // 10]:8.2f} med={statistics.median(v):8.2f} "
              f"p90={v[9 * len(v) // 10]:8.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
