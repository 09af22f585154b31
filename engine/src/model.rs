//! The decoder forward pass, written once against the [`Backend`] op trait so the CPU reference
//! and the CUDA backend run exactly the same sequence of ops.

use crate::config::ModelConfig;
use crate::error::Result;

/// Activation buffers the forward pass names. Their dtypes follow the CUDA backend: the
/// residual stream `X`, `Qkv`, `Gate`, `Mixed`, `Core` and `Logits` are f32; `Xn`, `Attn` and
/// `H` (GEMM inputs) hold bf16 values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Act {
    X,
    XLast,
    Xn,
    Qkv,
    /// The attention output gate's pre-activation (hybrid full-attention layers).
    Gate,
    /// A gated DeltaNet layer's input projection: conv channels, z, b, a.
    Mixed,
    /// The DeltaNet recurrence's output before the gated norm.
    Core,
    Attn,
    H,
    Logits,
}

/// Which norm weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Norm {
    Attn(usize),
    Ffn(usize),
    Final,
}

/// Which linear weight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linear {
    Qkv(usize),
    /// The attention output gate (hybrid full-attention layers).
    Gate(usize),
    O(usize),
    /// A gated DeltaNet layer's fused input projection.
    InProj(usize),
    /// A gated DeltaNet layer's output projection.
    OutProj(usize),
    GateUp(usize),
    Down(usize),
    LmHead,
}

impl Linear {
    pub fn op(self) -> &'static str {
        match self {
            Linear::Qkv(_) => "qkv_proj",
            Linear::Gate(_) => "gate_proj",
            Linear::O(_) => "o_proj",
            Linear::InProj(_) => "in_proj",
            Linear::OutProj(_) => "out_proj",
            Linear::GateUp(_) => "gate_up_proj",
            Linear::Down(_) => "down_proj",
            Linear::LmHead => "lm_head",
        }
    }
    pub fn layer(self) -> i32 {
        match self {
            Linear::Qkv(l)
            | Linear::Gate(l)
            | Linear::O(l)
            | Linear::InProj(l)
            | Linear::OutProj(l)
            | Linear::GateUp(l)
            | Linear::Down(l) => l as i32,
            Linear::LmHead => -1,
        }
    }
}

/// How a linear writes its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutMode {
    /// dst = W x (+ bias)
    Store,
    /// dst += W x (the residual add)
    Accumulate,
    /// W has interleaved gate/up rows; dst = silu(gate) * up, half as wide.
    Swiglu,
}

/// The rows of one forward call: a prefill of several tokens per sequence, or one decode token
/// per sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    pub tokens: Vec<i32>,
    pub seq: Vec<i32>,
    pub pos: Vec<i32>,
    /// The row of each sequence whose logits are wanted (the last prompt token in a prefill);
    /// `None` when every row produces logits (decode).
    pub out_rows: Option<Vec<i32>>,
}

impl Batch {
    /// `npl` sequences, each with the same prompt length, rows ordered sequence-major.
    pub fn prefill(prompts: &[Vec<i32>]) -> Self {
        let mut b = Batch {
            tokens: Vec::new(),
            seq: Vec::new(),
            pos: Vec::new(),
            out_rows: Some(Vec::new()),
        };
        for (s, p) in prompts.iter().enumerate() {
            for (i, &t) in p.iter().enumerate() {
                b.tokens.push(t);
                b.seq.push(s as i32);
                b.pos.push(i as i32);
            }
            if let Some(o) = b.out_rows.as_mut() {
                o.push(b.tokens.len() as i32 - 1);
            }
        }
        b
    }

    /// One token per sequence at position `pos[s]`.
    pub fn decode(tokens: Vec<i32>, pos: Vec<i32>) -> Self {
        let n = tokens.len();
        Batch {
            tokens,
            seq: (0..n as i32).collect(),
            pos,
            out_rows: None,
        }
    }

    pub fn rows(&self) -> usize {
        self.tokens.len()
    }
    pub fn logit_rows(&self) -> usize {
        self.out_rows.as_ref().map_or(self.rows(), Vec::len)
    }
}

