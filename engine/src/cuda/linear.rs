//! The linear kernels' entry selection and argument lists, in the order of their `extern "C"`
//! signatures in `kernels/cuda/{gemv,mmvq,mmq}.cu`: one place that the backend, the GPU checks
//! and kbench all call, so an argument order cannot drift between them.

use super::device::Arg;
use crate::dispatch::DispatchPolicy;
use crate::quant::WeightFormat;
use gapscope_kernels::Kernel;

/// The GEMV (bf16) or MMVQ (quantized) entry for a batch of `batch` rows (the whole batch,
/// not an 8-row chunk of it: a batch of 9 runs its ninth row on the multi-row entry, whose
/// bits the GEMM side of the threshold matches); batch 1 has its own entries per output shape
/// (plain rows, or gate/up pairs with the SwiGLU epilogue).
pub fn vector_kernel(format: WeightFormat, batch: usize, swiglu: bool) -> Kernel {
    entry(format, batch == 1, swiglu)
}

/// `vector_kernel`'s batch-1 entry when `batch1`, else the multi-row one.
pub fn entry(format: WeightFormat, batch1: bool, swiglu: bool) -> Kernel {
    match (format, batch1, swiglu) {
        (WeightFormat::Bf16, true, true) => Kernel::GemvBf16B1Swiglu,
        (WeightFormat::Bf16, true, false) => Kernel::GemvBf16B1,
        (WeightFormat::Bf16, false, _) => Kernel::GemvBf16,
        (WeightFormat::Q8_0, true, true) => Kernel::MmvqQ8_0B1Swiglu,
        (WeightFormat::Q8_0, true, false) => Kernel::MmvqQ8_0B1,
        (WeightFormat::Q8_0, false, _) => Kernel::MmvqQ8_0,
        (WeightFormat::Q4_0, true, true) => Kernel::MmvqQ4_0B1Swiglu,
        (WeightFormat::Q4_0, true, false) => Kernel::MmvqQ4_0B1,
        (WeightFormat::Q4_0, false, _) => Kernel::MmvqQ4_0,
    }
}

/// The batch-1 Q8_0 entries `b1_entry` may pick instead of `mmvq_q8_0_b1`.
pub const B1_Q8_0_SHAPE_ENTRIES: [Kernel; 2] = [Kernel::MmvqQ8_0B1Pair, Kernel::MmvqQ8_0B1KSplit];

/// The batch-1 Q8_0 entry for `n_out` plain rows over a K of `k`, by shape (all give the same
/// bits): the K-split entry (`mmvq_q8_0_b1_ksplit`) for long rows, K at least
/// `DispatchPolicy::mmvq_b1_k_split_min_k` and no more rows than K (ffn_down, where one warp
/// per row streams each long row as one dependent chain); the contiguous-load entry
/// (`mmvq_q8_0_b1_pair`) for at least `mmvq_b1_pair_min_rows_per_k` rows per column of K
/// (ffn_up, the LM head), which have rows enough for its lower occupancy; `kernel` otherwise.
pub fn b1_entry(kernel: Kernel, n_out: usize, k: usize, policy: &DispatchPolicy) -> Kernel {
    if kernel != Kernel::MmvqQ8_0B1 {
        kernel
    } else if k >= policy.mmvq_b1_k_split_min_k && n_out <= k {
        Kernel::MmvqQ8_0B1KSplit
    } else if n_out >= policy.mmvq_b1_pair_min_rows_per_k.saturating_mul(k) {
        Kernel::MmvqQ8_0B1Pair
    } else {
        kernel
    }
}

/// The MMQ entry for `format`, reading k-major activations (`quantize_q8_1_bf16_kmajor`) when
/// `k_major`, row-major ones otherwise (`DispatchPolicy::mmq_k_major`).
pub fn mmq_kernel(format: WeightFormat, k_major: bool) -> Kernel {
    match (format == WeightFormat::Q4_0, k_major) {
        (true, false) => Kernel::MmqQ4_0,
        (true, true) => Kernel::MmqQ4_0KMajor,
        (false, false) => Kernel::MmqQ8_0,
        (false, true) => Kernel::MmqQ8_0KMajor,
    }
}

/// Device pointers a linear launch reads and writes; 0 where a kernel takes none.
#[derive(Debug, Clone, Copy, Default)]
pub struct LinearPtrs {
    pub w: u64,
    pub scales: u64,
    /// bf16 activations (GEMV) or their q8_1 values (MMVQ, MMQ).
    pub x: u64,
    pub dx: u64,
    pub sx: u64,
    /// f32 output (store/accumulate), or 0 with the SwiGLU epilogue.
    pub y: u64,
    /// bf16 output of the SwiGLU epilogue, or 0.
    pub yh: u64,
    pub bias: u64,
    /// The batch-1 bf16 GEMV's fused RMSNorm (`norm_kernel`): the f32 rows it normalises
    /// instead of reading `x`, the norm weights and eps.
    pub norm_x: u64,
    pub norm_w: u64,
    pub norm_eps: f32,
}

