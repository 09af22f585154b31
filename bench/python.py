#!/usr/bin/env python3
"""The Python package against the CLI (issue 35), measured side by side in one run.

1. Time: `gapscope.report(TRACE)` in this interpreter against `gapscope report -q --json
   TRACE` as a process, alternating, REPEATS times each: medians, spread, and their ratio.
   The whole Python process (interpreter start, `import gapscope`, the report) is timed too,
   for scripts that run once.
2. Memory: the peak RSS (os.wait4) of a process that opens a synthetic trace of N kernels
   (`synth_trace N OUT`) and reads `.kernels` in Python, against `gapscope report -q
   --max-events 0` on it.

Run with the Python that has the package installed:
usage: python.py TRACE [--repeats 7] [--kernels 10000000] [--dir /tmp]
                 [--gapscope target/release/gapscope] [--synth target/release/examples/synth_trace]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import gapscope


def child(cmd):
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    out, err = p.stdout.read(), p.stderr.read().decode(errors="replace")
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{err}")
    return wall, ru.ru_maxrss / 1024, out


def spread(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--kernels", type=int, default=10_000_000)
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--gapscope", default="target/release/gapscope")
    ap.add_argument("--synth", default="target/release/examples/synth_trace")
    a = ap.parse_args()

    # 1. Time, alternating; the first round of each warms the page cache and is dropped.
    cli, api, proc = [], [], []
    for i in range(a.repeats + 1):
        w, _, out = child([a.gapscope, "report", "-q", "--json", a.trace])
        t0 = time.perf_counter()
        r = gapscope.report(a.trace, quiet=True)
        t_api = time.perf_counter() - t0
        w_proc, _, _ = child([sys.executable, "-c",
                              f"import gapscope; gapscope.report({a.trace!r}, quiet=True)"])
        if i == 0:
            assert r.to_dict() == json.loads(out)["reports"][0], "API and CLI disagree"
            continue
        cli.append(w)
        api.append(t_api)
        proc.append(w_proc)
    res = {"trace": a.trace, "cli_s": spread(cli), "api_s": spread(api), "python_process_s": spread(proc)}
    res["api_over_cli"] = res["api_s"]["median"] / res["cli_s"]["median"]
    res["process_over_cli"] = res["python_process_s"]["median"] / res["cli_s"]["median"]

    # 2. Memory on a synthetic trace of N kernels.
    synth = os.path.join(a.dir, f"gapscope-py-synth-{a.kernels}.gst")
    if not os.path.exists(synth):
        child([a.synth, str(a.kernels), synth])
    code = ("import gapscope; t = gapscope.open(%r, max_events=0, quiet=True); "
            "k = t.kernels; print(k.num_rows, k.nbytes)") % synth
    _, rss_cli, _ = child([a.gapscope, "report", "-q", "--max-events", "0", synth])
    _, rss_py, out = child([sys.executable, "-c", code])
    _, rss_base, _ = child([sys.executable, "-c", "import gapscope, pyarrow"])
    rows, nbytes = map(int, out.split())
    res["memory"] = {"kernels": rows, "kernels_table_mib": nbytes / 2**20,
                     "cli_peak_rss_mib": rss_cli, "python_peak_rss_mib": rss_py,
                     "python_import_only_rss_mib": rss_base, "python_over_cli": rss_py / rss_cli}
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
