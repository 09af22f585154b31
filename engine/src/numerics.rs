//! Where activations are rounded between ops: the engine's own choice, or HF transformers'
//! bf16 eager roundings, so that the engine's logits can be compared with HF's exactly.

/// Where the forward pass rounds activations to bf16.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
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
    pub fn name(self) -> &'static str {
        match self {
            Numerics::Engine => "engine",
            Numerics::HfBf16 => "hf-bf16",
        }
    }
}
