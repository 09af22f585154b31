//! GPU-vs-CPU checks of every kernel on fresh random inputs with poisoned (NaN) outputs, and
//! whole-model logits of the CUDA backend against the CPU reference. Run on the GPU machine by
//! `gapscope-engine selftest`; each check has a named tolerance.

use crate::Numerics;
use crate::config::ModelConfig;
use crate::cpu::{CpuBackend, ops};
use crate::cuda::{Capacity, CudaBackend, DevBuf, Device, Timing};
use crate::dispatch::Levers;
use crate::error::Result;
use crate::lever_matrix;
use crate::model::{Backend, Batch, forward};
use crate::quant::{Matrix, QK, WeightFormat, quantize_q8_1, round_bf16};
use crate::rng;
use crate::weights::ModelWeights;
use gapscope_kernels::Kernel;
use gapscope_traces::Phase;
use half::bf16;

use crate::cuda::attention_args::{AttnArgs, RopeArgs};
use crate::cuda::attention_shape;
use crate::cuda::device::{Arg, launch_block};
use crate::cuda::linear::{self, LinearPtrs};

#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    pub name: String,
    /// max |gpu - cpu| / max |cpu|
    pub rel_err: f64,
    pub tolerance: f64,
    pub pass: bool,
}

fn rel_err(gpu: &[f32], cpu: &[f32]) -> f64 {
    if gpu.len() != cpu.len() {
        return f64::INFINITY;
    }
    let scale = cpu
        .iter()
        .fold(0f64, |m, v| m.max(f64::from(v.abs())))
        .max(1e-30);
    let mut worst = 0f64;
    for (g, c) in gpu.iter().zip(cpu) {
        let d = f64::from((g - c).abs());
        if !d.is_finite() {
            return f64::INFINITY; // NaN poison survived: the kernel skipped an output
        }
        worst = worst.max(d);
    }
    worst / scale
}

struct Ctx<'a> {
    dev: &'a Device,
    seed: u64,
    stream_id: u64,
    out: Vec<Check>,
}

impl Ctx<'_> {
    fn randf(&mut self, n: usize, scale: f32) -> Vec<f32> {
        self.stream_id += 1;
        let mut v = vec![0f32; n];
        rng::fill(&mut v, self.seed, self.stream_id, 0.0, scale);
        v
    }
    fn bf16_vals(&mut self, n: usize, scale: f32) -> Vec<f32> {
        self.randf(n, scale).into_iter().map(round_bf16).collect()
    }
    fn up<T: Copy>(&self, v: &[T]) -> Result<DevBuf> {
        DevBuf::upload(v, &self.dev.stream)
    }
    /// A buffer of `bytes` filled with 0xFF: NaN as f32 and as bf16.
    fn poisoned(&self, bytes: usize) -> Result<DevBuf> {
        self.up(&vec![0xFFu8; bytes])
    }
    fn read_f32(&self, b: &DevBuf, n: usize) -> Result<Vec<f32>> {
        b.read::<f32>(n, &self.dev.stream)
    }
    fn read_bf16(&self, b: &DevBuf, n: usize) -> Result<Vec<f32>> {
        Ok(b.read::<u16>(n, &self.dev.stream)?
            .into_iter()
            .map(|x| bf16::from_bits(x).to_f32())
            .collect())
    }
    fn check(&mut self, name: impl Into<String>, gpu: &[f32], cpu: &[f32], tol: f64) {
        let e = rel_err(gpu, cpu);
        self.out.push(Check {
            name: name.into(),
            rel_err: e,
            tolerance: tol,
            pass: e <= tol,
        });
    }
}

fn to_bf16_bits(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| bf16::from_f32(x).to_bits()).collect()
}

/// bf16 rounding differences between two f32 sums can move a value by one bf16 ulp (2^-8).
pub const TOL_BF16: f64 = 1e-2;
/// f32 results of the same math in a different summation order.
pub const TOL_F32: f64 = 1e-4;
/// Whole-model logits with Q4_0 weights: one bf16 rounding flip in an activation moves its
/// q8_1 value by one step, and a 4-bit weight (step = 1/8 of the block range) turns that into a
/// larger logit change than Q8_0 or bf16 weights do.
pub const TOL_Q4_MODEL: f64 = 3e-2;
/// Whole-model logits with Q8_0 weights: the same mechanism with a 1/127 step. A fresh seed
/// measured 1.08e-2 on Qwen2 (every lever setting alike), so 1e-2 was too tight; a wrong kernel
/// is off by orders of magnitude more.
pub const TOL_Q8_MODEL: f64 = 2e-2;
/// Integer block dot products scaled in f32 (MMVQ/MMQ vs the CPU's identical math).
pub const TOL_INT8: f64 = 1e-4;

