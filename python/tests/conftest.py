"""Fixtures: the repository's bundled traces, and the CLI to compare the API against.

The CLI is ``$GAPSCOPE_BIN`` when set (CI points it at the cargo-built binary, so the API is
checked against the binary itself), else the ``gapscope`` command this package installed.
Neither found is a failure, not a skip: the comparison is the point of these tests."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, List

import pytest

ROOT = Path(__file__).resolve().parents[2]
REF = ROOT / "traces" / "reference"


def cli_path() -> str:
    p = os.environ.get("GAPSCOPE_BIN") or shutil.which("gapscope")
    if not p:
        pytest.fail("no gapscope command: install the package (pip install .) or set GAPSCOPE_BIN")
    return p


class Cli:
    def __init__(self, path: str):
        self.path = path

    def run(self, *args: Any) -> subprocess.CompletedProcess:
        return subprocess.run(
            [self.path, *map(str, args)], capture_output=True, text=True, timeout=600
        )

    def json(self, *args: Any, ok: tuple = (0,)) -> Any:
        p = self.run(*args)
        assert p.returncode in ok, p.stderr
        return json.loads(p.stdout)

    def error(self, *args: Any) -> str:
        """The one-line error the CLI prints, without its prefix."""
        p = self.run(*args)
        assert p.returncode == 2, (p.returncode, p.stdout[:200])
        lines = [l for l in p.stderr.splitlines() if l.startswith("gapscope: error: ")]
        assert len(lines) == 1, p.stderr
        return lines[0][len("gapscope: error: "):]


@pytest.fixture(scope="session")
def cli() -> Cli:
    return Cli(cli_path())


@pytest.fixture(scope="session")
def qwen() -> Path:
    return REF / "hf-qwen3-0.6b-npl1.json.gz"


def reference(*names: str) -> List[Path]:
    out = [REF / n for n in names]
    missing = [str(p) for p in out if not p.exists()]
    assert not missing, f"bundled traces missing: {missing}"
    return out
