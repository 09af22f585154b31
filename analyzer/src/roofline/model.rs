//! Model specs from a Hugging Face `config.json`: parameter counts, bytes read per decode
//! step by weight format, KV and recurrent-state bytes, FLOPs per token. Dense, MoE and
//! hybrid linear-attention (gated DeltaNet) decoders.

use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use crate::config_file::{MAX_CONFIG_BYTES, parse_json, read_config};
use crate::error::{AnalyzerError, Result};

/// Storage format of the matmul weights, by bytes per weight including block scales.
/// Serialized and displayed in the CLI's spelling (`bf16`, `q4_k`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightFormat {
    Bf16,
    Fp8,
    /// llama.cpp Q8_0: 32 int8 + one f16 scale = 34 bytes per 32 weights.
    #[serde(rename = "q8_0")]
    Q8_0,
    /// llama.cpp Q4_0: 32 4-bit + one f16 scale = 18 bytes per 32 weights.
    #[serde(rename = "q4_0")]
    Q4_0,
    /// llama.cpp Q4_K: 144 bytes per 256-weight super-block.
    #[serde(rename = "q4_k")]
    Q4K,
    /// NVFP4: 4-bit values + one FP8 scale per 16.
    Nvfp4,
    /// MXFP4: 4-bit values + one E8M0 scale per 32.
    Mxfp4,
}

impl WeightFormat {
    pub fn bytes_per_weight(self) -> f64 {
        match self {
            Self::Bf16 => 2.0,
            Self::Fp8 => 1.0,
            Self::Q8_0 => 34.0 / 32.0,
            Self::Q4_0 => 18.0 / 32.0,
            Self::Q4K => 144.0 / 256.0,
            Self::Nvfp4 => 0.5 + 1.0 / 16.0,
            Self::Mxfp4 => 0.5 + 1.0 / 32.0,
        }
    }

    /// The CLI spelling: `bf16`, `fp8`, `q8_0`, `q4_0`, `q4_k`, `nvfp4`, `mxfp4`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bf16 => "bf16",
            Self::Fp8 => "fp8",
            Self::Q8_0 => "q8_0",
            Self::Q4_0 => "q4_0",
            Self::Q4K => "q4_k",
            Self::Nvfp4 => "nvfp4",
            Self::Mxfp4 => "mxfp4",
        }
    }

    pub const ALL: [WeightFormat; 7] = [
        Self::Bf16,
        Self::Fp8,
        Self::Q8_0,
        Self::Q4_0,
        Self::Q4K,
        Self::Nvfp4,
        Self::Mxfp4,
    ];

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s.to_ascii_lowercase().replace('-', "_").as_str() {
            "bf16" | "fp16" | "f16" => Self::Bf16,
            "fp8" | "f8" => Self::Fp8,
            "q8_0" | "q8" => Self::Q8_0,
            "q4_0" | "q4" => Self::Q4_0,
            "q4_k" | "q4k" | "q4_k_m" => Self::Q4K,
            "nvfp4" => Self::Nvfp4,
            "mxfp4" => Self::Mxfp4,
            _ => return None,
        })
    }
}

impl std::fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Mixture-of-experts shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Moe {
    pub experts: u64,
    pub top_k: u64,
    pub expert_intermediate: u64,
    /// Shared experts (always active) and their total intermediate size.
    pub shared_intermediate: u64,
    /// Per layer: whether its MLP is MoE (others are dense).
    pub sparse_layers: Vec<bool>,
}

/// Gated DeltaNet linear-attention shape.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LinearAttn {
    pub key_heads: u64,
    pub value_heads: u64,
    pub key_head_dim: u64,
    pub value_head_dim: u64,
    pub conv_kernel: u64,
}

/// A decoder's shapes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelSpec {
    pub model_type: String,
    pub hidden: u64,
    pub layers: u64,
    pub heads: u64,
    pub kv_heads: u64,
    pub head_dim: u64,
    pub intermediate: u64,
    pub vocab: u64,
    pub tie_embeddings: bool,
    pub qkv_bias: bool,
    /// Full attention gates its output by a second query-sized projection (Qwen3-Next and
    /// Qwen3.5: `q_proj` is twice the query width).
    pub attn_output_gate: bool,
    /// RMSNorm weights on q and k per head (the Qwen3 family).
    pub qk_norm: bool,
    pub moe: Option<Moe>,
    pub linear: Option<LinearAttn>,
    /// Per layer: true for linear attention, false for full attention.
    pub linear_layers: Vec<bool>,
}

