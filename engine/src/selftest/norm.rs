//! The RMSNorms: `rms_norm_f32` over hidden rows, and Qwen3's q/k head norm
//! (`head_rms_norm_f32`) followed by RoPE and the KV append (`rope_kv_append_f32`) on the
//! block it normalised, as a layer runs them.

use super::{Ctx, TOL_BF16, TOL_F32};
use crate::config::ModelConfig;
use crate::cpu::ops;
use crate::cuda::DevBuf;
use crate::cuda::attention_args::RopeArgs;
use crate::cuda::launch::{HEAD_NORM_BLOCK, HeadNormArgs};
use crate::cuda::linear;
use crate::error::{EngineError, Result};
use crate::quant::round_bf16;
use gapscope_kernels::Kernel;

pub(super) fn rms_norm(c: &mut Ctx<'_>) -> Result<()> {
    for (h, rows) in [(4096usize, 3usize), (896, 5)] {
        let x = c.randf(rows * h, 2.0);
        let w = c
            .randf(h, 1.0)
            .iter()
            .map(|v| 1.0 + 0.1 * v)
            .collect::<Vec<_>>();
        let (xb, wb, ob) = (c.up(&x)?, c.up(&w)?, c.poisoned(rows * h * 2)?);
        let (grid, block, args) = linear::rms_norm_launch(xb.ptr, wb.ptr, ob.ptr, rows, h, 1e-5);
        c.dev.launch(Kernel::RmsNormF32, grid, block, &args)?;
        let got = c.read_bf16(&ob, rows * h)?;
        c.check(
            format!("rms_norm_f32 h={h}"),
            &got,
            &ops::rms_norm(&x, &w, h, 1e-5),
            TOL_BF16,
        );
    }
    Ok(())
}

/// head_rms_norm_f32 on a qkv block, then rope_kv_append_f32 on the normalised block (q
/// rotated in place, k and v appended to a poisoned cache at scattered slots).
pub(super) fn qk_norm_rope(c: &mut Ctx<'_>) -> Result<()> {
    let (nq, nkv, hd, rows) = (8usize, 2usize, 128usize, 3usize);
    let stride = (nq + 2 * nkv) * hd;
    let qkv = c.randf(rows * stride, 1.0);
    let qw: Vec<f32> = c.randf(hd, 0.1).iter().map(|v| 1.0 + v).collect();
    let kw: Vec<f32> = c.randf(hd, 0.1).iter().map(|v| 1.0 + v).collect();
    let qkvb = c.up(&qkv)?;
    let (qwb, kwb) = (c.up(&qw)?, c.up(&kw)?);
    let head_norm = HeadNormArgs {
        qkv: qkvb.ptr,
        q_weight: qwb.ptr,
        k_weight: kwb.ptr,
        heads: nq,
        kv_heads: nkv,
        head_dim: hd,
        row_stride: stride,
        eps: 1e-6,
    };
    c.dev.launch(
        Kernel::HeadRmsNormF32,
        head_norm.grid(rows),
        HEAD_NORM_BLOCK,
        &head_norm.args(),
    )?;
    let mut want = qkv.clone();
    for r in 0..rows {
        for h in 0..nq + nkv {
            let w = if h < nq { &qw } else { &kw };
            ops::head_norm(
                &mut want[r * stride + h * hd..r * stride + (h + 1) * hd],
                w,
                1e-6,
            );
        }
    }
    let got = c.read_f32(&qkvb, rows * stride)?;
    c.check("head_rms_norm_f32", &got, &want, TOL_F32);

    let cfg = ModelConfig::from_json(&serde_json::json!({"model_type":"llama","hidden_size":1024,
        "intermediate_size":64,"num_hidden_layers":1,"num_attention_heads":nq,"num_key_value_heads":nkv,
        "head_dim":hd,"vocab_size":8,"rope_theta":500000.0,"rope_scaling":{"rope_type":"llama3",
        "factor":8.0,"low_freq_factor":1.0,"high_freq_factor":4.0,"original_max_position_embeddings":8192}}))
    .map_err(EngineError::Invalid)?;
    rope_kv_append_check(
        c,
        &qkvb,
        &want,
        &RopeCase {
            label: "rope_kv_append_f32",
            nq,
            nkv,
            hd,
            rope_dim: hd,
            inv_freq: &cfg.inv_freq(),
            pos: &[0, 17, 3000],
            slots: &[5, 0, 2],
            nslots: 8,
            q_tol: 1e-3,
        },
    )
}

