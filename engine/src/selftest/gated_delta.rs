//! The hybrid models' kernels against the CPU reference: the DeltaNet conv step, the
//! recurrence under each state lever (reading the cache through the sequence ids or a
//! `state_gather_f32` scratch, writing the cache or scratch), the gated norm, the attention
//! output gate and partial RoPE. Rows come in three groups as a mixed batch would give them: a
//! 4-row prefill of sequence 2 from position 0, one decode row of sequence 0, and two rows of
//! sequence 1 that continue a stored state.

use super::norm::{RopeCase, rope_kv_append_check};
use super::{Ctx, TOL_BF16, TOL_F32, to_bf16_bits};
use crate::config::{HybridConfig, InProjLayout, LayerKind};
use crate::cpu::gated_delta::{L2NORM_EPS, conv1d_step, sigmoid};
use crate::cpu::hybrid::{delta_rule_row, gated_norm_row};
use crate::cuda::device::Arg;
use crate::error::Result;
use crate::quant::round_bf16;
use crate::weights::DeltaWeights;
use gapscope_kernels::Kernel;

/// Row groups: (first row, sequence), rows end at `ROWS`; positions per row.
const GROUP_START: [i32; 4] = [0, 4, 5, 7];
const GROUP_SEQ: [i32; 3] = [2, 0, 1];
const ROW_POS: [i32; 7] = [0, 1, 2, 3, 9, 4, 5];
const ROWS: usize = 7;
const SEQS: usize = 3;

fn group_of(r: usize) -> usize {
    GROUP_START
        .iter()
        .rposition(|&s| s as usize <= r)
        .unwrap_or(0)
}

/// The family: every kernel of `gated_delta.cu` and partial RoPE.
pub(super) fn gated_delta(c: &mut Ctx<'_>) -> Result<()> {
    conv_step(c)?;
    for dk in [32, 64, 128] {
        delta_rule(c, dk)?;
    }
    gated_norm(c)?;
    sigmoid_gate(c)?;
    partial_rope(c)
}

fn shape(dk: usize) -> HybridConfig {
    HybridConfig {
        layer_kinds: vec![LayerKind::LinearAttention],
        k_heads: 2,
        v_heads: 4,
        k_dim: dk,
        v_dim: 48,
        conv_kernel: 4,
        in_proj: InProjLayout::Split,
    }
}

fn conv_step(c: &mut Ctx<'_>) -> Result<()> {
    let (ch, taps, stride) = (200usize, 4usize, 230usize);
    let keep = taps - 1;
    let mixed = c.randf(ROWS * stride, 1.0);
    let w = c.randf(ch * taps, 0.5);
    let state = c.randf(SEQS * ch * keep, 1.0);
    let (mb, wb, sb) = (c.up(&mixed)?, c.up(&w)?, c.up(&state)?);
    let (gs, gq, rp) = (c.up(&GROUP_START)?, c.up(&GROUP_SEQ)?, c.up(&ROW_POS)?);
    let args = [
        Arg::Ptr(mb.ptr),
        Arg::I32(stride as i32),
        Arg::Ptr(wb.ptr),
        Arg::Ptr(sb.ptr),
        Arg::Ptr(gs.ptr),
        Arg::Ptr(gq.ptr),
        Arg::Ptr(rp.ptr),
        Arg::I32(ch as i32),
        Arg::I32(taps as i32),
    ];
    let grid = ((ch as u32).div_ceil(128), GROUP_SEQ.len() as u32, 1);
    c.dev.launch(Kernel::ConvStepF32, grid, 128, &args)?;
    let (mut want, mut want_state) = (mixed.clone(), state.clone());
    let mut out = vec![0f32; ch];
    for r in 0..ROWS {
        let seq = GROUP_SEQ[group_of(r)] as usize;
        let st = &mut want_state[seq * ch * keep..(seq + 1) * ch * keep];
        if ROW_POS[r] == 0 {
            st.fill(0.0);
        }
        let x = &mut want[r * stride..r * stride + ch];
        conv1d_step(st, x, &w, taps, &mut out);
        x.copy_from_slice(&out);
    }
    let got = c.read_f32(&mb, ROWS * stride)?;
    c.check("conv_step_f32", &got, &want, TOL_F32);
    let got_state = c.read_f32(&sb, SEQS * ch * keep)?;
    c.check("conv_step_f32 state", &got_state, &want_state, TOL_F32);
    Ok(())
}

