"""Logits and hidden-state dumps for ``gapscope numerics`` (docs/NUMERICS.md).

A dump is a safetensors file: ``tokens`` (int64 ``[T]`` or ``[P, T]``), ``logits``
(``[T, V]`` or ``[P, T, V]``; float32, bfloat16 or float16) and optionally ``hidden.N``
(the residual stream after decoder layer N), with ``engine``, ``model`` and ``dtype`` in
its metadata. Row t of the logits is the distribution of token t + 1.

>>> from gapscope import numerics
>>> numerics.dump_hf(model, tokens, "hf-bf16.safetensors", engine="hf bf16 eager")
>>> numerics.write_dump("mine.safetensors", tokens, logits, hidden=[h0, h1], engine="mine")
>>> r = numerics.compare("hf-f32.safetensors", "hf-bf16.safetensors")
>>> r.comparisons[0].verdict
"""
from __future__ import annotations

import json
import os
import struct
from typing import Any, Dict, Iterable, List, Optional, Sequence

try:
    from ._records import Record
except ImportError:  # loaded as a file, without the compiled package (a GPU machine)
    Record = object  # type: ignore[misc,assignment]

_DTYPES = {
    "float32": ("F32", 4),
    "float64": ("F64", 8),
    "float16": ("F16", 2),
    "bfloat16": ("BF16", 2),
    "int64": ("I64", 8),
}


def _raw(x: Any) -> tuple:
    """(safetensors dtype, shape, bytes) of a torch tensor or anything numpy takes."""
    mod = type(x).__module__
    if mod.startswith("torch"):
        import torch

        t = x.detach().contiguous().cpu()
        name = str(t.dtype).replace("torch.", "")
        if name not in _DTYPES:
            t, name = t.float(), "float32"
        st = _DTYPES[name][0]
        if name == "bfloat16":
            data = t.view(torch.int16).numpy().tobytes()
        else:
            data = t.numpy().tobytes()
        return st, list(t.shape), data
    import numpy as np

    a = np.ascontiguousarray(x)
    name = str(a.dtype)
    if name not in _DTYPES:
        raise ValueError(f"gapscope numerics: {name} tensors are not written; use float32 or float16")
    return _DTYPES[name][0], list(a.shape), a.astype(a.dtype.newbyteorder("<")).tobytes()


def write_dump(
    path: "os.PathLike[str] | str",
    tokens: Any,
    logits: Any,
    hidden: Optional[Sequence[Any]] = None,
    *,
    engine: str,
    model: str = "",
    dtype: str = "",
    **meta: str,
) -> None:
    """Write a dump: ``tokens`` ``[T]`` (or ``[P, T]``), ``logits`` ``[T, V]`` (or
    ``[P, T, V]``) and, optionally, one hidden state ``[T, H]`` per decoder layer."""
    import numpy as np

    tok = np.asarray(tokens.cpu() if hasattr(tokens, "cpu") else tokens, dtype=np.int64)
    parts = [("tokens", _raw(tok))]
    parts.append(("logits", _raw(logits)))
    for i, h in enumerate(hidden or []):
        parts.append((f"hidden.{i}", _raw(h)))
    lead = list(tok.shape)
    for name, (_, shape, _) in parts[1:]:
        if shape[:-1] != lead:
            raise ValueError(f"gapscope numerics: {name} has shape {shape}, tokens {lead}")
    names = {code: name for name, (code, _) in _DTYPES.items()}
    md: Dict[str, str] = {"engine": engine, "model": model, "dtype": dtype or names[parts[1][1][0]]}
    md.update({k: str(v) for k, v in meta.items()})
    header: Dict[str, Any] = {"__metadata__": md}
    at = 0
    for name, (st, shape, data) in parts:
        header[name] = {"dtype": st, "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    tmp = f"{os.fspath(path)}.partial"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, (_, _, data) in parts:
            f.write(data)
    os.replace(tmp, path)


def _decoder_layers(model: Any) -> List[Any]:
    """The decoder layers of an HF causal LM (``model.model.layers`` and the like)."""
    for path in ("model.layers", "model.decoder.layers", "transformer.h", "gpt_neox.layers", "layers"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
            return list(obj)
        except AttributeError:
            continue
    raise ValueError("gapscope numerics: cannot find the model's decoder layers")


def dump_hf(
    model: Any,
    tokens: Any,
    path: "os.PathLike[str] | str",
    *,
    engine: str = "hf-transformers",
    hidden: bool = True,
    first_position: int = 0,
    **meta: str,
) -> None:
    """Teacher-force ``tokens`` (``[T]`` or ``[P, T]``) through an HF causal LM and write
    its logits and, with ``hidden``, the residual stream after each decoder layer (read by
    a forward hook on the layer, so the final norm is not in the last one). Rows before
    ``first_position`` are left out (to match an engine that starts after its prompt)."""
    import torch

    t = torch.as_tensor(tokens, dtype=torch.long)
    passages = t.reshape(-1, t.shape[-1])
    layers = _decoder_layers(model)
    device = next(model.parameters()).device
    logits_all, hidden_all = [], [[] for _ in layers]
    captured: List[Any] = [None] * len(layers)
    hooks = []
    if hidden:
        for i, layer in enumerate(layers):
            def hook(_m, _inp, out, i=i):
                captured[i] = (out[0] if isinstance(out, tuple) else out).detach()
            hooks.append(layer.register_forward_hook(hook))
    try:
        with torch.no_grad():
            for p in passages:
                out = model(p[None].to(device), use_cache=False)
                logits_all.append(out.logits[0, first_position:].detach().cpu())
                if hidden:
                    for i, h in enumerate(captured):
                        hidden_all[i].append(h[0, first_position:].cpu())
    finally:
        for h in hooks:
            h.remove()
    lg = torch.stack(logits_all) if len(logits_all) > 1 else logits_all[0]
    hs = [torch.stack(h) if len(h) > 1 else h[0] for h in hidden_all] if hidden else None
    tok = passages[:, first_position:]
    tok = tok if len(logits_all) > 1 else tok[0]
    name = getattr(getattr(model, "config", None), "_name_or_path", "") or type(model).__name__
    write_dump(
        path,
        tok,
        lg,
        hs,
        engine=engine,
        model=str(name),
        dtype=str(lg.dtype).replace("torch.", ""),
        **meta,
    )


class Numerics(Record):
    """The result of ``gapscope numerics --json``: ``reference``, ``identity`` (the noise
    floor, or ``None``), ``comparisons`` (each with ``summary``, ``verdict``, ``layers`` and
    every position in ``positions``), ``thresholds``."""

    __slots__ = ()

    def worst(self) -> Optional[str]:
        """The worst verdict over the comparisons (``ACCEPT`` < ``MARGINAL`` < ``REJECT``)."""
        order = ["ACCEPT", "MARGINAL", "REJECT"]
        vs = [c["verdict"] for c in self._data["comparisons"]]
        return max(vs, key=order.index) if vs else None


def compare(
    reference: "os.PathLike[str] | str",
    *others: "os.PathLike[str] | str",
    identity: Optional[Iterable["os.PathLike[str] | str"]] = None,
    max_dppl: float = 1.0,
    min_top1: float = 95.0,
) -> Numerics:
    """``gapscope numerics reference others… [--identity A B]`` as a typed result."""
    from ._api import _run

    argv = ["numerics", os.fspath(reference), *map(os.fspath, others), "--json"]
    if identity is not None:
        argv += ["--identity", *map(os.fspath, identity)]
    argv += ["--max-dppl", str(max_dppl), "--min-top1", str(min_top1)]
    _, data = _run(argv)
    return Numerics(data)
