#!/usr/bin/env python3
"""Capture a CUDA graph of one LLM decode step under torch.profiler (the way vLLM's
--profiler-config.capture_torch_profiler_dir and SGLang's --enable-profile-cuda-graph do), then
profile replays of it, and write the truth from an eager run of the same step.

Writes to OUT (argv[1]):
  capture_bs8.json.gz   torch.profiler trace around the capture of the bs-8 graph, inside
                        record_function("capture_8_FULL")
  capture_bs4.json.gz   same model, a bs-4 graph ("capture_4_FULL"): a mismatching capture trace
  capture_l2.json.gz    another model (2 layers), bs 8: a mismatching capture trace
  replay.json.gz        10 replays of the bs-8 graph, each inside
                        record_function("execute_context_0(0)_generation_8(8)") with eager
                        argmax/copy kernels after the replay
  eager.json.gz         2 eager steps of the same bs-8 decode, with forward hooks that put a
                        record_function("truth: <module path>") around every module call
  graph_bs8.dot.gz      cudaGraphDebugDotPrint of the bs-8 graph (CUDAGraph.debug_dump)
  meta.json             which model path was used, the config, the counts seen
"""
import gzip, json, os, shutil, sys, tempfile, time, traceback
import torch
from torch.profiler import profile, ProfilerActivity, record_function

OUT = sys.argv[1]
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)
dev = torch.device("cuda")
META = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
HIDDEN, LAYERS, HEADS, KV, HD, INTER, VOCAB, MAXLEN, PROMPT = 1024, 4, 16, 4, 64, 2816, 32000, 256, 16


def log(m):
    print(f"[graph-capture] {m}", flush=True)


def export(prof, name):
    tmp = os.path.join(tempfile.mkdtemp(), "t.json")
    prof.export_chrome_trace(tmp)
    with open(tmp, "rb") as f, gzip.GzipFile(os.path.join(OUT, name), "wb", compresslevel=9, mtime=0) as g:
        shutil.copyfileobj(f, g)
    d = json.load(open(tmp))
    ev = d["traceEvents"]
    cats = {}
    for e in ev:
        cats[e.get("cat")] = cats.get(e.get("cat"), 0) + 1
    rt = {}
    for e in ev:
        if e.get("cat") == "cuda_runtime" or e.get("cat") == "cuda_driver":
            rt[e["name"]] = rt.get(e["name"], 0) + 1
    gk = sum(1 for e in ev if e.get("cat") == "kernel" and "graph id" in e.get("args", {}))
    gn = sum(1 for e in ev if "graph node id" in e.get("args", {}))
    META[name] = {"cats": cats, "runtime": rt, "kernels_with_graph_id": gk, "events_with_graph_node_id": gn,
                  "bytes_gz": os.path.getsize(os.path.join(OUT, name))}
    log(f"{name}: {cats} runtime={rt} graph-id kernels={gk} graph-node-id events={gn}")


class OwnOut:
    def __init__(self, logits):
        self.logits = logits


class OwnCache:
    """Static KV cache: one (bs, kv, MAXLEN, hd) pair per layer, allocated on first use."""

    def __init__(self, layers):
        self.k = [None] * layers
        self.v = [None] * layers


class OwnAttn(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.q_proj = torch.nn.Linear(HIDDEN, HEADS * HD, bias=False)
        self.k_proj = torch.nn.Linear(HIDDEN, KV * HD, bias=False)
        self.v_proj = torch.nn.Linear(HIDDEN, KV * HD, bias=False)
        self.o_proj = torch.nn.Linear(HEADS * HD, HIDDEN, bias=False)

    def forward(self, x, cache, i, pos):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, HEADS, HD).transpose(1, 2)
        k = self.k_proj(x).view(b, t, KV, HD).transpose(1, 2)
        v = self.v_proj(x).view(b, t, KV, HD).transpose(1, 2)
        if cache.k[i] is None:
            cache.k[i] = torch.zeros(b, KV, MAXLEN, HD, device=x.device, dtype=x.dtype)
            cache.v[i] = torch.zeros_like(cache.k[i])
        cache.k[i].index_copy_(2, pos, k)
        cache.v[i].index_copy_(2, pos, v)
        mask = torch.arange(MAXLEN, device=x.device).view(1, MAXLEN) <= pos.view(-1, 1)
        o = torch.nn.functional.scaled_dot_product_attention(q, cache.k[i], cache.v[i], attn_mask=mask,
                                                             enable_gqa=True)
        return self.o_proj(o.transpose(1, 2).reshape(b, t, HEADS * HD))


class OwnMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate_proj = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.up_proj = torch.nn.Linear(HIDDEN, INTER, bias=False)
        self.down_proj = torch.nn.Linear(INTER, HIDDEN, bias=False)
        self.act_fn = torch.nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class OwnLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.input_layernorm = torch.nn.RMSNorm(HIDDEN)
        self.self_attn = OwnAttn()
        self.post_attention_layernorm = torch.nn.RMSNorm(HIDDEN)
        self.mlp = OwnMLP()

    def forward(self, x, cache, i, pos):
        x = x + self.self_attn(self.input_layernorm(x), cache, i, pos)
        return x + self.mlp(self.post_attention_layernorm(x))


class OwnBody(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.embed_tokens = torch.nn.Embedding(VOCAB, HIDDEN)
        self.layers = torch.nn.ModuleList([OwnLayer() for _ in range(layers)])
        self.norm = torch.nn.RMSNorm(HIDDEN)

    def forward(self, ids, cache, pos):
        x = self.embed_tokens(ids)
        for i, layer in enumerate(self.layers):
            x = layer(x, cache, i, pos)
        return self.norm(x)


class OwnLlamaForCausalLM(torch.nn.Module):
    def __init__(self, layers):
        super().__init__()
        self.model = OwnBody(layers)
        self.lm_head = torch.nn.Linear(HIDDEN, VOCAB, bias=False)

    def forward(self, input_ids, past_key_values, use_cache, cache_position, position_ids=None):
        return OwnOut(self.lm_head(self.model(input_ids, past_key_values, cache_position)))


class OwnCfg:
    def __init__(self, layers):
        self.num_hidden_layers = layers

    def to_dict(self):
        return {"own": True, "num_hidden_layers": self.num_hidden_layers, "hidden_size": HIDDEN}


OWN = "--own" in sys.argv


def own_model(layers):
    torch.manual_seed(layers)
    with torch.device(dev):
        m = OwnLlamaForCausalLM(layers).to(torch.bfloat16).eval()
    return m, OwnCfg(layers)


def hf_model(layers):
    if OWN:
        return own_model(layers)
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(hidden_size=HIDDEN, num_hidden_layers=layers, num_attention_heads=HEADS,
                      num_key_value_heads=KV, head_dim=HD, intermediate_size=INTER, vocab_size=VOCAB,
                      max_position_embeddings=4096, attn_implementation="sdpa")
    torch.manual_seed(layers)
    with torch.device(dev):
        m = LlamaForCausalLM(cfg).to(torch.bfloat16).eval()
    return m, cfg


def static_cache(cfg, bs):
    if OWN:
        return OwnCache(cfg.num_hidden_layers)
    from transformers import StaticCache
    import inspect
    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"config": cfg, "max_cache_len": MAXLEN}
    if "max_batch_size" in params:
        kw["max_batch_size"] = bs
    if "device" in params:
        kw["device"] = dev
    if "dtype" in params:
        kw["dtype"] = torch.bfloat16
    return StaticCache(**kw)


