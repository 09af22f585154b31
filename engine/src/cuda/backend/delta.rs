//! The backend's hybrid-model ops: the attention output gate, and the gated DeltaNet layers'
//! conv step, recurrence (with the state levers: a gather into scratch or reads through the
//! sequence ids; a D2D copy back or an in-place update) and gated output norm. Rows are taken
//! in groups, one per sequence (`begin` lays them out in the metadata).

use super::CudaBackend;
use crate::config::HybridConfig;
use crate::cuda::device::{Arg, DevBuf};
use crate::dispatch::{StateRead, StateUpdate};
use crate::error::{EngineError, Result};
use gapscope_kernels::Kernel;

/// Threads of the conv step's blocks (a thread per channel).
const CONV_BLOCK: u32 = 128;

/// The gated DeltaNet layers' per-sequence caches and the scratch of the slow state levers.
pub(super) struct DeltaCaches {
    /// Per layer (`None` for full-attention layers): `[max_seqs, channels, K - 1]` f32.
    conv: Vec<Option<DevBuf>>,
    /// Per layer: `[max_seqs, v_heads, dk, dv]` f32.
    state: Vec<Option<DevBuf>>,
    /// `[max_seqs, v_heads, dk, dv]`: the gathered state and the state to copy back.
    scratch: DevBuf,
}

impl DeltaCaches {
    pub(super) fn alloc(hy: &HybridConfig, max_seqs: usize) -> Result<Self> {
        let per_layer = |elems: usize| -> Result<Vec<Option<DevBuf>>> {
            hy.layer_kinds
                .iter()
                .map(|k| match k {
                    crate::config::LayerKind::LinearAttention => {
                        DevBuf::alloc(max_seqs * elems * 4).map(Some)
                    }
                    crate::config::LayerKind::FullAttention => Ok(None),
                })
                .collect()
        };
        Ok(Self {
            conv: per_layer(hy.conv_state_elems())?,
            state: per_layer(hy.state_elems())?,
            scratch: DevBuf::alloc(max_seqs * hy.state_elems() * 4)?,
        })
    }
}

/// The recurrence entry for a key head dim (`HybridConfig::validate` admits these).
pub fn delta_rule_kernel(k_dim: usize) -> Option<Kernel> {
    match k_dim {
        32 => Some(Kernel::DeltaRuleDk32F32),
        64 => Some(Kernel::DeltaRuleDk64F32),
        128 => Some(Kernel::DeltaRuleDk128F32),
        _ => None,
    }
}

/// Runs of consecutive sequence ids in `seqs`: (first group, first sequence, length).
pub(super) fn seq_runs(seqs: &[i32]) -> Vec<(usize, i32, usize)> {
    let mut runs: Vec<(usize, i32, usize)> = Vec::new();
    for (g, &s) in seqs.iter().enumerate() {
        match runs.last_mut() {
            Some((_, s0, n)) if *s0 + *n as i32 == s => *n += 1,
            _ => runs.push((g, s, 1)),
        }
    }
    runs
}

impl CudaBackend {
    /// Lays out the batch's row groups in the metadata (hybrid models only): one group per
    /// sequence, whose rows must be contiguous. Under CUDA graphs the state copy-back's
    /// addresses are captured, so its decode rows must be sequences 0, 1, ... in order.
    pub(super) fn set_groups(&mut self, batch: &crate::model::Batch) -> Result<()> {
        if self.cfg.hybrid.is_none() {
            return Ok(());
        }
        let mut seqs: Vec<i32> = Vec::new();
        let mut starts: Vec<i32> = Vec::new();
        for (r, &s) in batch.seq.iter().enumerate() {
            if seqs.last() == Some(&s) {
                continue;
            }
            if seqs.contains(&s) {
                return Err(EngineError::invalid(format!(
                    "sequence {s}'s rows are not contiguous in the batch; the DeltaNet layers \
                     take each sequence's rows in one run"
                )));
            }
            seqs.push(s);
            starts.push(r as i32);
        }
        starts.push(batch.rows() as i32);
        let in_order = seqs.iter().enumerate().all(|(g, &s)| s == g as i32);
        if self.levers.graphs
            && batch.out_rows.is_none()
            && self.levers.hybrid.state_update == StateUpdate::Copy
            && !in_order
        {
            return Err(EngineError::invalid(
                "state_update=copy under CUDA graphs needs decode rows of sequences 0, 1, ... in \
                 order",
            ));
        }
        let l = self.layout;
        self.meta_host[l.group_start..l.group_start + starts.len()].copy_from_slice(&starts);
        self.meta_host[l.group_seq..l.group_seq + seqs.len()].copy_from_slice(&seqs);
        self.group_seqs = seqs;
        Ok(())
    }

    fn hybrid(&self) -> Result<HybridConfig> {
        self.cfg
            .hybrid
            .clone()
            .ok_or_else(|| EngineError::invalid("a DeltaNet op on a model without them"))
    }