/// The sizes a model spec may have. Generous for real decoders (the largest published ones
/// are far inside), and small enough that every count below stays exact in `u64` and every
/// per-layer table is small. A `config.json` outside them is refused with the field named.
pub mod limits {
    pub const LAYERS: u64 = 1024;
    pub const HIDDEN: u64 = 1 << 17;
    pub const HEADS: u64 = 1024;
    pub const HEAD_DIM: u64 = 4096;
    pub const VOCAB: u64 = 1 << 24;
    /// MLP width, dense or per expert; also the shared experts' total width.
    pub const INTERMEDIATE: u64 = 1 << 20;
    pub const EXPERTS: u64 = 1 << 14;
    pub const CONV_KERNEL: u64 = 64;
    /// Total parameters: 10^15.
    pub const PARAMS: u64 = 1_000_000_000_000_000;
}

fn invalid(message: String) -> AnalyzerError {
    AnalyzerError::Invalid(format!("config.json: {message}"))
}

/// An optional integer field: absent or `null` is `None`; anything but a non-negative
/// integer is an error.
fn u(v: &Value, k: &str) -> Result<Option<u64>> {
    match v.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(x) => x
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(format!("{k:?} must be a non-negative integer, not {x}"))),
    }
}

/// `value` of field `k` within `lo..=hi`.
fn within(k: &str, value: u64, lo: u64, hi: u64) -> Result<u64> {
    if (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(invalid(format!(
            "{k:?} = {value} is outside the supported range {lo}..={hi}"
        )))
    }
}

impl ModelSpec {
    /// Reads a model's `config.json` from `path` (a regular file of at most
    /// [`MAX_CONFIG_BYTES`]); errors name the file.
    pub fn load(path: &Path) -> Result<Self> {
        let text = read_config(path, "model config", MAX_CONFIG_BYTES)?;
        let cfg: Value = parse_json(path, &text, "model config")?;
        Self::from_hf_config(&cfg).map_err(|e| {
            let msg = e.to_string();
            let msg = msg.strip_prefix("config.json: ").unwrap_or(&msg);
            AnalyzerError::parse(path, format!("not a usable decoder config: {msg}"))
        })
    }

