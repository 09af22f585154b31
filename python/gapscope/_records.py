"""Typed views of the analyzer's JSON: the same figures as the CLI's ``--json``.

Every result object mirrors one JSON object of the CLI's output. Fields named in a class's
annotations are typed (and listed by ``help()``); any other key of the JSON is still an
attribute, so nothing the CLI prints is out of reach. ``to_dict()`` gives the JSON back.
"""
from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any, Dict, List, Optional

__all__ = ["Record", "Stats", "TopKernel", "BucketRow", "Device", "Source", "Steps", "HostIdle"]


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class Record:
    """A JSON object as attributes: ``r.steps.tpot_ms.median``; ``r["key"]`` works too."""

    __slots__ = ("_data",)

    def __init__(self, data: Dict[str, Any]):
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        data = object.__getattribute__(self, "_data")
        try:
            return _wrap(data[name])
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no field {name!r}; fields: {', '.join(data)}"
            ) from None

    def __getitem__(self, name: str) -> Any:
        return _wrap(self._data[name])

    def __contains__(self, name: object) -> bool:
        return name in self._data

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("results are read-only")

    def __dir__(self) -> List[str]:
        return sorted(set(self._data) | set(super().__dir__()))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return self._data == other._data
        return NotImplemented

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={_short(v)}" for k, v in self._data.items())
        return f"{type(self).__name__}({inner})"

    def keys(self) -> List[str]:
        """The JSON object's keys, in the CLI's order."""
        return list(self._data)

    def to_dict(self) -> Dict[str, Any]:
        """The JSON object, exactly as the CLI's ``--json`` has it."""
        return _copy(self._data)


def _copy(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _copy(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copy(x) for x in v]
    return v


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return "{…}"
    if isinstance(v, list):
        return f"[{len(v)} items]" if v else "[]"
    s = repr(v)
    return s if len(s) <= 40 else s[:37] + "…"


class Typed(Record):
    """A :class:`Record` whose common fields are declared (typed) in the class body."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # help() lists the declared fields: annotations alone would not show.
        own = getattr(cls, "__annotations__", {})
        if own:
            lines = "\n".join(f"    {k}: {v if isinstance(v, str) else getattr(v, '__name__', v)}"
                              for k, v in own.items())
            cls.__doc__ = (cls.__doc__ or "").rstrip() + (
                "\n\nFields (any other key of the CLI's JSON is an attribute too):\n" + lines + "\n"
            )

    def __getattr__(self, name: str) -> Any:
        data = object.__getattribute__(self, "_data")
        hint = _hints(type(self)).get(name)
        if hint is None:
            return Record.__getattr__(self, name)
        return _convert(data.get(name), hint)


_HINTS: Dict[type, Dict[str, Any]] = {}


def _hints(cls: type) -> Dict[str, Any]:
    h = _HINTS.get(cls)
    if h is None:
        mod = sys.modules[cls.__module__].__dict__
        h = {}
        for klass in reversed(cls.__mro__):
            if klass in (object, Record, Typed):
                continue
            for name, ann in getattr(klass, "__annotations__", {}).items():
                h[name] = eval(ann, mod) if isinstance(ann, str) else ann  # noqa: S307
        _HINTS[cls] = h
    return h


def _convert(value: Any, hint: Any) -> Any:
    if value is None:
        return None
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union:
        inner = [a for a in args if a is not type(None)]
        return _convert(value, inner[0]) if len(inner) == 1 else _wrap(value)
    if origin in (list, List) and isinstance(value, list):
        return [_convert(v, args[0]) if args else _wrap(v) for v in value]
    if isinstance(hint, type) and issubclass(hint, Record) and isinstance(value, dict):
        return hint(value)
    return _wrap(value)


def fields_of(cls: type) -> List[str]:
    """The declared (typed) fields of a result class."""
    return list(_hints(cls))


class Stats(Typed):
    """Spread of one figure over steps (ms): n, min, p10, median, mean, p90, p99, max, cv."""

    __slots__ = ()
    n: int
    min: float
    p10: float
    median: float
    mean: float
    p90: float
    p99: float
    max: float
    cv: float


class TopKernel(Typed):
    """One of a bucket's largest kernel names."""

    __slots__ = ()
    name: str
    calls: int
    ms: float


class BucketRow(Typed):
    """One bucket over the report's steps."""

    __slots__ = ()
    bucket: str
    calls: int
    calls_per_step: float
    ms_per_step: Stats
    total_ms: float
    share_of_busy_pct: float
    share_of_step_pct: float
    top: List[TopKernel]


class Device(Typed):
    """GPU busy time of one device (interval union)."""

    __slots__ = ()
    device: int
    busy_ns: int
    busy_pct: float
    kernel_busy_ns: int
    kernel_busy_pct: float
    span_ns: int


class Source(Typed):
    """Where the trace came from and what it holds."""

    __slots__ = ()
    path: str
    format: str
    gpus: List[Record]
    kernels: int
    memops: int
    launches: int
    markers: int
    scopes: int
    truncated: bool
    defects: List[Record]
    notes: List[str]


class Steps(Typed):
    """The steps found and their timing (TPOT is over pure decode steps)."""

    __slots__ = ()
    kind: str
    source: str
    decode_steps: int
    prefill_steps: int
    mixed_steps: int
    tpot_ms: Optional[Stats]
    decode_span_ms: Optional[Stats]
    decode_busy_pct: float
    launch_gap_ms_per_step: float
    launch_gap_pct: float
    host_gap_ms_per_step: float
    host_gap_pct: float
    batch_size: Optional[int]
    worst_stall: Optional[Record]


class HostIdle(Typed):
    """Why the GPU sat idle: the host side of each gap, per step."""

    __slots__ = ()
    steps: int
    gaps: int
    linked_pct: float
    inside_steps: Record
    between_steps: Record
    lever: Optional[Record]
    top_scopes: List[Record]
