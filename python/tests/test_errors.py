"""Hostile and wrong inputs raise TraceError (or a subclass) with the CLI's one-line
message; none of them crashes the interpreter."""
from __future__ import annotations

import gzip
import json
import os

import pytest

import gapscope

from conftest import reference

(QWEN,) = reference("hf-qwen3-0.6b-npl1.json.gz")


def same_line(cli, exc, *args):
    assert str(exc.value) == cli.error("report", "-q", "--json", *args)


def test_missing_file(cli, tmp_path):
    p = tmp_path / "nope.json"
    with pytest.raises(gapscope.TraceError) as e:
        gapscope.report(p)
    same_line(cli, e, p)
    with pytest.raises(gapscope.TraceError):
        gapscope.open(p)


def test_truncated_gzip_and_allow_truncated(cli, tmp_path):
    data = QWEN.read_bytes()
    p = tmp_path / "cut.json.gz"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(gapscope.TruncatedTraceError) as e:
        gapscope.report(p, quiet=True)
    same_line(cli, e, p)
    r = gapscope.report(p, allow_truncated=True, quiet=True)
    assert r.source.truncated
    assert r.to_dict() == cli.json("report", "-q", "--json", "--allow-truncated", p)["reports"][0]


def test_event_limit(cli):
    with pytest.raises(gapscope.LimitError) as e:
        gapscope.report(QWEN, max_events=1000, quiet=True)
    same_line(cli, e, "--max-events", "1000", QWEN)


def test_bad_rules_and_bad_options(cli, tmp_path):
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nname = "x"\nregex = "("\nbucket = "gemv"\n')
    with pytest.raises(gapscope.RulesError) as e:
        gapscope.report(QWEN, rules=rules, quiet=True)
    same_line(cli, e, "--rules", rules, QWEN)
    with pytest.raises(gapscope.UsageError):
        gapscope.report(QWEN, by="planet", quiet=True)
    with pytest.raises(TypeError):
        gapscope.report(QWEN, no_such_option=1)
    with pytest.raises(gapscope.TraceError):
        gapscope.report(str(QWEN.parent / "no-such-*.json.gz"))


HOSTILE = {
    "garbage.json": os.urandom(4096),
    "empty.json": b"",
    "not-an-object.json": b"[1, 2, 3]",
    "nan-times.json": json.dumps({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": "NaN", "dur": 1e308},
        {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": -1e300, "dur": -5},
    ]}).encode(),
    "deep.json": b"[" * 100000 + b"]" * 100000,
    "bomb.json.gz": gzip.compress(b"{\"traceEvents\": [" + b" " * (64 << 20)),
    "fake.sqlite": b"SQLite format 3\x00" + os.urandom(8192),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_inputs_raise_trace_error(tmp_path, name):
    p = tmp_path / name
    p.write_bytes(HOSTILE[name])
    for f in (gapscope.report, gapscope.open):
        try:
            f(p, quiet=True)
        except gapscope.TraceError as e:
            assert "\n" not in str(e) and str(e)
        # A trace that loads with nothing in it is fine too: the point is no crash.


def test_cut_native_trace_loads_what_it_holds_and_says_so(cli, tmp_path):
    (gst,) = reference("engine-llama3-8b-npl1.gst")
    out = tmp_path / "broken.gst"
    out.mkdir()
    for f in gst.iterdir():
        b = f.read_bytes()
        (out / f.name).write_bytes(b[: len(b) // 3] if f.name.startswith("kernels") else b)
    # A recording cut mid-stream keeps every whole batch, as the CLI does, and says so.
    t = gapscope.open(out, quiet=True)
    assert t.report.source.truncated
    assert t.kernels.num_rows == t.report.source.kernels
    assert t.report.to_dict() == cli.json("report", "-q", "--json", out)["reports"][0]


def test_the_command_lines_defaults_apply_to_the_api(qwen, monkeypatch, tmp_path):
    """GAPSCOPE_RULES (docs/CLI.md, "Configuration") reaches gapscope.report as it reaches
    `gapscope report`: a missing file is the same one-line error naming the variable."""
    monkeypatch.setenv("GAPSCOPE_NO_CONFIG", "1")
    monkeypatch.setenv("GAPSCOPE_RULES", str(tmp_path / "missing-rules.toml"))
    with pytest.raises(gapscope.UsageError, match="GAPSCOPE_RULES"):
        gapscope.report(qwen, quiet=True)
    monkeypatch.delenv("GAPSCOPE_RULES")
    assert gapscope.report(qwen, quiet=True).steps.decode_steps > 0
