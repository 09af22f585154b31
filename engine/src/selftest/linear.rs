//! The linears: the bf16 GEMV and small GEMM, the MMVQ and MMQ entries and the activation
//! quantization, against the CPU's identical math; the fused-RMSNorm GEMV entries and the
//! batch-1 shape entries against their plain entries (bitwise); and the dispatch and batch
//! invariances the greedy output relies on (bitwise). Arguments come from `cuda::linear`, as
//! in the backend; grids are chosen smaller than the backend's so the grid-stride loops run
//! several passes.

use super::{Ctx, TOL_BF16, TOL_F32, TOL_INT8, to_bf16_bits};
use crate::cpu::ops;
use crate::cuda::DevBuf;
use crate::cuda::device::launch_block;
use crate::cuda::linear::{self, LinearPtrs};
use crate::error::Result;
use crate::quant::{Matrix, QK, WeightFormat, quantize_q8_1};
use gapscope_kernels::Kernel;

/// (outputs, inputs). (64, 1120): 35 quant blocks, so the last summation group and MMQ's last
/// split are partial.
const SHAPES: [(usize, usize); 4] = [(512, 4096), (4096, 1024), (96, 14336), (64, 1120)];

/// One weight matrix and one batch of bf16 activations on the device, with the CPU's product.
struct Case<'a> {
    m: &'a Matrix,
    wv: &'a DevBuf,
    ws: &'a DevBuf,
    x: &'a [f32],
    xb: &'a DevBuf,
    want: &'a [f32],
    n: usize,
    k: usize,
    rows: usize,
    /// The entry family's name in check names.
    name: &'static str,
}

pub(super) fn linears(c: &mut Ctx<'_>) -> Result<()> {
    for &(n, k) in &SHAPES {
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
                let name = match (fmt, rows <= 8) {
                    (WeightFormat::Bf16, true) => "gemv_bf16",
                    (WeightFormat::Bf16, false) => "gemm_bf16_small",
                    (WeightFormat::Q8_0, true) => "mmvq_q8_0",
                    (WeightFormat::Q4_0, true) => "mmvq_q4_0",
                    (WeightFormat::Q8_0, false) => "mmq_q8_0",
                    (WeightFormat::Q4_0, false) => "mmq_q4_0",
                };
                let case = Case {
                    m: &m,
                    wv: &wv,
                    ws: &ws,
                    x: &x,
                    xb: &xb,
                    want: &want,
                    n,
                    k,
                    rows,
                    name,
                };
                if fmt == WeightFormat::Bf16 {
                    bf16_linear(c, &case)?;
                } else {
                    quant_linear(c, &case)?;
                }
            }
        }
    }
    Ok(())
}

/// The bf16 GEMV (up to 8 rows) or small GEMM in each output mode (store, accumulate,
/// SwiGLU); then the batch invariance at 16 rows and the fused-norm entries at one row.
fn bf16_linear(c: &mut Ctx<'_>, l: &Case<'_>) -> Result<()> {
    let (n, k, rows) = (l.n, l.k, l.rows);
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
        let kern = if rows <= 8 {
            linear::vector_kernel(WeightFormat::Bf16, rows, mode == 2)
        } else {
            Kernel::GemmBf16Small
        };
        let ptrs = LinearPtrs {
            w: l.wv.ptr,
            x: l.xb.ptr,
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
        c.dev.launch(
            kern,
            (grid as u32, 1, 1),
            launch_block(kern),
            &linear::vector_args(kern, &ptrs, n_out, k, rows, mode),
        )?;
        let (got, exp) = match mode {
            0 => (c.read_f32(&yb, rows * n)?, l.want.to_vec()),
            1 => (
                c.read_f32(&yb, rows * n)?,
                base.iter().zip(l.want).map(|(a, b)| a + b).collect(),
            ),
            _ => (c.read_bf16(&yh, rows * n_out)?, ops::swiglu(l.want)),
        };
        let tol = if mode == 2 { TOL_BF16 } else { TOL_F32 };
        c.check(
            format!("{} {n}x{k} rows={rows} mode={mode}", l.name),
            &got,
            &exp,
            tol,
        );
    }
    if rows == 16 {
        bf16_batch_invariance(c, l.wv, l.xb, n, k)?;
    }
    if rows == 1 && k <= linear::GEMV_NORM_MAX {
        fused_norm(c, l)?;
    }
    Ok(())
}

