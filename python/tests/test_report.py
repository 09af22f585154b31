"""gapscope.report and gapscope.open against the CLI's JSON, on bundled real traces."""
from __future__ import annotations

import threading
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import gapscope
from gapscope._records import Typed, fields_of

from conftest import REF, reference

TRACES = [
    "hf-qwen3-0.6b-npl1.json.gz",
    "hf-llama3.2-1b-npl8.json.gz",
    "engine-llama3-8b-npl1.gst",
    "llamacpp-llama3-8b-q8_0-npl1.gst",
    "cupti-qwen3next-small-npl1.gst",
]


# Traces other people recorded (vLLM, SGLang, HF on NVIDIA and AMD; traces/corpus/SOURCES.md).
CORPUS = [
    "vllm_mi300x_gptoss_prefilldecode_piecewise.json.gz",
    "sglang_mi300x_qwen3_8b_prefilldecode.json.gz",
    "hf_h100_qwen15_05b_chat.json.gz",
    "vllm_b200_gptoss_tp8_prefill.json.gz",
    "nsys_rtx5060ti_gemm_nokernels.sqlite",
]


@pytest.mark.parametrize("name", CORPUS)
def test_public_traces_equal_the_cli_json(cli, name):
    path = REF.parent / "corpus" / name
    assert path.exists(), path
    want = cli.json("report", "-q", "--json", path)["reports"][0]
    assert gapscope.report(path, quiet=True).to_dict() == want
    t = gapscope.open(path, quiet=True)
    assert t.kernels.num_rows == want["source"]["kernels"]
    assert t.memops.num_rows == want["source"]["memops"]


@pytest.mark.parametrize("name", TRACES)
def test_report_equals_the_cli_json(cli, name):
    (path,) = reference(name)
    want = cli.json("report", "-q", "--json", path)["reports"][0]
    r = gapscope.report(path, quiet=True)
    assert r.to_dict() == want
    if want["steps"]["tpot_ms"] is not None:
        assert r.steps.tpot_ms.median == want["steps"]["tpot_ms"]["median"]
    assert [b.bucket for b in r.buckets] == [b["bucket"] for b in want["buckets"]]


def test_options_mean_what_the_cli_flags_mean(cli, qwen):
    want = cli.json("report", "-q", "--json", "--by", "module", "--top", "5", qwen)
    r = gapscope.report(qwen, by="module", top=5, quiet=True)
    assert r.to_dict() == want["reports"][0]
    want = cli.json("report", "-q", "--json", "--no-markers", qwen)
    assert gapscope.report(qwen, no_markers=True, quiet=True).to_dict() == want["reports"][0]


def test_typed_fields_exist_in_the_json(qwen):
    r = gapscope.report(qwen, quiet=True)
    d = r.to_dict()

    def check(obj, data):
        assert isinstance(obj, Typed)
        for f in fields_of(type(obj)):
            assert f in data, f"{type(obj).__name__}.{f} is not in the CLI's JSON"

    check(r, d)
    check(r.steps, d["steps"])
    check(r.steps.tpot_ms, d["steps"]["tpot_ms"])
    check(r.source, d["source"])
    check(r.buckets[0], d["buckets"][0])
    check(r.buckets[0].ms_per_step, d["buckets"][0]["ms_per_step"])
    check(r.devices[0], d["devices"][0])
    check(r.host_idle, d["host_idle"])
    assert isinstance(r.steps.tpot_ms, gapscope.Stats)
    # A key no class declares is still an attribute.
    assert r.steps.phase_source == d["steps"]["phase_source"]
    with pytest.raises(AttributeError):
        r.steps.no_such_field
    with pytest.raises(AttributeError):
        r.steps = None


def test_step_tables_agree_with_the_report(qwen):
    r = gapscope.report(qwen, quiet=True)
    steps = r.step_table
    decode = steps.filter(pc.equal(steps["in_report"], 1))
    assert decode.num_rows == r.steps.decode_steps
    sb = r.step_buckets
    assert sb.schema.field("bucket").type == pa.dictionary(pa.uint8(), pa.string())
    # Calls per step of each bucket, over the report's steps, as the report counts them.
    in_report = set(decode["step"].to_pylist())
    rows = [x for x in sb.to_pylist() if x["step"] in in_report]
    for b in r.buckets:
        calls = sum(x["calls"] for x in rows if x["bucket"] == b.bucket)
        assert calls == b.calls, b.bucket


