#!/usr/bin/env python3
"""The truth for traces/reference/graph-capture/: from eager.json.gz (graph-capture.py's eager
run of the same bs-8 decode step, with a record_function("truth: <module path> (<class>)")
that forward hooks put around every module call), the ordered kernels of the first eager step,
each with its innermost module (path and class) and innermost CPU op; and the counts that
show the capture-order mapping holds: capture_bs8.json.gz's launches between
cudaStreamBeginCapture and cudaStreamEndCapture, in order, against the eager step's launches
(the ops that issue them), and each graph launch's kernels in replay.json.gz, in GPU order,
against the eager step's kernel names.

  python3 scripts/capture/graph-capture-truth.py traces/reference/graph-capture > truth.json
"""
import collections
import gzip
import json
import sys

LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx",
            "cudaMemcpyAsync", "cudaMemsetAsync")


def load(d, n):
    with gzip.open(f"{d}/{n}", "rb") as f:
        return json.load(f)["traceEvents"]


def innermost(ranges, t, tid):
    c = [e for e in ranges if e["tid"] == tid and e["ts"] <= t <= e["ts"] + e["dur"]]
    return min(c, key=lambda e: e["dur"]) if c else None


def runtime(ev):
    return [e for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver")]


def main(d):
    eager = load(d, "eager.json.gz")
    step = next(e for e in eager if e.get("cat") == "user_annotation" and e["name"] == "eager_step_0")
    by_corr = {e["args"]["correlation"]: e for e in runtime(eager) if "correlation" in e.get("args", {})}
    truth = [e for e in eager if e.get("cat") == "user_annotation" and e["name"].startswith("truth: ")]
    ops = [e for e in eager if e.get("cat") == "cpu_op"]
    rows = []
    for k in eager:
        if k.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        launch = by_corr.get(k["args"].get("correlation"))
        if launch is None or not step["ts"] <= launch["ts"] <= step["ts"] + step["dur"]:
            continue
        t = innermost(truth, launch["ts"], launch["tid"])
        op = innermost(ops, launch["ts"], launch["tid"])
        path, cls = t["name"][len("truth: "):].rsplit(" (", 1)
        rows.append({"launch_ts": launch["ts"], "gpu_ts": k["ts"], "kernel": k["name"], "api": launch["name"],
                     "module_path": path, "module_class": cls.rstrip(")"), "op": op["name"] if op else None})
    rows.sort(key=lambda r: r["launch_ts"])
    gpu_order = [r["gpu_ts"] for r in rows] == sorted(r["gpu_ts"] for r in rows)
    cap = sorted(runtime(load(d, "capture_bs8.json.gz")), key=lambda e: e["ts"])
    begin = next(e["ts"] for e in cap if e["name"] == "cudaStreamBeginCapture")
    end = next(e["ts"] for e in cap if e["name"] == "cudaStreamEndCapture")
    cap_ev = load(d, "capture_bs8.json.gz")
    cap_ops = [e for e in cap_ev if e.get("cat") == "cpu_op"]
    slots = [e for e in cap if begin < e["ts"] < end and e["name"] in LAUNCHES]
    slot_ops = [(innermost(cap_ops, e["ts"], e["tid"]) or {}).get("name") for e in slots]
    replay = load(d, "replay.json.gz")
    graph_launches = [e for e in runtime(replay) if e["name"] == "cudaGraphLaunch"]
    gpu = [e for e in replay if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    same = 0
    for g in graph_launches:
        seq = sorted((k for k in gpu if k["args"].get("correlation") == g["args"]["correlation"]),
                     key=lambda k: k["ts"])
        same += [k["name"] for k in seq] == [r["kernel"] for r in rows]
    out = {
        "eager_step_kernels": len(rows),
        "eager_launch_order_is_gpu_order": gpu_order,
        "capture_launches": len(slots),
        "capture_launch_ops_equal_eager_ops": slot_ops == [r["op"] for r in rows],
        "capture_launch_apis_equal_eager_apis": [e["name"] for e in slots] == [r["api"] for r in rows],
        "graph_launches": len(graph_launches),
        "graph_launches_whose_kernels_equal_eager_kernels_in_order": same,
        "per_module_class": dict(collections.Counter(r["module_class"] for r in rows).most_common()),
        "per_layer": dict(sorted(collections.Counter(
            r["module_path"].split(".")[2] for r in rows if r["module_path"].startswith("model.layers.")).items())),
        "kernels": [{k: r[k] for k in ("kernel", "api", "module_path", "module_class", "op")} for r in rows],
    }
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: graph-capture-truth.py DIR")
    main(sys.argv[1])
