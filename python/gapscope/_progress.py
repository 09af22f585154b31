"""The import progress bar: tqdm's (a notebook widget in Jupyter) when tqdm is installed,
else a one-line bar on stderr. Shown only for inputs over a few megabytes."""
from __future__ import annotations

import sys
from typing import Any, Optional

SHOW_FROM_BYTES = 8 << 20


class Bar:
    """What the importer calls: ``start(total)``, ``advance(n)``, ``finish()``."""

    def __init__(self, label: str):
        self._label = label
        self._bar: Any = None
        self._done = 0
        self._total = 0

    def start(self, total: int) -> None:
        if total < SHOW_FROM_BYTES:
            return
        self._total = total
        try:
            from tqdm.auto import tqdm

            self._bar = tqdm(total=total, unit="B", unit_scale=True, desc=self._label, leave=False)
        except ImportError:
            self._bar = _Plain(self._label, total)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


class _Plain:
    def __init__(self, label: str, total: int):
        self._label, self._total, self._done = label, total, 0

    def update(self, n: int) -> None:
        self._done += n
        pct = 100.0 * self._done / max(self._total, 1)
        filled = int(pct / 100 * 30)
        sys.stderr.write(f"\r{self._label} [{'=' * filled:<30}] {pct:5.1f}%")
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\r" + " " * (len(self._label) + 40) + "\r")
        sys.stderr.flush()


def bar(label: str, quiet: bool) -> Optional[Bar]:
    return None if quiet else Bar(label)