/// The ops a backend provides. Each call names buffers and weights; the backend owns storage,
/// dispatch (which kernel computes a linear at this batch) and instrumentation.
pub trait Backend {
    /// Makes the batch's tokens, positions and KV slots visible to the ops that follow.
    fn begin(&mut self, batch: &Batch) -> Result<()>;
    /// `X = embedding[tokens]`.
    fn embed(&mut self, rows: usize) -> Result<()>;
    /// `dst = bf16(rmsnorm(src) * w)`.
    fn rms_norm(&mut self, src: Act, norm: Norm, dst: Act, rows: usize) -> Result<()>;
    fn linear(&mut self, w: Linear, src: Act, dst: Act, rows: usize, mode: OutMode) -> Result<()>;
    /// Qwen3: RMSNorm each q and k head of `Qkv` in place.
    fn head_norm(&mut self, layer: usize, rows: usize) -> Result<()>;
    /// RoPE on q (in place) and k, and append k, v to the layer's KV cache.
    fn rope_kv_append(&mut self, layer: usize, rows: usize) -> Result<()>;
    /// `Attn = softmax(q k^T / sqrt(d)) v` over each row's sequence, positions [0, pos].
    fn attention(&mut self, layer: usize, rows: usize) -> Result<()>;
    /// `Attn = bf16(Attn * sigmoid(Gate))` (hybrid full-attention layers).
    fn attn_gate(&mut self, layer: usize, rows: usize) -> Result<()>;
    /// Gated DeltaNet: the causal conv1d with SiLU over `Mixed`'s conv channels, in place,
    /// rolling each sequence's conv state. A row at position 0 starts from a zero state.
    fn conv_step(&mut self, layer: usize, rows: usize) -> Result<()>;
    /// Gated DeltaNet: q, k L2 norms and the gates from `Mixed`, the delta rule over each
    /// sequence's recurrent state (rows of one sequence in order; position 0 starts from
    /// zero), `Core = S^T q`.
    fn delta_rule(&mut self, layer: usize, rows: usize) -> Result<()>;
    /// Gated DeltaNet: `Attn = bf16(rms_norm(Core) * w * silu(z))` per value head.
    fn gated_norm(&mut self, layer: usize, rows: usize) -> Result<()>;
    /// `XLast = X[out_rows]`.
    fn gather_last(&mut self, n: usize) -> Result<()>;
    /// Greedy tokens from `Logits`.
    fn argmax(&mut self, rows: usize) -> Result<()>;
    /// After decoder layer `layer`, whose output the residual stream `X` now holds: a backend
    /// set to capture hidden states copies `X`'s logit rows (a prefill's `out_rows`, every
    /// row of a decode) aside for the host; otherwise it does nothing (no launch, no copy,
    /// no synchronisation).
    fn layer_output(&mut self, layer: usize, rows: usize) -> Result<()>;
}

/// One forward pass over `batch` (after `Backend::begin`), ending in greedy tokens.
pub fn forward<B: Backend>(b: &mut B, cfg: &ModelConfig, batch: &Batch) -> Result<()> {
    let rows = batch.rows();
    b.embed(rows)?;
    for l in 0..cfg.layers {
        b.rms_norm(Act::X, Norm::Attn(l), Act::Xn, rows)?;
        if cfg.is_linear(l) {
            b.linear(Linear::InProj(l), Act::Xn, Act::Mixed, rows, OutMode::Store)?;
            b.conv_step(l, rows)?;
            b.delta_rule(l, rows)?;
            b.gated_norm(l, rows)?;
            b.linear(
                Linear::OutProj(l),
                Act::Attn,
                Act::X,
                rows,
                OutMode::Accumulate,
            )?;
        } else {
            b.linear(Linear::Qkv(l), Act::Xn, Act::Qkv, rows, OutMode::Store)?;
            if cfg.attn_output_gate {
                b.linear(Linear::Gate(l), Act::Xn, Act::Gate, rows, OutMode::Store)?;
            }
            if cfg.qk_norm {
                b.head_norm(l, rows)?;
            }
            b.rope_kv_append(l, rows)?;
            b.attention(l, rows)?;
            if cfg.attn_output_gate {
                b.attn_gate(l, rows)?;
            }
            b.linear(Linear::O(l), Act::Attn, Act::X, rows, OutMode::Accumulate)?;
        }
        b.rms_norm(Act::X, Norm::Ffn(l), Act::Xn, rows)?;
        b.linear(Linear::GateUp(l), Act::Xn, Act::H, rows, OutMode::Swiglu)?;
        b.linear(Linear::Down(l), Act::H, Act::X, rows, OutMode::Accumulate)?;
        b.layer_output(l, rows)?;
    }
    let out = batch.logit_rows();
    let src = if batch.out_rows.is_some() {
        b.gather_last(out)?;
        Act::XLast
    } else {
        Act::X
    };
    b.rms_norm(src, Norm::Final, Act::Xn, out)?;
    b.linear(Linear::LmHead, Act::Xn, Act::Logits, out, OutMode::Store)?;
    b.argmax(out)
}
