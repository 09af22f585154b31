#!/usr/bin/env python3
"""Convert llama.cpp's logits (and residual stream) into a `gapscope numerics` dump.

    python llamacpp_to_dump.py IN [IN …] OUT.safetensors [--tokens FILE] [--vocab V]
                               [--passages A:B] [--positions A:B] [--engine NAME] [--model NAME]

IN is one of two files (told apart by their first 8 bytes):

* ``_logits_``: the file ``llama-perplexity --kl-divergence-base FILE`` writes
  (tools/perplexity/perplexity.cpp). Header: int32 n_ctx, n_vocab, n_chunk, then the int32
  tokens of every chunk (n_chunk × n_ctx, as tokenized: position 0 of each chunk was
  evaluated as BOS when the vocabulary adds one). Then, per chunk, one row per position
  first = n_ctx/2 … n_ctx − 2: float32 scale, float32 min_log_prob, n_vocab uint16 q (padded
  to an even count), log-probability = scale·q + min_log_prob. The dump holds P = n_chunk
  passages of T = n_ctx − 1 − first positions (tokens first … n_ctx − 2 of each chunk), and
  ``logits`` = those log-probabilities (float32). They are LOSSY (docs/NUMERICS.md, "llama.cpp"):
  each log-probability within 16 nats of the row's top is rounded to a step of
  scale ≤ 16/65535 (error ≤ scale/2 ≤ 1.22e-4 nats); anything lower is raised to
  top − 16. No hidden states. The last scored position of each chunk (its next token,
  chunk position n_ctx − 1, is outside the dump's tokens) is not scored by gapscope.

* ``GSLCAP01``: the file ``llamacpp-capture`` (scripts/numerics/llamacpp_capture.cpp) writes:
  every position's float32 logits as llama.cpp returns them (exact) and the residual stream
  after each layer (llama.cpp's ``l_out-N`` tensors) → ``hidden.N``. One passage per file;
  several files of the same length make one dump of several passages, in the order given.

Checks, each a one-line error (exit 2): the magic, a file shorter or longer than its header
says, a token outside the vocabulary, ``--vocab V`` (the vocabulary the other engine uses),
and ``--tokens FILE`` (the tokens the dump must hold: a JSON list / whitespace-separated ids,
``[T]`` or ``[P, T]``, or another dump's ``.safetensors``, whose vocabulary is checked too).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import struct
import sys
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

KLD_MAGIC = b"_logits_"
CAP_MAGIC = b"GSLCAP01"


class ConvertError(Exception):
    """A one-line reason the file cannot be converted."""


def _kld_row_u16(n_vocab: int) -> int:
    # perplexity.cpp: const int nv = 2*((n_vocab + 1)/2) + 4;  (uint16 words per row)
    return 2 * ((n_vocab + 1) // 2) + 4


def read_kld(path: str) -> Dict[str, Any]:
    """Read a llama-perplexity --kl-divergence-base file (memory-mapped)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(20)
    if len(head) < 20:
        raise ConvertError(f"{path}: truncated: {size} bytes, shorter than the 20-byte header")
    n_ctx, n_vocab, n_chunk = struct.unpack("<3i", head[8:20])
    if n_ctx < 2 or n_vocab < 1 or n_chunk < 1:
        raise ConvertError(f"{path}: header says n_ctx {n_ctx}, n_vocab {n_vocab}, n_chunk {n_chunk}; not a logits file")
    first = n_ctx // 2
    rows = n_ctx - 1 - first
    nv = _kld_row_u16(n_vocab)
    tok_bytes = 4 * n_chunk * n_ctx
    want = 20 + tok_bytes + n_chunk * rows * nv * 2
    if size != want:
        kind = "truncated" if size < want else "longer than its header says"
        raise ConvertError(
            f"{path}: {kind}: {size} bytes, the header (n_ctx {n_ctx}, n_vocab {n_vocab}, n_chunk {n_chunk}) "
            f"says {want}"
        )
    tokens = np.fromfile(path, dtype="<i4", count=n_chunk * n_ctx, offset=20).reshape(n_chunk, n_ctx)
    body = np.memmap(path, dtype="<u2", mode="r", offset=20 + tok_bytes, shape=(n_chunk, rows, nv))
    return {
        "format": "llama-perplexity --kl-divergence-base",
        "n_ctx": n_ctx,
        "n_vocab": n_vocab,
        "first": first,
        "tokens": tokens[:, first : n_ctx - 1],
        "body": body,
    }


