"""The bucket rules: which rule sorts a kernel, memop or host scope into which bucket."""
from __future__ import annotations

from typing import Any, List, Optional

from ._api import _run
from ._options import PathLike, fspath
from ._records import Record, Typed

__all__ = ["explain", "explain_scope", "rules", "Explanation"]


class Explanation(Typed):
    """Which rule classifies a name (``gapscope buckets --explain NAME --json``)."""

    __slots__ = ()
    name: str
    bucket: str
    rule: Optional[Record]
    shadowed: List[Record]


def _args(rules: Optional[PathLike]) -> List[str]:
    return ["--rules", fspath(rules)] if rules is not None else []


def explain(name: str, rules: Optional[PathLike] = None) -> Explanation:
    """The bucket of a kernel name or memop kind, the rule that decides and the later rules
    it shadows.

    >>> gapscope.buckets.explain("nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT").bucket
    'gemm_dense'
    """
    _, data = _run(["buckets", "--explain", name, "--json"] + _args(rules))
    return Explanation(data)


def explain_scope(scope: str, rules: Optional[PathLike] = None) -> Record:
    """The host-scope rules a scope name matches, in order."""
    _, data = _run(["buckets", "--explain-scope", scope, "--json"] + _args(rules))
    return Record(data)


def rules(rules: Optional[PathLike] = None) -> List[Any]:
    """Every rule in order (built-in, or a rules file's before them)."""
    _, data = _run(["buckets", "--json"] + _args(rules))
    return Record(data).rules
