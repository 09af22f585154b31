//! Model configuration read from a Hugging Face `config.json` (Llama 3.x, Qwen2/2.5, Qwen3, and
//! the hybrid Qwen3-Next / Qwen3.5 decoders with gated DeltaNet layers).

use crate::error::{EngineError, Result};
use serde_json::Value;
use std::path::Path;

/// The decoder families the engine runs; each differs in a detail of the attention block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    /// Llama 2/3.x: no biases, no q/k norm.
    Llama,
    /// Qwen2 / Qwen2.5: biases on q, k and v.
    Qwen2,
    /// Qwen3: RMSNorm on each q and k head before RoPE.
    Qwen3,
    /// Qwen3-Next / Qwen3.5 (dense MLP): gated DeltaNet layers between full-attention layers
    /// whose output is gated, q/k norms, partial RoPE, zero-centred RMSNorm weights.
    #[serde(rename = "qwen3_next")]
    Qwen3Next,
}

/// What a decoder layer mixes tokens with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerKind {
    FullAttention,
    LinearAttention,
}

/// How the checkpoint stores the DeltaNet input projection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InProjLayout {
    /// Qwen3-Next: `in_proj_qkvz` and `in_proj_ba`, interleaved per key head.
    GroupedQkvzBa,
    /// Qwen3.5: `in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a`.
    Split,
}

/// The gated DeltaNet (linear attention) shape of a hybrid model.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HybridConfig {
    /// Per layer, full attention or gated DeltaNet.
    pub layer_kinds: Vec<LayerKind>,
    pub k_heads: usize,
    pub v_heads: usize,
    pub k_dim: usize,
    pub v_dim: usize,
    /// Taps of the causal conv1d (`linear_conv_kernel_dim`).
    pub conv_kernel: usize,
    pub in_proj: InProjLayout,
}

impl HybridConfig {
    /// Channels through the conv1d: q, k (key heads) and v (value heads).
    pub fn conv_channels(&self) -> usize {
        2 * self.k_heads * self.k_dim + self.v_heads * self.v_dim
    }
    pub fn value_width(&self) -> usize {
        self.v_heads * self.v_dim
    }
    /// Rows of the fused input projection: conv channels, then z, then b and a per value head.
    pub fn in_proj_rows(&self) -> usize {
        self.conv_channels() + self.value_width() + 2 * self.v_heads
    }
    /// f32 elements of one sequence's recurrent state in one layer (`v_heads x dk x dv`).
    pub fn state_elems(&self) -> usize {
        self.v_heads * self.k_dim * self.v_dim
    }
    /// f32 elements of one sequence's conv state in one layer (`channels x (K - 1)`).
    pub fn conv_state_elems(&self) -> usize {
        self.conv_channels() * (self.conv_kernel - 1)
    }
    pub fn linear_layers(&self) -> usize {
        self.layer_kinds
            .iter()
            .filter(|k| **k == LayerKind::LinearAttention)
            .count()
    }
}

/// RoPE frequency scaling as Llama 3.1+ configs declare it (`rope_type: llama3`).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Llama3Scaling {
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: f64,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelConfig {
    pub family: Family,
    pub hidden: usize,
    pub intermediate: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    pub rms_eps: f32,
    pub rope_theta: f64,
    pub rope_llama3: Option<Llama3Scaling>,
    pub tie_embeddings: bool,
    pub attention_bias: bool,
    pub qk_norm: bool,
    pub max_positions: usize,
    /// Leading dimensions of each head that RoPE rotates (`head_dim` unless the config
    /// declares `partial_rotary_factor`).
    pub rope_dim: usize,
    /// Full-attention output multiplied by `sigmoid(gate)`, the gate a second q projection.
    pub attn_output_gate: bool,
    /// Gated DeltaNet layers and their shape (hybrid models only).
    pub hybrid: Option<HybridConfig>,
}