def test_open_gives_the_trace_tables(cli, qwen):
    t = gapscope.open(qwen, quiet=True)
    src = t.report.source
    assert t.kernels.num_rows == src.kernels
    assert t.memops.num_rows == src.memops
    assert t.launches.num_rows == src.launches
    assert t.scopes.num_rows == src.scopes
    assert t.kernels.schema.field("name").type == pa.dictionary(pa.uint32(), pa.string())
    assert t.kernels.schema.field("bucket").type == pa.dictionary(pa.uint8(), pa.string())
    # Each kernel's bucket: the one the report's top kernels are filed under.
    k = t.kernels
    for b in t.report.buckets:
        for top in b.top:
            sel = k.filter(pc.equal(k["name"].cast(pa.string()), top.name))
            assert sel.num_rows > 0
            assert set(sel["bucket"].cast(pa.string()).to_pylist()) == {b.bucket}
    assert t.report.to_dict() == cli.json("report", "-q", "--json", qwen)["reports"][0]


def test_tables_cross_without_a_copy(qwen):
    t = gapscope.open(qwen, quiet=True)
    n = t._native
    a = pa.RecordBatchReader.from_stream(n.table("kernels")).read_all()
    b = pa.RecordBatchReader.from_stream(n.table("kernels")).read_all()
    for col in ("gpu_start_ns", "name"):
        ca, cb = a[col].chunk(0), b[col].chunk(0)
        if pa.types.is_dictionary(ca.type):
            ca, cb = ca.indices, cb.indices
        # Both imports point at the same Rust buffer: nothing was copied on the way.
        assert ca.buffers()[1].address == cb.buffers()[1].address


def test_polars_and_pandas(qwen):
    t = gapscope.open(qwen, quiet=True)
    pl = pytest.importorskip("polars")
    df = t.to_polars("kernels")
    assert df.height == t.kernels.num_rows
    per = df.group_by("bucket").agg(pl.len())
    assert per["len"].sum() == df.height
    pd = pytest.importorskip("pandas")
    assert len(t.to_pandas("step_buckets")) == t.step_buckets.num_rows
    r = gapscope.report(qwen, quiet=True)
    assert r.to_polars().height == len(r.buckets)
    assert isinstance(r.to_pandas(), pd.DataFrame)


def test_several_traces_give_one_long_table(cli):
    pattern = str(REF / "hf-llama3.2-1b-npl8-stack-*.json.gz")
    rs = gapscope.report(pattern, quiet=True)
    assert len(rs) == 2
    bt = rs.bucket_table()
    assert bt.column_names[0] == "trace"
    for r in rs:
        want = cli.json("report", "-q", "--json", r.path)["reports"][0]
        att = [b for b in want["buckets"] if b["bucket"] == "attention"][0]
        got = bt.filter(pc.and_(pc.equal(bt["trace"], r.path), pc.equal(bt["bucket"], "attention")))
        assert got["ms_per_step"].to_pylist() == [att["ms_per_step"]["median"]]
    long = rs.step_buckets()
    assert set(long["trace"].to_pylist()) == {r.path for r in rs}
    listed = gapscope.report([r.path for r in rs], quiet=True)
    assert [r.to_dict() for r in listed] == [r.to_dict() for r in rs]


def test_repr_html_draws_the_report(qwen):
    r = gapscope.report(qwen, quiet=True)
    html = r._repr_html_()
    assert "<svg" in html and "gemm_dense" in html
    assert "<html" not in html.lower()


def test_the_gil_is_released_during_analysis():
    (path,) = reference("hf-llama3-8b-npl1.json.gz")
    ticks = []
    done = threading.Event()

    def work():
        gapscope.report(path, quiet=True)
        done.set()

    th = threading.Thread(target=work)
    th.start()
    while not done.is_set():
        ticks.append(time.perf_counter())
        time.sleep(0.005)
    th.join()
    # The main thread kept running while the report was made (held, it would tick ~once).
    assert len(ticks) > 20


def test_progress_reaches_a_python_bar(monkeypatch, capsys):
    import gapscope._progress as prog

    monkeypatch.setattr(prog, "SHOW_FROM_BYTES", 0)
    calls = []

    class Spy(prog.Bar):
        def start(self, total):
            calls.append(("start", total))

        def advance(self, n):
            calls.append(("advance", n))

        def finish(self):
            calls.append(("finish", None))

    monkeypatch.setattr(prog, "Bar", Spy)
    (path,) = reference("hf-llama3-8b-npl1.json.gz")
    gapscope.report(path)
    assert calls[0][0] == "start" and calls[-1][0] == "finish"
    assert sum(n for k, n in calls if k == "advance") > 0
    calls.clear()
    gapscope.report(path, quiet=True)
    assert calls == []