    fn delta_caches(&self) -> Result<&DeltaCaches> {
        self.delta
            .as_ref()
            .ok_or_else(|| EngineError::invalid("a DeltaNet op without its state caches"))
    }

    fn delta_layer(&self, layer: usize) -> Result<&crate::cuda::weights::DevDelta> {
        self.w.layers[layer]
            .delta
            .as_ref()
            .ok_or_else(|| EngineError::invalid(format!("layer {layer} is not a DeltaNet layer")))
    }

    /// `Backend::attn_gate`: `Attn = bf16(Attn * sigmoid(Gate))`.
    pub(super) fn sigmoid_gate(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.flush_norm()?;
        let n = rows * self.cfg.q_dim();
        let args = [
            Arg::Ptr(self.a.attn.ptr),
            Arg::Ptr(self.a.gate.ptr),
            Arg::I64(n as i64),
        ];
        let grid = (n.div_ceil(256).min(65535) as u32, 1, 1);
        self.kernel(
            Kernel::SigmoidGateBf16,
            "attn_gate",
            layer as i32,
            "act_elementwise",
            grid,
            256,
            (n * 8) as u64,
            (n * 4) as u64,
            &args,
        )
    }

    /// `Backend::conv_step`.
    pub(super) fn conv(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.flush_norm()?;
        let hy = self.hybrid()?;
        let ch = hy.conv_channels();
        let state = self.delta_caches()?.conv[layer]
            .as_ref()
            .map(|b| b.ptr)
            .ok_or_else(|| EngineError::invalid(format!("layer {layer} has no conv state")))?;
        let weight = self.delta_layer(layer)?.conv.ptr;
        let l = self.layout;
        let args = [
            Arg::Ptr(self.a.mixed.ptr),
            Arg::I32(hy.in_proj_rows() as i32),
            Arg::Ptr(weight),
            Arg::Ptr(state),
            Arg::Ptr(self.meta_ptr(l.group_start)),
            Arg::Ptr(self.meta_ptr(l.group_seq)),
            Arg::Ptr(self.meta_ptr(l.row_pos)),
            Arg::I32(ch as i32),
            Arg::I32(hy.conv_kernel as i32),
        ];
        let groups = self.group_seqs.len();
        let grid = ((ch as u32).div_ceil(CONV_BLOCK), groups as u32, 1);
        let bytes = rows * ch * 8 + groups * hy.conv_state_elems() * 8 + ch * hy.conv_kernel * 4;
        self.kernel(
            Kernel::ConvStepF32,
            "conv1d",
            layer as i32,
            "conv",
            grid,
            CONV_BLOCK,
            bytes as u64,
            (rows * ch * 2 * hy.conv_kernel) as u64,
            &args,
        )
    }

    /// `Backend::delta_rule`, with the state levers: `state_read = gather` copies each group's
    /// state into scratch first (`state_gather`, the campaigns' get_rows); `state_update =
    /// copy` has the recurrence write scratch and copies it back with D2D copies.
    pub(super) fn recurrence(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.flush_norm()?;
        let hy = self.hybrid()?;
        let kern = delta_rule_kernel(hy.k_dim).ok_or_else(|| {
            EngineError::invalid(format!(
                "no recurrence kernel for key head dim {}",
                hy.k_dim
            ))
        })?;
        let caches = self.delta_caches()?;
        let cache = caches.state[layer]
            .as_ref()
            .map(|b| b.ptr)
            .ok_or_else(|| EngineError::invalid(format!("layer {layer} has no recurrent state")))?;
        let scratch = caches.scratch.ptr;
        let dw = self.delta_layer(layer)?;
        let (a_log, dt_bias) = (dw.a_log.ptr, dw.dt_bias.ptr);
        let l = self.layout;
        let groups = self.group_seqs.len();
        let seq_ids = self.meta_ptr(l.group_seq);
        let state_bytes = hy.state_elems() * 4;
        let levers = self.levers.hybrid;
        let (state_in, in_ids) = match levers.state_read {
            StateRead::Gather => {
                let vecs = state_bytes / 16;
                let args = [
                    Arg::Ptr(cache),
                    Arg::Ptr(seq_ids),
                    Arg::Ptr(scratch),
                    Arg::I64(vecs as i64),
                ];
                let grid = (vecs.div_ceil(256).min(1024) as u32, groups as u32, 1);
                self.kernel(
                    Kernel::StateGatherF32,
                    "state_gather",
                    layer as i32,
                    "embed_gather",
                    grid,
                    256,
                    (groups * state_bytes * 2) as u64,
                    0,
                    &args,
                )?;
                (scratch, 0)
            }
            StateRead::FusedIds => (cache, seq_ids),
        };
        let (state_out, out_ids) = match levers.state_update {
            StateUpdate::Copy => (scratch, 0),
            StateUpdate::Inplace => (cache, seq_ids),
        };
        let (kd, vd) = (hy.k_heads * hy.k_dim, hy.value_width());
        let args = [
            Arg::Ptr(self.a.mixed.ptr),
            Arg::I32(hy.in_proj_rows() as i32),
            Arg::Ptr(a_log),
            Arg::Ptr(dt_bias),
            Arg::Ptr(state_in),
            Arg::Ptr(in_ids),
            Arg::Ptr(state_out),
            Arg::Ptr(out_ids),
            Arg::Ptr(self.meta_ptr(l.group_start)),
            Arg::Ptr(self.meta_ptr(l.row_pos)),
            Arg::Ptr(self.a.core.ptr),
            Arg::I32(hy.k_heads as i32),
            Arg::I32(hy.v_heads as i32),
            Arg::F32(crate::cpu::gated_delta::L2NORM_EPS),
        ];
        let bytes = groups * state_bytes * 2 + rows * (2 * kd + vd + 2 * hy.v_heads + vd) * 4;
        let flops = rows * hy.v_heads * hy.k_dim * hy.v_dim * 7;
        self.kernel(
            kern,
            "delta_rule",
            layer as i32,
            "linear_attn_ssm",
            (hy.v_heads as u32, groups as u32, 1),
            hy.v_dim as u32,
            bytes as u64,
            flops as u64,
            &args,
        )?;
        if levers.state_update == StateUpdate::Copy {
            for (g0, s0, n) in seq_runs(&self.group_seqs) {
                let dst = cache + (s0 as usize * state_bytes) as u64;
                let src = scratch + (g0 * state_bytes) as u64;
                self.d2d_layer("state_copy", layer as i32, dst, src, n * state_bytes)?;
            }
        }
        Ok(())
    }