/// The batch-1 bf16 GEMV entry that computes its own input RMSNorm, if `kernel` has one in use.
/// The SwiGLU entry's fused variant (gemv_bf16_b1_swiglu_norm) runs two blocks per SM, where the
/// norm prologue cost more than the separate kernel on an H200 (59.5 vs 56.4 + 2.1 us), so the
/// engine keeps the FFN norm separate; the GPU checks still verify that entry.
pub fn norm_kernel(kernel: Kernel) -> Option<Kernel> {
    match kernel {
        Kernel::GemvBf16B1 => Some(Kernel::GemvBf16B1Norm),
        _ => None,
    }
}

/// Every fused-norm entry, for the GPU checks.
pub fn norm_kernel_any(kernel: Kernel) -> Option<Kernel> {
    match kernel {
        Kernel::GemvBf16B1Swiglu => Some(Kernel::GemvBf16B1SwigluNorm),
        k => norm_kernel(k),
    }
}

/// Widest row the fused-norm GEMV keeps in shared memory (GEMV_NORM_MAX in gemv.cu).
pub const GEMV_NORM_MAX: usize = 8192;

/// Rows of W per block and pass of `gemv_bf16` and `gemm_bf16_small` (MMA_ROWS in gemv.cu).
pub const MMA_ROWS: usize = 16;

/// Outputs per block and pass of a vector or small-GEMM entry, for its grid-stride grid.
pub fn outputs_per_block(kernel: Kernel, swiglu: bool) -> usize {
    match kernel {
        Kernel::GemvBf16 | Kernel::GemmBf16Small if swiglu => MMA_ROWS / 2,
        Kernel::GemvBf16 | Kernel::GemmBf16Small => MMA_ROWS,
        _ => 4,
    }
}

/// Arguments of a GEMV or MMVQ entry (`vector_kernel`), or of `gemm_bf16_small`.
pub fn vector_args(
    kernel: Kernel,
    p: &LinearPtrs,
    n_out: usize,
    k: usize,
    nb: usize,
    mode: i32,
) -> Vec<Arg> {
    let (n_out, k, nb) = (
        Arg::I32(n_out as i32),
        Arg::I32(k as i32),
        Arg::I32(nb as i32),
    );
    let (y, yh, bias) = (Arg::Ptr(p.y), Arg::Ptr(p.yh), Arg::Ptr(p.bias));
    match kernel {
        Kernel::GemvBf16B1 | Kernel::GemvBf16B1Swiglu => vec![
            Arg::Ptr(p.w),
            Arg::Ptr(p.x),
            y,
            yh,
            bias,
            n_out,
            k,
            Arg::I32(mode),
        ],
        Kernel::GemvBf16B1Norm | Kernel::GemvBf16B1SwigluNorm => vec![
            Arg::Ptr(p.w),
            Arg::Ptr(p.norm_x),
            Arg::Ptr(p.norm_w),
            Arg::F32(p.norm_eps),
            y,
            yh,
            bias,
            n_out,
            k,
            Arg::I32(mode),
        ],
        Kernel::GemvBf16 | Kernel::GemmBf16Small => vec![
            Arg::Ptr(p.w),
            Arg::Ptr(p.x),
            y,
            yh,
            bias,
            n_out,
            k,
            nb,
            Arg::I32(mode),
        ],
        _ => vec![
            Arg::Ptr(p.w),
            Arg::Ptr(p.scales),
            Arg::Ptr(p.x),
            Arg::Ptr(p.dx),
            Arg::Ptr(p.sx),
            y,
            yh,
            bias,
            n_out,
            k,
            nb,
            Arg::I32(mode),
        ],
    }
}

/// Arguments of an MMQ entry (`mmq_kernel`): output f32 `[nb, n]` at `p.y`; the activations at
/// `p.x`/`p.dx`/`p.sx` in the entry's layout. The k-major entries stride by `nb`, so `nb` must be
/// the number of rows `quantize_launch` quantized.
pub fn mmq_args(p: &LinearPtrs, n: usize, k: usize, nb: usize, mode: i32) -> Vec<Arg> {
    vec![
        Arg::Ptr(p.w),
        Arg::Ptr(p.scales),
        Arg::Ptr(p.x),
        Arg::Ptr(p.dx),
        Arg::Ptr(p.sx),
        Arg::Ptr(p.y),
        Arg::Ptr(p.bias),
        Arg::I32(n as i32),
        Arg::I32(k as i32),
        Arg::I32(nb as i32),
        Arg::I32(mode),
    ]
}

