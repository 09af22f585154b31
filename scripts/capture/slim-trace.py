#!/usr/bin/env python3
"""Slim a torch.profiler (Kineto) trace for the repository: drop the `python_function` events
that are not `nn.Module: ...` calls (with_stack records every Python frame; gapscope reads the
module calls, and those frames are most of the bytes). Everything else is kept as written, in
order. Writes gzip level 9 with no timestamp, so the output is reproducible.

  python3 scripts/capture/slim-trace.py IN.json.gz OUT.json.gz
"""
import gzip
import json
import sys


def main(src, dst):
    with gzip.open(src, "rb") as f:
        d = json.load(f)
    ev = d["traceEvents"]
    keep = [e for e in ev
            if e.get("cat") != "python_function" or str(e.get("name", "")).startswith("nn.Module: ")]
    d["traceEvents"] = keep
    with gzip.GzipFile(dst, "wb", compresslevel=9, mtime=0) as f:
        f.write(json.dumps(d).encode())
    print(f"{src}: {len(ev)} events -> {len(keep)}", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] == sys.argv[2]:
        sys.exit("usage: slim-trace.py IN.json.gz OUT.json.gz (two different paths)")
    main(sys.argv[1], sys.argv[2])
