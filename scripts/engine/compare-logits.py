#!/usr/bin/env python3
"""Compare an engine's logits against the Hugging Face reference logits of a tiny model.

The reference directory (written by scripts/engine/hf-tiny-models.py) holds:

  MODEL_DIR/tokens.json    {"prompt_len": P, "tokens": [P + gen ids], "model": ..., "dtype": ...}
  MODEL_DIR/hf_logits.f32  raw little-endian float32, shape [gen, vocab], row-major

Row i of the logits predicts token tokens[P + i] (row 0 comes from the prompt's last
position). The engine's file (--engine FILE) must have the same layout, the same number of
rows (gen = len(tokens) - prompt_len) and the same vocab (inferred from the file sizes).

Metrics:
  top1_agreement  fraction of rows whose argmax (first maximal index) is the same
  rel_err(row)    max_j |engine - hf| / max_j |hf|   over that row
  max_rel_err     max over rows of rel_err(row);  mean_rel_err: its mean
  max_abs_diff    max over all elements of |engine - hf|
  identical       fraction of all elements where the engine's f32 value equals HF's exactly
                  (near 1 only when the engine rounds as HF does: logits --numerics hf-bf16)

A non-finite engine value (NaN/Inf) makes its row's rel_err infinite and its row a top-1
mismatch; they are counted in "engine_nonfinite".

Near-ties: with random bf16 weights the HF top-1 and top-2 logits are sometimes equal or
within bf16 noise (hf-tiny-models.py records how often in hf_meta.json). Each mismatch is
listed with hf_margin = hf[hf_argmax] - hf[engine_argmax]; "top1_agreement_tie_aware"
also counts mismatches with hf_margin <= --tie-tol (0 when not given: exact HF ties) as
agreeing. The pass/fail verdict uses the strict top1_agreement unless --tie-tol is given.

Exit status: 0 when top1_agreement (tie-aware one with --tie-tol) >= --min-top1 (and max_rel_err <= --max-rel-err when
that is given), 1 otherwise, 2 with one line on stderr for malformed input (missing file,
bad JSON, file sizes that do not fit).

Usage:
  python3 scripts/engine/compare-logits.py DIR/tiny-llama --engine engine_logits.f32
  python3 scripts/engine/compare-logits.py DIR/tiny-llama --engine e.f32 --min-top1 0.95 --json cmp.json
  python3 scripts/engine/compare-logits.py DIR/tiny-qwen2 --engine e.f32 --tie-tol 0.02 --max-rel-err 0.05
  python3 scripts/engine/compare-logits.py --self-test

Uses torch for the arithmetic when it can be imported, else pure Python (array + struct);
--backend forces one. No other dependency.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import io
import json
import math
import os
import struct
import sys
import tempfile

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_MALFORMED = 2
MAX_MISMATCHES_LISTED = 20


class Malformed(Exception):
    """Bad input: reported as one line, exit status 2."""


# --------------------------------------------------------------------------------------
# Input
# --------------------------------------------------------------------------------------


def read_tokens(model_dir: str) -> dict:
    path = os.path.join(model_dir, "tokens.json")
    if not os.path.isfile(path):
        raise Malformed(f"missing {path} (is {model_dir!r} a directory made by hf-tiny-models.py?)")
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise Malformed(f"cannot read {path}: {e}") from None
    if not isinstance(d, dict):
        raise Malformed(f"{path}: expected a JSON object")
    p = d.get("prompt_len")
    toks = d.get("tokens")
    if not isinstance(p, int) or isinstance(p, bool) or p < 1:
        raise Malformed(f"{path}: 'prompt_len' must be a positive integer, got {p!r}")
    if not isinstance(toks, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in toks):
        raise Malformed(f"{path}: 'tokens' must be a list of integers")
    if len(toks) <= p:
        raise Malformed(f"{path}: {len(toks)} tokens but prompt_len is {p}; nothing was generated")
    return d


def file_floats(path: str, what: str) -> int:
    """Number of float32 values in a raw file, with checks."""
    if not os.path.isfile(path):
        raise Malformed(f"missing {what} logits file {path}")
    size = os.path.getsize(path)
    if size == 0:
        raise Malformed(f"{what} logits file {path} is empty")
    if size % 4:
        raise Malformed(f"{what} logits file {path}: {size} bytes is not a multiple of 4 (float32)")
    return size // 4


def infer_shapes(hf_path: str, eng_path: str, rows: int) -> int:
    """Return vocab; raise Malformed when the two files do not both hold [rows, vocab]."""
    n_hf = file_floats(hf_path, "HF")
    n_eng = file_floats(eng_path, "engine")
    if n_hf % rows:
        raise Malformed(f"HF logits {hf_path}: {n_hf} floats is not a multiple of {rows} rows "
                        f"(gen = len(tokens) - prompt_len)")
    vocab = n_hf // rows
    if n_eng != n_hf:
        if n_eng % vocab == 0:
            raise Malformed(f"engine logits {eng_path} has {n_eng // vocab} rows of vocab {vocab}, "
                            f"expected {rows} rows ({n_eng} floats vs {n_hf})")
        if n_eng % rows == 0:
            raise Malformed(f"engine logits {eng_path}: {rows} rows of vocab {n_eng // rows}, "
                            f"expected vocab {vocab} ({n_eng} floats vs {n_hf})")
        raise Malformed(f"engine logits {eng_path}: {n_eng} floats does not fit [{rows}, {vocab}] "
                        f"(HF has {n_hf})")
    return vocab


def config_vocab(model_dir: str):
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            v = json.load(f).get("vocab_size")
        return v if isinstance(v, int) else None
    except (OSError, ValueError, AttributeError):
        return None


def read_f32_python(path: str) -> array.array:
    a = array.array("f")
    if a.itemsize != 4:  # pragma: no cover - exotic platform
        raise Malformed("this Python's array('f') is not 4 bytes")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder == "big":  # files are little-endian
        a.byteswap()
    return a


def write_f32(path: str, values) -> None:
    """Write an iterable of floats as raw little-endian float32 (used by the self-test)."""
    a = array.array("f", values)
    if sys.byteorder == "big":
        a.byteswap()
    with open(path, "wb") as f:
        f.write(a.tobytes())


# --------------------------------------------------------------------------------------
# Metrics
# --------------------------------------------------------------------------------------


def _argmax(seq) -> int:
    """First index of the maximum; NaN never wins (returns -1 when the row is all NaN)."""
    best_i, best = -1, -math.inf
    for i, v in enumerate(seq):
        if v > best or (best_i < 0 and v == best):  # v == -inf on an all -inf row
            best_i, best = i, v
    return best_i


def bf16_round(v: float) -> float:
    """v rounded to bfloat16 (nearest, ties to even), as torch's .to(torch.bfloat16) does."""
    if not math.isfinite(v):
        return v
    u = struct.unpack("<I", struct.pack("<f", v))[0]
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0]


