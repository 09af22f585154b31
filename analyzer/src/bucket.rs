//! The semantic classes GPU work is sorted into.

use serde::{Deserialize, Serialize};

/// A bucket of GPU work. Order is the report's display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    /// Matrix-vector products (batch-1 linear layers, quantized or not).
    Gemv,
    /// Quantized-weight GEMMs (llama.cpp MMQ, Marlin, FP8/FP4 scaled GEMMs).
    GemmQuant,
    /// Dense GEMMs (cuBLAS, cuBLASLt, CUTLASS, hipBLASLt).
    GemmDense,
    /// Stand-alone activation quantization (per-token/block FP8, FP4, INT8, q8_1).
    Quantize,
    /// Convolutions (cuDNN/CUTLASS implicit GEMM, Winograd, depthwise).
    Conv,
    /// Attention (FlashAttention, paged attention, SDPA, softmax).
    Attention,
    /// Embedding lookups and gathers.
    EmbedGather,
    /// Copies, casts, concatenation, layout transforms, KV-cache writes, memops.
    Copy,
    /// Normalisation (RMSNorm, LayerNorm, batch norm).
    Norm,
    /// Rotary position embeddings.
    Rope,
    /// Activations and other elementwise ops.
    ActElementwise,
    /// Mixture-of-experts: grouped expert GEMMs, routing, top-k gating, finalize.
    Moe,
    /// Linear attention and state-space recurrences (gated DeltaNet, Mamba, RWKV).
    LinearAttnSsm,
    /// Sampling: argmax, top-k/top-p, sorting, random numbers.
    Sampling,
    /// Optimizer steps (multi-tensor apply, fused Adam/SGD/LAMB).
    Optimizer,
    /// Collectives and peer-to-peer traffic (NCCL/RCCL, custom all-reduce).
    Comm,
    /// What no rule matched.
    Other,
}

impl Bucket {
    pub const ALL: [Bucket; 17] = [
        Self::Gemv,
        Self::GemmQuant,
        Self::GemmDense,
        Self::Quantize,
        Self::Conv,
        Self::Attention,
        Self::EmbedGather,
        Self::Copy,
        Self::Norm,
        Self::Rope,
        Self::ActElementwise,
        Self::Moe,
        Self::LinearAttnSsm,
        Self::Sampling,
        Self::Optimizer,
        Self::Comm,
        Self::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gemv => "gemv",
            Self::GemmQuant => "gemm_quant",
            Self::GemmDense => "gemm_dense",
            Self::Quantize => "quantize",
            Self::Conv => "conv",
            Self::Attention => "attention",
            Self::EmbedGather => "embed_gather",
            Self::Copy => "copy",
            Self::Norm => "norm",
            Self::Rope => "rope",
            Self::ActElementwise => "act_elementwise",
            Self::Moe => "moe",
            Self::LinearAttnSsm => "linear_attn_ssm",
            Self::Sampling => "sampling",
            Self::Optimizer => "optimizer",
            Self::Comm => "comm",
            Self::Other => "other",
        }
    }

    /// Parses a bucket name; also accepts the aliases used in the seeds' scripts.
    pub fn parse(s: &str) -> Option<Self> {
        let s = s.trim().to_ascii_lowercase();
        let alias = match s.as_str() {
            "mmq" => "gemm_quant",
            "mmvq" => "gemv",
            "get_rows" => "embed_gather",
            "d2d" => "copy",
            "ssm" | "linear_attn" => "linear_attn_ssm",
            "elementwise" => "act_elementwise",
            "quant" | "act_quant" => "quantize",
            "convolution" => "conv",
            "optim" => "optimizer",
            other => other,
        };
        Self::ALL.iter().copied().find(|b| b.as_str() == alias)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_roundtrip() {
        for b in Bucket::ALL {
            assert_eq!(Bucket::parse(b.as_str()), Some(b));
            assert_eq!(Bucket::ALL[b.index()], b);
        }
        assert_eq!(Bucket::parse("MMQ"), Some(Bucket::GemmQuant));
        assert_eq!(Bucket::parse("quant"), Some(Bucket::Quantize));
        assert_eq!(Bucket::parse("convolution"), Some(Bucket::Conv));
        assert_eq!(Bucket::parse("optim"), Some(Bucket::Optimizer));
        assert_eq!(Bucket::parse("nope"), None);
    }
}
