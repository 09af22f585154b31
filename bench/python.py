#!/usr/bin/env python3
"""The Python package against the CLI (issue 35), measured side by side in one run.

1. Time: `gapscope.report(TRACE)` in this interpreter against `gapscope report -q --json
   TRACE` as a process, alternating, REPEATS times each: medians, spread, and their ratio.
   The whole Python process (interpreter start, `import gapscope`, the report) is timed too,
   for scripts that run once.
2. Memory on a synthetic trace of N kernels (`synth_trace N OUT`), each figure the peak RSS
   of its own process as GNU time reports it (Debian's `time`; os.wait4 from this
   interpreter would count its own pages, which a vfork'd child holds until exec):
   - the same work: `gapscope.report()` against `gapscope report`, both reading the
     columns the analysis needs;
   - every column: `gapscope.open()` and `.kernels` against `gapscope import` (every column,
     no analysis) and `gapscope export --tables` (every column, the analysis, Parquet).

Run with the Python that has the package installed:
usage: python.py TRACE [--repeats 7] [--kernels 10000000] [--mem-repeats 3] [--dir /tmp]
                 [--gapscope target/release/gapscope] [--synth target/release/examples/synth_trace]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

import gapscope


def peak_mib(cmd):
    """The peak RSS of `cmd` in MiB, from GNU time."""
    p = subprocess.run(["/usr/bin/time", "-f", "%M", *cmd], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{p.stderr}")
    return int(p.stderr.strip().splitlines()[-1]) / 1024


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
    ap.add_argument("--mem-repeats", type=int, default=3)
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
    if not os.path.exists("/usr/bin/time"):
        sys.exit("the memory figures need GNU time (/usr/bin/time; Debian package `time`)")
    synth = os.path.join(a.dir, f"gapscope-py-synth-{a.kernels}.gst")
    if not os.path.exists(synth):
        child([a.synth, str(a.kernels), synth])
    py = sys.executable
    out_dir = os.path.join(a.dir, "gapscope-py-bench-out")
    mem = {"kernels": a.kernels, "repeats": a.mem_repeats}
    runs = {k: [] for k in ("cli_report", "py_report", "cli_import", "cli_export_tables",
                            "py_open_kernels", "py_import_only")}
    for _ in range(a.mem_repeats):
        runs["cli_report"].append(peak_mib([a.gapscope, "report", "-q", "--max-events", "0", synth]))
        runs["py_report"].append(peak_mib([py, "-c", "import gapscope; gapscope.report(%r, "
                                           "max_events=0, quiet=True)" % synth]))
        shutil.rmtree(out_dir, ignore_errors=True)
        runs["cli_import"].append(peak_mib([a.gapscope, "import", "-q", "--max-events", "0",
                                            synth, "-o", out_dir + ".gst"]))
        shutil.rmtree(out_dir + ".gst", ignore_errors=True)
        runs["cli_export_tables"].append(peak_mib([a.gapscope, "export", "-q", "--max-events",
                                                   "0", synth, "--tables", out_dir]))
        shutil.rmtree(out_dir, ignore_errors=True)
        runs["py_open_kernels"].append(peak_mib([py, "-c", "import gapscope; t = gapscope.open("
                                                 "%r, max_events=0, quiet=True); k = t.kernels; "
                                                 "assert k.num_rows >= %d" % (synth, a.kernels)]))
        runs["py_import_only"].append(peak_mib([py, "-c", "import gapscope, pyarrow"]))
    mem.update({k: spread(v) for k, v in runs.items()})
    med = {k: statistics.median(v) for k, v in runs.items()}
    mem["py_report_over_cli_report"] = med["py_report"] / med["cli_report"]
    mem["py_open_over_cli_import"] = med["py_open_kernels"] / med["cli_import"]
    mem["py_open_over_cli_export_tables"] = med["py_open_kernels"] / med["cli_export_tables"]
    res["memory_mib"] = mem
    print(json.dumps(res, indent=2))


if __name__ == "__main__":
    main()