pub fn op_checks(dev: &Device, seed: u64) -> Result<Vec<Check>> {
    let mut c = Ctx {
        dev,
        seed,
        stream_id: 0,
        out: Vec::new(),
    };
    let st = &dev.stream;

    // get_rows_bf16
    {
        let (v, h, rows) = (50usize, 256usize, 7usize);
        let table = c.bf16_vals(v * h, 1.0);
        let ids: Vec<i32> = rng::tokens(seed, 1, rows, v);
        let (tb, ib, ob) = (
            c.up(&to_bf16_bits(&table))?,
            c.up(&ids)?,
            c.poisoned(rows * h * 4)?,
        );
        dev.launch(
            Kernel::GetRowsBf16,
            (rows as u32, 1, 1),
            256,
            &[
                Arg::Ptr(tb.ptr),
                Arg::Ptr(ib.ptr),
                Arg::Ptr(ob.ptr),
                Arg::I32(h as i32),
            ],
        )?;
        let want: Vec<f32> = ids
            .iter()
            .flat_map(|&i| table[i as usize * h..(i as usize + 1) * h].to_vec())
            .collect();
        let got = c.read_f32(&ob, rows * h)?;
        c.check("get_rows_bf16", &got, &want, 0.0);
    }
    // rms_norm_f32
    for (h, rows) in [(4096usize, 3usize), (896, 5)] {
        let x = c.randf(rows * h, 2.0);
        let w = c
            .randf(h, 1.0)
            .iter()
            .map(|v| 1.0 + 0.1 * v)
            .collect::<Vec<_>>();
        let (xb, wb, ob) = (c.up(&x)?, c.up(&w)?, c.poisoned(rows * h * 2)?);
        let (grid, block, args) = linear::rms_norm_launch(xb.ptr, wb.ptr, ob.ptr, rows, h, 1e-5);
        dev.launch(Kernel::RmsNormF32, grid, block, &args)?;
        let got = c.read_bf16(&ob, rows * h)?;
        c.check(
            format!("rms_norm_f32 h={h}"),
            &got,
            &ops::rms_norm(&x, &w, h, 1e-5),
            TOL_BF16,
        );
    }
    // head_rms_norm_f32 + rope_kv_append_f32 on a qkv block
    {
        let (nq, nkv, hd, rows) = (8usize, 2usize, 128usize, 3usize);
        let stride = (nq + 2 * nkv) * hd;
        let qkv = c.randf(rows * stride, 1.0);
        let qw: Vec<f32> = c.randf(hd, 0.1).iter().map(|v| 1.0 + v).collect();
        let kw: Vec<f32> = c.randf(hd, 0.1).iter().map(|v| 1.0 + v).collect();
        let qkvb = c.up(&qkv)?;
        let (qwb, kwb) = (c.up(&qw)?, c.up(&kw)?);
        dev.launch(
            Kernel::HeadRmsNormF32,
            (rows as u32, (nq + nkv) as u32, 1),
            32,
            &[
                Arg::Ptr(qkvb.ptr),
                Arg::Ptr(qwb.ptr),
                Arg::Ptr(kwb.ptr),
                Arg::I32(nq as i32),
                Arg::I32(nkv as i32),
                Arg::I32(hd as i32),
                Arg::I32(stride as i32),
                Arg::F32(1e-6),
            ],
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
        .map_err(crate::error::EngineError::Invalid)?;
        let inv = cfg.inv_freq();
        let pos: Vec<i32> = vec![0, 17, 3000];
        let slots: Vec<i32> = vec![5, 0, 2];
        let nslots = 8;
        let (pb, sb, fb) = (c.up(&pos)?, c.up(&slots)?, c.up(&inv)?);
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
        };
        dev.launch(
            Kernel::RopeKvAppendF32,
            (rows as u32, 1, 1),
            128,
            &rope.args(),
        )?;
        let got_q = c.read_f32(&qkvb, rows * stride)?;
        let kall = c.read_bf16(&kc, nslots * nkv * hd)?;
        let vall = c.read_bf16(&vc, nslots * nkv * hd)?;
        let (mut wq, mut gq, mut wk, mut gk, mut wv, mut gv) =
            (vec![], vec![], vec![], vec![], vec![], vec![]);
        for r in 0..rows {
            let mut row = want[r * stride..(r + 1) * stride].to_vec();
            for h in 0..nq + nkv {
                ops::rope(&mut row[h * hd..(h + 1) * hd], &inv, pos[r]);
            }
            wq.extend_from_slice(&row[..nq * hd]);
            gq.extend_from_slice(&got_q[r * stride..r * stride + nq * hd]);
            wk.extend(row[nq * hd..(nq + nkv) * hd].iter().map(|&x| round_bf16(x)));
            wv.extend(row[(nq + nkv) * hd..].iter().map(|&x| round_bf16(x)));
            let s = slots[r] as usize * nkv * hd;
            gk.extend_from_slice(&kall[s..s + nkv * hd]);
            gv.extend_from_slice(&vall[s..s + nkv * hd]);
        }
        c.check("rope_kv_append_f32 q", &gq, &wq, 1e-3);
        c.check("rope_kv_append_f32 k", &gk, &wk, TOL_BF16);
        c.check("rope_kv_append_f32 v", &gv, &wv, TOL_BF16);
    }
    // swiglu_f32
    {
        let n = 3 * 1000;
        let gu = c.randf(2 * n, 3.0);
        let (gb, hb) = (c.up(&gu)?, c.poisoned(n * 2)?);
        dev.launch(
            Kernel::SwigluF32,
            (n.div_ceil(256) as u32, 1, 1),
            256,
            &[Arg::Ptr(gb.ptr), Arg::Ptr(hb.ptr), Arg::I64(n as i64)],
        )?;
        let got = c.read_bf16(&hb, n)?;
        c.check("swiglu_f32", &got, &ops::swiglu(&gu), TOL_BF16);
    }
    // Linears: bf16 GEMV, MMVQ and MMQ against the CPU's identical math.
    // (64, 1120): 35 quant blocks, so the last summation group and MMQ's last split are partial.
    for &(n, k) in &[(512usize, 4096usize), (4096, 1024), (96, 14336), (64, 1120)] {
        let wf = c.randf(n * k, 0.05);
        for fmt in [WeightFormat::Bf16, WeightFormat::Q8_0, WeightFormat::Q4_0] {
            let m = Matrix::from_f32(fmt, n, k, &wf);
            let (wv, ws) = match &m {
                Matrix::Bf16 { data, .. } => (c.up(data)?, c.up(&[0u16])?),
                Matrix::Q8_0 { qs, d, .. } => (c.up(qs)?, c.up(d)?),
                Matrix::Q4_0 { qs, d, .. } => (c.up(qs)?, c.up(d)?),
            };
            let rows_list: &[usize] = if fmt == WeightFormat::Bf16 {
                &[1, 3, 8, 9, 16]
            } else {
                &[1, 5, 8, 13, 64, 128]
            };
            for &rows in rows_list {
                let x = c.bf16_vals(rows * k, 1.0);
                let want = ops::linear(&m, &x, rows);
                let xb = c.up(&to_bf16_bits(&x))?;
                let small = rows <= 8;
                let name = match (fmt, small) {
                    (WeightFormat::Bf16, true) => "gemv_bf16",
                    (WeightFormat::Bf16, false) => "gemm_bf16_small",
                    (WeightFormat::Q8_0, true) => "mmvq_q8_0",
                    (WeightFormat::Q4_0, true) => "mmvq_q4_0",
                    (WeightFormat::Q8_0, false) => "mmq_q8_0",
                    (WeightFormat::Q4_0, false) => "mmq_q4_0",
                };
                if fmt == WeightFormat::Bf16 {
                    for mode in [0, 1, 2] {
                        let n_out = if mode == 2 { n / 2 } else { n };
                        let base = c.randf(rows * n_out, 1.0);
                        let yb = if mode == 1 {
                            c.up(&base)?
                        } else {
                            c.poisoned(rows * n_out * 4)?
                        };
                        let yh = c.poisoned(rows * n_out * 2)?;
                        let (y, h) = if mode == 2 { (0, yh.ptr) } else { (yb.ptr, 0) };
                        let kern = if small {
                            linear::vector_kernel(fmt, rows, mode == 2)
                        } else {
                            Kernel::GemmBf16Small
                        };
                        let ptrs = LinearPtrs {
                            w: wv.ptr,
                            x: xb.ptr,
                            y,
                            yh: h,
                            ..LinearPtrs::default()
                        };
                        // Fewer blocks than tiles, so the grid-stride loop runs several passes.
                        let grid = if rows == 1 {
                            n_out.div_ceil(4).min(97)
                        } else {
                            n_out.div_ceil(4)
                        };
                        dev.launch(
                            kern,
                            (grid as u32, 1, 1),
                            launch_block(kern),
                            &linear::vector_args(kern, &ptrs, n_out, k, rows, mode),
                        )?;
                        let (got, exp) = match mode {
                            0 => (c.read_f32(&yb, rows * n)?, want.clone()),
                            1 => (
                                c.read_f32(&yb, rows * n)?,
                                base.iter().zip(&want).map(|(a, b)| a + b).collect(),
                            ),
                            _ => (c.read_bf16(&yh, rows * n_out)?, ops::swiglu(&want)),
                        };
                        let tol = if mode == 2 { TOL_BF16 } else { TOL_F32 };
                        c.check(
                            format!("{name} {n}x{k} rows={rows} mode={mode}"),
                            &got,
                            &exp,
                            tol,
                        );
                    }
                    if rows == 16 {
                        bf16_batch_invariance(&mut c, &wv, &xb, n, k)?;
                    }
                    if rows == 1 && k <= linear::GEMV_NORM_MAX {
                        // The entries with the input RMSNorm fused in: bitwise equal to
                        // rms_norm_f32 followed by the plain entry, and close to the CPU.
                        let resid = c.randf(k, 2.0);
                        let nw: Vec<f32> = c.randf(k, 0.1).iter().map(|v| 1.0 + v).collect();
                        let (rb, nwb, xn) = (c.up(&resid)?, c.up(&nw)?, c.poisoned(k * 2)?);
                        let (grid, block, args) =
                            linear::rms_norm_launch(rb.ptr, nwb.ptr, xn.ptr, 1, k, 1e-5);
                        dev.launch(Kernel::RmsNormF32, grid, block, &args)?;
                        let xn_cpu = ops::rms_norm(&resid, &nw, k, 1e-5);
                        let want_n = ops::linear(&m, &xn_cpu, 1);
                        for mode in [0, 2] {
                            let n_out = if mode == 2 { n / 2 } else { n };
                            let plain = linear::vector_kernel(fmt, 1, mode == 2);
                            let Some(fused) = linear::norm_kernel_any(plain) else {
                                continue;
                            };
                            let mut outs = Vec::new();
                            for (kern, norm) in [(plain, false), (fused, true)] {
                                let yb = c.poisoned(n_out * 4)?;
                                let yh = c.poisoned(n_out * 2)?;
                                let (y, h) = if mode == 2 { (0, yh.ptr) } else { (yb.ptr, 0) };
                                let ptrs = LinearPtrs {
                                    w: wv.ptr,
                                    x: if norm { 0 } else { xn.ptr },
                                    y,
                                    yh: h,
                                    norm_x: if norm { rb.ptr } else { 0 },
                                    norm_w: if norm { nwb.ptr } else { 0 },
                                    norm_eps: 1e-5,
                                    ..LinearPtrs::default()
                                };
                                dev.launch(
                                    kern,
                                    (n_out.div_ceil(4).min(97) as u32, 1, 1),
                                    launch_block(kern),
                                    &linear::vector_args(kern, &ptrs, n_out, k, 1, mode),
                                )?;
                                outs.push(if mode == 2 {
                                    c.read_bf16(&yh, n_out)?
                                } else {
                                    c.read_f32(&yb, n_out)?
                                });
                            }
                            let exp = if mode == 2 {
                                ops::swiglu(&want_n)
                            } else {
                                want_n.clone()
                            };
                            c.check(
                                format!("{name} {n}x{k} fused rms_norm mode={mode} vs CPU"),
                                &outs[1],
                                &exp,
                                TOL_BF16,
                            );
                            c.check(
                                format!("{name} {n}x{k} fused rms_norm mode={mode} vs rms_norm_f32 + GEMV (bitwise)"),
                                &outs[1],
                                &outs[0],
                                0.0,
                            );
                        }
                    }
                } else {
                    let blocks = rows * k / QK;
                    let (qx, dx, sx) = (
                        c.poisoned(rows * k)?,
                        c.poisoned(blocks * 4)?,
                        c.poisoned(blocks * 4)?,
                    );
                    // The same blocks k-major, as MMQ reads them.
                    let (qxk, dxk, sxk) = (
                        c.poisoned(rows * k)?,
                        c.poisoned(blocks * 4)?,
                        c.poisoned(blocks * 4)?,
                    );
                    for (k_major, (q, d, s)) in
                        [(false, (&qx, &dx, &sx)), (true, (&qxk, &dxk, &sxk))]
                    {
                        let (kern, grid, args) =
                            linear::quantize_launch(xb.ptr, q.ptr, d.ptr, s.ptr, rows, k, k_major);
                        dev.launch(kern, grid, linear::QUANTIZE_BLOCK, &args)?;
                    }
                    if rows == 5 && n == 512 {
                        let st = &dev.stream;
                        let kb = k / QK;
                        let row_major: Vec<i8> = qx.read::<i8>(rows * k, st)?;
                        let k_major: Vec<i8> = qxk.read::<i8>(rows * k, st)?;
                        let moved = |i: usize| {
                            let (r, b, j) = (i / k, (i % k) / QK, i % QK);
                            f32::from(k_major[(b * rows + r) * QK + j])
                        };
                        let got: Vec<f32> = (0..rows * k).map(moved).collect();
                        let want: Vec<f32> = row_major.iter().map(|&v| f32::from(v)).collect();
                        c.check(
                            format!("quantize_q8_1_bf16_kmajor k={k} values (bitwise)"),
                            &got,
                            &want,
                            0.0,
                        );
                        for (what, a, b) in [("scales", &dx, &dxk), ("sums", &sx, &sxk)] {
                            let rm = c.read_f32(a, blocks)?;
                            let km = c.read_f32(b, blocks)?;
                            let got: Vec<f32> =
                                (0..blocks).map(|i| km[(i % kb) * rows + i / kb]).collect();
                            c.check(
                                format!("quantize_q8_1_bf16_kmajor k={k} {what} (bitwise)"),
                                &got,
                                &rm,
                                0.0,
                            );
                        }
                    }
                    let mmq_in = |ptrs: LinearPtrs| LinearPtrs {
                        x: qxk.ptr,
                        dx: dxk.ptr,
                        sx: sxk.ptr,
                        ..ptrs
                    };
                    if rows == 1 && n == 512 {
                        let q = quantize_q8_1(&x);
                        let gq: Vec<f32> = qx
                            .read::<i8>(rows * k, st)?
                            .iter()
                            .map(|&v| f32::from(v))
                            .collect();
                        let wq: Vec<f32> = q.qs.iter().map(|&v| f32::from(v)).collect();
                        c.check(format!("quantize_q8_1_bf16 k={k} values"), &gq, &wq, 0.0);
                        c.check(
                            format!("quantize_q8_1_bf16 k={k} scales"),
                            &c.read_f32(&dx, blocks)?,
                            &q.d,
                            1e-6,
                        );
                        c.check(
                            format!("quantize_q8_1_bf16 k={k} sums"),
                            &c.read_f32(&sx, blocks)?,
                            &q.s,
                            1e-5,
                        );
                    }
                    let yb = c.poisoned(rows * n * 4)?;
                    let ptrs = LinearPtrs {
                        w: wv.ptr,
                        scales: ws.ptr,
                        x: qx.ptr,
                        dx: dx.ptr,
                        sx: sx.ptr,
                        y: yb.ptr,
                        ..LinearPtrs::default()
                    };
                    if small {
                        let kern = linear::vector_kernel(fmt, rows, false);
                        let args = linear::vector_args(kern, &ptrs, n, k, rows, 0);
                        dev.launch(
                            kern,
                            (n.div_ceil(4) as u32, 1, 1),
                            launch_block(kern),
                            &args,
                        )?;
                    } else {
                        let args = linear::mmq_args(&mmq_in(ptrs), n, k, rows, 0);
                        dev.launch(
                            linear::mmq_kernel(fmt, true),
                            linear::mmq_grid(n, rows),
                            128,
                            &args,
                        )?;
                    }
                    let got = c.read_f32(&yb, rows * n)?;
                    c.check(format!("{name} {n}x{k} rows={rows}"), &got, &want, TOL_INT8);
                    if rows == 1 {
                        // The batch-1 entries (one warp per row, and for Q8_0 the K-split and
                        // contiguous-load ones) and the general entry at nb = 1 sum the same
                        // block terms in f64: the same bits.
                        let general = linear::vector_kernel(fmt, 2, false);
                        let extra: &[Kernel] = if fmt == WeightFormat::Q8_0 {
                            &linear::B1_Q8_0_SHAPE_ENTRIES
                        } else {
                            &[]
                        };
                        // One launch of `kern` at nb = 1 over the first `n_out` rows, with more
                        // blocks' work than blocks (grid-stride passes); accumulating onto
                        // `resid` when given, into a poisoned output otherwise.
                        let run = |c: &Ctx<'_>,
                                   kern: Kernel,
                                   n_out: usize,
                                   mode: i32,
                                   bias: u64,
                                   resid: Option<&[f32]>|
                         -> Result<Vec<f32>> {
                            let yg = match resid {
                                Some(r) => c.up(r)?,
                                None => c.poisoned(n_out * 4)?,
                            };
                            let p = LinearPtrs {
                                y: yg.ptr,
                                bias,
                                ..ptrs
                            };
                            dev.launch(
                                kern,
                                (n_out.div_ceil(4).min(97) as u32, 1, 1),
                                launch_block(kern),
                                &linear::vector_args(kern, &p, n_out, k, 1, mode),
                            )?;
                            c.read_f32(&yg, n_out)
                        };
                        let mut outs = Vec::new();
                        for &kern in std::iter::once(&general).chain(extra) {
                            outs.push((kern, run(&c, kern, n, 0, ptrs.bias, None)?));
                        }
                        for (kern, out) in &outs[1..] {
                            c.check(
                                format!("{} vs {name}_b1 {n}x{k} (bitwise)", kern.name()),
                                out,
                                &got,
                                0.0,
                            );
                        }
                        c.check(
                            format!("{name}_b1 vs {name} nb=1 {n}x{k} (bitwise)"),
                            &got,
                            &outs[0].1,
                            0.0,
                        );
                        // The Q8_0 shape entries on a partial last tile (n - 3 rows), with a
                        // bias (store) and onto a residual (accumulate), against the general
                        // entry under the same settings.
                        let n3 = n - 3;
                        let bias_vals = c.randf(n3, 0.5);
                        let bias = c.up(&bias_vals)?;
                        let resid = c.randf(n3, 1.0);
                        for mode in [0, 1].into_iter().filter(|_| !extra.is_empty()) {
                            let mut outs = Vec::new();
                            for &kern in std::iter::once(&general).chain(extra) {
                                let out = if mode == 1 {
                                    run(&c, kern, n3, mode, 0, Some(&resid))?
                                } else {
                                    run(&c, kern, n3, mode, bias.ptr, None)?
                                };
                                outs.push((kern, out));
                            }
                            for (kern, out) in &outs[1..] {
                                c.check(
                                    format!(
                                        "{} vs {name} nb=1 {n3}x{k} mode={mode} (bitwise)",
                                        kern.name()
                                    ),
                                    out,
                                    &outs[0].1,
                                    0.0,
                                );
                            }
                        }
                    }
                    // Dispatch invariance: at a batch both paths can run, MMQ must give
                    // MMVQ's bits, or moving the threshold changes greedy output; and MMQ's two
                    // activation layouts must give each other's bits.
                    if rows > 1 {
                        for k_major in [false, true] {
                            if !small && k_major {
                                continue; // that is `got` itself
                            }
                            let yq = c.poisoned(rows * n * 4)?;
                            let p = LinearPtrs { y: yq.ptr, ..ptrs };
                            let p = if k_major { mmq_in(p) } else { p };
                            let args = linear::mmq_args(&p, n, k, rows, 0);
                            dev.launch(
                                linear::mmq_kernel(fmt, k_major),
                                linear::mmq_grid(n, rows),
                                128,
                                &args,
                            )?;
                            let layout = if k_major { "k-major" } else { "row-major" };
                            let of = if small { "" } else { " k-major" };
                            c.check(
                                format!("mmq {layout} vs {name}{of} {n}x{k} rows={rows} (bitwise)"),
                                &c.read_f32(&yq, rows * n)?,
                                &got,
                                0.0,
                            );
                        }
                    }
                }
            }
        }
    }
    // attention over a paged cache with a shuffled block table: one key lane with split 1 and
    // split 4 (+reduce or the in-kernel combine), key lanes combined on chip, both at once; then
    // the decode kernels with RoPE and the KV append fused in, which must give the same bits
    // as rope_kv_append_f32 followed by attention.
    for (nq, nkv, hd) in [
        (32usize, 8usize, 128usize),
        (8, 2, 64),
        (28, 4, 128),
        (14, 2, 64),
        (8, 2, 256),
    ] {
        let (nseq, bs, max_blocks) = (3usize, 16usize, 8usize);
        let slots = nseq * max_blocks * bs;
        let kv_dim = nkv * hd;
        let k = c.bf16_vals(slots * kv_dim, 1.0);
        let v = c.bf16_vals(slots * kv_dim, 1.0);
        // Physical block of (seq s, block j) = a permutation.
        let table: Vec<i32> = (0..nseq * max_blocks)
            .map(|i| ((i * 7 + 3) % (nseq * max_blocks)) as i32)
            .collect();
        let lens = [1usize, 37, 128];
        let rows = nseq;
        let slot_of = |s: usize, p: usize| table[s * max_blocks + p / bs] as usize * bs + p % bs;
        let q = c.randf(rows * nq * hd, 1.0);
        let row_seq: Vec<i32> = (0..rows as i32).collect();
        let row_pos: Vec<i32> = lens.iter().map(|&l| l as i32 - 1).collect();
        let row_slot: Vec<i32> = (0..rows).map(|s| slot_of(s, lens[s] - 1) as i32).collect();
        let want_of = |q: &[f32], stride: usize, k: &[f32], v: &[f32]| {
            let mut want = Vec::new();
            for s in 0..nseq {
                let mut ks = Vec::new();
                let mut vs = Vec::new();
                for p in 0..lens[s] {
                    let slot = slot_of(s, p);
                    ks.extend_from_slice(&k[slot * kv_dim..(slot + 1) * kv_dim]);
                    vs.extend_from_slice(&v[slot * kv_dim..(slot + 1) * kv_dim]);
                }
                want.extend(ops::attention_row(
                    &q[s * stride..s * stride + nq * hd],
                    &ks,
                    &vs,
                    lens[s],
                    nq,
                    nkv,
                    hd,
                    false,
                ));
            }
            want
        };
        let want = want_of(&q, nq * hd, &k, &v);
        let (kb, vb, tb) = (
            c.up(&to_bf16_bits(&k))?,
            c.up(&to_bf16_bits(&v))?,
            c.up(&table)?,
        );
        let (qb, rsb, rpb, rlb) = (
            c.up(&q)?,
            c.up(&row_seq)?,
            c.up(&row_pos)?,
            c.up(&row_slot)?,
        );
        let inv: Vec<f32> = (0..hd / 2)
            .map(|i| 500000f32.powf(-((2 * i) as f32) / hd as f32))
            .collect();
        let fb = c.up(&inv)?;
        let counters = c.up(&vec![0i32; rows * nq.div_ceil(4)])?;
        let max_splits = 13;
        let (pa, pm) = (
            c.poisoned(rows * nq * max_splits * hd * 4)?,
            c.poisoned(rows * nq * max_splits * 2 * 4)?,
        );
        let max_kw = attention_shape::max_key_lanes(hd);
        // (qkv, stride, read caches, write caches, rope flag, key lanes, splits, in-kernel combine)
        #[allow(clippy::too_many_arguments)]
        let launch = |qkv: u64,
                      stride: usize,
                      (kr, vr): (u64, u64),
                      (kw_, vw_): (u64, u64),
                      rope: bool,
                      kw: usize,
                      splits: usize,
                      combine: bool,
                      out: u64|
         -> Result<()> {
            let attn = AttnArgs {
                qkv,
                q_stride: stride,
                k_read: kr,
                v_read: vr,
                block_table: tb.ptr,
                max_blocks,
                block_size: bs,
                row_seq: rsb.ptr,
                row_pos: rpb.ptr,
                row_slot: rlb.ptr,
                inv_freq: fb.ptr,
                rope,
                k_cache: kw_,
                v_cache: vw_,
                out,
                part_acc: pa.ptr,
                part_ml: pm.ptr,
                counters: if combine { counters.ptr } else { 0 },
                heads: nq,
                kv_heads: nkv,
                head_dim: hd,
                chunk: (max_blocks * bs).div_ceil(splits).div_ceil(16) * 16,
            };
            let (kern, grid, block) = attn.launch(rows, kw, splits)?;
            dev.launch(kern, grid, block, &attn.args())?;
            if splits > 1 && !combine {
                dev.launch(
                    Kernel::AttnReduceF32,
                    ((rows * nq) as u32, 1, 1),
                    hd as u32,
                    &[
                        Arg::Ptr(pa.ptr),
                        Arg::Ptr(pm.ptr),
                        Arg::Ptr(out),
                        Arg::I32(splits as i32),
                        Arg::I32(hd as i32),
                    ],
                )?;
            }
            Ok(())
        };
        let shapes = [
            (1usize, 1usize, false),
            (1, 4, false),
            (1, 4, true),
            (1, 13, true),
            (2, 1, false),
            (max_kw, 1, false),
            (4, 2, true),
        ];
        for (kw, splits, combine) in shapes {
            let ob = c.poisoned(rows * nq * hd * 2)?;
            launch(
                qb.ptr,
                nq * hd,
                (kb.ptr, vb.ptr),
                (0, 0),
                false,
                kw,
                splits,
                combine,
                ob.ptr,
            )?;
            let got = c.read_bf16(&ob, rows * nq * hd)?;
            c.check(
                format!(
                    "attn_decode_bf16 nq={nq} nkv={nkv} hd={hd} key_lanes={kw} splits={splits}{}",
                    if combine { " fused reduce" } else { "" }
                ),
                &got,
                &want,
                TOL_BF16,
            );
        }
        // Fused RoPE + KV append: an unrotated qkv block; the unfused reference runs
        // rope_kv_append_f32 on a copy and then attention over the cache it wrote.
        let stride = (nq + 2 * nkv) * hd;
        let qkv = c.randf(rows * stride, 1.0);
        let mut roped = qkv.clone();
        let (mut k2, mut v2) = (k.clone(), v.clone());
        for r in 0..rows {
            let row = &mut roped[r * stride..(r + 1) * stride];
            for h in 0..nq + nkv {
                ops::rope(&mut row[h * hd..(h + 1) * hd], &inv, row_pos[r]);
            }
            let sl = row_slot[r] as usize * kv_dim;
            for i in 0..kv_dim {
                k2[sl + i] = round_bf16(row[nq * hd + i]);
                v2[sl + i] = round_bf16(row[(nq + nkv) * hd + i]);
            }
        }
        let want_fused = want_of(&roped, stride, &k2, &v2);
        for (kw, splits, combine) in [
            (1usize, 1usize, false),
            (1, 4, true),
            (max_kw, 1, false),
            (4, 2, true),
        ] {
            // Unfused: rope_kv_append_f32, then attention over the cache.
            let (ka, va, qa) = (
                c.up(&to_bf16_bits(&k))?,
                c.up(&to_bf16_bits(&v))?,
                c.up(&qkv)?,
            );
            let rope = RopeArgs {
                qkv: qa.ptr,
                pos: rpb.ptr,
                slots: rlb.ptr,
                inv_freq: fb.ptr,
                k_cache: ka.ptr,
                v_cache: va.ptr,
                heads: nq,
                kv_heads: nkv,
                head_dim: hd,
                row_stride: stride,
            };
            dev.launch(
                Kernel::RopeKvAppendF32,
                (rows as u32, 1, 1),
                512,
                &rope.args(),
            )?;
            let oa = c.poisoned(rows * nq * hd * 2)?;
            launch(
                qa.ptr,
                stride,
                (ka.ptr, va.ptr),
                (0, 0),
                false,
                kw,
                splits,
                combine,
                oa.ptr,
            )?;
            // Fused: the same inputs in one launch.
            let (kf, vf, qf) = (
                c.up(&to_bf16_bits(&k))?,
                c.up(&to_bf16_bits(&v))?,
                c.up(&qkv)?,
            );
            let of = c.poisoned(rows * nq * hd * 2)?;
            launch(
                qf.ptr,
                stride,
                (kf.ptr, vf.ptr),
                (kf.ptr, vf.ptr),
                true,
                kw,
                splits,
                combine,
                of.ptr,
            )?;
            let name = format!(
                "attention+rope fused nq={nq} nkv={nkv} hd={hd} key_lanes={kw} splits={splits}"
            );
            let (ga, gf) = (
                c.read_bf16(&oa, rows * nq * hd)?,
                c.read_bf16(&of, rows * nq * hd)?,
            );
            c.check(format!("{name} vs CPU"), &gf, &want_fused, TOL_BF16);
            c.check(format!("{name} vs unfused (bitwise)"), &gf, &ga, 0.0);
            let (cka, ckf) = (
                c.read_bf16(&ka, slots * kv_dim)?,
                c.read_bf16(&kf, slots * kv_dim)?,
            );
            let (cva, cvf) = (
                c.read_bf16(&va, slots * kv_dim)?,
                c.read_bf16(&vf, slots * kv_dim)?,
            );
            c.check(
                format!("{name} K cache vs unfused (bitwise)"),
                &ckf,
                &cka,
                0.0,
            );
            c.check(
                format!("{name} V cache vs unfused (bitwise)"),
                &cvf,
                &cva,
                0.0,
            );
        }
    }
    // argmax_f32, with a planted tie resolved to the lower index across two slices, in one
    // block per row and in slices combined by the last block (twice, so the tickets reset)
    {
        let (rows, v) = (4usize, 128_256usize);
        let mut l = c.randf(rows * v, 5.0);
        l[v + 1000] = 100.0;
        l[v + 90_000] = 100.0;
        l[2 * v + 7] = f32::NAN;
        let want: Vec<f32> = (0..rows)
            .map(|r| ops::argmax(&l[r * v..(r + 1) * v]) as f32)
            .collect();
        let lb = c.up(&l)?;
        let (pv, pi) = (c.poisoned(rows * 64 * 4)?, c.poisoned(rows * 64 * 4)?);
        let counters = c.up(&vec![0i32; rows])?;
        for (slices, rep) in [(1u32, 0), (32, 0), (32, 1), (64, 0)] {
            let ob = c.poisoned(rows * 4)?;
            dev.launch(
                Kernel::ArgmaxF32,
                (rows as u32, slices, 1),
                512,
                &[
                    Arg::Ptr(lb.ptr),
                    Arg::I32(v as i32),
                    Arg::Ptr(ob.ptr),
                    Arg::Ptr(pv.ptr),
                    Arg::Ptr(pi.ptr),
                    Arg::Ptr(counters.ptr),
                ],
            )?;
            let got: Vec<f32> = ob
                .read::<i32>(rows, st)?
                .iter()
                .map(|&x| x as f32)
                .collect();
            c.check(
                format!("argmax_f32 slices={slices} launch={rep}"),
                &got,
                &want,
                0.0,
            );
        }
    }
    Ok(c.out)
}

