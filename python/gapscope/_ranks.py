"""Several traces as the ranks of one run (tensor parallelism): ``gapscope report`` over
the ranks, with its multi-rank section."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Sequence, Union

from ._api import Report, _rows_table, _run
from ._options import ANALYSIS, PathLike, flags, fspath, paths
from ._records import Record, Typed

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Ranks", "ranks"]


class Ranks(Typed):
    """The ranks' section of ``gapscope report --json`` on a run of several ranks: steps
    aligned, every collective split into waiting and transfer, per-rank compute / transfer /
    wait / idle, and the verdict on the rank that sets the step (docs/CLI.md#ranks)."""

    __slots__ = ("_reports",)
    world_size: int
    ranks: List[int]
    aligned_steps: int
    matched_collectives: int
    collectives_per_step: float
    step_ms_median: float
    transfer_us_median: float
    verdict: Record
    per_rank: List[Record]
    notes: List[str]

    def __init__(self, data: Any, reports: List[Report]):
        super().__init__(data)
        object.__setattr__(self, "_reports", reports)

    @property
    def reports(self) -> List[Report]:
        """Each rank's own report, as ``reports`` in the CLI's JSON."""
        return list(self._reports)

    @property
    def late_rank(self) -> Union[int, None]:
        """The rank that sets the step, or None when no rank does or the verdict is refused."""
        v = self._data.get("verdict") or {}
        return v.get("rank") if v.get("kind") == "straggler" else None

    def rank_table(self) -> "pa.Table":
        """One row per rank: step, compute, transfer, wait, unsplit and idle (ms/step,
        medians), busy and working %, the share of collectives it arrived last at."""
        rows = self._data["per_rank"]
        return _rows_table(rows)


RANKS = {**ANALYSIS, "force": "--ranks"}


def ranks(
    traces: Union[PathLike, Sequence[PathLike]], *, force: bool = False, quiet: bool = True,
    **options: Any,
) -> Ranks:
    """Reads traces (a list, a glob, a directory or a recording's ``run.gst``) as the ranks of
    one run, as ``gapscope report`` does. Ranks come from Kineto's ``distributedInfo`` or
    the recorded ``RANK``; ``force=True`` takes traces that name none in order (``--ranks``).
    Raises :class:`TraceError` when they are not ranks of one run.

    >>> rk = gapscope.ranks(["rank0.json.gz", "rank1.json.gz"])
    >>> rk.late_rank, rk.verdict.others_wait_ms_per_step, rk.rank_table()
    """
    many = paths(traces)
    argv = ["report", "--json"] + (["-q"] if quiet else [])
    argv += flags({"force": force, **options}, RANKS)
    argv += many if many is not None else [fspath(traces)]
    _, data = _run(argv)
    if "ranks" not in data:
        from ._native import TraceError

        n = len(data.get("reports", []))
        raise TraceError(
            f"{n} trace(s) are not the ranks of one run (they name no rank, or the same "
            "one); force=True reads them as ranks in order"
        )
    return Ranks(data["ranks"], [Report(r) for r in data["reports"]])
