//! Model configuration read from a Hugging Face `config.json` (Llama 3.x, Qwen2/2.5, Qwen3).

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
            "" => return Err("no model_type; expected llama, qwen2 or qwen3".into()),
            other => {
                return Err(format!(
                    "model_type {other:?} is not supported; the engine runs llama, qwen2 and qwen3"
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
        let cfg = Self {
            family,
            hidden,
            intermediate: int("intermediate_size")?,
            layers: int("num_hidden_layers")?,
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
            qk_norm: family == Family::Qwen3,
            max_positions: v
                .get("max_position_embeddings")
                .and_then(Value::as_u64)
                .unwrap_or(4096) as usize,
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
        Ok(())
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

    /// RoPE inverse frequencies (length head_dim / 2), with Llama 3 scaling when declared,
    /// computed as transformers does (f64 then f32).
    pub fn inv_freq(&self) -> Vec<f32> {
        let half = self.head_dim / 2;
        (0..half)
            .map(|i| {
                let base = 1.0 / self.rope_theta.powf((2 * i) as f64 / self.head_dim as f64);
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
