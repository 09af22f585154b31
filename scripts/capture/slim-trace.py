#!/usr/bin/env python3
"""Slim a torch.profiler (Kineto) trace for the repository: drop the `python_function` events
that are not `nn.Module: ...` calls (with_stack records every Python frame; gapscope reads the
module calls, and those frames are most of the bytes). Everything else is kept as written, in
order. Writes gzip level 9 with no timestamp, so the output is reproducible.

`--steps N` also cuts the trace after its first N steps: events that start after the end of
the last GPU annotation `decode_step_{N-1}` (tp-decode.py's) are dropped.

  python3 scripts/capture/slim-trace.py [--steps N] IN.json.gz OUT.json.gz
"""
import gzip
import json
import sys


def main(src, dst, steps=None):
    with gzip.open(src, "rb") as f:
        d = json.load(f)
    ev = d["traceEvents"]
    keep = [e for e in ev
            if e.get("cat") != "python_function" or str(e.get("name", "")).startswith("nn.Module: ")]
    if steps is not None:
        last = [e for e in ev if e.get("cat") == "gpu_user_annotation"
                and e.get("name") == f"decode_step_{steps - 1}"]
        if not last:
            sys.exit(f"{src}: no GPU annotation decode_step_{steps - 1}")
        cut = max(float(e["ts"]) + float(e.get("dur", 0)) for e in last)
        keep = [e for e in keep if "ts" not in e or float(e["ts"]) <= cut]
    d["traceEvents"] = keep
    with gzip.GzipFile(dst, "wb", compresslevel=9, mtime=0) as f:
        f.write(json.dumps(d).encode())
    print(f"{src}: {len(ev)} events -> {len(keep)}", file=sys.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    n = None
    if len(args) == 4 and args[0] == "--steps":
        n = int(args[1])
        args = args[2:]
    if len(args) != 2 or args[0] == args[1]:
        sys.exit("usage: slim-trace.py [--steps N] IN.json.gz OUT.json.gz (two different paths)")
    main(args[0], args[1], n)
