//! Where activations are rounded between ops: the engine's own choice, or HF transformers'
//! bf16 eager roundings, so that the engine's logits can be compared with HF's exactly.

use crate::error::EngineError;

/// Where the forward pass rounds activations to bf16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Numerics {
    /// The engine's: an f32 residual stream and f32 op outputs, rounded to bf16 only at GEMM
    /// inputs and in the KV cache; fused kernels. What every benchmark runs.
    #[default]
    Engine,
    /// HF transformers' bf16 eager forward: every op output rounded to bf16 (the residual
    /// stream too), and the roundings inside RMSNorm, RoPE, SwiGLU and attention where torch
    /// makes them. Unfused and untuned; for comparing logits with HF, where the engine's own
    /// numerics can only pick HF's top-1 at an exact bf16 tie by chance. bf16 weights only.
    HfBf16,
}

impl Numerics {
    /// Every mode, in the order a usage message lists them.
    pub const ALL: [Numerics; 2] = [Numerics::Engine, Numerics::HfBf16];

    /// The name on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Numerics::Engine => "engine",
            Numerics::HfBf16 => "hf-bf16",
        }
    }
}

impl std::fmt::Display for Numerics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Numerics {
    type Err = EngineError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|n| n.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|n| n.name()).collect();
                EngineError::invalid(format!(
                    "unknown numerics {s:?}; use one of: {}",
                    names.join(", ")
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_names_list_the_valid_ones() {
        for n in Numerics::ALL {
            assert_eq!(n.to_string().parse::<Numerics>().unwrap(), n);
        }
        assert_eq!("hf-bf16".parse::<Numerics>().unwrap(), Numerics::HfBf16);
        let e = "hf_bf16".parse::<Numerics>().unwrap_err().to_string();
        assert!(
            e.contains("\"hf_bf16\"") && e.contains("engine, hf-bf16"),
            "{e}"
        );
    }
}
