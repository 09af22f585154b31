#!/usr/bin/env python3
"""Side-by-side benchmark: `gapscope report` vs HolisticTraceAnalysis 0.5.0 on one trace.

Runs the two tools alternately, REPEATS times each, on the same machine in one run, and
prints medians with min-max spread, the speed ratio and the peak-RSS ratio.

gapscope is timed as a whole process (start, gunzip, parse, bucket, steps, busy, output to
/dev/null). HTA is timed by bench/hta/hta-bench.py: parse (TraceAnalysis, gunzip included)
+ get_gpu_kernel_breakdown + get_temporal_breakdown, with HTA_DISABLE_NS_ROUNDING=1 (without
it HTA's temporal breakdown fails on these traces), excluding interpreter start and imports,
which favours HTA. Peak RSS of each is the child's ru_maxrss.

usage: compare-hta.py TRACE [--repeats 5] [--gapscope target/release/gapscope]
                            [--hta-python ~/.venvs/hta/bin/python] [--json-out FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run_gapscope(exe, trace):
    t0 = time.perf_counter()
    p = subprocess.Popen([exe, "report", "-q", trace], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"gapscope failed on {trace}")
    return {"wall_s": wall, "peak_rss_mib": ru.ru_maxrss / 1024}


def run_hta(py, trace):
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as out:
        subprocess.run([py, os.path.join(HERE, "hta", "hta-bench.py"), trace, "--repeats", "1",
                        "--no-ns-rounding", "--python", py, "--json-out", out.name],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        lines = [json.loads(l) for l in open(out.name) if l.strip()]
    r = [l for l in lines if not l.get("summary")][0]
    if not r.get("complete", True):
        sys.exit(f"HTA did not complete: {r}")
    return {"wall_s": r["hta_s"], "process_wall_s": r.get("process_wall_s"),
            "peak_rss_mib": r["peak_rss_mib"]}


def spread(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--gapscope", default="target/release/gapscope")
    ap.add_argument("--hta-python", default=os.path.expanduser("~/.venvs/hta/bin/python"))
    ap.add_argument("--json-out")
    a = ap.parse_args()
    run_gapscope(a.gapscope, a.trace)  # warm the page cache and the binary
    g, h = [], []
    for i in range(a.repeats):
        g.append(run_gapscope(a.gapscope, a.trace))
        h.append(run_hta(a.hta_python, a.trace))
        print(json.dumps({"repeat": i, "gapscope": g[-1], "hta": h[-1]}), flush=True)
    gs = spread([x["wall_s"] for x in g])
    hs = spread([x["wall_s"] for x in h])
    gr = spread([x["peak_rss_mib"] for x in g])
    hr = spread([x["peak_rss_mib"] for x in h])
    summary = {
        "trace": a.trace,
        "gapscope_wall_s": gs, "hta_wall_s": hs,
        "gapscope_rss_mib": gr, "hta_rss_mib": hr,
        "speedup_median": hs["median"] / gs["median"],
        "speedup_worst": hs["min"] / gs["max"],
        "rss_ratio_median": gr["median"] / hr["median"],
    }
    print(json.dumps({"summary": summary}))
    print(f"\n{a.trace}, {a.repeats} repeats each, alternating")
    print(f"  gapscope report : {gs['median']:.3f} s (min {gs['min']:.3f}, max {gs['max']:.3f}), "
          f"peak RSS {gr['median']:.0f} MiB")
    print(f"  HTA 0.5.0       : {hs['median']:.3f} s (min {hs['min']:.3f}, max {hs['max']:.3f}), "
          f"peak RSS {hr['median']:.0f} MiB")
    print(f"  speed-up        : {summary['speedup_median']:.1f}x median "
          f"(worst pairing {summary['speedup_worst']:.1f}x)")
    print(f"  RSS ratio       : {summary['rss_ratio_median']:.3f} (gapscope / HTA)")
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
