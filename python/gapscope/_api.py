"""The public functions: traces opened and reported by the analyzer, results as typed views
of the CLI's JSON and tables as Arrow."""
from __future__ import annotations

import builtins
import json
import os
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Union

from . import _native
from ._options import ANALYSIS, TRACE, PathLike, flags, fspath, paths
from ._progress import bar
from ._records import BucketRow, Device, HostIdle, Record, Source, Steps, Typed

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "Trace", "Report", "ReportSet", "Diff", "Gate", "Roofline",
    "open", "report", "diff", "gate", "roofline",
]


def _pa() -> Any:
    """pyarrow, imported when a table is first asked for: a script that only reads figures
    does not pay for it (about 60 MB and 100 ms)."""
    import pyarrow

    return pyarrow


def _table(native: Any) -> "pa.Table":
    """An Arrow table from the module, imported in place (the Arrow PyCapsule interface)."""
    return _pa().RecordBatchReader.from_stream(native).read_all()


def _rows_table(rows: List[Dict[str, Any]]) -> "pa.Table":
    """JSON rows as an Arrow table: one column per scalar field of the first row (nested
    objects and lists stay in the typed result)."""
    keys = [k for k, v in (rows[0].items() if rows else []) if not isinstance(v, (dict, list))]
    return _pa().table({k: [r.get(k) for r in rows] for k in keys})


def _polars(t: "pa.Table") -> Any:
    try:
        import polars as pl
    except ImportError:
        raise ImportError("to_polars() needs polars: pip install 'gapscope[polars]'") from None
    return pl.from_arrow(t)


def _pandas(t: "pa.Table") -> Any:
    try:
        import pandas  # noqa: F401
    except ImportError:
        raise ImportError("to_pandas() needs pandas: pip install 'gapscope[pandas]'") from None
    return t.to_pandas()


def _open_native(path: PathLike, options: Dict[str, Any], quiet: bool, keep_trace: bool) -> Any:
    p = fspath(path)
    return _native.open_trace(
        p, flags(options, OPEN), bar(os.path.basename(p), quiet), keep_trace
    )


# `open` and `report` also group by a key (`by="module"`), as `gapscope report --by` does.
OPEN = {**ANALYSIS, "by": "--by"}


def _run(argv: List[str]) -> Any:
    code, out, err = _native.run_command(argv)
    if err is not None:
        raise _native.TraceError(err)
    return code, json.loads(out)


class Report(Typed):
    """One trace's report: the same figures as ``gapscope report --json`` (one element of
    its ``reports``), with the per-step tables as Arrow.

    >>> r = gapscope.report("traces/reference/hf-qwen3-0.6b-npl1.json.gz")
    >>> r.steps.tpot_ms.median          # ms, over the decode steps
    >>> r.buckets[0].bucket, r.buckets[0].ms_per_step.median
    >>> r.step_buckets                  # pyarrow.Table: step x bucket (ns, calls, bytes)
    """

    __slots__ = ("_native",)
    schema_version: int
    source: Source
    steps: Steps
    buckets: List[BucketRow]
    prefill_buckets: List[BucketRow]
    devices: List[Device]
    host_idle: Optional[HostIdle]
    warnings: List[Record]
    plausibility: Record
    other: Record

    def __init__(self, data: Dict[str, Any], native: Any = None):
        super().__init__(data)
        object.__setattr__(self, "_native", native)

    @property
    def path(self) -> str:
        """The trace's path as given."""
        return self._data["source"]["path"]

    @property
    def step_table(self) -> "pa.Table":
        """Every step: number, phase, role, in_report, batch, tokens, GPU start/end, busy."""
        return _table(self._native.table("steps"))

    @property
    def step_buckets(self) -> "pa.Table":
        """Step x bucket: ns, calls, bytes, FLOPs (the per-step stacked chart's data)."""
        return _table(self._native.table("step_buckets"))

    @property
    def idle_gaps(self) -> "pa.Table":
        """Every GPU idle gap with its host-side cause."""
        return _table(self._native.table("idle_gaps"))

    @property
    def step_scopes(self) -> "pa.Table":
        """Host time per step and scope during GPU idle."""
        return _table(self._native.table("step_scopes"))

    @property
    def names(self) -> "pa.Table":
        """Every kernel and memop name's time over the report's steps."""
        return _table(self._native.table("names"))

    def bucket_table(self) -> "pa.Table":
        """The bucket table as Arrow: one row per bucket, medians and spread in ms/step."""
        return _bucket_table(self._data["buckets"])

    def to_polars(self) -> Any:
        """The bucket table as a polars DataFrame (needs polars)."""
        return _polars(self.bucket_table())

    def to_pandas(self) -> Any:
        """The bucket table as a pandas DataFrame (needs pandas)."""
        return _pandas(self.bucket_table())

    def _repr_html_(self) -> str:
        return self._native.html_fragment() if self._native is not None else repr(self)


