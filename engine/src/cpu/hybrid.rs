//! The CPU reference of the hybrid layers' ops: the attention output gate and the gated
//! DeltaNet conv, recurrence and gated norm over each sequence's conv and recurrent state.
//! The math is `gated_delta`'s; this file lays it over the batch and the per-sequence caches.

use super::CpuBackend;
use super::gated_delta::{
    L2NORM_EPS, conv1d_step, decay_log, delta_rule_step, gated_rms_norm, key_head_of, l2norm,
    sigmoid,
};
use crate::config::HybridConfig;
use crate::error::{EngineError, Result};
use crate::model::Act;
use crate::quant::round_bf16;
use crate::weights::DeltaWeights;
use std::collections::HashMap;

/// Per layer, per sequence: the conv state (`channels x (K - 1)`) and the recurrent state
/// (`v_heads x dk x dv`).
#[derive(Default)]
pub(super) struct StateCache {
    conv: Vec<HashMap<i32, Vec<f32>>>,
    recurrent: Vec<HashMap<i32, Vec<f32>>>,
}

impl StateCache {
    pub(super) fn new(layers: usize) -> Self {
        Self {
            conv: vec![HashMap::new(); layers],
            recurrent: vec![HashMap::new(); layers],
        }
    }
    pub(super) fn clear(&mut self) {
        self.conv.iter_mut().for_each(HashMap::clear);
        self.recurrent.iter_mut().for_each(HashMap::clear);
    }
}

/// A sequence's state for a row at `pos`: zeroed when the row starts the sequence.
fn state_for(cache: &mut HashMap<i32, Vec<f32>>, seq: i32, pos: i32, len: usize) -> &mut [f32] {
    let s = cache.entry(seq).or_insert_with(|| vec![0.0; len]);
    if pos == 0 {
        s.fill(0.0);
    }
    s
}

impl<'w> CpuBackend<'w> {
    fn delta_parts(&self, layer: usize) -> Result<(HybridConfig, &'w DeltaWeights)> {
        if self.ops.hf_attention {
            return Err(EngineError::invalid(
                "the hf-bf16 numerics do not cover gated DeltaNet layers; use the engine numerics",
            ));
        }
        let hy = self
            .cfg
            .hybrid
            .as_ref()
            .ok_or_else(|| EngineError::invalid("a DeltaNet op on a model without them"))?;
        let w: &'w crate::weights::ModelWeights = self.w;
        let dw = w.layers[layer].delta.as_ref().ok_or_else(|| {
            EngineError::invalid(format!("layer {layer} is not a DeltaNet layer"))
        })?;
        Ok((hy.clone(), dw))
    }

    pub(super) fn attn_gate_impl(&mut self, rows: usize) -> Result<()> {
        let gate = self.act(Act::Gate)?[..rows * self.cfg.q_dim()].to_vec();
        let attn = self
            .acts
            .get_mut(&Act::Attn)
            .ok_or_else(|| EngineError::invalid("attn_gate before attention"))?;
        for (a, g) in attn.iter_mut().zip(gate) {
            *a = round_bf16(*a * sigmoid(g));
        }
        Ok(())
    }

    pub(super) fn conv_step_impl(&mut self, layer: usize, rows: usize) -> Result<()> {
        let (hy, dw) = self.delta_parts(layer)?;
        let (channels, kernel, width) = (hy.conv_channels(), hy.conv_kernel, hy.in_proj_rows());
        let len = hy.conv_state_elems();
        let batch = self.batch()?.clone();
        let weight = &dw.conv;
        let mixed = self
            .acts
            .get_mut(&Act::Mixed)
            .ok_or_else(|| EngineError::invalid("conv_step before in_proj"))?;
        let mut out = vec![0f32; channels];
        for r in 0..rows {
            let state = state_for(
                &mut self.states.conv[layer],
                batch.seq[r],
                batch.pos[r],
                len,
            );
            let x = &mut mixed[r * width..r * width + channels];
            conv1d_step(state, x, weight, kernel, &mut out);
            x.copy_from_slice(&out);
        }
        Ok(())
    }