/// The entries with the input RMSNorm fused in: bitwise equal to rms_norm_f32 followed by the
/// plain entry, and close to the CPU.
fn fused_norm(c: &mut Ctx<'_>, l: &Case<'_>) -> Result<()> {
    let (n, k, name) = (l.n, l.k, l.name);
    let resid = c.randf(k, 2.0);
    let nw: Vec<f32> = c.randf(k, 0.1).iter().map(|v| 1.0 + v).collect();
    let (rb, nwb, xn) = (c.up(&resid)?, c.up(&nw)?, c.poisoned(k * 2)?);
    let (grid, block, args) = linear::rms_norm_launch(rb.ptr, nwb.ptr, xn.ptr, 1, k, 1e-5);
    c.dev.launch(Kernel::RmsNormF32, grid, block, &args)?;
    let xn_cpu = ops::rms_norm(&resid, &nw, k, 1e-5);
    let want_n = ops::linear(l.m, &xn_cpu, 1);
    for mode in [0, 2] {
        let n_out = if mode == 2 { n / 2 } else { n };
        let plain = linear::vector_kernel(WeightFormat::Bf16, 1, mode == 2);
        let Some(fused) = linear::norm_kernel_any(plain) else {
            continue;
        };
        let mut outs = Vec::new();
        for (kern, norm) in [(plain, false), (fused, true)] {
            let yb = c.poisoned(n_out * 4)?;
            let yh = c.poisoned(n_out * 2)?;
            let (y, h) = if mode == 2 { (0, yh.ptr) } else { (yb.ptr, 0) };
            let ptrs = LinearPtrs {
                w: l.wv.ptr,
                x: if norm { 0 } else { xn.ptr },
                y,
                yh: h,
                norm_x: if norm { rb.ptr } else { 0 },
                norm_w: if norm { nwb.ptr } else { 0 },
                norm_eps: 1e-5,
                ..LinearPtrs::default()
            };
            launch_nb1(c, kern, &ptrs, (n_out, k), mode)?;
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
    Ok(())
}

/// q8_1 activations on the device, row-major (MMVQ) and k-major (MMQ).
struct Quantized {
    row_major: [DevBuf; 3],
    k_major: [DevBuf; 3],
}

impl Quantized {
    /// `p` reading the k-major activations.
    fn k_major_in(&self, p: LinearPtrs) -> LinearPtrs {
        LinearPtrs {
            x: self.k_major[0].ptr,
            dx: self.k_major[1].ptr,
            sx: self.k_major[2].ptr,
            ..p
        }
    }
}

/// Quantizes the case's activations both ways, as the backend does before an MMVQ or MMQ.
fn quantize(c: &mut Ctx<'_>, l: &Case<'_>) -> Result<Quantized> {
    let (rows, k) = (l.rows, l.k);
    let blocks = rows * k / QK;
    let layout = || -> Result<[DevBuf; 3]> {
        Ok([
            c.poisoned(rows * k)?,
            c.poisoned(blocks * 4)?,
            c.poisoned(blocks * 4)?,
        ])
    };
    let q = Quantized {
        row_major: layout()?,
        k_major: layout()?,
    };
    for (k_major, [qx, dx, sx]) in [(false, &q.row_major), (true, &q.k_major)] {
        let (kern, grid, args) =
            linear::quantize_launch(l.xb.ptr, qx.ptr, dx.ptr, sx.ptr, rows, k, k_major);
        c.dev.launch(kern, grid, linear::QUANTIZE_BLOCK, &args)?;
    }
    Ok(q)
}

/// The quantized formats: activations quantized both ways, the MMVQ (up to 8 rows) or MMQ
/// against the CPU; the batch-1 entries against each other; MMQ against MMVQ and across its
/// two activation layouts.
fn quant_linear(c: &mut Ctx<'_>, l: &Case<'_>) -> Result<()> {
    let (n, k, rows, name) = (l.n, l.k, l.rows, l.name);
    let small = rows <= 8;
    let q = quantize(c, l)?;
    let [qx, dx, sx] = &q.row_major;
    if rows == 5 && n == 512 {
        quantize_layouts_agree(c, &q, rows, k)?;
    }
    if rows == 1 && n == 512 {
        quantize_matches_cpu(c, l, &q)?;
    }
    let fmt = l.m.format();
    let yb = c.poisoned(rows * n * 4)?;
    let ptrs = LinearPtrs {
        w: l.wv.ptr,
        scales: l.ws.ptr,
        x: qx.ptr,
        dx: dx.ptr,
        sx: sx.ptr,
        y: yb.ptr,
        ..LinearPtrs::default()
    };
    if small {
        let kern = linear::vector_kernel(fmt, rows, false);
        let args = linear::vector_args(kern, &ptrs, n, k, rows, 0);
        c.dev.launch(
            kern,
            (n.div_ceil(4) as u32, 1, 1),
            launch_block(kern),
            &args,
        )?;
    } else {
        let (kern, grid, block, args) =
            linear::mmq_launch(fmt, true, &q.k_major_in(ptrs), (n, k, rows), 0);
        c.dev.launch(kern, grid, block, &args)?;
    }
    let got = c.read_f32(&yb, rows * n)?;
    c.check(
        format!("{name} {n}x{k} rows={rows}"),
        &got,
        l.want,
        TOL_INT8,
    );
    if rows == 1 {
        b1_entries_agree(c, l, &ptrs, &got)?;
    }
    // Dispatch invariance: at a batch both paths can run, MMQ must give MMVQ's bits, or moving
    // the threshold changes greedy output; and MMQ's two activation layouts must give each
    // other's bits.
    if rows > 1 {
        for k_major in [false, true] {
            if !small && k_major {
                continue; // that is `got` itself
            }
            let yq = c.poisoned(rows * n * 4)?;
            let p = LinearPtrs { y: yq.ptr, ..ptrs };
            let p = if k_major { q.k_major_in(p) } else { p };
            let (kern, grid, block, args) = linear::mmq_launch(fmt, k_major, &p, (n, k, rows), 0);
            c.dev.launch(kern, grid, block, &args)?;
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
    Ok(())
}

/// The row-major quantization against the CPU's `quantize_q8_1`: values exact, scales and sums
/// to f32 rounding.
fn quantize_matches_cpu(c: &mut Ctx<'_>, l: &Case<'_>, q: &Quantized) -> Result<()> {
    let (rows, k) = (l.rows, l.k);
    let [qx, dx, sx] = &q.row_major;
    let want = quantize_q8_1(l.x);
    let blocks = rows * k / QK;
    let gq: Vec<f32> = qx
        .read::<i8>(rows * k, &c.dev.stream)?
        .iter()
        .map(|&v| f32::from(v))
        .collect();
    let wq: Vec<f32> = want.qs.iter().map(|&v| f32::from(v)).collect();
    c.check(format!("quantize_q8_1_bf16 k={k} values"), &gq, &wq, 0.0);
    c.check(
        format!("quantize_q8_1_bf16 k={k} scales"),
        &c.read_f32(dx, blocks)?,
        &want.d,
        1e-6,
    );
    c.check(
        format!("quantize_q8_1_bf16 k={k} sums"),
        &c.read_f32(sx, blocks)?,
        &want.s,
        1e-5,
    );
    Ok(())
}

/// The k-major quantization holds the row-major one's values, scales and sums, moved.
fn quantize_layouts_agree(c: &mut Ctx<'_>, q: &Quantized, rows: usize, k: usize) -> Result<()> {
    let st = &c.dev.stream;
    let (kb, blocks) = (k / QK, rows * k / QK);
    let row_major: Vec<i8> = q.row_major[0].read::<i8>(rows * k, st)?;
    let k_major: Vec<i8> = q.k_major[0].read::<i8>(rows * k, st)?;
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
    for (what, i) in [("scales", 1), ("sums", 2)] {
        let rm = c.read_f32(&q.row_major[i], blocks)?;
        let km = c.read_f32(&q.k_major[i], blocks)?;
        let got: Vec<f32> = (0..blocks).map(|i| km[(i % kb) * rows + i / kb]).collect();
        c.check(
            format!("quantize_q8_1_bf16_kmajor k={k} {what} (bitwise)"),
            &got,
            &rm,
            0.0,
        );
    }
    Ok(())
}

/// `launch_nb1` of `kern` over the first `n_out` rows, accumulating onto `resid` when given,
/// into a poisoned output otherwise.
fn b1_launch(
    c: &Ctx<'_>,
    kern: Kernel,
    ptrs: &LinearPtrs,
    (n_out, k): (usize, usize),
    mode: i32,
    bias: u64,
    resid: Option<&[f32]>,
) -> Result<Vec<f32>> {
    let yg = match resid {
        Some(r) => c.up(r)?,
        None => c.poisoned(n_out * 4)?,
    };
    let p = LinearPtrs {
        y: yg.ptr,
        bias,
        ..*ptrs
    };
    launch_nb1(c, kern, &p, (n_out, k), mode)?;
    c.read_f32(&yg, n_out)
}

/// `kern` at nb = 1 over `n_out` outputs of `k` inputs, in fewer blocks than the backend
/// launches (at most 97), so the grid-stride loop runs several passes.
fn launch_nb1(
    c: &Ctx<'_>,
    kern: Kernel,
    p: &LinearPtrs,
    (n_out, k): (usize, usize),
    mode: i32,
) -> Result<()> {
    c.dev.launch(
        kern,
        (n_out.div_ceil(4).min(97) as u32, 1, 1),
        launch_block(kern),
        &linear::vector_args(kern, p, n_out, k, 1, mode),
    )
}

/// The batch-1 entries (one warp per row, and for Q8_0 the K-split and contiguous-load ones)
/// and the general entry at nb = 1 sum the same block terms in f64: the same bits. `got` is
/// the batch-1 entry's output.
fn b1_entries_agree(c: &mut Ctx<'_>, l: &Case<'_>, ptrs: &LinearPtrs, got: &[f32]) -> Result<()> {
    let (n, k, name) = (l.n, l.k, l.name);
    let fmt = l.m.format();
    let general = linear::vector_kernel(fmt, 2, false);
    let extra: &[Kernel] = if fmt == WeightFormat::Q8_0 {
        &linear::B1_Q8_0_SHAPE_ENTRIES
    } else {
        &[]
    };
    let mut outs = Vec::new();
    for &kern in std::iter::once(&general).chain(extra) {
        outs.push((kern, b1_launch(c, kern, ptrs, (n, k), 0, ptrs.bias, None)?));
    }
    for (kern, out) in &outs[1..] {
        c.check(
            format!("{} vs {name}_b1 {n}x{k} (bitwise)", kern.name()),
            out,
            got,
            0.0,
        );
    }
    c.check(
        format!("{name}_b1 vs {name} nb=1 {n}x{k} (bitwise)"),
        got,
        &outs[0].1,
        0.0,
    );
    // The Q8_0 shape entries on a partial last tile (n - 3 rows), with a bias (store) and onto
    // a residual (accumulate), against the general entry under the same settings.
    let n3 = n - 3;
    let bias_vals = c.randf(n3, 0.5);
    let bias = c.up(&bias_vals)?;
    let resid = c.randf(n3, 1.0);
    for mode in [0, 1].into_iter().filter(|_| !extra.is_empty()) {
        let mut outs = Vec::new();
        for &kern in std::iter::once(&general).chain(extra) {
            let out = if mode == 1 {
                b1_launch(c, kern, ptrs, (n3, k), mode, 0, Some(&resid))?
            } else {
                b1_launch(c, kern, ptrs, (n3, k), mode, bias.ptr, None)?
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
    Ok(())
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
