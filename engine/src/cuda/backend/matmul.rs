//! The backend's linears: the dispatch policy's path at this batch, then either our own
//! vector kernels (the GEMV/MMVQ in chunks of at most 8 rows, or the small bf16 GEMM in one
//! launch) or a GEMM (cuBLAS, or the MMQ after quantizing the activations), with SwiGLU as its
//! own kernel after a GEMM.

use super::CudaBackend;
use crate::cuda::device::launch_block;
use crate::cuda::launch;
use crate::cuda::linear::{self, LinearPtrs};
use crate::dispatch::{LinearPath, OutProjLayout};
use crate::error::Result;
use crate::model::{Act, Linear, Norm, OutMode};
use crate::quant::WeightFormat;
use crate::records::LaunchMeta;
use cudarc::cublas::sys as blas;
use gapscope_kernels::Kernel;

/// One linear's operands: the weight, the input activation, the outputs.
#[derive(Clone, Copy)]
struct LinearCall {
    which: Linear,
    format: WeightFormat,
    /// Weight rows (outputs, or gate|up pairs) and columns.
    n: usize,
    k: usize,
    /// Bytes of the weight (values and scales).
    weight_bytes: u64,
    /// The weight, its scales and the bias (0 where absent).
    base: LinearPtrs,
    /// The bf16 input `[rows, k]`.
    x: u64,
    /// f32 output (store, accumulate) and bf16 output (SwiGLU); 0 for the unused one.
    y: u64,
    yh: u64,
    rows: usize,
    mode: OutMode,
    /// The 3-D activation layout at decode (`out_proj_layout = 3d`): a launch per row.
    per_row: bool,
}

impl LinearCall {
    fn swiglu(&self) -> bool {
        self.mode == OutMode::Swiglu
    }
}

impl CudaBackend {
    /// The engine's linear: f32 out for store and accumulate, bf16 for SwiGLU.
    pub(super) fn engine_linear(
        &mut self,
        which: Linear,
        src: Act,
        dst: Act,
        rows: usize,
        mode: OutMode,
    ) -> Result<()> {
        let (y, yh) = if mode == OutMode::Swiglu {
            (0, self.act(dst))
        } else {
            (self.act(dst), 0)
        };
        self.linear_into(which, src, y, yh, rows, mode)
    }

    /// One linear `W src` written to `y` (f32: store, accumulate) or `yh` (bf16: SwiGLU),
    /// through the dispatch policy's path at this batch.
    pub(super) fn linear_into(
        &mut self,
        which: Linear,
        src: Act,
        y: u64,
        yh: u64,
        rows: usize,
        mode: OutMode,
    ) -> Result<()> {
        let (lin, bias) = self.weight(which);
        let call = LinearCall {
            which,
            format: lin.format,
            n: lin.rows,
            k: lin.cols,
            weight_bytes: lin.bytes,
            base: LinearPtrs {
                w: lin.values.ptr,
                scales: lin.scales_ptr(),
                bias: bias.unwrap_or(0),
                ..LinearPtrs::default()
            },
            x: self.act(src),
            y,
            yh,
            rows,
            mode,
            per_row: matches!(which, Linear::OutProj(_))
                && self.levers.hybrid.out_proj == OutProjLayout::ThreeD
                && !self.prefill,
        };
        // At decode a [dim, 1, n_seqs] activation is n_seqs one-row products to the dispatch,
        // whatever the batch (the campaigns' out_proj GEMV); a prefill's [dim, n_tokens,
        // n_seqs] is not, and takes the batch's path.
        let path = if call.per_row {
            match call.format {
                WeightFormat::Bf16 => LinearPath::GemvBf16,
                _ => LinearPath::Mmvq,
            }
        } else {
            self.levers.dispatch.path(call.format, rows)
        };
        // A held-back RMSNorm into this linear's input: fused into the batch-1 GEMV, else run now.
        let fused_norm = match self.pending_norm {
            Some((nsrc, norm)) if src == Act::Xn && rows == 1 && path == LinearPath::GemvBf16 => {
                self.pending_norm = None;
                Some((nsrc, norm))
            }
            _ => {
                self.flush_norm()?;
                None
            }
        };
        match path {
            LinearPath::GemvBf16 | LinearPath::Mmvq | LinearPath::GemmBf16Small => {
                self.vector_linear(&call, path, fused_norm)
            }
            LinearPath::CublasBf16 | LinearPath::Mmq => self.gemm_linear(&call, path),
        }
    }

