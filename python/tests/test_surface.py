"""Every public name is exercised: ranks, the remaining tables and conversions, help()."""
from __future__ import annotations

import json
import pydoc

import pytest

import gapscope

from conftest import REF, reference

(QWEN,) = reference("hf-qwen3-0.6b-npl1.json.gz")
TP2 = REF / "tp2"


def test_ranks_equal_the_cli_and_name_the_planted_rank(cli):
    pair = [TP2 / "host-rank0.json.gz", TP2 / "host-rank1.json.gz"]
    want = cli.json("report", "-q", "--json", *pair)
    rk = gapscope.ranks(pair)
    assert rk.to_dict() == want["ranks"]
    assert [r.to_dict() for r in rk.reports] == want["reports"]
    truth = json.loads((TP2 / "truth-host.json").read_text())
    assert rk.late_rank == truth["late_rank"]
    assert rk.verdict.late_by.scope == "planted_host_stall"
    t = rk.rank_table()
    assert t.num_rows == 2 and "wait_ms" in t.column_names
    assert gapscope.ranks(str(TP2 / "host-rank*.json.gz")).to_dict() == want["ranks"]


def test_traces_that_are_not_ranks_are_refused():
    with pytest.raises(gapscope.TraceError):
        gapscope.ranks([QWEN, REF / "hf-llama3.2-1b-npl8.json.gz"])


def test_every_table_and_conversion():
    pytest.importorskip("polars")
    pytest.importorskip("pandas")
    t = gapscope.open(QWEN, quiet=True)
    assert set(t.table_names) >= {"kernels", "memops", "launches", "markers", "samples",
                                  "scopes", "steps", "step_buckets", "idle_gaps",
                                  "step_scopes", "names", "strings"}
    for name in t.table_names:
        assert t.table(name).num_rows == len(t._native.table(name))
    assert t.markers.num_rows == t.report.source.markers
    assert t.samples.num_rows == 0
    assert t.steps.num_rows >= t.report.steps.decode_steps
    assert "Trace(" in repr(t) and "<svg" in t._repr_html_()
    with pytest.raises(KeyError):
        t.table("no_such_table")
    r = gapscope.report(QWEN, quiet=True)
    assert r.idle_gaps.num_rows > 0 and r.step_scopes.num_rows > 0 and r.names.num_rows > 0
    assert r.path.endswith("hf-qwen3-0.6b-npl1.json.gz")
    rs = gapscope.report([QWEN, QWEN], quiet=True)
    assert rs.step_table().num_rows == 2 * r.step_table.num_rows
    assert rs.to_polars().height == 2 * len(r.buckets)
    assert len(rs.to_pandas()) == 2 * len(r.buckets)
    assert rs._repr_html_().count("<svg") >= 2 and "ReportSet(2" in repr(rs)
    assert r.bucket_table().column_names[0] == "bucket"


def test_help_is_useful():
    for f in (gapscope.open, gapscope.report, gapscope.diff, gapscope.gate,
              gapscope.roofline, gapscope.ranks, gapscope.buckets.explain):
        doc = pydoc.render_doc(f, renderer=pydoc.plaintext)
        assert ">>>" in doc, f.__name__
    doc = pydoc.render_doc(gapscope.Report, renderer=pydoc.plaintext)
    for field in ("steps: Steps", "buckets: List[BucketRow]", "step_buckets", "to_polars"):
        assert field in doc, field
    assert gapscope.__version__
