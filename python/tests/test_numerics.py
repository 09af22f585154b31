"""gapscope.numerics: dumps written from numpy, compared through the package and the CLI,
and every figure recomputed with numpy by scripts/numerics-check.py (docs/NUMERICS.md)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gapscope
from gapscope import numerics

ROOT = Path(__file__).resolve().parents[2]


def model(tokens: np.ndarray, layers: int = 4, fault: int | None = None, scale: float = 1.02):
    """A deterministic stand-in for a model: hidden states from the tokens, logits from the
    last one; layer ``fault`` scaled by ``scale``."""
    rng = np.random.default_rng(3)
    emb = rng.standard_normal((64, 16)).astype(np.float32)
    w = [rng.standard_normal((16, 16)).astype(np.float32) * 0.2 for _ in range(layers)]
    head = rng.standard_normal((16, 64)).astype(np.float32)
    h = emb[tokens]
    hidden = []
    for i in range(layers):
        h = h + np.tanh(h @ w[i])
        if i == fault:
            h = h * scale
        hidden.append(h.copy())
    return h @ head, hidden


def write(path: Path, tokens, engine: str, **kw) -> Path:
    logits, hidden = model(tokens, **kw)
    numerics.write_dump(path, tokens, logits, hidden, engine=engine, model="stand-in")
    return path


def test_a_planted_fault_is_found_at_its_layer_and_every_figure_matches_numpy(tmp_path: Path, cli):
    tokens = np.random.default_rng(1).integers(0, 64, (3, 24))
    ref = write(tmp_path / "ref.safetensors", tokens, "ref")
    again = write(tmp_path / "again.safetensors", tokens, "again")
    fault = write(tmp_path / "fault.safetensors", tokens, "fault", fault=2)
    r = numerics.compare(ref, again, fault, identity=(ref, again))
    assert r.identity["verdict"] == "ACCEPT"
    c = r.comparisons[1]
    assert c["layers"]["first_diverging"] == 2
    assert c["layers"]["error"][:2] == [0.0, 0.0]
    assert r.worst() in ("ACCEPT", "MARGINAL", "REJECT")
    # The same figures from the CLI, then recomputed by numpy from the files' bytes.
    out = tmp_path / "r.json"
    out.write_text(json.dumps(cli.json("numerics", ref, again, fault, "--identity", ref, again, "--json")))
    p = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "numerics-check.py"), str(out)],
        capture_output=True,
        text=True,
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "agree with numpy within 1e-06" in p.stdout


def test_float16_dumps_and_shape_errors(tmp_path: Path):
    tokens = np.arange(10) % 64
    logits, hidden = model(tokens)
    half = tmp_path / "half.safetensors"
    numerics.write_dump(half, tokens, logits.astype(np.float16), engine="half")
    ref = write(tmp_path / "ref.safetensors", tokens, "ref")
    r = numerics.compare(ref, half)
    assert r.comparisons[0]["other"]["dtype"] == "float16"
    assert r.comparisons[0]["layers"] is None
    with pytest.raises(ValueError, match="shape"):
        numerics.write_dump(tmp_path / "bad.safetensors", tokens, logits[:5], engine="bad")
    with pytest.raises(gapscope.TraceError, match="different tokens"):
        other = write(tmp_path / "other.safetensors", (tokens + 1) % 64, "other")
        numerics.compare(ref, other)