/// The activation quantization before an MMVQ (row-major) or MMQ (`k_major`, as the MMQ entry
/// of `mmq_kernel(_, k_major)` reads it) launch of `rows` rows of `k` bf16 values at `x`, into
/// `qx`/`dx`/`sx`: the kernel, its grid (a warp per 32-value block, 8 warps per block) and its
/// arguments.
pub fn quantize_launch(
    x: u64,
    qx: u64,
    dx: u64,
    sx: u64,
    rows: usize,
    k: usize,
    k_major: bool,
) -> (Kernel, (u32, u32, u32), Vec<Arg>) {
    let blocks = rows * k / 32;
    let mut args = vec![
        Arg::Ptr(x),
        Arg::Ptr(qx),
        Arg::Ptr(dx),
        Arg::Ptr(sx),
        Arg::I64(blocks as i64),
    ];
    let kern = if k_major {
        args.push(Arg::I32((k / 32) as i32));
        Kernel::QuantizeQ8_1Bf16KMajor
    } else {
        Kernel::QuantizeQ8_1Bf16
    };
    (kern, (blocks.div_ceil(8) as u32, 1, 1), args)
}

/// Block size of rms_norm_f32 (RMS_THREADS in common.cuh): 256 threads with every float4 load
/// in flight at once (a 1024-thread block took 3.8 us per 4096-wide row on the H200, this 2.1).
/// The GEMV entries with the norm fused into their prologue run the same code at this size,
/// which is what makes them bitwise equal to `rms_norm_f32` followed by the plain GEMV.
pub const RMS_THREADS: u32 = 256;

/// `rms_norm_f32` over `rows` rows of `h` f32 values at `x`, weight `w`, bf16 out at `out`: its
/// grid (a block per row), block size and arguments.
pub fn rms_norm_launch(
    x: u64,
    w: u64,
    out: u64,
    rows: usize,
    h: usize,
    eps: f32,
) -> ((u32, u32, u32), u32, Vec<Arg>) {
    let args = vec![
        Arg::Ptr(x),
        Arg::Ptr(w),
        Arg::Ptr(out),
        Arg::I32(h as i32),
        Arg::F32(eps),
    ];
    ((rows as u32, 1, 1), RMS_THREADS, args)
}

/// Threads per block of the quantize entries (`quantize_launch`'s grid assumes 8 warps).
pub const QUANTIZE_BLOCK: u32 = 256;

/// The MMQ grid: x = blocks of 32 batch columns (adjacent, so they share each weight tile in
/// L2), y = tiles of 16 weight rows.
pub fn mmq_grid(n: usize, nb: usize) -> (u32, u32, u32) {
    (nb.div_ceil(32) as u32, n.div_ceil(16) as u32, 1)
}

/// Threads per block of the MMQ entries.
pub const MMQ_BLOCK: u32 = 128;

