#!/usr/bin/env python3
"""Proves the native format opens without gapscope: reads every golden fixture and a
freshly written trace with pyarrow and checks row counts against the manifest's batches.

usage: check-arrow-readable.py TRACE.gst [TRACE.gst ...]
"""
import json
import os
import sys

import pyarrow as pa

TABLES = ["strings", "kernels", "memops", "launches", "markers", "samples"]


def check(path):
    manifest = json.load(open(os.path.join(path, "manifest.json")))
    assert manifest["format"] == "gapscope-trace", manifest["format"]
    rows = {}
    for t in TABLES:
        with pa.ipc.open_stream(os.path.join(path, f"{t}.arrows")) as r:
            batches = list(r)
        if manifest.get("complete"):
            assert len(batches) == manifest["batches"][t], (t, len(batches))
        rows[t] = sum(b.num_rows for b in batches)
    names = pa.ipc.open_stream(os.path.join(path, "strings.arrows")).read_all()
    assert names.column("value")[0].as_py() == "", "string id 0 must be empty"
    kernels = pa.ipc.open_stream(os.path.join(path, "kernels.arrows")).read_all()
    for col in ("gpu_start_ns", "gpu_end_ns", "name", "stream", "correlation"):
        assert col in kernels.schema.names, col
    print(f"pyarrow {pa.__version__} reads {path}: {rows}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        check(p)