/// One recurrence kernel under the four state levers. The cache holds `SEQS` states; scratch
/// holds one per group.
fn delta_rule(c: &mut Ctx<'_>, dk: usize) -> Result<()> {
    let hy = shape(dk);
    let (width, len) = (hy.in_proj_rows(), hy.state_elems());
    let kern = crate::cuda::backend::delta_rule_kernel(dk).expect("admitted key dim");
    let mixed = c.randf(ROWS * width, 1.0);
    let dw = DeltaWeights {
        conv: Vec::new(),
        a_log: c.randf(hy.v_heads, 0.5),
        dt_bias: c.randf(hy.v_heads, 0.5),
        norm: Vec::new(),
    };
    let cache = c.randf(SEQS * len, 0.1);
    // CPU: each group's state from its sequence's slot (zero when it starts at position 0).
    let vd = hy.value_width();
    let mut want_core = vec![0f32; ROWS * vd];
    let mut want_groups = vec![0f32; GROUP_SEQ.len() * len];
    for (g, &seq) in GROUP_SEQ.iter().enumerate() {
        let st = &mut want_groups[g * len..(g + 1) * len];
        st.copy_from_slice(&cache[seq as usize * len..(seq as usize + 1) * len]);
        for r in GROUP_START[g] as usize..GROUP_START[g + 1] as usize {
            if ROW_POS[r] == 0 {
                st.fill(0.0);
            }
            delta_rule_row(
                &hy,
                &dw,
                &mixed[r * width..(r + 1) * width],
                st,
                &mut want_core[r * vd..(r + 1) * vd],
            );
        }
    }
    let mut want_cache = cache.clone();
    for (g, &seq) in GROUP_SEQ.iter().enumerate() {
        want_cache[seq as usize * len..(seq as usize + 1) * len]
            .copy_from_slice(&want_groups[g * len..(g + 1) * len]);
    }
    let (mb, ab, db) = (c.up(&mixed)?, c.up(&dw.a_log)?, c.up(&dw.dt_bias)?);
    let (gs, gq, rp) = (c.up(&GROUP_START)?, c.up(&GROUP_SEQ)?, c.up(&ROW_POS)?);
    for (gather, copy) in [(false, false), (true, false), (false, true), (true, true)] {
        let cb = c.up(&cache)?;
        let scratch = c.poisoned(GROUP_SEQ.len() * len * 4)?;
        if gather {
            let vecs = len / 4;
            let args = [
                Arg::Ptr(cb.ptr),
                Arg::Ptr(gq.ptr),
                Arg::Ptr(scratch.ptr),
                Arg::I64(vecs as i64),
            ];
            let grid = (vecs.div_ceil(256) as u32, GROUP_SEQ.len() as u32, 1);
            c.dev.launch(Kernel::StateGatherF32, grid, 256, &args)?;
        }
        let core = c.poisoned(ROWS * vd * 4)?;
        let (sin, in_ids) = if gather {
            (scratch.ptr, 0)
        } else {
            (cb.ptr, gq.ptr)
        };
        let (sout, out_ids) = if copy {
            (scratch.ptr, 0)
        } else {
            (cb.ptr, gq.ptr)
        };
        let args = [
            Arg::Ptr(mb.ptr),
            Arg::I32(width as i32),
            Arg::Ptr(ab.ptr),
            Arg::Ptr(db.ptr),
            Arg::Ptr(sin),
            Arg::Ptr(in_ids),
            Arg::Ptr(sout),
            Arg::Ptr(out_ids),
            Arg::Ptr(gs.ptr),
            Arg::Ptr(rp.ptr),
            Arg::Ptr(core.ptr),
            Arg::I32(hy.k_heads as i32),
            Arg::I32(hy.v_heads as i32),
            Arg::F32(L2NORM_EPS),
        ];
        let grid = (hy.v_heads as u32, GROUP_SEQ.len() as u32, 1);
        c.dev.launch(kern, grid, hy.v_dim as u32, &args)?;
        let lever = format!(
            "state_read={} state_update={}",
            if gather { "gather" } else { "fused_ids" },
            if copy { "copy" } else { "inplace" }
        );
        let got = c.read_f32(&core, ROWS * vd)?;
        c.check(
            format!("{} {lever} output", kern.name()),
            &got,
            &want_core,
            TOL_F32,
        );
        let (got_state, want_state) = if copy {
            (c.read_f32(&scratch, GROUP_SEQ.len() * len)?, &want_groups)
        } else {
            (c.read_f32(&cb, SEQS * len)?, &want_cache)
        };
        c.check(
            format!("{} {lever} state", kern.name()),
            &got_state,
            want_state,
            TOL_F32,
        );
    }
    Ok(())
}

