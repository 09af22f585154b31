"""Tests of llamacpp_to_dump.py on real llama.cpp output (scripts/numerics/data/README.md)
and on broken copies of it. Pure Python (numpy, pytest); the `gapscope` binary, when
GAPSCOPE_BIN names it or /var/tmp/gapscope-ci-target/release/gapscope exists, compares the
converted dumps too."""
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
sys.path.insert(0, HERE)

import llamacpp_to_dump as conv  # noqa: E402

KLD = os.path.join(DATA, "tiny-f32.kld")
CAP = os.path.join(DATA, "tiny-f32-chunk0.gscap")
CAP16 = os.path.join(DATA, "tiny-f16-chunk0.gscap")
TOKENS0 = os.path.join(DATA, "chunk0-tokens.txt")
N_CTX, V, CHUNKS, H, LAYERS = 32, 259, 4, 64, 2
FIRST = N_CTX // 2


def read_dump(path):
    """A safetensors dump → (metadata, {name: array}), read without gapscope."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        body = f.read()
    meta = header.pop("__metadata__", {})
    types = {"F32": "<f4", "I64": "<i8"}
    out = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        out[name] = np.frombuffer(body[a:b], dtype=types[e["dtype"]]).reshape(e["shape"])
    return meta, out


def exact_logprobs(logits):
    x = logits.astype(np.float64)
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def gapscope_bin():
    b = os.environ.get("GAPSCOPE_BIN") or "/var/tmp/gapscope-ci-target/release/gapscope"
    return b if os.access(b, os.X_OK) else None


# ---- the real files -------------------------------------------------------------------


def test_kld_file_layout():
    d = conv.read_kld(KLD)
    assert (d["n_ctx"], d["n_vocab"], d["first"]) == (N_CTX, V, FIRST)
    assert d["body"].shape == (CHUNKS, N_CTX - 1 - FIRST, 2 * ((V + 1) // 2) + 4)
    raw = np.fromfile(KLD, dtype="<i4", count=CHUNKS * N_CTX, offset=20).reshape(CHUNKS, N_CTX)
    assert (d["tokens"] == raw[:, FIRST : N_CTX - 1]).all()
    assert raw[0, 0] == 1  # llama-perplexity's tokenization starts with the BOS


def test_kld_logprobs_are_the_exact_ones_within_the_quantisation():
    """Chunk 0 of llama-perplexity's file against llamacpp-capture's exact float32 logits
    of the same 32 tokens through the same model: every log-probability within 16 nats of
    the top agrees within scale/2 (plus float32 rounding); the rest sit on the floor."""
    kld = conv.read_kld(KLD)
    lp = conv.kld_logprobs(kld["body"][0], V).astype(np.float64)  # [15, V]
    head = np.ascontiguousarray(kld["body"][0, :, :4]).view("<f4")
    scale, floor = head[:, 0:1].astype(np.float64), head[:, 1:2].astype(np.float64)
    cap = conv.read_capture(CAP)
    assert (cap["tokens"][0] == np.loadtxt(TOKENS0, dtype=np.int64)).all()
    exact = exact_logprobs(np.asarray(cap["logits"][0, FIRST : N_CTX - 1]))
    assert (scale <= 16 / 65535 * (1 + 1e-6)).all()
    above = exact > floor + scale / 2
    err = np.abs(lp - exact)
    assert above.mean() > 0.5, above.mean()  # most entries are above the floor
    assert (err[above] <= (scale / 2 + 2e-5).repeat(V, 1)[above]).all(), err[above].max()
    # below the floor: stored as the floor, and the exact value is at or below it
    below = ~above
    assert (np.abs(lp[below] - floor.repeat(V, 1)[below]) <= 1e-6).all()
    assert (exact[below] <= floor.repeat(V, 1)[below] + scale.repeat(V, 1)[below]).all()
    # the top-1 of every row agrees
    assert (lp.argmax(-1) == exact.argmax(-1)).all()


def test_convert_kld(tmp_path):
    out = tmp_path / "kld.safetensors"
    s = conv.convert(KLD, str(out))
    assert s == {"format": "llama-perplexity --kl-divergence-base", "tokens": [CHUNKS, N_CTX - 1 - FIRST], "vocab": V, "layers": 0}
    meta, t = read_dump(out)
    assert t["tokens"].shape == (CHUNKS, 15) and t["logits"].shape == (CHUNKS, 15, V)
    assert meta["source_format"] == "llama-perplexity --kl-divergence-base"
    assert meta["first_position_in_chunk"] == str(FIRST)
    assert not any(k.startswith("hidden.") for k in t)
    # a log-probability row sums to about 1 in probability (the floor adds a little mass)
    p = np.exp(t["logits"].astype(np.float64)).sum(-1)
    assert (np.abs(p - 1) < 1e-3).all()


def test_convert_capture_with_hidden_states(tmp_path):
    out = tmp_path / "cap.safetensors"
    s = conv.convert(CAP, str(out), tokens=TOKENS0)
    assert s == {"format": "llamacpp-capture", "tokens": [N_CTX], "vocab": V, "layers": LAYERS}
    meta, t = read_dump(out)
    assert t["logits"].shape == (N_CTX, V)
    assert [t[f"hidden.{n}"].shape for n in range(LAYERS)] == [(N_CTX, H)] * LAYERS
    assert meta["engine"] == "llama.cpp" and "F32" in meta["model"]
    assert not np.array_equal(t["hidden.0"], t["hidden.1"])


def test_capture_positions_match_kld_chunk(tmp_path):
    """--positions and --passages line the two routes up; --tokens takes a dump."""
    cap = tmp_path / "cap-mid.safetensors"
    conv.convert(CAP, str(cap), positions=f"{FIRST}:{N_CTX - 1}")
    kld = tmp_path / "kld0.safetensors"
    conv.convert(KLD, str(kld), passages="0:1", tokens=str(cap))
    _, a = read_dump(cap)
    _, b = read_dump(kld)
    assert (a["tokens"] == b["tokens"][0]).all()


def test_gapscope_compares_the_converted_dumps(tmp_path):
    g = gapscope_bin()
    if g is None:
        pytest.skip("no gapscope binary (set GAPSCOPE_BIN)")
    f32, f32b, f16 = (tmp_path / n for n in ("f32.safetensors", "f32b.safetensors", "f16.safetensors"))
    conv.convert(CAP, str(f32))
    shutil.copy(f32, f32b)
    conv.convert(CAP16, str(f16), tokens=str(f32), engine="llama.cpp f16 weights")
    r = subprocess.run([g, "numerics", str(f32), str(f16), "--identity", str(f32), str(f32b), "--json"],
                       capture_output=True, text=True, check=True)
    rep = json.loads(r.stdout)
    c = rep["comparisons"][-1]
    assert c["other"]["engine"] == "llama.cpp f16 weights" and c["other"]["layers"] == LAYERS
    assert c["verdict"] == "ACCEPT" and c["summary"]["top1_agreement_pct"] == 100.0
    assert 0 < c["summary"]["kl_mean"] < 1e-4
    assert c["layers"]["first_diverging"] == 0
    assert rep["identity"]["summary"]["kl_max"] == 0


# ---- broken copies --------------------------------------------------------------------


def broken(tmp_path, src, name, edit):
    b = bytearray(open(src, "rb").read())
    b = edit(b)
    p = tmp_path / name
    p.write_bytes(bytes(b))
    return str(p)


def error_of(src, tmp_path, capsys, *args):
    rc = conv.main([src, str(tmp_path / "out.safetensors"), *args])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.startswith("llamacpp_to_dump: error: "), err
    assert not (tmp_path / "out.safetensors").exists()
    return err


@pytest.mark.parametrize("src", [KLD, CAP])
def test_truncated(tmp_path, capsys, src):
    p = broken(tmp_path, src, "cut", lambda b: b[:-100])
    assert "truncated" in error_of(p, tmp_path, capsys)
    p = broken(tmp_path, src, "short", lambda b: b[:12])
    assert "truncated" in error_of(p, tmp_path, capsys)


@pytest.mark.parametrize("src", [KLD, CAP])
def test_trailing_bytes(tmp_path, capsys, src):
    p = broken(tmp_path, src, "long", lambda b: b + b"\0" * 6)
    assert "longer than its header says" in error_of(p, tmp_path, capsys)


def test_wrong_magic(tmp_path, capsys):
    p = broken(tmp_path, KLD, "magic", lambda b: b"_logitz_" + b[8:])
    assert "magic b'_logitz_'" in error_of(p, tmp_path, capsys)
    p = tmp_path / "dump.safetensors"
    conv.convert(CAP, str(p))
    assert "is neither" in error_of(str(p), tmp_path, capsys)


def test_vocabulary_mismatch(tmp_path, capsys):
    assert "vocabulary 259, expected 32000 (--vocab)" in error_of(KLD, tmp_path, capsys, "--vocab", "32000")

    def bad_token(b):  # chunk 0, position FIRST + 3: a token past the vocabulary
        struct.pack_into("<i", b, 20 + 4 * (FIRST + 3), 4000)
        return b

    p = broken(tmp_path, KLD, "tok", bad_token)
    assert "token 4000 at passage 0 position 3 is outside the vocabulary (259)" in error_of(p, tmp_path, capsys)


def test_tokens_check(tmp_path, capsys):
    want = np.loadtxt(TOKENS0, dtype=np.int64)
    want[5] += 1
    p = tmp_path / "tokens.json"
    p.write_text(json.dumps(want.tolist()))
    err = error_of(CAP, tmp_path, capsys, "--tokens", str(p))
    assert f"differ first at passage 0 position 5: token {want[5] - 1} against {want[5]}" in err
    err = error_of(KLD, tmp_path, capsys, "--tokens", TOKENS0)
    assert "holds 4 passages of 15 tokens" in err


def test_captures_stack_into_passages(tmp_path, capsys):
    out = tmp_path / "two.safetensors"
    assert conv.main([CAP, CAP16, str(out)]) == 0
    meta, t = read_dump(out)
    assert t["tokens"].shape == (2, N_CTX) and t["logits"].shape == (2, N_CTX, V)
    assert t["hidden.1"].shape == (2, N_CTX, H)
    assert meta["source"] == "tiny-f32-chunk0.gscap, tiny-f16-chunk0.gscap"
    one = conv.read_capture(CAP16)
    assert np.array_equal(t["logits"][1], one["logits"][0])


def test_a_kld_file_is_not_stacked(tmp_path, capsys):
    rc = conv.main([CAP, KLD, str(tmp_path / "x.safetensors")])
    err = capsys.readouterr().err
    assert rc == 2 and "tiny-f32.kld: only llamacpp-capture files are stacked into passages" in err