/// Whole-model logits: the CUDA backend vs the CPU reference on a tiny config, for a prefill of
/// two sequences and three decode steps, per weight format and per lever setting.
pub fn model_checks(seed: u64) -> Result<Vec<Check>> {
    let mut out = Vec::new();
    for (mt, extra) in [("llama", false), ("qwen2", false), ("qwen3", true)] {
        let cfg = ModelConfig::from_json(&serde_json::json!({
            "model_type": mt, "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
            "head_dim": 64, "vocab_size": 1000, "rms_norm_eps": 1e-6, "tie_word_embeddings": extra
        }))
        .map_err(crate::error::EngineError::Invalid)?;
        for fmt in [WeightFormat::Bf16, WeightFormat::Q8_0, WeightFormat::Q4_0] {
            let w = ModelWeights::random(&cfg, fmt, seed);
            // The PDL settings run untimed so programmatic dependent launch is live (launch
            // timing turns it off).
            for levers in lever_matrix::selftest_levers() {
                let timing = if levers.pdl {
                    Timing::Off
                } else {
                    Timing::Launch
                };
                let (worst, same_tokens, _) =
                    model_run(&cfg, &w, levers, timing, Numerics::Engine, seed)?;
                let name = format!(
                    "model {mt} {} kv={} graphs={} mmvq_max_batch={} pdl={} fusion={} logits{}",
                    fmt.name(),
                    if levers.paged_kv {
                        "paged"
                    } else {
                        "contiguous"
                    },
                    levers.graphs,
                    levers.dispatch.mmvq_max_batch,
                    levers.pdl,
                    levers.fusion,
                    if same_tokens {
                        ""
                    } else {
                        " (greedy tokens differ)"
                    }
                );
                let tol = match fmt {
                    WeightFormat::Q4_0 => TOL_Q4_MODEL,
                    WeightFormat::Q8_0 => TOL_Q8_MODEL,
                    WeightFormat::Bf16 => TOL_BF16,
                };
                out.push(Check {
                    name,
                    rel_err: worst,
                    tolerance: tol,
                    pass: worst <= tol,
                });
            }
        }
        // HF numerics (bf16 weights): the GPU's hf_numerics kernels against the CPU's hf_ops,
        // with and without graphs, paged and contiguous. Same greedy tokens required; the share
        // of bit-identical logits is reported.
        let w = ModelWeights::random(&cfg, WeightFormat::Bf16, seed);
        for levers in lever_matrix::selftest_hf_levers() {
            let (worst, same_tokens, exact) =
                model_run(&cfg, &w, levers, Timing::Off, Numerics::HfBf16, seed)?;
            out.push(Check {
                name: format!(
                    "model {mt} bf16 numerics=hf-bf16 kv={} graphs={} logits ({:.1}% bit-identical{})",
                    if levers.paged_kv { "paged" } else { "contiguous" },
                    levers.graphs,
                    100.0 * exact,
                    if same_tokens {
                        ""
                    } else {
                        ", greedy tokens differ"
                    }
                ),
                rel_err: worst,
                tolerance: TOL_BF16,
                pass: worst <= TOL_BF16 && same_tokens,
            });
        }
    }
    Ok(out)
}

