"""vllm_hooks.py imports without torch, vLLM or SGLang (they are imported inside the
functions that need them); the recipe itself is untested here (docs/NUMERICS.md)."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import vllm_hooks  # noqa: E402


def test_importable_and_documented():
    for name in ("Recorder", "capture_vllm", "capture_in_process", "rejoin_check", "lm_head_logits", "vllm_logits"):
        assert callable(getattr(vllm_hooks, name)) and getattr(vllm_hooks, name).__doc__
    assert "UNTESTED IN THIS WORKPLACE" in vllm_hooks.__doc__


def test_passages():
    assert vllm_hooks._passages([1, 2, 3]) == [[1, 2, 3]]
    assert vllm_hooks._passages([[1, 2], [3, 4]]) == [[1, 2], [3, 4]]


def test_recorder_refuses_a_model_without_layers():
    class M:
        pass

    with pytest.raises(ValueError, match="model.model.layers"):
        vllm_hooks.Recorder(M())