class Runner:
    """One bs: a static cache filled by a prompt, static inputs, the step function."""

    def __init__(self, model, cfg, bs):
        self.model, self.bs = model, bs
        self.cache = static_cache(cfg, bs)
        ids = torch.randint(0, VOCAB, (bs, PROMPT), device=dev)
        with torch.no_grad():
            out = model(input_ids=ids, past_key_values=self.cache, use_cache=True,
                        cache_position=torch.arange(PROMPT, device=dev))
        self.ids = out.logits[:, -1:].argmax(-1)
        self.pos = torch.tensor([PROMPT], device=dev)
        self.logits = None

    def step(self):
        with torch.no_grad():
            out = self.model(input_ids=self.ids, past_key_values=self.cache, use_cache=True,
                             cache_position=self.pos, position_ids=self.pos.view(1, 1).expand(self.bs, 1))
        self.logits = out.logits
        return out.logits


def prof():
    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True,
                   with_stack=True, with_modules=True)


def warm(r, n=3):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(n):
            r.step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()


def capture(r, name, debug=False):
    warm(r)
    g = torch.cuda.CUDAGraph()
    if debug:
        g.enable_debug_mode()
    with prof() as p:
        with record_function(f"capture_{r.bs}_FULL"):
            with torch.cuda.graph(g):
                r.step()
        torch.cuda.synchronize()
    export(p, name)
    return g


def main():
    model, cfg = hf_model(LAYERS)
    META["config"] = cfg.to_dict() if hasattr(cfg, "to_dict") else str(cfg)
    META["config"] = {k: v for k, v in META["config"].items() if isinstance(v, (int, float, str, bool, type(None)))}
    r8 = Runner(model, cfg, 8)
    warm(r8)
    # Eager truth: module hooks put record_function("truth: <path>") around every module call.
    stack = []
    hooks = []
    for path, mod in model.named_modules():
        label = f"truth: {path or '<root>'} ({type(mod).__name__})"

        def pre(m, a, label=label):
            rf = record_function(label)
            rf.__enter__()
            stack.append(rf)

        def post(m, a, o):
            stack.pop().__exit__(None, None, None)

        hooks.append(mod.register_forward_pre_hook(pre))
        hooks.append(mod.register_forward_hook(post))
    saved_pos = r8.pos.clone()
    with prof() as p:
        for i in range(2):
            with record_function(f"eager_step_{i}"):
                r8.step()
        torch.cuda.synchronize()
    for h in hooks:
        h.remove()
    assert not stack
    export(p, "eager.json.gz")
    r8.pos.copy_(saved_pos)
    g8 = capture(r8, "capture_bs8.json.gz", debug=True)
    try:
        dot = os.path.join(tempfile.mkdtemp(), "g.dot")
        g8.debug_dump(dot)
        with open(dot, "rb") as f, gzip.GzipFile(os.path.join(OUT, "graph_bs8.dot.gz"), "wb", mtime=0) as g:
            shutil.copyfileobj(f, g)
    except Exception as e:  # noqa: BLE001
        META["dot_error"] = repr(e)
        log(f"debug_dump failed: {e!r}")
    r4 = Runner(model, cfg, 4)
    capture(r4, "capture_bs4.json.gz")
    m2, cfg2 = hf_model(2)
    r2 = Runner(m2, cfg2, 8)
    capture(r2, "capture_l2.json.gz")
    # Replays of the bs-8 graph, with eager argmax/copy kernels after each.
    for _ in range(3):
        g8.replay()
    torch.cuda.synchronize()
    with prof() as p:
        for i in range(10):
            with record_function("execute_context_0(0)_generation_8(8)"):
                g8.replay()
                nxt = r8.logits[:, -1:].argmax(-1)
                r8.ids.copy_(nxt)
                r8.pos.add_(1)
        torch.cuda.synchronize()
    export(p, "replay.json.gz")


META["own_model"] = OWN
try:
    main()
    META["ok"] = True
except Exception as e:  # noqa: BLE001
    traceback.print_exc()
    META["ok"] = False
    META["error"] = repr(e)
json.dump(META, open(os.path.join(OUT, "meta.json"), "w"), indent=1, default=str)
log("done ok=%s" % META["ok"])