def metrics_python(hf: array.array, eng: array.array, rows: int, vocab: int, tie_tol: float = 0.0,
                   engine_bf16: bool = False) -> dict:
    per_row = []
    matches = 0
    max_abs = 0.0
    nonfinite = 0
    mism = []
    identical = 0
    for r in range(rows):
        lo, hi = r * vocab, (r + 1) * vocab
        h = hf[lo:hi]
        e = eng[lo:hi]
        bad = 0
        row_abs = 0.0
        for a, b in zip(h, e):
            if not math.isfinite(b):
                bad += 1
                continue
            identical += a == b
            d = abs(a - b)
            if d > row_abs:
                row_abs = d
        nonfinite += bad
        hmax = max(abs(v) for v in h)
        if bad:
            rel = math.inf
            row_abs = math.inf
        elif hmax > 0:
            rel = row_abs / hmax
        else:
            rel = 0.0 if row_abs == 0 else math.inf
        per_row.append(rel)
        max_abs = max(max_abs, row_abs)
        ah = _argmax(h)
        ae = _argmax([bf16_round(v) for v in e] if engine_bf16 else e) if not bad else -1
        if ah == ae:
            matches += 1
        else:
            mism.append(_mismatch(r, ah, ae, h))
    return _summary(rows, vocab, matches, per_row, max_abs, nonfinite, mism, tie_tol, identical)