impl ModelConfig {
    /// Reads and validates `config.json` (a file, or a directory holding one).
    pub fn from_path(path: &Path) -> Result<Self> {
        let file = if path.is_dir() {
            path.join("config.json")
        } else {
            path.to_path_buf()
        };
        let text = std::fs::read_to_string(&file).map_err(|e| EngineError::io(&file, e))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| EngineError::Config {
            path: file.clone(),
            message: format!("not valid JSON: {e}"),
        })?;
        Self::from_json(&v).map_err(|message| EngineError::Config {
            path: file,
            message,
        })
    }

    pub fn from_json(v: &Value) -> std::result::Result<Self, String> {
        let model_type = v.get("model_type").and_then(Value::as_str).unwrap_or("");
        let family = match model_type {
            "llama" => Family::Llama,
            "qwen2" => Family::Qwen2,
            "qwen3" => Family::Qwen3,
            "qwen3_next" | "qwen3_5_text" => Family::Qwen3Next,
            "" => return Err(format!("no model_type; expected one of {SUPPORTED}")),
            other => {
                return Err(format!(
                    "model_type {other:?} is not supported; the engine runs {SUPPORTED}"
                ));
            }
        };
        let int = |key: &str| -> std::result::Result<usize, String> {
            v.get(key)
                .and_then(Value::as_u64)
                .map(|n| n as usize)
                .ok_or_else(|| format!("missing or non-integer {key:?}"))
        };
        let hidden = int("hidden_size")?;
        let heads = int("num_attention_heads")?;
        let kv_heads = v
            .get("num_key_value_heads")
            .and_then(Value::as_u64)
            .map(|n| n as usize)
            .unwrap_or(heads);
        let head_dim = v
            .get("head_dim")
            .and_then(Value::as_u64)
            .map(|n| n as usize)
            .unwrap_or(hidden.checked_div(heads).unwrap_or(0));
        let rope = v.get("rope_parameters");
        let scaling = v
            .get("rope_scaling")
            .filter(|s| !s.is_null())
            .or(rope.filter(|r| r.get("rope_type").is_some()));
        let rope_theta = v
            .get("rope_theta")
            .and_then(Value::as_f64)
            .or_else(|| {
                rope.and_then(|r| r.get("rope_theta"))
                    .and_then(Value::as_f64)
            })
            .unwrap_or(10_000.0);
        let rope_llama3 = match scaling {
            None => None,
            Some(s) => {
                let kind = s
                    .get("rope_type")
                    .or_else(|| s.get("type"))
                    .and_then(Value::as_str)
                    .unwrap_or("default");
                match kind {
                    "default" => None,
                    "llama3" => {
                        let f = |k: &str| {
                            s.get(k)
                                .and_then(Value::as_f64)
                                .ok_or_else(|| format!("llama3 rope scaling lacks {k:?}"))
                        };
                        Some(Llama3Scaling {
                            factor: f("factor")?,
                            low_freq_factor: f("low_freq_factor")?,
                            high_freq_factor: f("high_freq_factor")?,
                            original_max_position_embeddings: f(
                                "original_max_position_embeddings",
                            )?,
                        })
                    }
                    other => return Err(format!("rope scaling type {other:?} is not supported")),
                }
            }
        };
        let layers = int("num_hidden_layers")?;
        let hybrid = match family {
            Family::Qwen3Next => Some(hybrid_of(v, model_type, layers)?),
            _ => None,
        };
        let partial = v
            .get("partial_rotary_factor")
            .or_else(|| rope.and_then(|r| r.get("partial_rotary_factor")))
            .and_then(Value::as_f64)
            .unwrap_or(1.0);
        let rope_dim = (head_dim as f64 * partial) as usize;
        let cfg = Self {
            family,
            hidden,
            intermediate: int("intermediate_size")?,
            layers,
            heads,
            kv_heads,
            head_dim,
            vocab: int("vocab_size")?,
            rms_eps: v
                .get("rms_norm_eps")
                .and_then(Value::as_f64)
                .unwrap_or(1e-6) as f32,
            rope_theta,
            rope_llama3,
            tie_embeddings: v
                .get("tie_word_embeddings")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            attention_bias: match family {
                Family::Qwen2 => true,
                _ => v
                    .get("attention_bias")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            },
            qk_norm: matches!(family, Family::Qwen3 | Family::Qwen3Next),
            max_positions: v
                .get("max_position_embeddings")
                .and_then(Value::as_u64)
                .unwrap_or(4096) as usize,
            rope_dim,
            attn_output_gate: family == Family::Qwen3Next
                && v.get("attn_output_gate")
                    .and_then(Value::as_bool)
                    .unwrap_or(true),
            hybrid,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    fn validate(&self) -> std::result::Result<(), String> {
        let positive = [
            ("hidden_size", self.hidden),
            ("intermediate_size", self.intermediate),
            ("num_hidden_layers", self.layers),
            ("num_attention_heads", self.heads),
            ("num_key_value_heads", self.kv_heads),
            ("head_dim", self.head_dim),
            ("vocab_size", self.vocab),
        ];
        for (k, n) in positive {
            if n == 0 {
                return Err(format!("{k} must be positive"));
            }
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return Err(format!(
                "num_attention_heads {} is not a multiple of num_key_value_heads {}",
                self.heads, self.kv_heads
            ));
        }
        if self.heads / self.kv_heads > 8 {
            return Err(format!(
                "GQA group of {} query heads per KV head; the attention kernel supports up to 8",
                self.heads / self.kv_heads
            ));
        }
        if ![64, 128, 256].contains(&self.head_dim) {
            return Err(format!(
                "head_dim {} is not supported; the attention kernel handles 64, 128 and 256",
                self.head_dim
            ));
        }
        for (k, n) in [
            ("hidden_size", self.hidden),
            ("intermediate_size", self.intermediate),
        ] {
            if !n.is_multiple_of(32) {
                return Err(format!(
                    "{k} {n} must be a multiple of 32 (quant block size)"
                ));
            }
        }
        if self.rms_eps.is_nan() || self.rope_theta <= 0.0 {
            return Err("rms_norm_eps or rope_theta is invalid".into());
        }
        if self.rope_dim == 0 || !self.rope_dim.is_multiple_of(2) || self.rope_dim > self.head_dim {
            return Err(format!(
                "partial_rotary_factor gives {} rotated dimensions of head_dim {}; expected an \
                 even number from 2 to head_dim",
                self.rope_dim, self.head_dim
            ));
        }
        if let Some(h) = &self.hybrid {
            h.validate()?;
        }
        Ok(())
    }

    /// Whether layer `l` is a gated DeltaNet layer.
    pub fn is_linear(&self, l: usize) -> bool {
        self.hybrid
            .as_ref()
            .is_some_and(|h| h.layer_kinds[l] == LayerKind::LinearAttention)
    }

    /// Norm weights stored as an offset from 1 (`x * (1 + w)`, Qwen3-Next's zero-centred
    /// RMSNorm); the loader adds the 1.
    pub fn zero_centred_norms(&self) -> bool {
        self.family == Family::Qwen3Next
    }

    pub fn q_dim(&self) -> usize {
        self.heads * self.head_dim
    }
    pub fn kv_dim(&self) -> usize {
        self.kv_heads * self.head_dim
    }
    /// Width of the fused q|k|v projection output.
    pub fn qkv_dim(&self) -> usize {
        self.q_dim() + 2 * self.kv_dim()
    }
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// RoPE inverse frequencies (length rope_dim / 2), with Llama 3 scaling when declared,
    /// computed as transformers does (f64 then f32).
    pub fn inv_freq(&self) -> Vec<f32> {
        let half = self.rope_dim / 2;
        (0..half)
            .map(|i| {
                let base = 1.0 / self.rope_theta.powf((2 * i) as f64 / self.rope_dim as f64);
                let base = base as f32 as f64;
                let f = match self.rope_llama3 {
                    None => base,
                    Some(s) => {
                        let low_wavelen = s.original_max_position_embeddings / s.low_freq_factor;
                        let high_wavelen = s.original_max_position_embeddings / s.high_freq_factor;
                        let wavelen = 2.0 * std::f64::consts::PI / base;
                        if wavelen > low_wavelen {
                            base / s.factor
                        } else if wavelen < high_wavelen {
                            base
                        } else {
                            let smooth = (s.original_max_position_embeddings / wavelen
                                - s.low_freq_factor)
                                / (s.high_freq_factor - s.low_freq_factor);
                            (1.0 - smooth) * base / s.factor + smooth * base
                        }
                    }
                };
                f as f32
            })
            .collect()
    }
}

const SUPPORTED: &str = "llama, qwen2, qwen3, qwen3_next and qwen3_5_text";

/// The DeltaNet shape of a Qwen3-Next / Qwen3.5 config, with its layer pattern from
/// `layer_types` or `full_attention_interval` (every `interval`-th layer is full attention).
fn hybrid_of(
    v: &Value,
    model_type: &str,
    layers: usize,
) -> std::result::Result<HybridConfig, String> {
    let int = |key: &str, default: Option<usize>| -> std::result::Result<usize, String> {
        match v.get(key) {
            Some(x) => x
                .as_u64()
                .map(|n| n as usize)
                .ok_or_else(|| format!("{key:?} must be a non-negative integer")),
            None => default.ok_or_else(|| format!("missing {key:?}")),
        }
    };
    if int("num_experts", Some(0))? > 0 {
        return Err(format!(
            "{model_type} with num_experts > 0 (a mixture of experts) is not supported; the \
             engine runs the dense-MLP variant"
        ));
    }
    let layer_kinds = match v.get("layer_types").filter(|t| !t.is_null()) {
        Some(t) => {
            let list = t
                .as_array()
                .ok_or("\"layer_types\" must be a list")?
                .iter()
                .map(|k| match k.as_str() {
                    Some("full_attention") => Ok(LayerKind::FullAttention),
                    Some("linear_attention") => Ok(LayerKind::LinearAttention),
                    _ => Err(format!(
                        "layer type {k} is not supported; expected \"full_attention\" or \
                         \"linear_attention\""
                    )),
                })
                .collect::<std::result::Result<Vec<_>, _>>()?;
            if list.len() != layers {
                return Err(format!(
                    "\"layer_types\" lists {} layers; num_hidden_layers is {layers}",
                    list.len()
                ));
            }
            list
        }
        None => {
            let every = int("full_attention_interval", Some(4))?;
            if every == 0 {
                return Err("\"full_attention_interval\" must be positive".into());
            }
            (0..layers)
                .map(|l| {
                    if (l + 1).is_multiple_of(every) {
                        LayerKind::FullAttention
                    } else {
                        LayerKind::LinearAttention
                    }
                })
                .collect()
        }
    };
    Ok(HybridConfig {
        layer_kinds,
        k_heads: int("linear_num_key_heads", Some(16))?,
        v_heads: int("linear_num_value_heads", Some(32))?,
        k_dim: int("linear_key_head_dim", Some(128))?,
        v_dim: int("linear_value_head_dim", Some(128))?,
        conv_kernel: int("linear_conv_kernel_dim", Some(4))?,
        in_proj: if model_type == "qwen3_next" {
            InProjLayout::GroupedQkvzBa
        } else {
            InProjLayout::Split
        },
    })
}

impl HybridConfig {
    fn validate(&self) -> std::result::Result<(), String> {
        for (k, n) in [
            ("linear_num_key_heads", self.k_heads),
            ("linear_num_value_heads", self.v_heads),
            ("linear_key_head_dim", self.k_dim),
            ("linear_value_head_dim", self.v_dim),
            ("linear_conv_kernel_dim", self.conv_kernel),
        ] {
            if n == 0 {
                return Err(format!("{k} must be positive"));
            }
        }
        if !self.v_heads.is_multiple_of(self.k_heads) {
            return Err(format!(
                "linear_num_value_heads {} is not a multiple of linear_num_key_heads {}",
                self.v_heads, self.k_heads
            ));
        }
        if ![32, 64, 128].contains(&self.k_dim) || self.v_dim > 256 {
            return Err(format!(
                "linear key/value head dims {}/{} are not supported; the recurrence kernel \
                 handles key dims 32, 64 and 128 and value dims up to 256",
                self.k_dim, self.v_dim
            ));
        }
        if self.conv_kernel > 8 {
            return Err(format!(
                "linear_conv_kernel_dim {} is over the 8 taps the conv kernel handles",
                self.conv_kernel
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(name: &str) -> ModelConfig {
        let p = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../models")
            .join(name);
        ModelConfig::from_path(&p).unwrap()
    }

    #[test]
    fn shipped_configs_parse() {
        let l8 = load("llama-3-8b.json");
        assert_eq!(
            (l8.hidden, l8.layers, l8.kv_heads, l8.head_dim),
            (4096, 32, 8, 128)
        );
        assert_eq!(l8.qkv_dim(), 6144);
        assert_eq!(l8.family, Family::Llama);
        let q = load("qwen3-0.6b.json");
        assert!(q.qk_norm && q.tie_embeddings && !q.attention_bias);
        let q7 = load("qwen2.5-7b.json");
        assert!(q7.attention_bias && q7.family == Family::Qwen2);
        assert_eq!(q7.group(), 7);
        let l1 = load("llama-3.2-1b.json");
        assert!(l1.rope_llama3.is_some());
        assert!(l1.hybrid.is_none() && l1.rope_dim == l1.head_dim && !l1.attn_output_gate);
    }

    /// Qwen3.5-9B: 3 gated DeltaNet layers per full-attention layer, 16 key and 32 value heads
    /// of 128, a conv of 4 taps, a quarter of each 256-wide head rotated.
    #[test]
    fn hybrid_config_parses() {
        let c = load("qwen3.5-9b.json");
        assert_eq!(c.family, Family::Qwen3Next);
        let h = c.hybrid.as_ref().unwrap();
        assert_eq!(h.linear_layers(), 24);
        assert!(c.is_linear(0) && c.is_linear(2) && !c.is_linear(3) && !c.is_linear(31));
        assert_eq!((h.k_heads, h.v_heads, h.k_dim, h.v_dim), (16, 32, 128, 128));
        assert_eq!(h.conv_channels(), 8192);
        assert_eq!(h.in_proj_rows(), 8192 + 4096 + 64);
        assert_eq!(h.state_elems(), 32 * 128 * 128);
        assert_eq!((c.rope_dim, c.inv_freq().len()), (64, 32));
        assert!(c.attn_output_gate && c.qk_norm && c.zero_centred_norms());
        assert_eq!(h.in_proj, InProjLayout::Split);
    }

    #[test]
    fn hybrid_layer_types_and_errors() {
        let base = serde_json::json!({"model_type":"qwen3_next","hidden_size":64,
            "intermediate_size":64,"num_hidden_layers":3,"num_attention_heads":2,
            "num_key_value_heads":1,"head_dim":64,"vocab_size":8,
            "layer_types":["linear_attention","full_attention","linear_attention"],
            "linear_num_key_heads":2,"linear_num_value_heads":4,"linear_key_head_dim":32,
            "linear_value_head_dim":16,"linear_conv_kernel_dim":4});
        let c = ModelConfig::from_json(&base).unwrap();
        let h = c.hybrid.as_ref().unwrap();
        assert_eq!(h.in_proj, InProjLayout::GroupedQkvzBa);
        assert!(c.is_linear(0) && !c.is_linear(1) && c.is_linear(2));
        assert_eq!(c.rope_dim, 64);
        let with = |key: &str, val: serde_json::Value| {
            let mut v = base.clone();
            v[key] = val;
            ModelConfig::from_json(&v).unwrap_err()
        };
        assert!(with("num_experts", 8.into()).contains("mixture of experts"));
        assert!(with("layer_types", serde_json::json!(["x"])).contains("\"x\""));
        assert!(
            with("layer_types", serde_json::json!(["full_attention"])).contains("lists 1 layers")
        );
        assert!(with("linear_num_value_heads", 3.into()).contains("multiple"));
        assert!(with("linear_key_head_dim", 48.into()).contains("key dims 32, 64 and 128"));
        assert!(with("partial_rotary_factor", 0.001.into()).contains("rotated"));
    }

    #[test]
    fn llama3_inv_freq_matches_transformers_rule() {
        let v = serde_json::json!({"model_type":"llama","hidden_size":4096,"intermediate_size":64,
            "num_hidden_layers":1,"num_attention_heads":32,"num_key_value_heads":8,"vocab_size":8,
            "rope_theta":500000.0,"rope_scaling":{"rope_type":"llama3","factor":8.0,
            "low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192}});
        let c = ModelConfig::from_json(&v).unwrap();
        let f = c.inv_freq();
        assert_eq!(f.len(), 64);
        // Highest frequency: wavelength 2*pi < 2048, unscaled.
        assert_eq!(f[0], 1.0);
        // Lowest frequency: wavelength far above 8192, divided by the factor.
        let base = 1.0 / 500000f64.powf(126.0 / 128.0);
        assert!(((f[63] as f64) - base / 8.0).abs() / (base / 8.0) < 1e-6);
    }

    #[test]
    fn errors_name_the_problem() {
        let bad = serde_json::json!({"model_type":"mamba"});
        assert!(ModelConfig::from_json(&bad).unwrap_err().contains("mamba"));
        let bad = serde_json::json!({"model_type":"llama","hidden_size":64});
        assert!(
            ModelConfig::from_json(&bad)
                .unwrap_err()
                .contains("num_attention_heads")
        );
        let bad = serde_json::json!({"model_type":"llama","hidden_size":96,"intermediate_size":64,
            "num_hidden_layers":1,"num_attention_heads":3,"num_key_value_heads":2,"vocab_size":8});
        assert!(
            ModelConfig::from_json(&bad)
                .unwrap_err()
                .contains("multiple")
        );
        let err = ModelConfig::from_path(Path::new("/nonexistent/config.json")).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/config.json"));
    }
}
