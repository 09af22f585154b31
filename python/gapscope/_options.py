"""Keyword arguments to the CLI's flags: the Python API passes options through the command
line's own parser, so each means and checks exactly what the CLI documents."""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Union

PathLike = Union[str, "os.PathLike[str]"]

# keyword -> flag, for the analysis options every command shares (docs/CLI.md).
ANALYSIS = {
    "rules": "--rules",
    "step_regex": "--step-regex",
    "no_markers": "--no-markers",
    "allow_truncated": "--allow-truncated",
    "max_events": "--max-events",
    "max_steps": "--max-steps",
    "top": "--top",
    "spec_metrics": "--spec-metrics",
}

# The options of commands that take traces but list no kernel names (`gate`, `roofline`):
# the analysis options without `top`, which the CLI refuses there.
TRACE = {k: v for k, v in ANALYSIS.items() if k != "top"}


def flags(options: Dict[str, Any], table: Dict[str, str]) -> List[str]:
    """``--flag value`` pairs for the options that are set; ``True`` gives a bare flag."""
    out: List[str] = []
    for key, value in options.items():
        if key not in table:
            raise TypeError(f"unknown option {key!r}; options: {', '.join(sorted(table))}")
        if value is None or value is False:
            continue
        flag = table[key]
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                out += [flag, fspath(v)]
        else:
            out += [flag, fspath(value)]
    return out


def fspath(v: Any) -> str:
    return os.fspath(v) if isinstance(v, os.PathLike) else str(v)


def paths(p: Union[PathLike, Sequence[PathLike]]) -> Optional[List[str]]:
    """A list of paths for a list or a glob pattern; ``None`` for one plain path."""
    import glob

    if isinstance(p, (str, os.PathLike)):
        s = os.fspath(p)
        if any(c in s for c in "*?[") and not os.path.exists(s):
            found = sorted(glob.glob(s))
            if not found:
                from ._native import TraceError

                raise TraceError(f"{s}: no file matches this pattern")
            return found
        return None
    return [os.fspath(x) for x in p]