def metrics_torch(hf_path: str, eng_path: str, rows: int, vocab: int, tie_tol: float = 0.0,
                  engine_bf16: bool = False) -> dict:
    import torch

    def load(path):
        if sys.byteorder == "big":  # pragma: no cover - the files are little-endian
            return torch.tensor(read_f32_python(path), dtype=torch.float64).reshape(rows, vocab)
        with open(path, "rb") as f:
            buf = bytearray(f.read())
        return torch.frombuffer(buf, dtype=torch.float32).reshape(rows, vocab).double()

    hf = load(hf_path)
    eng = load(eng_path)
    finite = torch.isfinite(eng)
    bad_rows = ~finite.all(dim=1)
    nonfinite = int((~finite).sum())
    diff = (eng - hf).abs()
    diff = torch.where(finite, diff, torch.zeros_like(diff))
    row_abs = diff.max(dim=1).values
    hmax = hf.abs().max(dim=1).values
    rel = torch.where(hmax > 0, row_abs / torch.where(hmax > 0, hmax, torch.ones_like(hmax)),
                      torch.where(row_abs == 0, torch.zeros_like(row_abs), torch.full_like(row_abs, math.inf)))
    rel = torch.where(bad_rows, torch.full_like(rel, math.inf), rel)
    row_abs = torch.where(bad_rows, torch.full_like(row_abs, math.inf), row_abs)
    ah = hf.argmax(dim=1)
    eng_clean = torch.where(finite, eng, torch.full_like(eng, -math.inf))
    if engine_bf16:
        eng_clean = eng_clean.float().to(torch.bfloat16).double()
    ae = torch.where(bad_rows, torch.full_like(ah, -1), eng_clean.argmax(dim=1))
    match = ah == ae
    mism = []
    for r in (~match).nonzero().flatten().tolist():
        mism.append(_mismatch(r, int(ah[r]), int(ae[r]), hf[r].tolist()))
    identical = int((eng == hf).sum())
    return _summary(rows, vocab, int(match.sum()), rel.tolist(), float(row_abs.max()), nonfinite, mism, tie_tol,
                    identical)


def _mismatch(row: int, ah: int, ae: int, hf_row) -> dict:
    """A top-1 mismatch, with how close the HF logits of the two tokens were."""
    d = {"row": row, "hf_argmax": ah, "engine_argmax": ae}
    if ae >= 0:
        d["hf_margin"] = float(hf_row[ah]) - float(hf_row[ae])  # >= 0; small means near-tie
    return d


def _summary(rows, vocab, matches, per_row, max_abs, nonfinite, mism, tie_tol, identical) -> dict:
    mean_rel = sum(per_row) / len(per_row) if per_row else 0.0
    near_ties = sum(1 for x in mism if "hf_margin" in x and x["hf_margin"] <= tie_tol)
    return {
        "rows": rows,
        "vocab": vocab,
        "top1_matches": matches,
        "top1_agreement": matches / rows if rows else 0.0,
        "max_rel_err": max(per_row) if per_row else 0.0,
        "mean_rel_err": mean_rel,
        "max_abs_diff": max_abs,
        "identical": identical / (rows * vocab) if rows * vocab else 0.0,
        "engine_nonfinite": nonfinite,
        "tie_tol": tie_tol,
        "top1_near_tie_mismatches": near_ties,
        "top1_agreement_tie_aware": (matches + near_ties) / rows if rows else 0.0,
        "mismatches": mism[:MAX_MISMATCHES_LISTED],
        "mismatches_total": len(mism),
    }


def have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except Exception:
        return False
    return True


