#!/usr/bin/env python3
"""Per-kernel engine event timing vs CUPTI (issue 4, "Our engine"), launch by launch.

Pairs each kernel name's launches in the engine's own trace with the same name's joined
kernels in the recording (those that received engine metadata from `gapscope join`), in time
order, and prints per kernel name: launches, mean engine and CUPTI durations, and the mean,
median and SD of engine - CUPTI in ns. Names whose launch counts differ (a cuBLAS call that is
several recorded kernels) are listed with their counts and not compared.

    python3 scripts/record/engine-vs-cupti-kernels.py JOINED.gst ENGINE.gst

Needs pyarrow (reads the native trace's Arrow IPC tables directly).
"""
import argparse
import collections
import statistics as st
import sys

import pyarrow.ipc as ipc


def load(d, table):
    path = f"{d}/{table}.arrows"
    try:
        return ipc.open_file(path).read_all().to_pylist()
    except Exception:
        return ipc.open_stream(path).read_all().to_pylist()


def durations(trace, joined_only):
    strings = {r["id"]: r["value"] for r in load(trace, "strings")}
    out = collections.defaultdict(list)
    for k in sorted(load(trace, "kernels"), key=lambda k: k["gpu_start_ns"]):
        if joined_only and not strings.get(k["op"]):
            continue
        out[strings[k["name"]]].append(k["gpu_end_ns"] - k["gpu_start_ns"])
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("joined", help="the recording after `gapscope join` (.gst directory)")
    p.add_argument("engine", help="the engine's own trace of the same run (.gst directory)")
    a = p.parse_args()
    eng, rec = durations(a.engine, False), durations(a.joined, True)
    for name in sorted(eng, key=lambda n: -len(eng[n])):
        if len(eng[name]) != len(rec.get(name, [])):
            print(f"{name[:28]:28s} engine {len(eng[name])} launches, recorded {len(rec.get(name, []))}: not compared")
            continue
        d = [x - y for x, y in zip(eng[name], rec[name])]
        print(f"{name[:28]:28s} n={len(d):5d} eng={st.mean(eng[name]):8.0f} cupti={st.mean(rec[name]):8.0f} "
              f"diff mean={st.mean(d):6.0f} median={st.median(d):6.0f} sd={st.pstdev(d):5.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