    pub(super) fn delta_rule_impl(&mut self, layer: usize, rows: usize) -> Result<()> {
        let (hy, dw) = self.delta_parts(layer)?;
        let (vd, width, len) = (hy.value_width(), hy.in_proj_rows(), hy.state_elems());
        let batch = self.batch()?.clone();
        let mixed = self
            .acts
            .get(&Act::Mixed)
            .ok_or_else(|| EngineError::invalid("delta_rule before in_proj"))?;
        let states = &mut self.states.recurrent[layer];
        let mut core = vec![0f32; rows * vd];
        for r in 0..rows {
            let state = state_for(states, batch.seq[r], batch.pos[r], len);
            delta_rule_row(
                &hy,
                dw,
                &mixed[r * width..(r + 1) * width],
                state,
                &mut core[r * vd..(r + 1) * vd],
            );
        }
        self.acts.insert(Act::Core, core);
        Ok(())
    }

    pub(super) fn gated_norm_impl(&mut self, layer: usize, rows: usize) -> Result<()> {
        let (hy, dw) = self.delta_parts(layer)?;
        let (vd, width, z_at) = (hy.value_width(), hy.in_proj_rows(), hy.conv_channels());
        let core = self.act(Act::Core)?;
        let mixed = self.act(Act::Mixed)?;
        let mut out = vec![0f32; rows * vd];
        for r in 0..rows {
            gated_norm_row(
                &core[r * vd..(r + 1) * vd],
                &mixed[r * width + z_at..r * width + z_at + vd],
                &dw.norm,
                self.cfg.rms_eps,
                &mut out[r * vd..(r + 1) * vd],
            );
        }
        self.acts.insert(Act::Attn, out);
        Ok(())
    }
}

/// One row of the recurrence: q and k of each key head L2-normalised (q scaled by
/// `1 / sqrt(dk)`), the gates from the row's a and b, then the delta rule on each value head's
/// part of `state`; `core` gets `S^T q` per value head. `row` is a mixed row (`q | k | v | z |
/// b | a`).
pub(crate) fn delta_rule_row(
    hy: &HybridConfig,
    dw: &DeltaWeights,
    row: &[f32],
    state: &mut [f32],
    core: &mut [f32],
) {
    let (kh, vh, dk, dv) = (hy.k_heads, hy.v_heads, hy.k_dim, hy.v_dim);
    let (kd, vd) = (kh * dk, hy.value_width());
    let scale = 1.0 / (dk as f32).sqrt();
    let (mut q, mut k) = (row[..kd].to_vec(), row[kd..2 * kd].to_vec());
    for h in 0..kh {
        l2norm(&mut q[h * dk..(h + 1) * dk], L2NORM_EPS);
        l2norm(&mut k[h * dk..(h + 1) * dk], L2NORM_EPS);
    }
    q.iter_mut().for_each(|x| *x *= scale);
    let v = &row[2 * kd..2 * kd + vd];
    let (b, a) = (
        &row[2 * kd + 2 * vd..][..vh],
        &row[2 * kd + 2 * vd + vh..][..vh],
    );
    for h in 0..vh {
        let g = key_head_of(h, kh, vh);
        delta_rule_step(
            &mut state[h * dk * dv..(h + 1) * dk * dv],
            &q[g * dk..(g + 1) * dk],
            &k[g * dk..(g + 1) * dk],
            &v[h * dv..(h + 1) * dv],
            decay_log(a[h], dw.a_log[h], dw.dt_bias[h]),
            sigmoid(b[h]),
            &mut core[h * dv..(h + 1) * dv],
        );
    }
}

/// One row of the gated output norm: per value head of `x.len() / w.len()`, bf16 values of
/// `rms_norm(x) * w * silu(z)`.
pub(crate) fn gated_norm_row(x: &[f32], z: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let dv = w.len();
    for ((o, x), z) in out
        .chunks_exact_mut(dv)
        .zip(x.chunks_exact(dv))
        .zip(z.chunks_exact(dv))
    {
        gated_rms_norm(x, z, w, eps, o);
        o.iter_mut().for_each(|v| *v = round_bf16(*v));
    }
}