def compare(model_dir: str, engine_path: str, backend: str = "auto", tie_tol: float = 0.0,
            engine_bf16: bool = False) -> dict:
    """Validate the inputs and compute the metrics (raises Malformed)."""
    if not os.path.isdir(model_dir):
        raise Malformed(f"model directory {model_dir!r} does not exist")
    tok = read_tokens(model_dir)
    rows = len(tok["tokens"]) - tok["prompt_len"]
    hf_path = os.path.join(model_dir, "hf_logits.f32")
    vocab = infer_shapes(hf_path, engine_path, rows)
    cv = config_vocab(model_dir)
    if cv is not None and cv != vocab:
        raise Malformed(f"HF logits have vocab {vocab} but {model_dir}/config.json says vocab_size {cv}")
    if backend == "auto":
        backend = "torch" if have_torch() else "python"
    if backend == "torch":
        if not have_torch():
            raise Malformed("--backend torch but torch cannot be imported")
        m = metrics_torch(hf_path, engine_path, rows, vocab, tie_tol, engine_bf16)
    else:
        m = metrics_python(read_f32_python(hf_path), read_f32_python(engine_path), rows, vocab, tie_tol,
                           engine_bf16)
    m["engine_bf16"] = engine_bf16
    m["backend"] = backend
    m["model_dir"] = model_dir
    m["engine"] = engine_path
    m["model"] = tok.get("model")
    m["prompt_len"] = tok["prompt_len"]
    return m


def verdict(m: dict, min_top1: float, max_rel_err, tie_aware: bool = False) -> bool:
    agree = m["top1_agreement_tie_aware"] if tie_aware else m["top1_agreement"]
    ok = agree >= min_top1
    if max_rel_err is not None:
        ok = ok and m["max_rel_err"] <= max_rel_err
    return ok


def summary_line(m: dict, ok: bool) -> str:
    s = (f"{'PASS' if ok else 'FAIL'} {m.get('model') or m['model_dir']}: top1 {m['top1_agreement']:.4f} "
         f"({m['top1_matches']}/{m['rows']} rows), max rel err {m['max_rel_err']:.3e}, "
         f"mean rel err {m['mean_rel_err']:.3e}, max abs diff {m['max_abs_diff']:.3e}, "
         f"{100 * m['identical']:.2f}% of logits bit-identical, vocab {m['vocab']}")
    if m["top1_near_tie_mismatches"]:
        s += (f", tie-aware top1 {m['top1_agreement_tie_aware']:.4f} "
              f"({m['top1_near_tie_mismatches']} mismatches within {m['tie_tol']:g} of the HF max)")
    if m["engine_nonfinite"]:
        s += f", {m['engine_nonfinite']} non-finite engine values"
    if m["mismatches_total"]:
        near = [x["hf_margin"] for x in m["mismatches"] if "hf_margin" in x]
        if near:
            s += f"; smallest HF margin among listed mismatches {min(near):.3e}"
    return s