def kld_logprobs(body: np.ndarray, n_vocab: int) -> np.ndarray:
    """[..., nv] uint16 rows → [..., n_vocab] float32 log-probabilities (scale·q + min)."""
    head = np.ascontiguousarray(body[..., :4]).view("<f4")  # [..., 2]: scale, min_log_prob
    scale = head[..., 0:1]
    lo = head[..., 1:2]
    q = body[..., 4 : 4 + n_vocab].astype(np.float32)
    return (scale * q + lo).astype(np.float32)


def read_capture(path: str) -> Dict[str, Any]:
    """Read a llamacpp-capture file (memory-mapped)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(28)
        if len(head) < 28:
            raise ConvertError(f"{path}: truncated: {size} bytes, shorter than the 28-byte header")
        T, V, H, L, dlen = struct.unpack("<5I", head[8:28])
        desc = f.read(dlen)
    if T < 1 or V < 1 or (L and H < 1):
        raise ConvertError(f"{path}: header says {T} tokens, vocabulary {V}, width {H}, {L} layers; not a capture")
    off = 28 + dlen
    want = off + 4 * T + 4 * T * V + 4 * L * T * H
    if size != want:
        kind = "truncated" if size < want else "longer than its header says"
        raise ConvertError(f"{path}: {kind}: {size} bytes, the header ({T} tokens, vocabulary {V}, {L} layers of {H}) says {want}")
    tokens = np.fromfile(path, dtype="<i4", count=T, offset=off).reshape(1, T)
    off += 4 * T
    logits = np.memmap(path, dtype="<f4", mode="r", offset=off, shape=(1, T, V))
    off += 4 * T * V
    hidden = [np.memmap(path, dtype="<f4", mode="r", offset=off + 4 * n * T * H, shape=(1, T, H)) for n in range(L)]
    return {
        "format": "llamacpp-capture",
        "n_vocab": V,
        "desc": desc.decode("utf-8", "replace"),
        "tokens": tokens,
        "logits": logits,
        "hidden": hidden,
    }


def _slice(spec: Optional[str], n: int, what: str) -> slice:
    if not spec:
        return slice(0, n)
    try:
        a, _, b = spec.partition(":")
        s = slice(int(a) if a else 0, int(b) if b else n)
    except ValueError:
        raise ConvertError(f"--{what} {spec!r}: START:STOP expected") from None
    lo, hi, _ = s.indices(n)
    if hi - lo < 1:
        raise ConvertError(f"--{what} {spec} selects nothing of {n}")
    return slice(lo, hi)


def _safetensors_tokens(path: str) -> Tuple[np.ndarray, Optional[int]]:
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        base = 8 + n
        t = header.get("tokens")
        if t is None:
            raise ConvertError(f"{path}: no `tokens` tensor")
        dt = {"I64": "<i8", "I32": "<i4"}.get(t["dtype"])
        if dt is None:
            raise ConvertError(f"{path}: tokens are {t['dtype']}, not I64 or I32")
        a, b = t["data_offsets"]
        f.seek(base + a)
        tok = np.frombuffer(f.read(b - a), dtype=dt).reshape(t["shape"]).astype(np.int64)
    lg = header.get("logits")
    return tok, (int(lg["shape"][-1]) if lg else None)


def load_tokens(path: str) -> Tuple[np.ndarray, Optional[int]]:
    """Expected tokens (and vocabulary, from a dump) from a JSON/text list or a .safetensors dump."""
    if path.endswith(".safetensors"):
        return _safetensors_tokens(path)
    with open(path) as f:
        text = f.read()
    try:
        tok = np.asarray(json.loads(text), dtype=np.int64)
    except (ValueError, TypeError):
        tok = np.asarray(text.replace(",", " ").split(), dtype=np.int64)
    return tok, None


def check_tokens(got: np.ndarray, want: np.ndarray, src: str, ref: str) -> None:
    w = want.reshape(1, -1) if want.ndim == 1 else want
    if w.shape != got.shape:
        raise ConvertError(f"{src} holds {got.shape[0]} passages of {got.shape[1]} tokens, {ref} {w.shape[0]} of {w.shape[1]}")
    diff = np.argwhere(w != got)
    if len(diff):
        p, t = (int(x) for x in diff[0])
        raise ConvertError(f"{src} and {ref} differ first at passage {p} position {t}: token {got[p, t]} against {w[p, t]}")


def _write_dump() -> Any:
    """gapscope's own writer: the installed package, else python/gapscope/numerics.py as a file."""
    try:
        from gapscope.numerics import write_dump

        return write_dump
    except ImportError:
        here = os.path.dirname(os.path.abspath(__file__))
        src = os.path.join(here, "..", "..", "python", "gapscope", "numerics.py")
        spec = importlib.util.spec_from_file_location("gapscope_numerics_file", src)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.write_dump