/// One MMQ launch (`mmq_kernel`, `mmq_grid`, `MMQ_BLOCK`, `mmq_args`): the entry for `format`
/// and the activation layout, its grid, block and arguments.
pub fn mmq_launch(
    format: WeightFormat,
    k_major: bool,
    p: &LinearPtrs,
    (n, k, nb): (usize, usize, usize),
    mode: i32,
) -> (Kernel, (u32, u32, u32), u32, Vec<Arg>) {
    (
        mmq_kernel(format, k_major),
        mmq_grid(n, nb),
        MMQ_BLOCK,
        mmq_args(p, n, k, nb, mode),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cuda::launch::signature::{self, kinds};

    /// Argument counts follow the kernel signatures (a mismatch is undefined behaviour on the
    /// device, so pin them here where CI runs).
    #[test]
    fn argument_lists_match_the_signatures() {
        let p = LinearPtrs::default();
        for (fmt, nb, sw, count) in [
            (WeightFormat::Bf16, 1, false, 8),
            (WeightFormat::Bf16, 1, true, 8),
            (WeightFormat::Bf16, 4, false, 9),
            (WeightFormat::Bf16, 9, true, 9),
            (WeightFormat::Q8_0, 1, true, 12),
            (WeightFormat::Q4_0, 8, false, 12),
        ] {
            assert_eq!(
                vector_args(vector_kernel(fmt, nb, sw), &p, 8, 64, nb, 0).len(),
                count
            );
        }
        assert_eq!(
            vector_args(Kernel::GemmBf16Small, &p, 8, 64, 16, 0).len(),
            9
        );
        assert_eq!(outputs_per_block(Kernel::GemvBf16, true), 8);
        assert_eq!(outputs_per_block(Kernel::GemmBf16Small, false), 16);
        assert_eq!(outputs_per_block(Kernel::MmvqQ8_0, false), 4);
        assert_eq!(mmq_args(&p, 8, 64, 16, 0).len(), 11);
        assert_eq!(mmq_kernel(WeightFormat::Q4_0, false), Kernel::MmqQ4_0);
        assert_eq!(mmq_kernel(WeightFormat::Q8_0, true), Kernel::MmqQ8_0KMajor);
        assert_eq!(
            vector_kernel(WeightFormat::Q8_0, 1, true),
            Kernel::MmvqQ8_0B1Swiglu
        );
        assert_eq!(mmq_grid(14336, 65), (3, 896, 1));
        // 8B shapes with the default policy: ffn_down splits K, ffn_up and the LM head load
        // in pairs, q/k/v/o keep one block per lane; SwiGLU pairs and other formats are
        // never rerouted; the levers force each way.
        let d = DispatchPolicy::default();
        let b1 = |n, k| b1_entry(Kernel::MmvqQ8_0B1, n, k, &d);
        assert_eq!(b1(4096, 14336), Kernel::MmvqQ8_0B1KSplit);
        assert_eq!(b1(14336, 4096), Kernel::MmvqQ8_0B1Pair);
        assert_eq!(b1(128256, 4096), Kernel::MmvqQ8_0B1Pair);
        assert_eq!(b1(4096, 4096), Kernel::MmvqQ8_0B1);
        assert_eq!(b1(6144, 4096), Kernel::MmvqQ8_0B1);
        for kern in [Kernel::MmvqQ8_0B1Swiglu, Kernel::MmvqQ4_0B1] {
            assert_eq!(b1_entry(kern, 4096, 14336, &d), kern);
            assert_eq!(b1_entry(kern, 14336, 4096, &d), kern);
        }
        let never = DispatchPolicy {
            mmvq_b1_k_split_min_k: usize::MAX,
            mmvq_b1_pair_min_rows_per_k: usize::MAX,
            ..d
        };
        assert_eq!(
            b1_entry(Kernel::MmvqQ8_0B1, 4096, 14336, &never),
            Kernel::MmvqQ8_0B1
        );
        assert_eq!(
            b1_entry(Kernel::MmvqQ8_0B1, 128256, 4096, &never),
            Kernel::MmvqQ8_0B1
        );
        let always = DispatchPolicy {
            mmvq_b1_k_split_min_k: usize::MAX,
            mmvq_b1_pair_min_rows_per_k: 0,
            ..d
        };
        assert_eq!(
            b1_entry(Kernel::MmvqQ8_0B1, 64, 4096, &always),
            Kernel::MmvqQ8_0B1Pair
        );
    }

    /// Each signature's parameters, read from the CUDA source: the lists must have as many
    /// arguments, with pointers exactly where the kernel takes pointers.
    #[test]
    fn lists_agree_with_the_cuda_source() {
        let pointers = |k: Kernel| signature::of(k, k.name());
        let p = LinearPtrs::default();
        for k in [
            Kernel::GemvBf16B1,
            Kernel::GemvBf16B1Swiglu,
            Kernel::GemvBf16B1Norm,
            Kernel::GemvBf16B1SwigluNorm,
            Kernel::GemvBf16,
            Kernel::MmvqQ8_0,
            Kernel::MmvqQ8_0B1Swiglu,
            Kernel::MmvqQ8_0B1KSplit,
            Kernel::MmvqQ8_0B1Pair,
            Kernel::MmvqQ4_0B1,
        ] {
            assert_eq!(
                kinds(&vector_args(k, &p, 1, 32, 1, 0)),
                pointers(k),
                "{}",
                k.name()
            );
        }
        let (_, _, norm) = rms_norm_launch(1, 2, 3, 1, 64, 1e-5);
        assert_eq!(kinds(&norm), pointers(Kernel::RmsNormF32));
        for k_major in [false, true] {
            let (k, grid, args) = quantize_launch(1, 2, 3, 4, 3, 64, k_major);
            assert_eq!(kinds(&args), pointers(k), "{}", k.name());
            assert_eq!(grid, (1, 1, 1));
        }
        for k in [
            Kernel::MmqQ8_0,
            Kernel::MmqQ4_0,
            Kernel::MmqQ8_0KMajor,
            Kernel::MmqQ4_0KMajor,
        ] {
            assert_eq!(
                kinds(&mmq_args(&p, 1, 32, 1, 0)),
                pointers(k),
                "{}",
                k.name()
            );
        }
    }
}