/// A prefill of two 5-token prompts and three decode steps on the GPU and on the CPU
/// reference with the same numerics: (worst logit rel-error, same greedy tokens, share of
/// bit-identical logits).
fn model_run(
    cfg: &ModelConfig,
    w: &ModelWeights,
    levers: Levers,
    timing: Timing,
    numerics: Numerics,
    seed: u64,
) -> Result<(f64, bool, f64)> {
    let dev = Device::open(0)?;
    let cap = Capacity {
        max_seqs: 4,
        max_ctx: 64,
        max_rows: 16,
    };
    let mut gpu = CudaBackend::new(dev, cfg, w, levers, cap, timing)?;
    gpu.set_numerics(numerics)?;
    gpu.rec.start_run()?;
    let mut cpu = CpuBackend::with_numerics(cfg, w, numerics);
    let prompts = vec![
        rng::tokens(seed, 11, 5, cfg.vocab),
        rng::tokens(seed, 12, 5, cfg.vocab),
    ];
    let (mut same, mut total) = (0usize, 0usize);
    let mut tally = |g: &[f32], c: &[f32]| {
        same += g.iter().zip(c).filter(|(a, b)| a == b).count();
        total += c.len();
        rel_err(g, c)
    };
    let pre = Batch::prefill(&prompts);
    gpu.set_tokens(&pre.tokens)?;
    gpu.step(&pre, Phase::Prefill, 0)?;
    cpu.begin(&pre)?;
    forward(&mut cpu, cfg, &pre)?;
    let mut worst = tally(&gpu.read_logits()?, cpu.logits());
    let mut same_tokens = gpu.read_sampled(2)? == cpu.sampled;
    for i in 0..3 {
        let toks = cpu.sampled.clone();
        let b = Batch::decode(toks.clone(), vec![5 + i; 2]);
        gpu.set_tokens(&toks)?;
        gpu.step(&b, Phase::Decode, 1 + i as i64)?;
        gpu.finish_steps()?;
        cpu.begin(&b)?;
        forward(&mut cpu, cfg, &b)?;
        worst = worst.max(tally(&gpu.read_logits()?, cpu.logits()));
        same_tokens &= gpu.read_sampled(2)? == cpu.sampled;
    }
    Ok((worst, same_tokens, same as f64 / total.max(1) as f64))
}

