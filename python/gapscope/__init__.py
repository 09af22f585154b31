"""gapscope: where a decode step's time goes, and how far it is from what the GPU allows.

The analysis is gapscope's own (the Rust analyzer the ``gapscope`` command runs); results
are typed views of the CLI's JSON and tables are ``pyarrow.Table``.

>>> import gapscope
>>> r = gapscope.report("traces/reference/hf-qwen3-0.6b-npl1.json.gz")
>>> r.steps.tpot_ms.median
>>> t = gapscope.open("traces/reference/hf-qwen3-0.6b-npl1.json.gz")
>>> t.kernels            # pyarrow.Table, with each kernel's bucket and step
>>> gapscope.diff(a, b).gap_ms
>>> gapscope.gate(baseline, current).passed
>>> gapscope.roofline("models/llama-3-8b.json", "h200").crossover_batch
>>> gapscope.buckets.explain("nvjet_sm90_tst_64x8").bucket
>>> gapscope.ranks(["rank0.json.gz", "rank1.json.gz"]).late_rank
"""
from ._native import (
    LimitError,
    RulesError,
    TraceError,
    TruncatedTraceError,
    UsageError,
    __version__,
)
from ._api import (
    Diff,
    Gate,
    Report,
    ReportSet,
    Roofline,
    Trace,
    diff,
    gate,
    open,
    report,
    roofline,
)
from ._ranks import Ranks, ranks
from ._records import BucketRow, Device, HostIdle, Record, Source, Stats, Steps
from . import buckets, numerics

__all__ = [
    "numerics",
    "open", "report", "diff", "gate", "roofline", "ranks", "buckets",
    "Trace", "Report", "ReportSet", "Diff", "Gate", "Roofline", "Ranks",
    "Record", "Stats", "BucketRow", "Device", "Source", "Steps", "HostIdle",
    "TraceError", "TruncatedTraceError", "LimitError", "RulesError", "UsageError",
    "__version__",
]