def _json_safe(x):
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)  # "inf"/"nan": strict JSON has no such numbers
    if isinstance(x, dict):
        return {k: _json_safe(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_json_safe(v) for v in x]
    return x


# --------------------------------------------------------------------------------------
# Self-test
# --------------------------------------------------------------------------------------


def self_test() -> int:
    import random

    rng = random.Random(1234)
    P, rows, vocab = 4, 6, 50
    failures = []

    def check(cond, what):
        print(f"  {'ok  ' if cond else 'FAIL'} {what}")
        if not cond:
            failures.append(what)

    backends = ["python"] + (["torch"] if have_torch() else [])
    with tempfile.TemporaryDirectory(prefix="compare_logits_selftest_") as d:
        md = os.path.join(d, "tiny")
        os.makedirs(md)
        toks = [rng.randrange(vocab) for _ in range(P + rows)]
        with open(os.path.join(md, "tokens.json"), "w") as f:
            json.dump({"prompt_len": P, "tokens": toks, "model": "selftest", "dtype": "bfloat16"}, f)
        with open(os.path.join(md, "config.json"), "w") as f:
            json.dump({"vocab_size": vocab}, f)
        # HF rows: the argmax is clear (planted +5 on one token per row).
        hf = []
        for r in range(rows):
            row = [rng.gauss(0.0, 1.0) for _ in range(vocab)]
            row[(7 * r + 3) % vocab] = 6.0 + r * 0.25
            hf.append(row)
        hf[5][0] = hf[5][(7 * 5 + 3) % vocab] - 0.01  # a near-tie in row 5 (margin ~0.01)
        hf[3][10] = hf[3][20] = 7.5  # an exact tie in row 3, as bf16 logits have (argmax: 10)
        flat = [v for row in hf for v in row]
        # float32-rounded reference, so expected numbers are exact for both backends
        flat32 = list(array.array("f", flat))
        write_f32(os.path.join(md, "hf_logits.f32"), flat32)

        def engine_file(name, vals):
            p = os.path.join(d, name)
            write_f32(p, vals)
            return p

        # 1. identical
        same = engine_file("same.f32", flat32)
        # 2. small perturbation: each element * (1 + 1e-3), argmax preserved
        small = engine_file("small.f32", [v * (1 + 1e-3) for v in flat32])
        # 3. two rows with a different argmax (rows 1 and 4): must fail at min-top1 0.99
        bad_vals = list(flat32)
        for r in (1, 4):
            j = ((7 * r + 3) % vocab + 1) % vocab
            bad_vals[r * vocab + j] = 100.0
        bad = engine_file("bad.f32", bad_vals)
        # 4. a NaN in row 2
        nan_vals = list(flat32)
        nan_vals[2 * vocab + 5] = float("nan")
        nanf = engine_file("nan.f32", nan_vals)
        # 5. the near-tie of row 5 flipped (engine token 0 by 0.01): strict fails, tie-aware passes
        tie_vals = list(flat32)
        tie_vals[5 * vocab + 0] += 0.02
        tie = engine_file("tie.f32", tie_vals)
        # 5b. the exact tie of row 3 split by less than a bf16 step in the engine's favour of 20:
        #     strict top-1 misses it, the engine's logits rounded to bf16 tie again and agree
        bt_vals = list(flat32)
        bt_vals[3 * vocab + 20] += 0.001
        btie = engine_file("btie.f32", bt_vals)
        # 6. malformed: one row short, one float short
        short = engine_file("short.f32", flat32[:-vocab])
        ragged = engine_file("ragged.f32", flat32[:-1])

        hmax = [max(abs(v) for v in flat32[r * vocab:(r + 1) * vocab]) for r in range(rows)]
        for be in backends:
            print(f"backend {be}:")
            m = compare(md, same, be)
            check(m["top1_agreement"] == 1.0 and m["max_rel_err"] == 0.0 and m["max_abs_diff"] == 0.0,
                  "identical files: top1 1.0, zero error")
            check(verdict(m, 0.99, None), "identical files pass")

            m = compare(md, small, be)
            exp_abs = max(abs(float(array.array("f", [v * (1 + 1e-3)])[0]) - v) for v in flat32)
            check(m["top1_agreement"] == 1.0, "1e-3 relative perturbation keeps top1 1.0")
            check(abs(m["max_rel_err"] - 1e-3) < 2e-5, f"max rel err ~1e-3 (got {m['max_rel_err']:.6e})")
            check(abs(m["mean_rel_err"] - 1e-3) < 2e-5, f"mean rel err ~1e-3 (got {m['mean_rel_err']:.6e})")
            check(abs(m["max_abs_diff"] - exp_abs) < 1e-9, f"max abs diff {exp_abs:.6e} (got {m['max_abs_diff']:.6e})")
            check(verdict(m, 0.99, None) and verdict(m, 0.99, 2e-3) and not verdict(m, 0.99, 5e-4),
                  "--max-rel-err threshold applies")

            m = compare(md, bad, be)
            check(m["top1_matches"] == rows - 2 and abs(m["top1_agreement"] - 4 / 6) < 1e-12,
                  "two changed argmaxes: top1 4/6")
            check([x["row"] for x in m["mismatches"]] == [1, 4], "mismatching rows listed as [1, 4]")
            exp_rel = max((100.0 - flat32[r * vocab + ((7 * r + 3) % vocab + 1) % vocab]) / hmax[r] for r in (1, 4))
            check(abs(m["max_rel_err"] - exp_rel) < 1e-9, f"max rel err {exp_rel:.6f} (got {m['max_rel_err']:.6f})")
            check(not verdict(m, 0.99, None), "two changed argmaxes FAIL at --min-top1 0.99")
            check(verdict(m, 0.6, None), "... but pass at --min-top1 0.6")

            m = compare(md, btie, be)
            check(m["top1_matches"] == rows - 1 and [x["row"] for x in m["mismatches"]] == [3],
                  "a tie split below bf16 resolution: strict top1 misses row 3")
            m = compare(md, btie, be, engine_bf16=True)
            # (Row 5's 0.01 margin is below bf16 resolution too, so rounding ties it where this
            # float32 reference does not; a real HF reference is bf16 and ties there as well.)
            check(m["engine_bf16"] and 3 not in [x["row"] for x in m["mismatches"]],
                  "--engine-bf16: the split tie rounds back to a tie, first index agrees")
            check(m["max_abs_diff"] > 0.0009, "--engine-bf16 keeps the error on float32 values")
            check(bf16_round(7.501) == 7.5 and bf16_round(1.0 + 2 ** -8) == 1.0
                  and bf16_round(1.0 + 3 * 2 ** -8) == 1.0 + 2 ** -6 and bf16_round(-7.5) == -7.5,
                  "bf16 rounding is nearest-even")
            m = compare(md, tie, be, tie_tol=0.05)
            check(m["top1_agreement"] == 5 / 6 and m["top1_near_tie_mismatches"] == 1
                  and m["top1_agreement_tie_aware"] == 1.0 and abs(m["mismatches"][0]["hf_margin"] - 0.01) < 1e-5,
                  "near-tie flip: strict 5/6, tie-aware 1.0, hf_margin ~0.01")
            check(not verdict(m, 0.99, None) and verdict(m, 0.99, None, tie_aware=True),
                  "near-tie flip fails strict, passes tie-aware")
            m = compare(md, tie, be, tie_tol=0.005)
            check(m["top1_near_tie_mismatches"] == 0, "near-tie flip beyond --tie-tol 0.005 still counts")
            m = compare(md, bad, be, tie_tol=0.5)
            check(not verdict(m, 0.99, None, tie_aware=True), "clear mismatches fail even tie-aware")

            m = compare(md, nanf, be)
            check(m["engine_nonfinite"] == 1 and m["top1_matches"] == rows - 1 and math.isinf(m["max_rel_err"]),
                  "NaN: counted, its row mismatches, max rel err inf")
            check(not verdict(m, 0.99, None), "NaN row fails at 0.99")

            for path, what in ((short, "one row short"), (ragged, "one float short"),
                               (os.path.join(d, "absent.f32"), "missing engine file")):
                try:
                    compare(md, path, be)
                    check(False, f"{what} is malformed")
                except Malformed as e:
                    check(True, f"{what} is malformed: {e}")
            try:
                compare(os.path.join(d, "nope"), same, be)
                check(False, "missing model dir is malformed")
            except Malformed as e:
                check(True, f"missing model dir is malformed: {e}")

        # The CLI's exit statuses, end to end (in-process).
        print("cli:")
        check(main([md, "--engine", same, "--backend", "python"]) == EXIT_OK, "exit 0 on identical")
        check(main([md, "--engine", bad, "--backend", "python"]) == EXIT_FAIL, "exit 1 on two mismatches")
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = main([md, "--engine", short, "--backend", "python"])
        check(rc == EXIT_MALFORMED and err.getvalue().count("\n") == 1 and "error:" in err.getvalue(),
              "exit 2 and one stderr line on a short file")
        check(main([md, "--engine", tie, "--backend", "python"]) == EXIT_FAIL, "exit 1 on near-tie flip (strict)")
        check(main([md, "--engine", tie, "--backend", "python", "--tie-tol", "0.05"]) == EXIT_OK,
              "exit 0 on near-tie flip with --tie-tol 0.05")
        out_json = os.path.join(d, "cmp.json")
        rc = main([md, "--engine", nanf, "--backend", "python", "--json", out_json])
        with open(out_json) as f:
            j = json.load(f)
        check(rc == EXIT_FAIL and j["pass"] is False and j["max_rel_err"] == "inf", "--json written, inf as string")

    if failures:
        print(f"self-test: {len(failures)} FAILED")
        return EXIT_FAIL
    print("self-test: all passed")
    return EXIT_OK


# --------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------


def main(argv=None) -> int:
    p = argparse.ArgumentParser(
        prog="compare-logits.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model_dir", metavar="MODEL_DIR", nargs="?",
                   help="reference directory with tokens.json and hf_logits.f32 (e.g. DIR/tiny-llama)")
    p.add_argument("--engine", metavar="FILE", help="the engine's logits: raw float32 [rows, vocab]")
    p.add_argument("--min-top1", type=float, default=0.99,
                   help="pass when top-1 agreement >= this (default 0.99)")
    p.add_argument("--max-rel-err", type=float, default=None,
                   help="also require max_rel_err <= this (default: not checked)")
    p.add_argument("--tie-tol", type=float, default=None, metavar="T",
                   help="judge by the tie-aware top-1 agreement: a mismatch where the HF logit of the "
                        "engine's token is within T of the HF maximum counts as agreeing (default: "
                        "strict top-1)")
    p.add_argument("--engine-bf16", action="store_true",
                   help="take the engine's top-1 from its logits rounded to bfloat16 (nearest even), "
                        "the precision of the HF reference, first index on ties as torch.argmax; "
                        "errors are still measured on the engine's float32 values")
    p.add_argument("--json", metavar="OUT", help="write the metrics as JSON to OUT")
    p.add_argument("--backend", choices=("auto", "torch", "python"), default="auto",
                   help="arithmetic backend (default auto: torch when importable)")
    p.add_argument("--self-test", action="store_true",
                   help="run the built-in self-test on synthetic files and exit")
    args = p.parse_args(argv)

    if args.self_test:
        return self_test()
    if not args.model_dir or not args.engine:
        p.print_usage(sys.stderr)
        print("compare-logits.py: error: MODEL_DIR and --engine FILE are required", file=sys.stderr)
        return EXIT_MALFORMED
    if not 0.0 <= args.min_top1 <= 1.0:
        print(f"compare-logits.py: error: --min-top1 must be in [0, 1], got {args.min_top1}", file=sys.stderr)
        return EXIT_MALFORMED
    try:
        m = compare(args.model_dir, args.engine, args.backend,
                    0.0 if args.tie_tol is None else args.tie_tol, args.engine_bf16)
    except Malformed as e:
        print(f"compare-logits.py: error: {e}", file=sys.stderr)
        return EXIT_MALFORMED
    if args.tie_tol is not None and args.tie_tol < 0:
        print(f"compare-logits.py: error: --tie-tol must be >= 0, got {args.tie_tol}", file=sys.stderr)
        return EXIT_MALFORMED
    ok = verdict(m, args.min_top1, args.max_rel_err, tie_aware=args.tie_tol is not None)
    m["verdict_uses"] = "top1_agreement_tie_aware" if args.tie_tol is not None else "top1_agreement"
    m["min_top1"] = args.min_top1
    m["max_rel_err_limit"] = args.max_rel_err
    m["pass"] = ok
    print(summary_line(m, ok))
    if args.json:
        try:
            d = os.path.dirname(os.path.abspath(args.json))
            os.makedirs(d, exist_ok=True)
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(_json_safe(m), f, indent=2)
                f.write("\n")
        except OSError as e:
            print(f"compare-logits.py: error: cannot write {args.json}: {e}", file=sys.stderr)
            return EXIT_MALFORMED
    return EXIT_OK if ok else EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