def _bucket_table(rows: List[Dict[str, Any]], trace: Optional[str] = None) -> "pa.Table":
    cols: Dict[str, List[Any]] = {
        "bucket": [], "ms_per_step": [], "p10_ms": [], "p90_ms": [], "calls_per_step": [],
        "total_ms": [], "share_of_busy_pct": [], "share_of_step_pct": [], "top_kernel": [],
    }
    for r in rows:
        s = r["ms_per_step"]
        cols["bucket"].append(r["bucket"])
        cols["ms_per_step"].append(s["median"])
        cols["p10_ms"].append(s["p10"])
        cols["p90_ms"].append(s["p90"])
        cols["calls_per_step"].append(r["calls_per_step"])
        cols["total_ms"].append(r["total_ms"])
        cols["share_of_busy_pct"].append(r["share_of_busy_pct"])
        cols["share_of_step_pct"].append(r["share_of_step_pct"])
        cols["top_kernel"].append(r["top"][0]["name"] if r["top"] else None)
    t = _pa().table(cols)
    if trace is not None:
        t = t.add_column(0, "trace", _pa().array([trace] * t.num_rows, _pa().string()))
    return t


class ReportSet(Sequence[Report]):
    """Reports of several traces (a list or a glob), with long tables that carry a
    ``trace`` column: the "ms/step of attention across these 40 traces" question in one
    filter."""

    def __init__(self, reports: List[Report]):
        self._reports = reports

    def __getitem__(self, i: Any) -> Any:
        return self._reports[i]

    def __len__(self) -> int:
        return len(self._reports)

    def __iter__(self) -> Iterator[Report]:
        return iter(self._reports)

    def __repr__(self) -> str:
        return f"ReportSet({len(self)} traces)"

    def bucket_table(self) -> "pa.Table":
        """Every trace's bucket rows, with a ``trace`` column."""
        return _pa().concat_tables(
            [_bucket_table(r._data["buckets"], r.path) for r in self._reports]
        ) if self._reports else _bucket_table([], "")

    def step_buckets(self) -> "pa.Table":
        """Every trace's step x bucket table, with a ``trace`` column."""
        return self._long("step_buckets")

    def step_table(self) -> "pa.Table":
        """Every trace's step table, with a ``trace`` column."""
        return self._long("steps")

    def _long(self, name: str) -> "pa.Table":
        parts = []
        for r in self._reports:
            t = _table(r._native.table(name))
            parts.append(t.add_column(0, "trace", _pa().array([r.path] * t.num_rows, _pa().string())))
        return _pa().concat_tables(parts, promote_options="permissive")

    def to_polars(self) -> Any:
        """The long bucket table as a polars DataFrame."""
        return _polars(self.bucket_table())

    def to_pandas(self) -> Any:
        """The long bucket table as a pandas DataFrame."""
        return _pandas(self.bucket_table())

    def _repr_html_(self) -> str:
        return "".join(r._repr_html_() for r in self._reports)


class Trace:
    """An opened trace: its tables as ``pyarrow.Table`` (imported without a copy) and its
    report.

    Tables: ``kernels`` and ``memops`` (with the analysis's ``bucket`` and ``step``),
    ``launches``, ``markers``, ``samples`` (NVML), ``scopes`` (host scopes), and the analysis
    tables ``steps``, ``step_buckets``, ``idle_gaps``, ``step_scopes``, ``names``, plus
    ``strings``. Names are dictionary columns over the trace's strings; ``step`` is
    4294967295 outside every step. Times are ns on each column's clock (``gpu_*``,
    ``host_*``).
    """

    def __init__(self, native: Any):
        self._native = native
        self._cache: Dict[str, "pa.Table"] = {}
        self.report = _report_of(native)

    def __repr__(self) -> str:
        return f"gapscope.Trace({self._native.path!r}, {self.kernels.num_rows} kernels)"

    @property
    def path(self) -> str:
        return self._native.path

    @property
    def table_names(self) -> List[str]:
        return list(self._native.table_names)

    def table(self, name: str) -> "pa.Table":
        """One table by name (see ``table_names``)."""
        if name not in self._cache:
            self._cache[name] = _table(self._native.table(name))
        return self._cache[name]

    kernels = property(lambda self: self.table("kernels"), doc="Every kernel.")
    memops = property(lambda self: self.table("memops"), doc="Every memcpy/memset.")
    launches = property(lambda self: self.table("launches"), doc="Host launch calls.")
    markers = property(lambda self: self.table("markers"), doc="Step and range markers.")
    samples = property(lambda self: self.table("samples"), doc="NVML telemetry samples.")
    scopes = property(lambda self: self.table("scopes"), doc="Host scopes (ops, modules, NVTX).")
    steps = property(lambda self: self.table("steps"), doc="The analysis's steps.")
    step_buckets = property(lambda self: self.table("step_buckets"), doc="Step x bucket.")

    def to_polars(self, name: str = "kernels") -> Any:
        """A table as a polars DataFrame (needs polars)."""
        return _polars(self.table(name))

    def to_pandas(self, name: str = "kernels") -> Any:
        """A table as a pandas DataFrame (needs pandas)."""
        return _pandas(self.table(name))

    def _repr_html_(self) -> str:
        return self.report._repr_html_()


