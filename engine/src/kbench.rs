//! Single-kernel benchmarks against the copy bandwidth measured in the same run: the bf16 GEMV
//! and Q8_0 MMVQ at Llama-3-8B FFN shapes (batch 1), MMQ against chunked MMVQ at batch 64
//! and 128, and MMQ on its two activation layouts at batch 16 to 128. Weights rotate over
//! several copies so no repeat reads a warm L2.

use crate::bench::copy_bandwidth;
use crate::cuda::device::launch_block;
use crate::cuda::linear::{self, LinearPtrs};
use crate::cuda::{DevBuf, Device};
use crate::dispatch::DispatchPolicy;
use crate::error::Result;
use crate::quant::{Matrix, WeightFormat};
use crate::rng;
use cudarc::driver::sys;
use gapscope_kernels::Kernel;
use gapscope_traces::stats::Summary;

#[derive(Debug, Clone, serde::Serialize)]
pub struct KernelBench {
    pub name: String,
    pub shape: String,
    pub time_us: Summary,
    pub bytes: u64,
    /// Achieved bytes/s over the measured copy bandwidth, in %.
    pub pct_of_copy_bw: f64,
    pub registers_per_thread: u32,
    pub blocks_per_sm: u32,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct KernelBenchReport {
    pub device: String,
    pub copy_bw_bytes_per_s: Summary,
    pub kernels: Vec<KernelBench>,
    /// (batch, MMQ µs, chunked-MMVQ µs, speed-up)
    pub mmq_vs_mmvq: Vec<(usize, f64, f64, f64)>,
    /// MMQ on row-major vs k-major activations, side by side (data behind the MMQ layout
    /// policy, `DispatchPolicy::mmq_k_major`).
    pub mmq_layouts: Vec<MmqLayoutBench>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct MmqLayoutBench {
    pub shape: String,
    pub batch: usize,
    pub row_major_us: Summary,
    pub k_major_us: Summary,
    /// The layout the default `DispatchPolicy` picks at this batch.
    pub policy_k_major: bool,
}

/// Weight copies rotated through, so consecutive launches never find the weights in L2.
const COPIES: usize = 4;

/// Launches issued back to back between one event pair; the per-launch time is the pair's
/// interval divided by this, as in a decode loop where the next kernel is already queued.
const BURST: usize = 10;

fn time_us(
    dev: &Device,
    reps: usize,
    mut launch: impl FnMut(usize) -> Result<()>,
) -> Result<Summary> {
    let ev = || {
        dev.ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
    };
    let (a, b) = (ev()?, ev()?);
    launch(0)?; // warm-up
    let mut t = Vec::with_capacity(reps);
    for i in 0..reps {
        a.record(&dev.stream)?;
        for j in 0..BURST {
            launch(i * BURST + j)?;
        }
        b.record(&dev.stream)?;
        b.synchronize()?;
        t.push(f64::from(a.elapsed_ms(&b)?) * 1e3 / BURST as f64);
    }
    Ok(Summary::of(&t))
}

struct DevMat {
    values: DevBuf,
    scales: DevBuf,
    bytes: u64,
}

fn upload(m: &Matrix, dev: &Device) -> Result<DevMat> {
    let s = &dev.stream;
    let (values, scales) = match m {
        Matrix::Bf16 { data, .. } => (DevBuf::upload(data, s)?, DevBuf::alloc(16)?),
        Matrix::Q8_0 { qs, d, .. } => (DevBuf::upload(qs, s)?, DevBuf::upload(d, s)?),
        Matrix::Q4_0 { qs, d, .. } => (DevBuf::upload(qs, s)?, DevBuf::upload(d, s)?),
    };
    Ok(DevMat {
        values,
        scales,
        bytes: m.bytes(),
    })
}

#[expect(
    clippy::too_many_lines,
    reason = "one timed case per kernel family, each a few lines of set-up against the same device and buffers"
)]
pub fn run(dev: &Device, reps: usize) -> Result<KernelBenchReport> {
    let bw = copy_bandwidth(dev, 1 << 30, 20)?;
    let mut kernels = Vec::new();
    let mut mmq_vs_mmvq = Vec::new();
    let mut mmq_layouts = Vec::new();
    let s = &dev.stream;
    for &(n, k) in &[(14336usize, 4096usize), (4096, 14336)] {
        let mut wf = vec![0f32; n * k];
        rng::fill(&mut wf, 7, (n + k) as u64, 0.0, 0.05);
        let xs: Vec<u16> = (0..128 * k)
            .map(|i| half::bf16::from_f32(rng::uniform(9, 1, i as u64)).to_bits())
            .collect();
        let xb = DevBuf::upload(&xs, s)?;
        let y = DevBuf::alloc(128 * n * 4)?;
        // Quantized activations for the int8 kernels (as quantize_q8_1 would produce).
        let xf: Vec<f32> = xs
            .iter()
            .map(|&b| half::bf16::from_bits(b).to_f32())
            .collect();
        let q = crate::quant::quantize_q8_1(&xf);
        let (qx, dx, sx) = (
            DevBuf::upload(&q.qs, s)?,
            DevBuf::upload(&q.d, s)?,
            DevBuf::upload(&q.s, s)?,
        );
        // MMQ reads them k-major (quantize_q8_1_bf16_kmajor), per batch size.
        let k_major = |rows: usize| -> Result<(DevBuf, DevBuf, DevBuf)> {
            let m = q.rows_k_major(rows, k);
            Ok((
                DevBuf::upload(&m.qs, s)?,
                DevBuf::upload(&m.d, s)?,
                DevBuf::upload(&m.s, s)?,
            ))
        };
        for fmt in [WeightFormat::Bf16, WeightFormat::Q8_0] {
            let m = Matrix::from_f32(fmt, n, k, &wf);
            let copies: Vec<DevMat> = (0..COPIES)
                .map(|_| upload(&m, dev))
                .collect::<Result<_>>()?;
            let bytes = copies[0].bytes
                + (k * if fmt == WeightFormat::Bf16 { 2 } else { 1 }) as u64
                + (n * 4) as u64;
            let kern = linear::vector_kernel(fmt, 1, false);
            let grid8 = (dev.stride_grid(Kernel::MmvqQ8_0, n, 4), 1, 1);
            // Activations: bf16 for the GEMV, q8_1 for the int8 kernels.
            let input = |w: &DevMat| {
                let p = LinearPtrs {
                    w: w.values.ptr,
                    scales: w.scales.ptr,
                    y: y.ptr,
                    ..LinearPtrs::default()
                };
                if fmt == WeightFormat::Bf16 {
                    LinearPtrs { x: xb.ptr, ..p }
                } else {
                    LinearPtrs {
                        x: qx.ptr,
                        dx: dx.ptr,
                        sx: sx.ptr,
                        ..p
                    }
                }
            };
            // The batch-1 entry, and for Q8_0 also the contiguous-load and K-split ones, side by
            // side; the shape says which the default policy picks.
            let picked = linear::b1_entry(kern, n, k, &DispatchPolicy::default());
            let shape_entries: &[Kernel] = if fmt == WeightFormat::Q8_0 {
                &linear::B1_Q8_0_SHAPE_ENTRIES
            } else {
                &[]
            };
            for &entry in std::iter::once(&kern).chain(shape_entries) {
                let grid = (dev.stride_grid(entry, n, 4), 1, 1);
                let t = time_us(dev, reps, |i| {
                    let args = linear::vector_args(entry, &input(&copies[i % COPIES]), n, k, 1, 0);
                    dev.launch(entry, grid, launch_block(entry), &args)
                })?;
                kernels.push(KernelBench {
                    name: entry.name().into(),
                    shape: format!(
                        "{n}x{k} batch 1{}",
                        if !shape_entries.is_empty() && entry == picked {
                            " (policy)"
                        } else {
                            ""
                        }
                    ),
                    pct_of_copy_bw: 100.0 * (bytes as f64 / (t.median * 1e-6)) / bw.median,
                    time_us: t,
                    bytes,
                    registers_per_thread: dev.attrs(entry).0,
                    blocks_per_sm: dev.occupancy(entry),
                });
            }
            // MMQ at `batch` on either activation layout.
            let mmq_time = |batch: usize, k_major_layout: bool| -> Result<Summary> {
                let km = if k_major_layout {
                    Some(k_major(batch)?)
                } else {
                    None
                };
                time_us(dev, reps, |i| {
                    let p = input(&copies[i % COPIES]);
                    let p = match &km {
                        Some((qxk, dxk, sxk)) => LinearPtrs {
                            x: qxk.ptr,
                            dx: dxk.ptr,
                            sx: sxk.ptr,
                            ..p
                        },
                        None => p,
                    };
                    let args = linear::mmq_args(&p, n, k, batch, 0);
                    let kern = linear::mmq_kernel(WeightFormat::Q8_0, k_major_layout);
                    dev.launch(kern, linear::mmq_grid(n, batch), 128, &args)
                })
            };
            if fmt == WeightFormat::Q8_0 {
                for batch in [16usize, 24, 32, 48, 64, 96, 128] {
                    let row_major_us = mmq_time(batch, false)?;
                    let k_major_us = mmq_time(batch, true)?;
                    mmq_layouts.push(MmqLayoutBench {
                        shape: format!("{n}x{k}"),
                        batch,
                        row_major_us,
                        k_major_us,
                        policy_k_major: DispatchPolicy::default().mmq_k_major(batch, k),
                    });
                }
            }
            if fmt == WeightFormat::Q8_0 && n == 14336 {
                for batch in [64usize, 128] {
                    // MMQ in the layout the policy picks, as the layout table just timed it.
                    let l = mmq_layouts
                        .iter()
                        .rfind(|l| l.batch == batch)
                        .expect("the layout table covers batch 64 and 128");
                    let mmq = if l.policy_k_major {
                        &l.k_major_us
                    } else {
                        &l.row_major_us
                    };
                    let mmvq = time_us(dev, reps, |i| {
                        let p = input(&copies[i % COPIES]);
                        for c in (0..batch).step_by(8) {
                            let chunk = LinearPtrs {
                                x: qx.at(c * k),
                                dx: dx.at(c * k / 32 * 4),
                                sx: sx.at(c * k / 32 * 4),
                                y: y.at(c * n * 4),
                                ..p
                            };
                            let args = linear::vector_args(Kernel::MmvqQ8_0, &chunk, n, k, 8, 0);
                            dev.launch(Kernel::MmvqQ8_0, grid8, 128, &args)?;
                        }
                        Ok(())
                    })?;
                    mmq_vs_mmvq.push((batch, mmq.median, mmvq.median, mmvq.median / mmq.median));
                }
            }
        }
    }
    Ok(KernelBenchReport {
        device: dev.info.name.clone(),
        copy_bw_bytes_per_s: bw,
        kernels,
        mmq_vs_mmvq,
        mmq_layouts,
    })
}
