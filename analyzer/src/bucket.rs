//! The semantic classes GPU work is sorted into.

use serde::{Deserialize, Serialize};

/// A bucket of GPU work. Order is the report's display order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bucket {
    Gemv,
    GemmQuant,
    GemmDense,
    Attention,
    EmbedGather,
    Copy,
    Norm,
    Rope,
    ActElementwise,
    Moe,
    LinearAttnSsm,
    Sampling,
    Comm,
    Other,
}

impl Bucket {
    pub const ALL: [Bucket; 14] = [
        Self::Gemv,
        Self::GemmQuant,
        Self::GemmDense,
        Self::Attention,
        Self::EmbedGather,
        Self::Copy,
        Self::Norm,
        Self::Rope,
        Self::ActElementwise,
        Self::Moe,
        Self::LinearAttnSsm,
        Self::Sampling,
        Self::Comm,
        Self::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Gemv => "gemv",
            Self::GemmQuant => "gemm_quant",
            Self::GemmDense => "gemm_dense",
            Self::Attention => "attention",
            Self::EmbedGather => "embed_gather",
            Self::Copy => "copy",
            Self::Norm => "norm",
            Self::Rope => "rope",
            Self::ActElementwise => "act_elementwise",
            Self::Moe => "moe",
            Self::LinearAttnSsm => "linear_attn_ssm",
            Self::Sampling => "sampling",
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
        assert_eq!(Bucket::parse("nope"), None);
    }
}
