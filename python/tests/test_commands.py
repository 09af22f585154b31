"""diff, gate, roofline, buckets and the installed command, against the CLI's JSON."""
from __future__ import annotations

import subprocess
import sys

import pytest

import gapscope

from conftest import ROOT, reference

CUDNN, MATH = reference(
    "hf-llama3.2-1b-npl8-stack-cudnn.json.gz", "hf-llama3.2-1b-npl8-stack-math.json.gz"
)


def test_diff_equals_the_cli_json(cli):
    want = cli.json("diff", "-q", "--json", CUDNN, MATH)
    d = gapscope.diff(CUDNN, MATH)
    assert d.to_dict() == want
    assert d.gap_ms == want["gap_ms"]
    t = d.bucket_table()
    assert t.num_rows == len(want["buckets"])
    page = d._repr_html_()
    assert page.startswith("<iframe") and "srcdoc=" in page and "&lt;svg" in page


def test_gate_equals_the_cli_json_and_exit_code(cli):
    want = cli.json("gate", "-q", "--json", "--baseline", CUDNN, "--current", CUDNN)
    g = gapscope.gate(CUDNN, CUDNN)
    assert g.to_dict() == want
    assert g.passed and g.exit_code == 0
    p = cli.run("gate", "-q", "--json", "--baseline", MATH, "--current", CUDNN,
                "--allow-incomparable")
    g = gapscope.gate(MATH, CUDNN, allow_incomparable=True)
    assert g.exit_code == p.returncode
    assert g.verdict == __import__("json").loads(p.stdout)["verdict"]


def test_gate_errors_raise_like_the_cli_exits_2(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    line = cli.error("gate", "-q", "--json", "--baseline", CUDNN, "--current", bad)
    with pytest.raises(gapscope.TraceError) as e:
        gapscope.gate(CUDNN, bad)
    assert str(e.value) == line


def test_roofline_equals_the_cli_json(cli):
    model = ROOT / "models" / "llama-3-8b.json"
    want = cli.json("roofline", "-q", "--json", "--model", model, "--hw", "h200",
                    "--batch", "1,8,64")
    rf = gapscope.roofline(model, "h200", batch=[1, 8, 64])
    assert rf.to_dict() == want
    assert rf.floor_table().num_rows == 3
    (engine,) = reference("engine-llama3-8b-npl1.gst")
    want = cli.json("roofline", "-q", "--json", "--model", model, "--hw", "h200", "--trace", engine)
    assert gapscope.roofline(model, "h200", trace=engine).to_dict() == want


def test_buckets_explain_equals_the_cli(cli):
    name = "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT"
    want = cli.json("buckets", "--json", "--explain", name)
    e = gapscope.buckets.explain(name)
    assert e.to_dict() == want and e.bucket == "gemm_dense"
    scope = "aten::mm"
    assert gapscope.buckets.explain_scope(scope).to_dict() == cli.json(
        "buckets", "--json", "--explain-scope", scope)
    assert len(gapscope.buckets.rules()) == len(cli.json("buckets", "--json")["rules"])


def test_the_installed_command_is_the_cli(cli):
    p = subprocess.run([cli.path, "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "report" in p.stdout
    p = subprocess.run([sys.executable, "-m", "gapscope._cli", "--version"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and p.stdout.startswith("gapscope ")
