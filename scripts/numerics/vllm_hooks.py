"""vLLM and SGLang → `gapscope numerics` dumps: forward hooks that rejoin the residual stream.

UNTESTED IN THIS WORKPLACE against vLLM or SGLang: neither is installed here, so nothing
below has run inside either engine. The statements it relies on were checked against their
source (docs/NUMERICS.md, "vLLM and SGLang"); the hook logic ran on a torch model built
like theirs (test_vllm_hooks_torch.py). Run it on a small model and check the
`rejoin_check_max` it reports before trusting a dump.

Both engines' Llama-family decoder layers (vLLM vllm/model_executor/models/llama.py,
SGLang python/sglang/srt/models/llama.py, `LlamaDecoderLayer.forward`) return
`(hidden_states, residual)`: the residual add of each sub-block is fused into the next
RMSNorm (`RMSNorm.forward(x, residual)` returns `(norm(x + residual), x + residual)`,
vllm/model_executor/layers/layernorm.py and python/sglang/srt/layers/layernorm.py), so the
residual stream after layer N is `hidden_states + residual` of layer N's outputs, and the
final norm (`model.model.norm(hidden_states, residual)`) normalises that same sum after the
last layer. The CUDA path (`fused_add_rms_norm`) does this IN PLACE on both tensors, so a
hook must form the sum when the layer returns, before the next layer runs; it is formed in
float32 and cast to the model dtype, as `forward_native` does (`x.float() + residual.float()`,
then `residual = x.to(orig_dtype)`).

vLLM (offline `LLM`):

    from vllm import LLM
    import vllm_hooks
    llm = LLM(MODEL, dtype="bfloat16", enforce_eager=True, enable_prefix_caching=False,
              max_num_batched_tokens=4096, max_model_len=4096, compilation_config=0)
    vllm_hooks.capture_vllm(llm, tokens, "vllm-bf16.safetensors", engine="vllm bf16")

SGLang (in process, the way `python -m sglang.bench_one_batch` builds its ModelRunner; run
with --disable-cuda-graph --disable-radix-cache, tp_size 1):

    vllm_hooks.capture_in_process(model_runner.model, run_prefill, tokens,
                                  "sglang-bf16.safetensors", engine="sglang bf16",
                                  logits_fn=vllm_hooks.lm_head_logits)

where `run_prefill(ids)` runs one prefill (extend) forward over the token list `ids`
(bench_one_batch's `prepare_inputs_for_correctness_test` + `extend`, with the request's
`origin_input_ids = ids`).
"""
from __future__ import annotations

import importlib.util
import os
from typing import Any, Callable, Dict, List, Optional, Sequence

_ATTR = "_gapscope_recorder"


class Recorder:
    """Forward hooks on `model.model.layers[*]` and `model.model.norm` of a vLLM or SGLang
    causal LM (the `LlamaForCausalLM`-style module: `.model.layers`, `.model.norm`).

    Per forward call it keeps, for each layer N, `hidden_states + residual` (the residual
    stream after layer N, [tokens, hidden], model dtype) and the final norm's output (the
    normed hidden state the LM head reads)."""

    def __init__(self, model: Any):
        inner = getattr(model, "model", None)
        layers = getattr(inner, "layers", None)
        norm = getattr(inner, "norm", None)
        if layers is None or norm is None:
            raise ValueError("gapscope: no model.model.layers / model.model.norm: not a Llama-family vLLM/SGLang model")
        self.layers = list(layers)
        self.norm = norm
        self.handles: List[Any] = []
        self.calls: List[Dict[str, Any]] = []

    def install(self) -> "Recorder":
        for i, layer in enumerate(self.layers):
            self.handles.append(layer.register_forward_hook(self._layer_hook(i)))
        self.handles.append(self.norm.register_forward_hook(self._norm_hook))
        return self

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def reset(self) -> None:
        self.calls = []

    def _current(self, i: int) -> Dict[str, Any]:
        # layer 0 opens a new forward call
        if i == 0 or not self.calls:
            self.calls.append({"hidden": {}, "normed": None})
        return self.calls[-1]

    def _layer_hook(self, i: int) -> Callable:
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            import torch

            if isinstance(output, tuple) and len(output) >= 2 and output[1] is not None:
                h, r = output[0], output[1]
                # formed now: the next layer's fused norm overwrites h and r in place
                s = (h.float() + r.float()).to(h.dtype)
            else:  # a layer that returns the full stream itself
                s = (output[0] if isinstance(output, tuple) else output).clone()
            with torch.no_grad():
                self._current(i)["hidden"][i] = s.detach()

        return hook

    def _norm_hook(self, _module: Any, _inputs: Any, output: Any) -> None:
        out = output[0] if isinstance(output, tuple) else output
        if self.calls:
            self.calls[-1]["normed"] = out.detach().clone()

    def take(self, n_tokens: int) -> Dict[str, Any]:
        """The one forward call that covered `n_tokens` tokens: its per-layer residual
        stream (first `n_tokens` rows) and normed final hidden state."""
        full = [c for c in self.calls if len(c["hidden"]) == len(self.layers) and c["normed"] is not None]
        if not full:
            raise RuntimeError(
                f"gapscope: {len(self.calls)} forward calls recorded, none through every layer: "
                "the model ran compiled or as a CUDA graph (use enforce_eager / --disable-cuda-graph, no torch.compile)"
            )
        big = [c for c in full if c["normed"].shape[0] >= n_tokens]
        if len(big) != 1:
            rows = [c["normed"].shape[0] for c in full]
            raise RuntimeError(
                f"gapscope: forward calls of {rows} rows; exactly one of >= {n_tokens} expected "
                "(prefix caching or chunked prefill split the prompt?)"
            )
        c = big[0]
        hidden = [c["hidden"][i][:n_tokens] for i in range(len(self.layers))]
        return {"hidden": hidden, "normed": c["normed"][:n_tokens]}