/// One launch of a batch-invariance variant: the entry, its first row and its rows.
type Launch = (Kernel, usize, usize);

/// The bf16 linears of 2 to 16 rows must give the same bits whichever side of the dispatch
/// threshold runs them: `gemm_bf16_small` over 16 rows in one launch, `gemv_bf16` over them in
/// two 8-row launches (the engine's chunks), and `gemv_bf16` over single rows and a 5-row plus
/// 11-row split, each compared bitwise with the 16-row launch's rows.
fn bf16_batch_invariance(
    c: &mut Ctx<'_>,
    wv: &DevBuf,
    xb: &DevBuf,
    n: usize,
    k: usize,
) -> Result<()> {
    let rows = 16;
    for mode in [0, 2] {
        let n_out = if mode == 2 { n / 2 } else { n };
        let esz = if mode == 2 { 2 } else { 4 };
        // (kernel, first row, rows) per launch; each variant covers the rows it lists.
        let variants: [(&str, Vec<Launch>); 4] = [
            (
                "gemm_bf16_small 16 rows",
                vec![(Kernel::GemmBf16Small, 0, 16)],
            ),
            (
                "gemv_bf16 2 x 8 rows",
                vec![(Kernel::GemvBf16, 0, 8), (Kernel::GemvBf16, 8, 8)],
            ),
            (
                "gemv_bf16 row by row",
                (0..rows).map(|r| (Kernel::GemvBf16, r, 1)).collect(),
            ),
            (
                "gemm_bf16_small rows 0-4 and 5-15",
                vec![
                    (Kernel::GemmBf16Small, 0, 5),
                    (Kernel::GemmBf16Small, 5, 11),
                ],
            ),
        ];
        let mut reference: Option<Vec<f32>> = None;
        for (label, launches) in variants {
            let out = c.poisoned(rows * n_out * esz)?;
            for &(kern, r0, nb) in &launches {
                let ptrs = LinearPtrs {
                    w: wv.ptr,
                    x: xb.at(r0 * k * 2),
                    y: if mode == 2 { 0 } else { out.at(r0 * n_out * 4) },
                    yh: if mode == 2 { out.at(r0 * n_out * 2) } else { 0 },
                    ..LinearPtrs::default()
                };
                // Fewer blocks than tiles, so the grid-stride loop runs several passes.
                c.dev.launch(
                    kern,
                    (n_out.div_ceil(16).min(7) as u32, 1, 1),
                    launch_block(kern),
                    &linear::vector_args(kern, &ptrs, n_out, k, nb, mode),
                )?;
            }
            let got = if mode == 2 {
                c.read_bf16(&out, rows * n_out)?
            } else {
                c.read_f32(&out, rows * n_out)?
            };
            match &reference {
                None => reference = Some(got),
                Some(want) => c.check(
                    format!(
                        "bf16 {n}x{k} mode={mode} {label} vs gemm_bf16_small 16 rows (bitwise)"
                    ),
                    &got,
                    want,
                    0.0,
                ),
            }
        }
    }
    Ok(())
}