    /// Our own kernels: the GEMV/MMVQ in launches of at most 8 rows (each re-reading the
    /// weights), or the small bf16 GEMM in one launch over every row (weights read once, the
    /// GEMV's bits per row). A held-back RMSNorm runs in the GEMV's prologue when the entry
    /// has a fused-norm twin, else as its own launch first.
    fn vector_linear(
        &mut self,
        c: &LinearCall,
        path: LinearPath,
        fused_norm: Option<(Act, Norm)>,
    ) -> Result<()> {
        let (n, k, rows) = (c.n, c.k, c.rows);
        let (layer, op) = (c.which.layer(), c.which.op());
        let mode_code = match c.mode {
            OutMode::Store => 0,
            OutMode::Accumulate => 1,
            OutMode::Swiglu => 2,
        };
        let n_out = if c.swiglu() { n / 2 } else { n };
        let out_elem = match c.mode {
            OutMode::Swiglu => 2,
            OutMode::Accumulate => 8,
            OutMode::Store => 4,
        };
        let quant = path == LinearPath::Mmvq;
        if quant {
            self.quantize(c.x, rows, k, layer, false)?;
        }
        let (kern, chunk, bucket) = if path == LinearPath::GemmBf16Small {
            (Kernel::GemmBf16Small, rows.max(1), "gemm_dense")
        } else {
            // Per row, a multi-row batch launches the multi-row entry one row at a time: it is
            // batch-invariant, so each row gets the bits of the 2-D GEMV or small GEMM.
            let b1 = self.levers.dispatch.batch1_entry(c.format, rows);
            let vector = linear::entry(c.format, b1, c.swiglu());
            let kern = linear::b1_entry(vector, n_out, k, &self.levers.dispatch);
            (kern, if c.per_row { 1 } else { 8 }, "gemv")
        };
        for r0 in (0..rows).step_by(chunk) {
            let nb = (rows - r0).min(chunk);
            let at = |p: u64, bytes_per_row: usize| {
                if p == 0 {
                    0
                } else {
                    p + (r0 * bytes_per_row) as u64
                }
            };
            let ptrs = if quant {
                LinearPtrs {
                    x: at(self.a.qx.ptr, k),
                    dx: at(self.a.dx.ptr, k / 32 * 4),
                    sx: at(self.a.sx.ptr, k / 32 * 4),
                    ..c.base
                }
            } else {
                LinearPtrs {
                    x: at(c.x, k * 2),
                    ..c.base
                }
            };
            let ptrs = LinearPtrs {
                y: at(c.y, n_out * 4),
                yh: at(c.yh, n_out * 2),
                ..ptrs
            };
            let (kern, ptrs, norm_bytes) = match (fused_norm, linear::norm_kernel(kern)) {
                (Some((nsrc, norm)), Some(nk)) => (
                    nk,
                    LinearPtrs {
                        norm_x: self.act(nsrc),
                        norm_w: self.norm_weight(norm),
                        norm_eps: self.cfg.rms_eps,
                        ..ptrs
                    },
                    (k * 8) as u64,
                ),
                (Some((nsrc, norm)), None) => {
                    self.launch_norm(nsrc, norm, Act::Xn, rows)?;
                    (kern, ptrs, 0)
                }
                (None, _) => (kern, ptrs, 0),
            };
            // Outputs per block and pass (GEMV_B1_T, the MMVQ warps, or a 16-row tile of the
            // tensor-core GEMV), over the resident capacity of the entry actually launched
            // (the fused-norm entries have their own registers and shared memory).
            let per_block = linear::outputs_per_block(kern, c.swiglu());
            let grid = (self.dev.stride_grid(kern, n_out, per_block), 1, 1);
            let block = launch_block(kern);
            let bytes = norm_bytes
                + c.weight_bytes
                + (nb * k) as u64 * if quant { 1 } else { 2 }
                + (nb * n_out * out_elem) as u64;
            let flops = 2 * (n * k * nb) as u64;
            let args = linear::vector_args(kern, &ptrs, n_out, k, nb, mode_code);
            self.kernel(kern, op, layer, bucket, grid, block, bytes, flops, &args)?;
        }
        Ok(())
    }