def rejoin_check(norm: Any, last: Any, normed: Any) -> float:
    """max |RMSNorm(last) − normed| / max |normed|, recomputed in float32 from the norm's
    weight and eps (vLLM: `variance_epsilon`; SGLang: `variance_epsilon`). Small (≈ the model
    dtype's rounding) when `last` is the stream the final norm normalised."""
    import torch

    x = last.float()
    eps = getattr(norm, "variance_epsilon", getattr(norm, "eps", 1e-6))
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    y = y.to(last.dtype).float() * norm.weight.float()
    return float((y - normed.float()).abs().max() / normed.float().abs().max().clamp_min(1e-30))


def lm_head_logits(model: Any, normed: Any) -> Any:
    """`normed @ lm_head.weightᵀ` in the weight's dtype: SGLang's LogitsProcessor for tp_size 1
    without logit soft-capping or scaling (check `config.final_logit_softcapping`)."""
    import torch

    w = model.lm_head.weight
    return torch.matmul(normed.to(w.dtype), w.T)


def vllm_logits(model: Any, normed: Any) -> Any:
    """vLLM's own path: `model.compute_logits` (lm_head + LogitsProcessor: TP gather, vocab
    padding removed, soft-capping and scale applied). Newer vLLM takes the hidden states
    only; older versions also a sampling_metadata (None is accepted for plain logits)."""
    try:
        return model.compute_logits(normed)
    except TypeError:
        return model.compute_logits(normed, None)


# --- in-process capture (SGLang ModelRunner, or vLLM with VLLM_ENABLE_V1_MULTIPROCESSING=0) ---


def capture_in_process(
    model: Any,
    run_prefill: Callable[[List[int]], Any],
    tokens: Any,
    path: str,
    *,
    engine: str,
    logits_fn: Callable[[Any, Any], Any] = lm_head_logits,
    model_name: str = "",
    hidden: bool = True,
) -> Dict[str, Any]:
    """Teacher-force each passage of `tokens` ([T] or [P, T]) with one prefill forward
    (`run_prefill(list_of_ids)`), record the residual stream and compute every position's
    logits from the recorded final norm output; write the dump. Returns the rejoin checks."""
    import torch

    rec = getattr(model, _ATTR, None) or Recorder(model).install()
    setattr(model, _ATTR, rec)
    passages = _passages(tokens)
    logits, layers, checks = [], [], []
    with torch.no_grad():
        for ids in passages:
            rec.reset()
            run_prefill(list(ids))
            got = rec.take(len(ids))
            checks.append(rejoin_check(rec.norm, got["hidden"][-1], got["normed"]))
            logits.append(logits_fn(model, got["normed"]).cpu())
            layers.append([h.cpu() for h in got["hidden"]])
    rec.remove()
    setattr(model, _ATTR, None)
    return _write(path, passages, logits, layers if hidden else None, engine, model_name, checks)