fn gated_norm(c: &mut Ctx<'_>) -> Result<()> {
    let (vh, dv, rows) = (4usize, 128usize, 5usize);
    let vd = vh * dv;
    let (stride, z_at) = (vd * 2 + 40, vd + 20);
    let core = c.randf(rows * vd, 1.0);
    let mixed = c.randf(rows * stride, 2.0);
    let w: Vec<f32> = c.randf(dv, 0.1).iter().map(|v| 1.0 + v).collect();
    let (cb, mb, wb, ob) = (
        c.up(&core)?,
        c.up(&mixed)?,
        c.up(&w)?,
        c.poisoned(rows * vd * 2)?,
    );
    let args = [
        Arg::Ptr(cb.ptr),
        Arg::Ptr(mb.ptr),
        Arg::I32(stride as i32),
        Arg::I32(z_at as i32),
        Arg::Ptr(wb.ptr),
        Arg::Ptr(ob.ptr),
        Arg::I32(vh as i32),
        Arg::I32(dv as i32),
        Arg::F32(1e-6),
    ];
    c.dev
        .launch(Kernel::GatedNormF32, (rows as u32, vh as u32, 1), 32, &args)?;
    let mut want = vec![0f32; rows * vd];
    for r in 0..rows {
        gated_norm_row(
            &core[r * vd..(r + 1) * vd],
            &mixed[r * stride + z_at..r * stride + z_at + vd],
            &w,
            1e-6,
            &mut want[r * vd..(r + 1) * vd],
        );
    }
    let got = c.read_bf16(&ob, rows * vd)?;
    c.check("gated_norm_f32", &got, &want, TOL_BF16);
    Ok(())
}

fn sigmoid_gate(c: &mut Ctx<'_>) -> Result<()> {
    let n = 3000usize;
    let attn = c.bf16_vals(n, 1.0);
    let gate = c.randf(n, 3.0);
    let (ab, gb) = (c.up(&to_bf16_bits(&attn))?, c.up(&gate)?);
    let args = [Arg::Ptr(ab.ptr), Arg::Ptr(gb.ptr), Arg::I64(n as i64)];
    c.dev.launch(
        Kernel::SigmoidGateBf16,
        (n.div_ceil(256) as u32, 1, 1),
        256,
        &args,
    )?;
    let want: Vec<f32> = attn
        .iter()
        .zip(&gate)
        .map(|(a, g)| round_bf16(a * sigmoid(*g)))
        .collect();
    let got = c.read_bf16(&ab, n)?;
    c.check("sigmoid_gate_bf16", &got, &want, TOL_BF16);
    Ok(())
}

/// `rope_kv_append_f32` rotating a quarter of each 256-wide head (Qwen3.5's partial RoPE):
/// the rest of q stays, the rest of k goes to the cache unrotated.
fn partial_rope(c: &mut Ctx<'_>) -> Result<()> {
    let (nq, nkv, hd, rot) = (4usize, 2usize, 256usize, 64usize);
    let pos = [0i32, 17, 300];
    let qkv = c.randf(pos.len() * (nq + 2 * nkv) * hd, 1.0);
    let inv: Vec<f32> = (0..rot / 2)
        .map(|i| 1.0 / 1e7f32.powf(2.0 * i as f32 / rot as f32))
        .collect();
    let qb = c.up(&qkv)?;
    rope_kv_append_check(
        c,
        &qb,
        &qkv,
        &RopeCase {
            label: "rope_kv_append_f32 partial",
            nq,
            nkv,
            hd,
            rope_dim: rot,
            inv_freq: &inv,
            pos: &pos,
            slots: &[2, 0, 1],
            nslots: pos.len(),
            q_tol: TOL_F32,
        },
    )
}
