#!/usr/bin/env python3
"""Recompute every figure of `gapscope numerics --json` with numpy, independently of
gapscope (docs/NUMERICS.md): per-position KL, top-1 and log-probabilities, the summary's
means, perplexities and Δppl, and each layer's relative error, all in float64 from the
dumps' own bytes. Fails when any differs by more than 1e-6 relative.

    gapscope numerics ref.safetensors other.safetensors --json > r.json
    python3 scripts/numerics-check.py r.json

The bootstrap interval is not recomputed (it depends on the resampling generator).
"""
import json
import struct
import sys

import numpy as np

REL = 1e-6


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    start = 8 + n
    mm = np.memmap(path, dtype=np.uint8, mode="r")

    def tensor(name):
        e = header[name]
        a, b = e["data_offsets"]
        raw = mm[start + a : start + b]
        dt = e["dtype"]
        if dt == "BF16":
            x = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "F16":
            x = raw.view("<f2")
        elif dt == "F32":
            x = raw.view("<f4")
        elif dt == "F64":
            x = raw.view("<f8")
        elif dt == "I64":
            x = raw.view("<i8")
        else:
            x = raw.view("<i4")
        return x.reshape(e["shape"])

    tokens = tensor("tokens").reshape(-1, tensor("tokens").shape[-1])
    p, t = tokens.shape
    logits = tensor("logits").reshape(p * t, -1)
    layers = sorted(int(k.split(".")[1]) for k in header if k.startswith("hidden."))
    hidden = [tensor(f"hidden.{l}").reshape(p * t, -1) for l in layers]
    return tokens, logits, hidden


def close(a, b, what):
    if a is None or b is None:
        if a is not b:
            raise SystemExit(f"numerics-check: {what}: {a} against {b}")
        return
    a, b = float(a), float(b)
    if abs(a - b) > REL * max(abs(a), abs(b)) + 1e-12:
        raise SystemExit(f"numerics-check: {what}: gapscope {a!r}, numpy {b!r}")


def check(ref_path, c):
    tok, lr_all, hr = load(ref_path)
    tok2, lo_all, ho = load(c["other"]["path"])
    assert (tok == tok2).all()
    p, t = tok.shape
    rows = c["positions"]
    nll_r = np.zeros(p)
    nll_o = np.zeros(p)
    cnt = np.zeros(p)
    kls, agree, dl = [], 0, []
    chunk = 64
    for start in range(0, p * t, chunk):
        r = lr_all[start : start + chunk].astype(np.float64)
        o = lo_all[start : start + chunk].astype(np.float64)
        r = r - r.max(axis=1, keepdims=True)
        o = o - o.max(axis=1, keepdims=True)
        r = r - np.log(np.exp(r).sum(axis=1, keepdims=True))
        o = o - np.log(np.exp(o).sum(axis=1, keepdims=True))
        kl = (np.exp(r) * (r - o)).sum(axis=1)
        for k in range(r.shape[0]):
            i = start + k
            row = rows[i]
            what = f"{c['other']['path']} position {i}"
            close(row["kl"], max(kl[k], 0.0), what + " KL")
            assert row["top1_reference"] == int(np.argmax(lr_all[i])), what
            assert row["top1_other"] == int(np.argmax(lo_all[i])), what
            kls.append(max(kl[k], 0.0))
            agree += row["top1_reference"] == row["top1_other"]
            pi, ti = divmod(i, t)
            if ti + 1 < t:
                n = int(tok[pi, ti + 1])
                close(row["logp_reference"], r[k, n], what + " log p (reference)")
                close(row["logp_other"], o[k, n], what + " log p (other)")
                nll_r[pi] -= r[k, n]
                nll_o[pi] -= o[k, n]
                cnt[pi] += 1
                dl.append(abs(r[k, n] - o[k, n]))
    s = c["summary"]
    close(s["kl_mean"], np.mean(kls), "KL mean")
    close(s["kl_max"], np.max(kls), "KL max")
    close(s["top1_agreement_pct"], 100.0 * agree / len(kls), "top-1 %")
    close(s["dlogp_mean"], np.mean(dl), "|Δ log p| mean")
    close(s["dlogp_max"], np.max(dl), "|Δ log p| max")
    ppl_r = np.exp(nll_r.sum() / cnt.sum())
    ppl_o = np.exp(nll_o.sum() / cnt.sum())
    close(s["ppl_reference"], ppl_r, "ppl (reference)")
    close(s["ppl_other"], ppl_o, "ppl (other)")
    close(s["dppl_pct"], 100.0 * (ppl_o / ppl_r - 1.0), "Δppl %")
    n = 9 + 4 * len(rows)
    if c["layers"] is not None:
        for l, (a, b) in enumerate(zip(hr, ho)):
            a = a.astype(np.float64)
            b = b.astype(np.float64)
            e = np.sqrt(((b - a) ** 2).sum() / (a**2).sum())
            close(c["layers"]["error"][l], e, f"layer {l} relative error")
            n += 1
    return n


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    r = json.load(open(sys.argv[1]))
    figures = 0
    pairs = [(c["against"], c) for c in r["comparisons"]]
    if r.get("identity"):
        pairs.append((r["identity"]["against"], r["identity"]))
    for ref, c in pairs:
        figures += check(ref, c)
    print(f"numerics-check: ok: {figures} figures over {len(pairs)} comparisons agree with numpy within {REL:g}")


if __name__ == "__main__":
    main()