# --- vLLM offline LLM: the same hooks inside each worker, through LLM.apply_model ---


def _install(model: Any) -> int:
    rec = getattr(model, _ATTR, None) or Recorder(model).install()
    setattr(model, _ATTR, rec)
    rec.reset()
    return len(rec.layers)


def _collect(model: Any, n_tokens: int) -> Dict[str, Any]:
    import torch

    rec = getattr(model, _ATTR)
    got = rec.take(n_tokens)
    with torch.no_grad():
        lg = vllm_logits(model, got["normed"])
    rec.reset()
    return {
        "logits": None if lg is None else lg.cpu(),  # None on TP ranks > 0 (gathered to rank 0)
        "hidden": [h.cpu() for h in got["hidden"]],
        "rejoin": rejoin_check(rec.norm, got["hidden"][-1], got["normed"]),
    }


def _remove(model: Any) -> None:
    rec = getattr(model, _ATTR, None)
    if rec is not None:
        rec.remove()
        setattr(model, _ATTR, None)


def capture_vllm(llm: Any, tokens: Any, path: str, *, engine: str = "vllm", model_name: str = "",
                 hidden: bool = True) -> Dict[str, Any]:
    """Teacher-force `tokens` ([T] or [P, T]) through a vLLM `LLM` (one prompt per passage,
    max_tokens=1: one prefill forward over all T tokens) and write the dump: every
    position's logits from vLLM's `compute_logits` over the final norm's output, and
    `hidden.N` = the rejoined residual stream after layer N.

    The LLM must run the model eagerly and in one piece: enforce_eager=True (no CUDA graph),
    no torch.compile (compilation_config=0), enable_prefix_caching=False, and
    max_num_batched_tokens ≥ T (no chunked prefill split)."""
    from vllm import SamplingParams

    try:  # ship this module's functions by value to worker processes (V1 multiprocessing)
        import cloudpickle
        import sys

        cloudpickle.register_pickle_by_value(sys.modules[__name__])
    except (ImportError, AttributeError, KeyError):
        pass
    try:
        from vllm.inputs import TokensPrompt
    except ImportError:  # older vLLM: a dict prompt
        TokensPrompt = dict  # type: ignore[assignment,misc]

    passages = _passages(tokens)
    llm.apply_model(_install)
    logits, layers, checks = [], [], []
    sp = SamplingParams(max_tokens=1, temperature=0.0)
    try:
        for ids in passages:
            llm.generate([TokensPrompt(prompt_token_ids=[int(t) for t in ids])], sp, use_tqdm=False)
            n = len(ids)
            res = llm.apply_model(lambda m, n=n: _collect(m, n))
            r0 = next(r for r in res if r["logits"] is not None)
            logits.append(r0["logits"])
            layers.append(r0["hidden"])
            checks.append(r0["rejoin"])
    finally:
        llm.apply_model(_remove)
    return _write(path, passages, logits, layers if hidden else None, engine, model_name, checks)


# --- shared ---


def _passages(tokens: Any) -> List[List[int]]:
    t = tokens.tolist() if hasattr(tokens, "tolist") else list(tokens)
    if t and isinstance(t[0], (list, tuple)):
        return [[int(x) for x in p] for p in t]
    return [[int(x) for x in t]]


def _write_dump() -> Callable:
    try:
        from gapscope.numerics import write_dump

        return write_dump
    except ImportError:  # python/gapscope/numerics.py loads as a file (no compiled package)
        src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "gapscope", "numerics.py")
        spec = importlib.util.spec_from_file_location("gapscope_numerics_file", src)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.write_dump


def _write(path: str, passages: Sequence[List[int]], logits: List[Any], layers: Optional[List[List[Any]]],
           engine: str, model_name: str, checks: List[float]) -> Dict[str, Any]:
    import torch

    one = len(passages) == 1
    tok = torch.tensor(passages[0] if one else passages, dtype=torch.int64)
    lg = logits[0] if one else torch.stack(logits)
    hid = None
    if layers:
        n = len(layers[0])
        hid = [layers[0][i] if one else torch.stack([p[i] for p in layers]) for i in range(n)]
    _write_dump()(path, tok, lg, hidden=hid, engine=engine, model=model_name,
                  rejoin_check_max=f"{max(checks):.3e}", hidden_from="hidden_states + residual per decoder layer")
    return {"passages": len(passages), "tokens": len(passages[0]), "layers": len(hid or []),
            "rejoin_check_max": max(checks)}