def _report_of(native: Any) -> Report:
    """The report of one opened trace (the CLI's JSON, `reports[0]`) with its tables."""
    return Report(json.loads(native.report_json)["reports"][0], native)


def open(path: PathLike, *, quiet: bool = False, **options: Any) -> Trace:  # noqa: A001
    """Imports and analyses one trace (Kineto ``.json``/``.json.gz``, nsys ``.sqlite``,
    native ``.gst``) and keeps its tables.

    Options are the CLI's analysis options as keywords: ``rules``, ``step_regex``,
    ``no_markers``, ``allow_truncated``, ``max_events``, ``max_steps``, ``top``,
    ``spec_metrics``, ``by``. ``quiet=True`` hides the progress bar.

    >>> t = gapscope.open("traces/reference/hf-qwen3-0.6b-npl1.json.gz")
    >>> t.kernels.group_by("bucket").aggregate([("gpu_end_ns", "count")])
    """
    return Trace(_open_native(path, options, quiet, True))


def report(
    path: Union[PathLike, Sequence[PathLike]], *, quiet: bool = False, **options: Any
) -> Union[Report, ReportSet]:
    """The report of one trace, or a :class:`ReportSet` for a list or a glob pattern.

    The figures are those of ``gapscope report --json`` with the same options, passed as
    keywords (``rules=``, ``step_regex=``, ``by="module"``, ``top=``, ``no_markers=True``,
    ``allow_truncated=True``, ``max_events=``, ``max_steps=``, ``spec_metrics=``). Only the
    report and the per-step tables are kept, not the trace.

    >>> r = gapscope.report("traces/reference/hf-qwen3-0.6b-npl1.json.gz")
    >>> r.steps.tpot_ms.median
    >>> rs = gapscope.report("traces/reference/hf-*.json.gz")
    >>> rs.bucket_table().filter(pa.compute.equal(rs.bucket_table()["bucket"], "attention"))
    """
    many = paths(path)
    if many is None:
        return _report_of(_open_native(path, options, quiet, False))
    return ReportSet([_report_of(_open_native(p, options, quiet, False)) for p in many])


class Diff(Typed):
    """Where the per-step gap between two traces lives (``gapscope diff --json``)."""

    __slots__ = ("_html",)
    a: Record
    b: Record
    gap_ms: float
    gap_is_meaningful: bool
    buckets: List[Record]
    groups: List[Record]
    residual_ms: float
    idle: Record
    structural: Record
    top_moved: List[Record]

    def __init__(self, data: Dict[str, Any], html: Optional[str] = None):
        super().__init__(data)
        object.__setattr__(self, "_html", html)

    def _repr_html_(self) -> str:
        if self._html is None:
            return repr(self)
        # `diff --html`'s page in a frame of its own: its styles stay inside.
        import html as _h

        return ('<iframe style="width:100%;height:900px;border:0" sandbox srcdoc="'
                + _h.escape(self._html, quote=True) + '"></iframe>')

    def bucket_table(self) -> "pa.Table":
        """One row per bucket: A and B ms/step, the delta and its share of the gap."""
        rows = self._data["buckets"]
        return _rows_table(rows)


DIFF = {"what_if": "--what-if", "measured": "--measured", "hw": "--hw", "weights": "--weights",
        "list": "--list", "allow_implausible": "--allow-implausible", **ANALYSIS}