def _read(src: str) -> Dict[str, Any]:
    if not os.path.isfile(src):
        raise ConvertError(f"{src}: no such file")
    with open(src, "rb") as f:
        magic = f.read(8)
    if magic == KLD_MAGIC:
        return read_kld(src)
    if magic == CAP_MAGIC:
        return read_capture(src)
    raise ConvertError(
        f"{src}: magic {magic!r} is neither {KLD_MAGIC!r} (llama-perplexity --kl-divergence-base) "
        f"nor {CAP_MAGIC!r} (llamacpp-capture)"
    )


def _stack(srcs: List[str], ds: List[Dict[str, Any]]) -> Dict[str, Any]:
    """Several llamacpp-capture files (one passage each) → one dump of P passages."""
    a = ds[0]
    for p, d in zip(srcs, ds):
        if d["format"] != "llamacpp-capture":
            raise ConvertError(f"{p}: only llamacpp-capture files are stacked into passages (a .kld file holds its own chunks)")
        if (d["tokens"].shape, d["n_vocab"], len(d["hidden"])) != (a["tokens"].shape, a["n_vocab"], len(a["hidden"])) or (
            d["hidden"] and d["hidden"][0].shape != a["hidden"][0].shape
        ):
            raise ConvertError(
                f"{p}: {d['tokens'].shape[1]} tokens, vocabulary {d['n_vocab']}, {len(d['hidden'])} layers; "
                f"{srcs[0]}: {a['tokens'].shape[1]}, {a['n_vocab']}, {len(a['hidden'])}: passages of one dump must match"
            )
    return {
        "format": "llamacpp-capture",
        "n_vocab": a["n_vocab"],
        "desc": a["desc"],
        "tokens": np.concatenate([d["tokens"] for d in ds]),
        "logits": np.concatenate([d["logits"] for d in ds]),
        "hidden": [np.concatenate([d["hidden"][n] for d in ds]) for n in range(len(a["hidden"]))],
    }