/// One `rope_kv_append_f32` case: the heads' shape, the rotated width, the positions and
/// cache slots of the rows, and q's tolerance (a large position loses more in sin/cos).
pub(super) struct RopeCase<'a> {
    /// Check names start with it: `{label} q`, `{label} k`, `{label} v`.
    pub label: &'a str,
    pub nq: usize,
    pub nkv: usize,
    pub hd: usize,
    pub rope_dim: usize,
    pub inv_freq: &'a [f32],
    pub pos: &'a [i32],
    pub slots: &'a [i32],
    /// Cache slots allocated (poisoned), at least every slot named.
    pub nslots: usize,
    pub q_tol: f64,
}

/// `rope_kv_append_f32` on the q|k|v rows at `qkvb`, against `ops::rope` on the first
/// `rope_dim` dimensions of each head of `want` (the same rows as the CPU holds them): q
/// rotated in place, k (rotated) and v written to the rows' slots of a poisoned cache as bf16.
pub(super) fn rope_kv_append_check(
    c: &mut Ctx<'_>,
    qkvb: &DevBuf,
    want: &[f32],
    case: &RopeCase<'_>,
) -> Result<()> {
    let RopeCase {
        label,
        nq,
        nkv,
        hd,
        rope_dim,
        inv_freq,
        pos,
        slots,
        nslots,
        q_tol,
    } = *case;
    let rows = pos.len();
    let stride = (nq + 2 * nkv) * hd;
    let (pb, sb, fb) = (c.up(pos)?, c.up(slots)?, c.up(inv_freq)?);
    let (kc, vc) = (
        c.poisoned(nslots * nkv * hd * 2)?,
        c.poisoned(nslots * nkv * hd * 2)?,
    );
    let rope = RopeArgs {
        qkv: qkvb.ptr,
        pos: pb.ptr,
        slots: sb.ptr,
        inv_freq: fb.ptr,
        k_cache: kc.ptr,
        v_cache: vc.ptr,
        heads: nq,
        kv_heads: nkv,
        head_dim: hd,
        row_stride: stride,
        rope_dim,
    };
    c.rope_kv_append(&rope, rows)?;
    let got_q = c.read_f32(qkvb, rows * stride)?;
    let kall = c.read_bf16(&kc, nslots * nkv * hd)?;
    let vall = c.read_bf16(&vc, nslots * nkv * hd)?;
    let (mut wq, mut gq, mut wk, mut gk, mut wv, mut gv) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    for r in 0..rows {
        let mut row = want[r * stride..(r + 1) * stride].to_vec();
        for h in 0..nq + nkv {
            ops::rope(&mut row[h * hd..h * hd + rope_dim], inv_freq, pos[r]);
        }
        wq.extend_from_slice(&row[..nq * hd]);
        gq.extend_from_slice(&got_q[r * stride..r * stride + nq * hd]);
        wk.extend(row[nq * hd..(nq + nkv) * hd].iter().map(|&x| round_bf16(x)));
        wv.extend(row[(nq + nkv) * hd..].iter().map(|&x| round_bf16(x)));
        let s = slots[r] as usize * nkv * hd;
        gk.extend_from_slice(&kall[s..s + nkv * hd]);
        gv.extend_from_slice(&vall[s..s + nkv * hd]);
    }
    c.check(format!("{label} q"), &gq, &wq, q_tol);
    c.check(format!("{label} k"), &gk, &wk, TOL_BF16);
    c.check(format!("{label} v"), &gv, &wv, TOL_BF16);
    Ok(())
}
