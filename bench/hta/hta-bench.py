#!/usr/bin/env python3
"""Time HolisticTraceAnalysis (HTA) on one Kineto trace, for comparison with gapscope.

Usage:
  python3 bench/hta/hta-bench.py TRACE [--repeats N] [--decompress] [--json-out FILE]

Each repeat runs in a fresh Python subprocess, which:
  1. imports hta (timed separately, as import_s; not part of hta_s);
  2. runs TraceAnalysis(trace_files={0: "rank-0.json[.gz]"}, trace_dir=TMPDIR)   -> parse_s
     (HTA reads the file, builds its DataFrame, aligns and filters it);
  3. runs get_gpu_kernel_breakdown(visualize=False)                            -> kernel_breakdown_s
  4. runs get_temporal_breakdown(visualize=False)                              -> temporal_breakdown_s
hta_s = parse_s + kernel_breakdown_s + temporal_breakdown_s (time.perf_counter, wall time).

The parent reads the subprocess's peak resident set size from os.wait4() (ru_maxrss of that
child; it includes any of its own children it waited for) and also records the subprocess's
whole wall time (interpreter start and imports included) as process_wall_s.

HTA wants a trace directory holding per-rank files. The parent makes a temporary directory with
a symlink `rank-0.json.gz` (or `rank-0.json`) to TRACE and passes trace_files={0: name} and
trace_dir=that directory. HTA 0.5.0 reads .gz itself (gzip.open), so by default the gunzip is
inside parse_s, as a user would see it. With --decompress the parent writes an uncompressed
`rank-0.json` into the temporary directory first, outside the timing.

Output: one JSON line per repeat (prefix none), then a JSON summary line with "summary": true
holding median/min/max of hta_s, parse_s and peak_rss_mib. --json-out also writes all of it to
a file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def child(trace_dir: str, fname: str) -> int:
    import resource

    t0 = time.perf_counter()
    import hta  # noqa: F401
    from hta.trace_analysis import TraceAnalysis

    import_s = time.perf_counter() - t0

    # Each step is timed on its own; a step that raises is recorded (failed_step, error) and
    # the later steps still run where they can, so a partial result is still visible.
    info: dict = {}
    kb = tb = None
    t0 = time.perf_counter()
    ta = TraceAnalysis(trace_files={0: fname}, trace_dir=trace_dir)
    t1 = time.perf_counter()
    try:
        kb = ta.get_gpu_kernel_breakdown(visualize=False)
    except Exception as e:
        info.setdefault("failed_step", "get_gpu_kernel_breakdown")
        info["kernel_breakdown_exception"] = f"{type(e).__name__}: {e}"[:500]
    t2 = time.perf_counter()
    try:
        tb = ta.get_temporal_breakdown(visualize=False)
    except Exception as e:
        info.setdefault("failed_step", "get_temporal_breakdown")
        info["temporal_breakdown_exception"] = f"{type(e).__name__}: {e}"[:500] or type(e).__name__
    t3 = time.perf_counter()

    # A few results, so a run that did nothing is visible.
    try:
        df = ta.t.get_trace(0)
        info["trace_rows"] = int(len(df))
    except Exception as e:  # pragma: no cover - diagnostics only
        info["trace_rows_error"] = repr(e)
    if kb is not None:
        kernel_type_df, kernel_df = kb
        info["kernel_types"] = int(len(kernel_type_df))
        info["kernel_rows"] = int(len(kernel_df))
    if tb is not None:
        row = tb.iloc[0].to_dict()
        info["temporal_breakdown"] = {k: (float(v) if hasattr(v, "__float__") else str(v))
                                      for k, v in row.items()}

    import pandas

    out = {
        "import_s": round(import_s, 4),
        "parse_s": round(t1 - t0, 4),
        "kernel_breakdown_s": round(t2 - t1, 4),
        "temporal_breakdown_s": round(t3 - t2, 4),
        "hta_s": round(t3 - t0, 4),
        "complete": "failed_step" not in info,
        "hta_disable_ns_rounding": os.environ.get("HTA_DISABLE_NS_ROUNDING", "unset"),
        "self_maxrss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "hta_version": getattr(sys.modules.get("hta"), "__version__", None) or _hta_version(),
        "pandas_version": pandas.__version__,
        "python": sys.version.split()[0],
        **info,
    }
    print("HTA_CHILD_RESULT " + json.dumps(out), flush=True)
    return 0


def _hta_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("HolisticTraceAnalysis")
    except Exception:
        return None


def prepare_dir(trace: str, decompress: bool) -> tuple[str, str, float]:
    tmp = tempfile.mkdtemp(prefix="hta_bench_")
    t0 = time.perf_counter()
    src = os.path.abspath(trace)
    if decompress and src.endswith(".gz"):
        fname = "rank-0.json"
        with gzip.open(src, "rb") as fi, open(os.path.join(tmp, fname), "wb") as fo:
            shutil.copyfileobj(fi, fo, length=1 << 22)
    else:
        fname = "rank-0.json.gz" if src.endswith(".gz") else "rank-0.json"
        os.symlink(src, os.path.join(tmp, fname))
    return tmp, fname, time.perf_counter() - t0


def run_one(trace_dir: str, fname: str, python: str, verbose: bool, no_ns_rounding: bool) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if no_ns_rounding:
        env["HTA_DISABLE_NS_ROUNDING"] = "1"
    err_path = os.path.join(trace_dir, "child.stderr")
    with open(err_path, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [python, os.path.abspath(__file__), "--child", trace_dir, fname],
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
        out = proc.stdout.read().decode("utf-8", "replace")
        proc.stdout.close()
        _, status, ru = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
    res: dict = {"process_wall_s": round(wall, 4), "peak_rss_mib": round(ru.ru_maxrss / 1024, 1),
                 "rc": proc.returncode}
    for line in out.splitlines():
        if line.startswith("HTA_CHILD_RESULT "):
            res.update(json.loads(line[len("HTA_CHILD_RESULT "):]))
    if verbose or proc.returncode != 0 or "hta_s" not in res or not res.get("complete", True):
        with open(err_path, "rb") as f:
            tail = f.read()[-4000:].decode("utf-8", "replace")
        sys.stderr.write(tail)
        if "hta_s" not in res:
            res["error"] = "child produced no result; stderr tail above"
    return res


def stats(xs: list[float]) -> dict:
    return {"median": round(statistics.median(xs), 4), "min": round(min(xs), 4), "max": round(max(xs), 4)}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        return child(argv[1], argv[2])
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("trace", help="Kineto trace, .json or .json.gz")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--decompress", action="store_true",
                   help="gunzip into the temp dir first (outside the timing)")
    p.add_argument("--python", default=sys.executable, help="interpreter with HTA installed")
    p.add_argument("--json-out", help="also write the per-repeat lines and the summary here")
    p.add_argument("--verbose", action="store_true", help="show the child's stderr (HTA logs)")
    p.add_argument("--keep-tmp", action="store_true")
    p.add_argument("--no-ns-rounding", action="store_true",
                   help="set HTA_DISABLE_NS_ROUNDING=1 in the child (HTA otherwise rounds float "
                   "ts up and ends down to whole microseconds, which can give sub-microsecond "
                   "kernels negative durations)")
    args = p.parse_args(argv)

    trace_dir, fname, prep_s = prepare_dir(args.trace, args.decompress)
    rows = []
    try:
        for i in range(args.repeats):
            r = run_one(trace_dir, fname, args.python, args.verbose, args.no_ns_rounding)
            r = {"repeat": i, "trace": args.trace, "input": fname, **r}
            rows.append(r)
            print(json.dumps(r), flush=True)
    finally:
        if not args.keep_tmp:
            shutil.rmtree(trace_dir, ignore_errors=True)
    ok = [r for r in rows if "hta_s" in r and r.get("rc") == 0]
    complete = [r for r in ok if r.get("complete")]
    summary = {
        "summary": True,
        "trace": args.trace,
        "trace_bytes": os.path.getsize(args.trace),
        "input": fname,
        "decompressed_outside_timing": bool(args.decompress and args.trace.endswith(".gz")),
        "prepare_s": round(prep_s, 4),
        "repeats": args.repeats,
        "ok": len(ok),
        "complete": len(complete),
        "hta_disable_ns_rounding": bool(args.no_ns_rounding),
    }
    if ok:
        summary["hta_s"] = stats([r["hta_s"] for r in ok])
        summary["parse_s"] = stats([r["parse_s"] for r in ok])
        summary["kernel_breakdown_s"] = stats([r["kernel_breakdown_s"] for r in ok])
        summary["temporal_breakdown_s"] = stats([r["temporal_breakdown_s"] for r in ok])
        summary["process_wall_s"] = stats([r["process_wall_s"] for r in ok])
        summary["peak_rss_mib"] = stats([r["peak_rss_mib"] for r in ok])
        for k in ("hta_version", "pandas_version", "python", "trace_rows", "failed_step",
                  "temporal_breakdown_exception", "kernel_breakdown_exception"):
            if ok[0].get(k) is not None:
                summary[k] = ok[0].get(k)
    print(json.dumps(summary), flush=True)
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
            f.write(json.dumps(summary) + "\n")
    return 0 if len(complete) == args.repeats else 1


if __name__ == "__main__":
    sys.exit(main())