    /// Reads a `config.json` value (the text config of multimodal models too). Sizes are
    /// checked against [`limits`].
    #[expect(
        clippy::too_many_lines,
        reason = "one block per family of config.json keys (dense, MoE, hybrid), each read once into the same spec"
    )]
    pub fn from_hf_config(cfg: &Value) -> Result<Self> {
        let cfg = cfg.get("text_config").unwrap_or(cfg);
        if !cfg.is_object() {
            return Err(invalid("not a JSON object".into()));
        }
        let need = |k: &str, hi: u64| {
            let v = u(cfg, k)?.ok_or_else(|| invalid(format!("missing integer {k:?}")))?;
            within(k, v, 1, hi)
        };
        let opt = |k: &str, lo: u64, hi: u64| -> Result<Option<u64>> {
            u(cfg, k)?.map(|v| within(k, v, lo, hi)).transpose()
        };
        let hidden = need("hidden_size", limits::HIDDEN)?;
        let layers = need("num_hidden_layers", limits::LAYERS)?;
        let heads = need("num_attention_heads", limits::HEADS)?;
        let kv_heads = opt("num_key_value_heads", 1, heads)?.unwrap_or(heads);
        if heads % kv_heads != 0 {
            return Err(invalid(format!(
                "\"num_key_value_heads\" = {kv_heads} does not divide \"num_attention_heads\" = {heads}"
            )));
        }
        let head_dim = match opt("head_dim", 1, limits::HEAD_DIM)? {
            Some(d) => d,
            None => within(
                "hidden_size / num_attention_heads",
                hidden / heads,
                1,
                limits::HEAD_DIM,
            )?,
        };
        let vocab = need("vocab_size", limits::VOCAB)?;
        let model_type = cfg
            .get("model_type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .chars()
            .take(64)
            .collect::<String>();
        let intermediate = opt("intermediate_size", 0, limits::INTERMEDIATE)?.unwrap_or(0);
        let qkv_bias = cfg
            .get("attention_bias")
            .and_then(Value::as_bool)
            .unwrap_or(false)
            || model_type == "qwen2"
            || model_type == "qwen2_moe";
        let qwen_gated = matches!(
            model_type.as_str(),
            "qwen3_next" | "qwen3_5" | "qwen3_5_text" | "qwen3_5_moe" | "qwen3_5_moe_text"
        );
        let attn_output_gate = cfg
            .get("attn_output_gate")
            .and_then(Value::as_bool)
            .unwrap_or(qwen_gated);
        let qk_norm = model_type.starts_with("qwen3");
        let experts = match opt("num_experts", 0, limits::EXPERTS)? {
            Some(e) => Some(e),
            None => match opt("num_local_experts", 0, limits::EXPERTS)? {
                Some(e) => Some(e),
                None => opt("n_routed_experts", 0, limits::EXPERTS)?,
            },
        }
        .unwrap_or(0);
        let moe = if experts > 0 {
            let first_dense = u(cfg, "first_k_dense_replace")?.unwrap_or(0);
            let step = u(cfg, "decoder_sparse_step")?.unwrap_or(1).max(1);
            let mut mlp_only = vec![false; layers as usize];
            if let Some(a) = cfg.get("mlp_only_layers").and_then(Value::as_array) {
                for l in a.iter().filter_map(Value::as_u64) {
                    if let Some(x) = usize::try_from(l).ok().and_then(|l| mlp_only.get_mut(l)) {
                        *x = true;
                    }
                }
            }
            let sparse_layers = (0..layers)
                .map(|l| l >= first_dense && (l + 1) % step == 0 && !mlp_only[l as usize])
                .collect();
            let expert_intermediate =
                opt("moe_intermediate_size", 0, limits::INTERMEDIATE)?.unwrap_or(intermediate);
            let shared_intermediate =
                match opt("shared_expert_intermediate_size", 0, limits::INTERMEDIATE)? {
                    Some(s) => s,
                    None => {
                        let n = opt("n_shared_experts", 0, limits::EXPERTS)?.unwrap_or(0);
                        within(
                            "n_shared_experts * moe_intermediate_size",
                            n * expert_intermediate,
                            0,
                            limits::INTERMEDIATE,
                        )?
                    }
                };
            Some(Moe {
                experts,
                top_k: opt("num_experts_per_tok", 1, experts)?.unwrap_or(1),
                expert_intermediate,
                shared_intermediate,
                sparse_layers,
            })
        } else {
            None
        };
        let linear_layers: Vec<bool> =
            if let Some(types) = cfg.get("layer_types").and_then(Value::as_array) {
                if types.len() as u64 != layers {
                    return Err(invalid(format!(
                        "layer_types has {} entries for {layers} layers",
                        types.len()
                    )));
                }
                types
                    .iter()
                    .map(|t| t.as_str().is_some_and(|s| s.contains("linear")))
                    .collect()
            } else if let Some(n) = u(cfg, "full_attention_interval")?.filter(|&n| n > 0) {
                (0..layers).map(|l| (l + 1) % n != 0).collect()
            } else {
                vec![false; layers as usize]
            };
        let linear = if linear_layers.iter().any(|&l| l) {
            Some(LinearAttn {
                key_heads: opt("linear_num_key_heads", 1, limits::HEADS)?.unwrap_or(heads),
                value_heads: opt("linear_num_value_heads", 1, limits::HEADS)?.unwrap_or(heads),
                key_head_dim: opt("linear_key_head_dim", 1, limits::HEAD_DIM)?.unwrap_or(head_dim),
                value_head_dim: opt("linear_value_head_dim", 1, limits::HEAD_DIM)?
                    .unwrap_or(head_dim),
                conv_kernel: opt("linear_conv_kernel_dim", 0, limits::CONV_KERNEL)?.unwrap_or(4),
            })
        } else {
            None
        };
        let spec = Self {
            model_type,
            hidden,
            layers,
            heads,
            kv_heads,
            head_dim,
            intermediate,
            vocab,
            tie_embeddings: cfg
                .get("tie_word_embeddings")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            qkv_bias,
            attn_output_gate,
            qk_norm,
            moe,
            linear,
            linear_layers,
        };
        if spec.params_u128() > limits::PARAMS as u128 {
            return Err(invalid(format!(
                "the sizes give more than {} parameters",
                limits::PARAMS
            )));
        }
        Ok(spec)
    }

    /// [`Self::params`] in `u128`: within the field limits it cannot overflow, and the spec
    /// is refused when it exceeds [`limits::PARAMS`], so the `u64` counts elsewhere are exact.
    fn params_u128(&self) -> u128 {
        let w = |x: u64| x as u128;
        let (h, v) = (w(self.hidden), w(self.vocab));
        let attn = {
            let (nh, kv, d) = (w(self.heads), w(self.kv_heads), w(self.head_dim));
            let gate = if self.attn_output_gate { h * nh * d } else { 0 };
            2 * h * nh * d + 2 * h * kv * d + gate + w(self.attn_vectors())
        };
        let linear = self.linear.as_ref().map_or(0, |l| {
            let qk = w(l.key_heads) * w(l.key_head_dim);
            let vv = w(l.value_heads) * w(l.value_head_dim);
            h * (2 * qk + 2 * vv)
                + h * 2 * w(l.value_heads)
                + (2 * qk + vv) * w(l.conv_kernel)
                + vv * h
                + 2 * w(l.value_heads)
                + w(l.value_head_dim)
        });
        let dense = 3 * h * w(self.intermediate);
        let mut p = v * h * if self.tie_embeddings { 1 } else { 2 } + h;
        for layer in 0..self.layers as usize {
            p += 2 * h;
            p += if self.linear_layers[layer] {
                linear
            } else {
                attn
            };
            p += match &self.moe {
                Some(m) if m.sparse_layers[layer] => {
                    w(m.experts) * 3 * h * w(m.expert_intermediate)
                        + 3 * h * w(m.shared_intermediate)
                        + h * w(m.experts)
                }
                _ => dense,
            };
        }
        p
    }

    /// Weights of one full-attention block: the q (with the output gate's half), k, v and o
    /// matmuls, plus [`Self::attn_vectors`].
    fn attn_params(&self) -> u64 {
        let gate = if self.attn_output_gate { 2 } else { 1 };
        let q = gate * self.hidden * self.heads * self.head_dim;
        let kv = 2 * self.hidden * self.kv_heads * self.head_dim;
        let o = self.heads * self.head_dim * self.hidden;
        q + kv + o + self.attn_vectors()
    }

    /// The small vectors of one full-attention block: q/k/v biases and q/k norm weights.
    fn attn_vectors(&self) -> u64 {
        let bias = if self.qkv_bias {
            (self.heads + 2 * self.kv_heads) * self.head_dim
        } else {
            0
        };
        bias + if self.qk_norm { 2 * self.head_dim } else { 0 }
    }

    /// Weights of one gated-DeltaNet block: fused qkvz and ba projections, depthwise conv,
    /// output projection, per-head decay and bias, output norm.
    fn linear_params(&self) -> u64 {
        let Some(l) = &self.linear else { return 0 };
        let qk = l.key_heads * l.key_head_dim;
        let v = l.value_heads * l.value_head_dim;
        let in_proj = self.hidden * (2 * qk + 2 * v) + self.hidden * 2 * l.value_heads;
        let conv = (2 * qk + v) * l.conv_kernel;
        let out = v * self.hidden;
        in_proj + conv + out + 2 * l.value_heads + l.value_head_dim
    }

    fn dense_mlp_params(&self) -> u64 {
        3 * self.hidden * self.intermediate
    }

    /// Total parameters (embedding and LM head counted once each unless tied).
    pub fn params(&self) -> u64 {
        let mut p = self.vocab * self.hidden;
        if !self.tie_embeddings {
            p += self.vocab * self.hidden;
        }
        p += self.hidden; // final norm
        for layer in 0..self.layers as usize {
            p += 2 * self.hidden; // norms
            p += if self.linear_layers[layer] {
                self.linear_params()
            } else {
                self.attn_params()
            };
            p += match &self.moe {
                Some(m) if m.sparse_layers[layer] => {
                    m.experts * 3 * self.hidden * m.expert_intermediate
                        + 3 * self.hidden * m.shared_intermediate
                        + self.hidden * m.experts
                }
                _ => self.dense_mlp_params(),
            };
        }
        p
    }

    /// Expected distinct experts touched by `batch` tokens routing top-k of E uniformly.
    pub fn distinct_experts(&self, batch: u64) -> f64 {
        match &self.moe {
            Some(m) => {
                let e = m.experts as f64;
                let k = m.top_k as f64;
                e * (1.0 - (1.0 - k / e).powf(batch as f64))
            }
            None => 0.0,
        }
    }

    /// Weight bytes read by one decode step of `batch` sequences. The embedding is read by
    /// rows only, the LM head fully; MoE reads only the experts the batch is expected to
    /// touch (top-k at batch 1); norms, biases, routers and DeltaNet decay vectors stay bf16.
    pub fn weight_bytes_per_step(&self, fmt: WeightFormat, batch: u64) -> f64 {
        let bpw = fmt.bytes_per_weight();
        let small = 2.0; // bf16 vectors
        let rows = batch.min(self.vocab) as f64;
        let mut b = rows * self.hidden as f64 * bpw; // embedding rows
        b += (self.vocab * self.hidden) as f64 * bpw; // LM head, full
        b += self.hidden as f64 * small; // final norm
        let bias = self.attn_vectors() as f64;
        for layer in 0..self.layers as usize {
            b += 2.0 * self.hidden as f64 * small;
            if self.linear_layers[layer] {
                let l = self
                    .linear
                    .as_ref()
                    .map(|l| (l.value_heads, l.value_head_dim))
                    .unwrap_or((0, 0));
                let vec = (2 * l.0 + l.1) as f64;
                b += (self.linear_params() as f64 - vec) * bpw + vec * small;
            } else {
                b += (self.attn_params() as f64 - bias) * bpw + bias * small;
            }
            b += match &self.moe {
                Some(m) if m.sparse_layers[layer] => {
                    let expert = (3 * self.hidden * m.expert_intermediate) as f64;
                    self.distinct_experts(batch) * expert * bpw
                        + (3 * self.hidden * m.shared_intermediate) as f64 * bpw
                        + (self.hidden * m.experts) as f64 * small
                }
                _ => self.dense_mlp_params() as f64 * bpw,
            };
        }
        b
    }

    /// Bytes of the embedding rows one decode step of `batch` sequences gathers.
    pub fn embedding_bytes_per_step(&self, fmt: WeightFormat, batch: u64) -> f64 {
        batch.min(self.vocab) as f64 * self.hidden as f64 * fmt.bytes_per_weight()
    }

    /// Bytes of the bf16 norm weights read per step: two per block plus the final norm.
    pub fn norm_bytes(&self) -> f64 {
        (2 * self.layers + 1) as f64 * self.hidden as f64 * 2.0
    }

    /// Bytes of the bf16 per-head vectors of the gated-DeltaNet blocks (decay, bias, output
    /// norm), which the recurrent kernels read rather than a matmul.
    pub fn linear_vector_bytes(&self) -> f64 {
        let Some(l) = &self.linear else { return 0.0 };
        self.linear_attention_layers() as f64 * (2 * l.value_heads + l.value_head_dim) as f64 * 2.0
    }

    /// Matmul weight bytes read by one decode step: the projections and MLPs of every block
    /// (MoE: the experts the batch is expected to touch, shared experts and routers), their
    /// biases, and the LM head. This is [`Self::weight_bytes_per_step`] less the embedding
    /// rows, the norms and the DeltaNet vectors.
    pub fn matmul_weight_bytes_per_step(&self, fmt: WeightFormat, batch: u64) -> f64 {
        self.weight_bytes_per_step(fmt, batch)
            - self.embedding_bytes_per_step(fmt, batch)
            - self.norm_bytes()
            - self.linear_vector_bytes()
    }

    pub fn full_attention_layers(&self) -> u64 {
        self.linear_layers.iter().filter(|&&l| !l).count() as u64
    }

    pub fn linear_attention_layers(&self) -> u64 {
        self.layers - self.full_attention_layers()
    }

    /// KV-cache bytes one token adds (all full-attention layers, K and V).
    pub fn kv_bytes_per_token(&self, kv_bytes_per_elem: f64) -> f64 {
        (self.full_attention_layers() * 2 * self.kv_heads * self.head_dim) as f64
            * kv_bytes_per_elem
    }

    /// KV bytes read by one decode step at context `ctx` for `batch` sequences.
    pub fn kv_bytes_per_step(&self, batch: u64, ctx: u64, kv_bytes_per_elem: f64) -> f64 {
        batch as f64 * ctx as f64 * self.kv_bytes_per_token(kv_bytes_per_elem)
    }

    /// Recurrent state of one sequence: the f32 DeltaNet state per value head
    /// (k_dim x v_dim) plus the bf16 convolution window, over all linear layers.
    pub fn recurrent_state_bytes(&self) -> f64 {
        let Some(l) = &self.linear else { return 0.0 };
        let state = (l.value_heads * l.key_head_dim * l.value_head_dim) as f64 * 4.0;
        let conv_ch = 2 * l.key_heads * l.key_head_dim + l.value_heads * l.value_head_dim;
        let conv = (l.conv_kernel.saturating_sub(1) * conv_ch) as f64 * 2.0;
        self.linear_attention_layers() as f64 * (state + conv)
    }

    /// Attention FLOPs of one token at context `ctx`: QK^T and PV, 4 x ctx x heads x
    /// head_dim per full-attention layer.
    pub fn attention_flops_per_token(&self, ctx: u64) -> f64 {
        4.0 * ctx as f64 * (self.heads * self.head_dim) as f64 * self.full_attention_layers() as f64
    }

    /// FLOPs of the DeltaNet state update and read-out of one token, all linear layers.
    pub fn recurrent_flops_per_token(&self) -> f64 {
        let Some(l) = &self.linear else { return 0.0 };
        4.0 * (l.value_heads * l.key_head_dim * l.value_head_dim) as f64
            * self.linear_attention_layers() as f64
    }

    /// Matmul FLOPs of one token: 2 per active matmul weight, LM head included.
    pub fn matmul_flops_per_token(&self) -> f64 {
        self.flops_per_token(0) - self.recurrent_flops_per_token()
    }

    /// FLOPs for one token at context `ctx` at batch 1: 2 per active matmul weight (LM head
    /// included, embedding excluded), plus attention (QK^T and PV: 4 x ctx x heads x
    /// head_dim per full layer) and the DeltaNet state update and read-out.
    pub fn flops_per_token(&self, ctx: u64) -> f64 {
        let mut f = 2.0 * (self.vocab * self.hidden) as f64;
        for layer in 0..self.layers as usize {
            if self.linear_layers[layer] {
                f += 2.0 * self.linear_params() as f64;
                if let Some(l) = &self.linear {
                    f += 4.0 * (l.value_heads * l.key_head_dim * l.value_head_dim) as f64;
                }
            } else {
                f += 2.0 * self.attn_params() as f64;
                f += 4.0 * ctx as f64 * (self.heads * self.head_dim) as f64;
            }
            f += match &self.moe {
                Some(m) if m.sparse_layers[layer] => {
                    2.0 * (3
                        * self.hidden
                        * (m.top_k * m.expert_intermediate + m.shared_intermediate)
                        + self.hidden * m.experts) as f64
                }
                _ => 2.0 * self.dense_mlp_params() as f64,
            };
        }
        f
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use serde_json::json;

    /// Mixtral-like: 2 layers, 8 experts top-2, no shared experts.
    pub(crate) fn tiny_mixtral() -> ModelSpec {
        ModelSpec::from_hf_config(&json!({
            "model_type": "mixtral", "hidden_size": 64, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
            "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 100
        }))
        .unwrap()
    }

    /// Qwen3-Next-like: 4 layers, full attention every 4th (3 linear + 1 full).
    pub(crate) fn tiny_qwen3_next() -> ModelSpec {
        ModelSpec::from_hf_config(&json!({
            "model_type": "qwen3_next", "hidden_size": 64, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
            "intermediate_size": 128, "vocab_size": 100, "full_attention_interval": 4,
            "linear_num_key_heads": 2, "linear_num_value_heads": 4,
            "linear_key_head_dim": 16, "linear_value_head_dim": 8, "linear_conv_kernel_dim": 4
        }))
        .unwrap()
    }

    pub(crate) fn llama3_8b() -> ModelSpec {
        ModelSpec::from_hf_config(&json!({
            "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 128256, "tie_word_embeddings": false
        }))
        .unwrap()
    }

    #[test]
    fn a_qwen35_hybrid_has_the_weights_llama_cpp_loads() {
        // scripts/llamacpp/tiny/qwen35.json. make-models.py wrote a GGUF of these shapes that
        // llama.cpp's qwen35 loader accepted and ran; gguf-py counts 2,502,136 weights in it:
        // the full-attention query projection twice as wide (the output gate), q/k norms.
        let m = ModelSpec::from_hf_config(&json!({
            "model_type": "qwen3_5_text", "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "full_attention_interval": 4, "linear_num_key_heads": 2,
            "linear_num_value_heads": 4, "linear_key_head_dim": 32, "linear_value_head_dim": 32,
            "linear_conv_kernel_dim": 4, "attn_output_gate": true, "vocab_size": 512
        }))
        .unwrap();
        assert!(m.attn_output_gate && m.qk_norm);
        assert_eq!(m.params(), 2_502_136);
        assert_eq!(m.params_u128(), 2_502_136);
    }

    #[test]
    fn llama3_8b_by_hand() {
        let m = llama3_8b();
        // q 4096*4096 + k,v 2*4096*1024 + o 4096*4096 = 41,943,040; mlp 3*4096*14336 =
        // 176,160,768; per layer 218,103,808 (+ 8,192 norm); x32 = 6,979,321,856 (+262,144).
        // Embedding and LM head 128256*4096 = 525,336,576 each; final norm 4096.
        assert_eq!(m.params(), 6_979_321_856 + 262_144 + 2 * 525_336_576 + 4096);
        assert_eq!(m.params(), 8_030_261_248);
        // bf16 batch 1: one embedding row 8,192 B; layers 13,958,643,712 B; norms
        // (32*8192 + 4096)*2 = 532,480 B; LM head 1,050,673,152 B.
        let bytes = m.weight_bytes_per_step(WeightFormat::Bf16, 1);
        assert_eq!(
            bytes,
            8_192.0 + 13_958_643_712.0 + 532_480.0 + 1_050_673_152.0
        );
        // KV: 32 layers * 2 * 8 heads * 128 dims * 2 bytes = 131,072 B per token.
        assert_eq!(m.kv_bytes_per_token(2.0), 131_072.0);
        // FLOPs at ctx 0: 2 * (layers' matmuls + LM head).
        assert_eq!(
            m.flops_per_token(0),
            2.0 * (6_979_321_856.0 + 525_336_576.0)
        );
        // Split by who reads it: the matmuls read the layers' projections and MLPs plus the
        // LM head, 13,958,643,712 + 1,050,673,152 = 15,009,316,864 B; the gather one row.
        assert_eq!(
            m.matmul_weight_bytes_per_step(WeightFormat::Bf16, 1),
            15_009_316_864.0
        );
        assert_eq!(m.embedding_bytes_per_step(WeightFormat::Bf16, 1), 8_192.0);
        assert_eq!(m.embedding_bytes_per_step(WeightFormat::Bf16, 4), 32_768.0);
        assert_eq!(m.norm_bytes(), 532_480.0);
        assert_eq!(m.matmul_flops_per_token(), m.flops_per_token(0));
        // Attention at ctx 160: 4 * 160 * 32 heads * 128 * 32 layers = 83,886,080.
        assert_eq!(m.attention_flops_per_token(160), 83_886_080.0);
        assert_eq!(
            m.flops_per_token(160),
            m.matmul_flops_per_token() + m.attention_flops_per_token(160)
        );
    }

    #[test]
    fn moe_counts_active_experts_and_widens_with_batch() {
        let m = tiny_mixtral();
        let attn = 64 * 64 + 2 * 64 * 32 + 64 * 64; // 12,288
        let expert = 3 * 64 * 128; // 24,576
        let router = 64 * 8;
        assert_eq!(
            m.params(),
            2 * 100 * 64 + 64 + 2 * (128 + attn + 8 * expert + router)
        );
        // Batch 1 in bf16: 2 experts per layer; routers and norms bf16 too.
        let b1 = m.weight_bytes_per_step(WeightFormat::Bf16, 1);
        let want = 64.0 * 2.0
            + 6400.0 * 2.0
            + 128.0
            + 2.0 * (256.0 + attn as f64 * 2.0 + 2.0 * expert as f64 * 2.0 + router as f64 * 2.0);
        assert!((b1 - want).abs() < 1e-6, "{b1} vs {want}");
        // Expected distinct experts: 8 * (1 - (6/8)^B).
        assert!((m.distinct_experts(4) - 8.0 * (1.0 - 0.75f64.powi(4))).abs() < 1e-12);
        assert!(m.weight_bytes_per_step(WeightFormat::Bf16, 64) > b1);
        assert!(m.distinct_experts(1000) <= 8.0);
        // FLOPs: top-2 experts active.
        let f = m.flops_per_token(0);
        assert_eq!(
            f,
            2.0 * 6400.0 + 2.0 * 2.0 * (attn as f64 + (2 * expert + router) as f64)
        );
    }

    #[test]
    fn hybrid_deltanet_layers_and_state() {
        // 4 layers, full attention every 4th: 3 linear + 1 full.
        let m = tiny_qwen3_next();
        assert_eq!(m.linear_layers, vec![true, true, true, false]);
        // KV only from the one full layer: 2 * 2 heads * 16 * 2 B = 128 B per token.
        assert_eq!(m.kv_bytes_per_token(2.0), 128.0);
        // State per linear layer: 4 heads * 16 * 8 * 4 B = 2,048; conv 3 * (2*2*16 + 4*8) * 2 = 576.
        assert_eq!(m.recurrent_state_bytes(), 3.0 * (2048.0 + 576.0));
        // DeltaNet block: in_proj 64*(2*32 + 2*32) + 64*2*4 = 8,704; conv (64+32)*4 = 384;
        // out 32*64 = 2,048; vectors 2*4 + 8 = 16.
        assert_eq!(m.linear_params(), 8_704 + 384 + 2_048 + 16);
        // The weight bytes split without remainder into matmul, gather, norms and the
        // DeltaNet vectors (3 layers * 16 bf16 = 96 B).
        assert_eq!(m.linear_vector_bytes(), 96.0);
        for batch in [1, 7] {
            let parts = m.matmul_weight_bytes_per_step(WeightFormat::Q8_0, batch)
                + m.embedding_bytes_per_step(WeightFormat::Q8_0, batch)
                + m.norm_bytes()
                + m.linear_vector_bytes();
            let all = m.weight_bytes_per_step(WeightFormat::Q8_0, batch);
            assert!((parts - all).abs() < 1e-6, "{parts} vs {all}");
        }
        // State update: 4 * (4 heads * 16 * 8) per linear layer, 3 layers.
        assert_eq!(m.recurrent_flops_per_token(), 3.0 * 4.0 * 512.0);
        assert_eq!(m.attention_flops_per_token(10), 4.0 * 10.0 * 4.0 * 16.0);
        assert_eq!(
            m.flops_per_token(10),
            m.matmul_flops_per_token()
                + m.recurrent_flops_per_token()
                + m.attention_flops_per_token(10)
        );
        let types = ModelSpec::from_hf_config(&json!({
            "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "vocab_size": 100, "intermediate_size": 8,
            "layer_types": ["linear_attention", "full_attention"]
        }))
        .unwrap();
        assert_eq!(types.linear_layers, vec![true, false]);
        assert!(ModelSpec::from_hf_config(&json!({"hidden_size": 64})).is_err());
    }

    #[test]
    fn sizes_outside_the_limits_are_refused_before_anything_is_built() {
        let base = json!({
            "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100
        });
        let err = |k: &str, v: Value| {
            let mut c = base.clone();
            c[k] = v;
            ModelSpec::from_hf_config(&c).unwrap_err().to_string()
        };
        // 10^18 layers would allocate per-layer tables of that length.
        let e = err("num_hidden_layers", json!(1_000_000_000_000_000_000u64));
        assert!(
            e.contains("num_hidden_layers") && e.contains("1..=1024"),
            "{e}"
        );
        assert!(err("hidden_size", json!(u64::MAX)).contains("hidden_size"));
        assert!(err("vocab_size", json!(0)).contains("vocab_size"));
        assert!(err("num_key_value_heads", json!(3)).contains("does not divide"));
        assert!(err("hidden_size", json!(-1)).contains("non-negative integer"));
        assert!(err("head_dim", json!("128")).contains("head_dim"));
        assert!(
            err("num_attention_heads", json!(128)).contains("hidden_size / num_attention_heads")
        );
        assert!(err("layer_types", json!(["linear_attention"])).contains("1 entries for 2 layers"));
        let mut moe = base.clone();
        moe["num_local_experts"] = json!(8);
        moe["num_experts_per_tok"] = json!(9);
        let e = ModelSpec::from_hf_config(&moe).unwrap_err().to_string();
        assert!(e.contains("num_experts_per_tok"), "{e}");
        moe["num_experts_per_tok"] = json!(2);
        moe["n_shared_experts"] = json!(u64::MAX);
        assert!(ModelSpec::from_hf_config(&moe).is_err());
        // Each size within its limit, the product over 10^15 parameters: refused too.
        let huge = json!({
            "hidden_size": 131072, "num_hidden_layers": 1024, "num_attention_heads": 1024,
            "head_dim": 4096, "intermediate_size": 1048576, "vocab_size": 16777216
        });
        let e = ModelSpec::from_hf_config(&huge).unwrap_err().to_string();
        assert!(e.contains("parameters"), "{e}");
        // null means absent, as HF configs write it.
        let mut c = base.clone();
        c["head_dim"] = Value::Null;
        assert_eq!(ModelSpec::from_hf_config(&c).unwrap().head_dim, 16);
    }
}