    /// A GEMM over every row: cuBLAS (then the bias, if any) or the MMQ (after quantizing the
    /// activations). It writes f32 `[rows, n]`; SwiGLU runs as its own kernel afterwards.
    fn gemm_linear(&mut self, c: &LinearCall, path: LinearPath) -> Result<()> {
        let (n, k, rows) = (c.n, c.k, c.rows);
        let layer = c.which.layer();
        let target = if c.swiglu() { self.a.gu.ptr } else { c.y };
        let accumulate = c.mode == OutMode::Accumulate;
        let out_bytes = (rows * n) as u64 * if accumulate { 8 } else { 4 };
        if path == LinearPath::CublasBf16 {
            let bytes = c.weight_bytes + (rows * k * 2) as u64 + out_bytes;
            self.cublas_gemm(
                c.which,
                c.base.w,
                n,
                k,
                c.x,
                target,
                rows,
                accumulate,
                bytes,
                blas::cudaDataType_t::CUDA_R_32F,
            )?;
            if c.mode == OutMode::Store && c.base.bias != 0 {
                let total = rows * n;
                let (grid, block, args) = launch::add_bias_launch(target, c.base.bias, n, total);
                self.kernel(
                    Kernel::AddBiasF32,
                    "qkv_bias",
                    layer,
                    "act_elementwise",
                    grid,
                    block,
                    (total * 8) as u64,
                    total as u64,
                    &args,
                )?;
            }
        } else {
            let k_major = self.levers.dispatch.mmq_k_major(rows, k);
            self.quantize(c.x, rows, k, layer, k_major)?;
            let bytes = c.weight_bytes + (rows * k) as u64 + out_bytes;
            let ptrs = LinearPtrs {
                x: self.a.qx.ptr,
                dx: self.a.dx.ptr,
                sx: self.a.sx.ptr,
                y: target,
                ..c.base
            };
            let (kern, grid, block, args) = linear::mmq_launch(
                c.format,
                k_major,
                &ptrs,
                (n, k, rows),
                i32::from(accumulate),
            );
            self.kernel(
                kern,
                c.which.op(),
                layer,
                "gemm_quant",
                grid,
                block,
                bytes,
                2 * (n * k * rows) as u64,
                &args,
            )?;
        }
        if c.swiglu() {
            self.swiglu(layer, rows)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn cublas_gemm(
        &mut self,
        which: Linear,
        w_ptr: u64,
        n: usize,
        k: usize,
        x: u64,
        y: u64,
        rows: usize,
        accumulate: bool,
        bytes: u64,
        y_type: blas::cudaDataType_t,
    ) -> Result<()> {
        let alpha = 1.0f32;
        let beta = if accumulate { 1.0f32 } else { 0.0 };
        let i = self.rec.before_launch()?;
        // SAFETY: W is [n, k] bf16 (col-major k x n), x is [rows, k] bf16, y is [rows, n] of
        // y_type (f32, or bf16 for the hf-bf16 numerics); all live device buffers of those sizes.
        let st = unsafe {
            blas::cublasGemmEx(
                *self.blas.handle(),
                blas::cublasOperation_t::CUBLAS_OP_T,
                blas::cublasOperation_t::CUBLAS_OP_N,
                n as i32,
                rows as i32,
                k as i32,
                &alpha as *const f32 as *const _,
                w_ptr as *const _,
                blas::cudaDataType_t::CUDA_R_16BF,
                k as i32,
                x as *const _,
                blas::cudaDataType_t::CUDA_R_16BF,
                k as i32,
                &beta as *const f32 as *const _,
                y as *mut _,
                y_type,
                n as i32,
                blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        st.result()?;
        self.rec.after_launch(
            i,
            LaunchMeta {
                name: "cublasGemmEx_bf16",
                op: which.op(),
                layer: which.layer(),
                bucket: "gemm_dense",
                grid: [0; 3],
                block: 0,
                bytes,
                flops: 2 * (n * k * rows) as u64,
                memop: None,
                registers: 0,
                static_smem: 0,
            },
        )
    }

    fn swiglu(&mut self, layer: i32, rows: usize) -> Result<()> {
        let n = rows * self.cfg.intermediate;
        let (grid, block, args) = launch::swiglu_launch(self.a.gu.ptr, self.a.h.ptr, n);
        self.kernel(
            Kernel::SwigluF32,
            "swiglu",
            layer,
            "act_elementwise",
            grid,
            block,
            (n * 8 + n * 2) as u64,
            (n * 6) as u64,
            &args,
        )
    }

    /// Quantizes `rows` activation rows to q8_1: row-major for MMVQ, k-major for MMQ.
    fn quantize(&mut self, x: u64, rows: usize, k: usize, layer: i32, k_major: bool) -> Result<()> {
        let blocks = rows * k / 32;
        let (qx, dx, sx) = (self.a.qx.ptr, self.a.dx.ptr, self.a.sx.ptr);
        let (kern, grid, args) = linear::quantize_launch(x, qx, dx, sx, rows, k, k_major);
        self.kernel(
            kern,
            "quantize_q8_1",
            layer,
            "act_elementwise",
            grid,
            linear::QUANTIZE_BLOCK,
            (rows * k * 3 + blocks * 8) as u64,
            (rows * k * 3) as u64,
            &args,
        )
    }
}