    /// `Backend::gated_norm`: `Attn = bf16(rms_norm(Core) * w * silu(z))` per value head.
    pub(super) fn gated_rms_norm(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.flush_norm()?;
        let hy = self.hybrid()?;
        let w = self.delta_layer(layer)?.norm.ptr;
        let args = [
            Arg::Ptr(self.a.core.ptr),
            Arg::Ptr(self.a.mixed.ptr),
            Arg::I32(hy.in_proj_rows() as i32),
            Arg::I32(hy.conv_channels() as i32),
            Arg::Ptr(w),
            Arg::Ptr(self.a.attn.ptr),
            Arg::I32(hy.v_heads as i32),
            Arg::I32(hy.v_dim as i32),
            Arg::F32(self.cfg.rms_eps),
        ];
        let vd = hy.value_width();
        self.kernel(
            Kernel::GatedNormF32,
            "gated_norm",
            layer as i32,
            "norm",
            (rows as u32, hy.v_heads as u32, 1),
            32,
            (rows * vd * 10 + hy.v_dim * 4) as u64,
            (rows * vd * 6) as u64,
            &args,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::launch::signature::{kinds, of as signature};

    #[test]
    fn runs_of_consecutive_sequences() {
        assert_eq!(seq_runs(&[0, 1, 2, 3]), vec![(0, 0, 4)]);
        assert_eq!(
            seq_runs(&[2, 3, 7, 8, 1]),
            vec![(0, 2, 2), (2, 7, 2), (4, 1, 1)]
        );
        assert!(seq_runs(&[]).is_empty());
    }

    #[test]
    fn every_admitted_key_dim_has_an_entry() {
        for k in [32, 64, 128] {
            assert!(delta_rule_kernel(k).is_some());
        }
        assert!(delta_rule_kernel(96).is_none());
    }

    /// The argument kinds the backend passes, against the CUDA signatures.
    #[test]
    fn argument_lists_agree_with_the_cuda_source() {
        let p = Arg::Ptr(1);
        let i = Arg::I32(1);
        let conv = [p, i, p, p, p, p, p, i, i];
        assert_eq!(
            kinds(&conv),
            signature(Kernel::ConvStepF32, "conv_step_f32")
        );
        let rule = [p, i, p, p, p, p, p, p, p, p, p, i, i, Arg::F32(0.0)];
        for k in [
            Kernel::DeltaRuleDk32F32,
            Kernel::DeltaRuleDk64F32,
            Kernel::DeltaRuleDk128F32,
        ] {
            assert_eq!(kinds(&rule), signature(k, k.name()), "{}", k.name());
        }
        let norm = [p, p, i, i, p, p, i, i, Arg::F32(0.0)];
        assert_eq!(
            kinds(&norm),
            signature(Kernel::GatedNormF32, "gated_norm_f32")
        );
        let gather = [p, p, p, Arg::I64(1)];
        assert_eq!(
            kinds(&gather),
            signature(Kernel::StateGatherF32, "state_gather_f32")
        );
        let gate = [p, p, Arg::I64(1)];
        assert_eq!(
            kinds(&gate),
            signature(Kernel::SigmoidGateBf16, "sigmoid_gate_bf16")
        );
    }
}
