//! The backend's RMSNorms, and the held-back norm: at decode batch 1 with the fusion lever on,
//! the attention and final norms are not launched but computed in the prologue of the bf16
//! GEMV that consumes them (`linear_into`); any other op launches a held-back norm first.

use super::CudaBackend;
use crate::cuda::linear;
use crate::dispatch::LinearPath;
use crate::error::Result;
use crate::model::{Act, Linear, Norm};

impl CudaBackend {
    pub(super) fn norm_weight(&self, norm: Norm) -> u64 {
        match norm {
            Norm::Attn(l) => self.w.layers[l].attn_norm.ptr,
            Norm::Ffn(l) => self.w.layers[l].ffn_norm.ptr,
            Norm::Final => self.w.final_norm.ptr,
        }
    }

    /// One rms_norm_f32 launch.
    pub(super) fn launch_norm(
        &mut self,
        src: Act,
        norm: Norm,
        dst: Act,
        rows: usize,
    ) -> Result<()> {
        let h = self.cfg.hidden;
        let w = self.norm_weight(norm);
        let layer = match norm {
            Norm::Attn(l) | Norm::Ffn(l) => l as i32,
            Norm::Final => -1,
        };
        let (s, d) = (self.act(src), self.act(dst));
        let (grid, block, args) = linear::rms_norm_launch(s, w, d, rows, h, self.cfg.rms_eps);
        let (kern, own_block) = self.ops.rms_norm;
        let block = own_block.unwrap_or(block);
        self.kernel(
            kern,
            "rms_norm",
            layer,
            "norm",
            grid,
            block,
            (rows * h * 6 + h * 4) as u64,
            (rows * h * 4) as u64,
            &args,
        )
    }

    /// Launches a held-back RMSNorm (before any op other than the linear that fuses it).
    pub(super) fn flush_norm(&mut self) -> Result<()> {
        match self.pending_norm.take() {
            Some((src, norm)) => self.launch_norm(src, norm, Act::Xn, 1),
            None => Ok(()),
        }
    }

    /// Whether the linear after this RMSNorm computes it itself: the attention and final norms
    /// (into q|k|v and the LM head) at decode batch 1 on the bf16 GEMV with the fusion lever on.
    /// (The FFN norm stays separate: see `linear::norm_kernel`.)
    pub(super) fn norm_fusible(&self, norm: Norm, rows: usize) -> bool {
        let consumer = match norm {
            // A gated attention layer's q|k|v and gate projections both read the norm's output,
            // which a fused prologue keeps to itself.
            Norm::Attn(l) if !self.cfg.is_linear(l) && self.cfg.attn_output_gate => return false,
            Norm::Attn(l) if self.cfg.is_linear(l) => Linear::InProj(l),
            Norm::Attn(l) => Linear::Qkv(l),
            Norm::Final => Linear::LmHead,
            Norm::Ffn(_) => return false,
        };
        self.levers.fusion
            && self.ops.fusions
            && rows == 1
            && !self.prefill
            && self.cfg.hidden <= linear::GEMV_NORM_MAX
            && self.levers.dispatch.path(self.weight(consumer).0.format, 1) == LinearPath::GemvBf16
            && self
                .levers
                .dispatch
                .batch1_entry(self.weight(consumer).0.format, 1)
    }
}