def diff(a: PathLike, b: PathLike, *, quiet: bool = True, **options: Any) -> Diff:
    """``gapscope diff A B``: the gap between two traces by bucket, groups, idle split,
    structural changes. Options: ``what_if``, ``measured`` (a list of ``LEVER=TRACE``),
    ``hw``, ``weights``, ``list``, ``allow_implausible`` and the analysis options.

    >>> d = gapscope.diff("slow.json.gz", "fast.json.gz")
    >>> d.gap_ms, d.bucket_table()
    """
    import tempfile

    argv = ["diff", fspath(a), fspath(b), "--json"] + (["-q"] if quiet else [])
    argv += flags(options, DIFF)
    if options.get("what_if"):
        # A what-if diff has no page (the CLI refuses --html with --what-if).
        _, data = _run(argv)
        return Diff(data)
    with tempfile.TemporaryDirectory(prefix="gapscope-diff-") as tmp:
        page = os.path.join(tmp, "diff.html")
        _, data = _run(argv + ["--html", page])
        with builtins.open(page, encoding="utf-8") as f:
            return Diff(data, f.read())


class Gate(Typed):
    """The CI gate's verdict (``gapscope gate --json``): ``verdict`` is ``pass``,
    ``regression``, ``incomparable`` … and ``passed`` is what the exit code says."""

    __slots__ = ("_code",)
    verdict: str
    baseline: str
    current: str
    steps: List[Record]
    buckets: List[Record]
    structural: List[Record]
    incomparable: List[Record]
    warnings: List[Record]

    def __init__(self, data: Dict[str, Any], code: int):
        super().__init__(data)
        object.__setattr__(self, "_code", code)

    @property
    def exit_code(self) -> int:
        """What ``gapscope gate`` exits with: 0 pass, 1 regression."""
        return self._code

    @property
    def passed(self) -> bool:
        return self._code == 0


GATE = {"policy": "--policy", "allow_incomparable": "--allow-incomparable", "junit": "--junit",
        "baseline_history": "--baseline-history", "db": "--db", **TRACE}


def gate(
    baseline: Optional[PathLike], current: PathLike, *, quiet: bool = True, **options: Any
) -> Gate:
    """``gapscope gate --baseline B --current C``. ``policy`` is a gate.toml path; also
    ``allow_incomparable``, ``junit`` (a file to write), ``baseline_history`` (N runs,
    with ``baseline=None``), ``db`` and the analysis options. An error (a broken run, an
    unreadable trace) raises :class:`TraceError`, as the CLI exits 2.

    >>> g = gapscope.gate("base.json.gz", "pr.json.gz")
    >>> g.passed, g.verdict
    """
    argv = ["gate", "--current", fspath(current), "--json"] + (["-q"] if quiet else [])
    if baseline is not None:
        argv += ["--baseline", fspath(baseline)]
    code, data = _run(argv + flags(options, GATE))
    return Gate(data, code)


class Roofline(Typed):
    """Floors per batch and the crossover batch (``gapscope roofline --json``)."""

    __slots__ = ()
    model: Record
    hardware: Record
    weights: str
    ctx: int
    crossover_batch: float
    floors: List[Record]
    measured: List[Record]

    def floor_table(self) -> "pa.Table":
        """One row per batch: the floors (ms) and what bounds each."""
        rows = self._data["floors"]
        return _rows_table(rows)


ROOFLINE = {"hw_profile": "--hw-profile", "weights": "--weights", "ctx": "--ctx",
            "trace": "--trace", "trace_batch": "--trace-batch", "svg": "--svg",
            "spec_k": "--spec-k", **TRACE}


def roofline(
    model: PathLike, hw: Optional[str] = None, *, batch: Optional[Sequence[int]] = None,
    quiet: bool = True, **options: Any,
) -> Roofline:
    """``gapscope roofline --model CONFIG --hw GPU``: weight-read, KV-read and compute floors
    per batch. ``batch`` is a list of batches; ``trace`` a trace (or list) to place;
    ``weights``, ``ctx``, ``hw_profile``, ``trace_batch``, ``svg``, ``spec_k`` as the CLI.

    >>> rf = gapscope.roofline("models/llama-3-8b.json", "h200")
    >>> rf.crossover_batch, rf.floor_table()
    """
    argv = ["roofline", "--model", fspath(model), "--json"] + (["-q"] if quiet else [])
    if hw is not None:
        argv += ["--hw", hw]
    if batch is not None:
        argv += ["--batch", ",".join(str(int(b)) for b in batch)]
    _, data = _run(argv + flags(options, ROOFLINE))
    return Roofline(data)
