//! The CUDA ops whose kernels depend on the numerics, picked once (`CudaBackend::new`, then
//! `set_numerics`): the engine's kernels, or the `hf_numerics.cu` ones that round where HF's
//! bf16 forward does. The backend's per-op methods launch what this table names and never look
//! at `Numerics` themselves.

use super::{CudaBackend, hf_numerics};
use crate::Numerics;
use crate::error::Result;
use crate::model::{Act, Linear, OutMode};
use gapscope_kernels::Kernel;

/// `Backend::linear`: (which, src, dst, rows, mode).
type LinearOp = fn(&mut CudaBackend, Linear, Act, Act, usize, OutMode) -> Result<()>;
/// Attention after the KV gather: (layer, K read, V read, block table, rows).
type AttentionOp = fn(&mut CudaBackend, usize, u64, u64, u64, usize) -> Result<()>;

/// One choice per numerics-dependent op.
#[derive(Clone, Copy)]
pub(super) struct NumericsOps {
    pub numerics: Numerics,
    /// The RMSNorm entry, and its block when it is not `rms_norm_launch`'s.
    pub rms_norm: (Kernel, Option<u32>),
    /// The q/k head RMSNorm entry and its block.
    pub head_norm: (Kernel, u32),
    /// The RoPE + KV append entry and its block.
    pub rope: (Kernel, u32),
    /// The engine's fusions (an RMSNorm inside the next GEMV, RoPE inside attention) may run;
    /// the HF roundings have no fused entries.
    pub fusions: bool,
    pub linear: LinearOp,
    pub attention: AttentionOp,
}

impl NumericsOps {
    pub fn of(numerics: Numerics) -> Self {
        match numerics {
            Numerics::Engine => Self {
                numerics,
                rms_norm: (Kernel::RmsNormF32, None),
                head_norm: (Kernel::HeadRmsNormF32, crate::cuda::launch::HEAD_NORM_BLOCK),
                rope: (
                    Kernel::RopeKvAppendF32,
                    crate::cuda::attention_args::ROPE_BLOCK,
                ),
                fusions: true,
                linear: CudaBackend::engine_linear,
                attention: CudaBackend::engine_attention,
            },
            Numerics::HfBf16 => Self {
                numerics,
                rms_norm: (Kernel::RmsNormHf, Some(hf_numerics::THREADS)),
                head_norm: (Kernel::HeadRmsNormHf, hf_numerics::THREADS),
                rope: (Kernel::RopeKvAppendHf, hf_numerics::THREADS),
                fusions: false,
                linear: CudaBackend::hf_linear,
                attention: CudaBackend::hf_attention,
            },
        }
    }
}