def convert(
    src: "str | List[str]",
    out: str,
    *,
    tokens: Optional[str] = None,
    vocab: Optional[int] = None,
    passages: Optional[str] = None,
    positions: Optional[str] = None,
    engine: Optional[str] = None,
    model: str = "",
) -> Dict[str, Any]:
    """Convert `src` into the dump `out`; returns a short summary (shapes, format)."""
    srcs = [src] if isinstance(src, str) else list(src)
    ds = [_read(p) for p in srcs]
    if len(ds) > 1:
        d = _stack(srcs, ds)
        src = srcs[0] if len(srcs) == 1 else f"{srcs[0]} … {srcs[-1]}"
    else:
        d, src = ds[0], srcs[0]
    V = d["n_vocab"]
    tok_all = d["tokens"]
    ps = _slice(passages, tok_all.shape[0], "passages")
    ts = _slice(positions, tok_all.shape[1], "positions")
    tok = np.ascontiguousarray(tok_all[ps, ts]).astype(np.int64)
    bad = np.argwhere((tok < 0) | (tok >= V))
    if len(bad):
        p, t = (int(x) for x in bad[0])
        raise ConvertError(f"{src}: token {tok[p, t]} at passage {p} position {t} is outside the vocabulary ({V})")
    if vocab is not None and vocab != V:
        raise ConvertError(f"{src}: vocabulary {V}, expected {vocab} (--vocab)")
    if tokens:
        want, want_v = load_tokens(tokens)
        if want_v is not None and want_v != V:
            raise ConvertError(f"{src}: vocabulary {V}, {tokens} has {want_v}")
        check_tokens(tok, want, src, tokens)

    meta: Dict[str, str] = {"source": ", ".join(os.path.basename(p) for p in srcs), "source_format": d["format"]}
    if d["format"] == "llamacpp-capture":
        logits = np.ascontiguousarray(d["logits"][ps, ts])
        hidden: List[np.ndarray] = [np.ascontiguousarray(h[ps, ts]) for h in d["hidden"]]
        eng = engine or "llama.cpp"
        meta["logits_from"] = "exact float32 (llama_get_logits_ith)"
        meta["hidden_from"] = "l_out-N (residual stream after layer N)" if hidden else "none"
        model = model or d["desc"]
    else:
        logits = kld_logprobs(d["body"][ps, ts], V)
        hidden = []
        eng = engine or "llama.cpp (llama-perplexity)"
        meta["logits_from"] = "log-probabilities, uint16-quantised (step <= 16/65535, floor top-16)"
        meta["n_ctx"] = str(d["n_ctx"])
        meta["first_position_in_chunk"] = str(d["first"] + ts.start)
        bad = np.argwhere(~np.isfinite(logits))
        if len(bad):
            p, t, i = (int(x) for x in bad[0])
            raise ConvertError(f"{src}: row scale/min not finite at passage {p} position {t} (index {i})")
    if tok.shape[0] == 1 and d["format"] == "llamacpp-capture" and len(srcs) == 1:
        tok, logits, hidden = tok[0], logits[0], [h[0] for h in hidden]
    _write_dump()(out, tok, logits, hidden=hidden, engine=eng, model=model, dtype="float32", **meta)
    return {"format": d["format"], "tokens": list(tok.shape), "vocab": V, "layers": len(hidden)}


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("input", nargs="+", help="a llama-perplexity --kl-divergence-base file, or llamacpp-capture files (one passage each)")
    ap.add_argument("output", help="the dump to write (.safetensors)")
    ap.add_argument("--tokens", help="the tokens the dump must hold: JSON/text ids or another dump (.safetensors)")
    ap.add_argument("--vocab", type=int, help="the vocabulary size the dump must have")
    ap.add_argument("--passages", help="keep passages (chunks) START:STOP")
    ap.add_argument("--positions", help="keep positions START:STOP of each passage")
    ap.add_argument("--engine", help="the dump's engine name (default: llama.cpp …)")
    ap.add_argument("--model", default="", help="the dump's model name")
    a = ap.parse_args(argv)
    try:
        s = convert(
            a.input, a.output, tokens=a.tokens, vocab=a.vocab, passages=a.passages,
            positions=a.positions, engine=a.engine, model=a.model,
        )
    except ConvertError as e:
        print(f"llamacpp_to_dump: error: {e}", file=sys.stderr)
        return 2
    print(f"{a.output}: {s['format']}: tokens {s['tokens']}, vocabulary {s['vocab']}, {s['layers']} hidden layers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
