//! The CUDA backend's `hf-bf16` numerics (`Numerics::HfBf16`): launches of the
//! `hf_numerics.cu` kernels, which round activations where HF transformers' bf16 eager forward
//! does. A linear runs through torch's own cuBLAS call (bf16 out), or, with a bias, the usual
//! dispatch into f32; one epilogue then applies HF's roundings, residual add or SwiGLU.

use super::CudaBackend;
use super::numerics_ops::NumericsOps;
use crate::Numerics;
use crate::cuda::device::{Arg, DevBuf};
use crate::error::{EngineError, Result};
use crate::model::{Act, Linear, OutMode};
use crate::quant::WeightFormat;
use gapscope_kernels::Kernel;

/// Threads per block of every `hf_numerics.cu` kernel (`HF_THREADS`).
pub const THREADS: u32 = 128;
/// Longest context `attn_hf_bf16` keeps in shared memory (`HF_ATT_MAX_CTX`).
pub const MAX_CTX: usize = 8192;
/// Widest head `attn_hf_bf16` holds its query for.
const MAX_HEAD_DIM: usize = 256;

/// `hf_linear_epilogue`'s arguments.
fn epilogue_args(acc32: u64, acc16: u64, y: u64, yh: u64, outputs: usize, mode: i32) -> Vec<Arg> {
    vec![
        Arg::Ptr(acc32),
        Arg::Ptr(acc16),
        Arg::Ptr(y),
        Arg::Ptr(yh),
        Arg::I64(outputs as i64),
        Arg::I32(mode),
    ]
}

impl CudaBackend {
    /// Switches where activations are rounded. `HfBf16` needs bf16 weights, a context the
    /// HF attention kernel holds, and graphs captured before the switch are dropped.
    pub fn set_numerics(&mut self, numerics: Numerics) -> Result<()> {
        if numerics == Numerics::HfBf16 {
            if self.cfg.hybrid.is_some() {
                return Err(EngineError::invalid(
                    "--numerics hf-bf16 does not cover gated DeltaNet layers; hybrid models run \
                     the engine numerics",
                ));
            }
            if self.w_format() != WeightFormat::Bf16 {
                return Err(EngineError::invalid(format!(
                    "--numerics hf-bf16 reproduces HF's bf16 forward and needs bf16 weights, not {:?}",
                    self.w_format()
                )));
            }
            if self.kv.max_ctx > MAX_CTX {
                return Err(EngineError::invalid(format!(
                    "--numerics hf-bf16 attends over at most {MAX_CTX} positions; this run needs {}",
                    self.kv.max_ctx
                )));
            }
            if self.cfg.head_dim > MAX_HEAD_DIM || 2 * self.cfg.intermediate < self.cfg.hidden {
                return Err(EngineError::invalid(format!(
                    "--numerics hf-bf16 supports head_dim <= {MAX_HEAD_DIM} and intermediate >= hidden / 2 (got {} and {}/{})",
                    self.cfg.head_dim, self.cfg.intermediate, self.cfg.hidden
                )));
            }
        }
        if numerics == Numerics::HfBf16 && self.hf_out.is_none() {
            let c = &self.cfg;
            let widest = c
                .vocab
                .max(c.qkv_dim())
                .max(2 * c.intermediate)
                .max(c.hidden);
            let rows = self.cap.max_rows.max(self.cap.max_seqs);
            self.hf_out = Some(DevBuf::alloc(rows * widest * 2)?);
        }
        if numerics != self.ops.numerics {
            self.graphs.clear();
            self.ops = NumericsOps::of(numerics);
        }
        Ok(())
    }

    /// A linear as torch computes it in bf16. Without a bias, the same cuBLAS call torch
    /// makes (`cublasGemmEx`, bf16 in and out, f32 compute, W transposed), so cuBLAS picks
    /// the same algorithm and sums in the same order: any other order flips bf16 roundings
    /// that then spread through every later layer. With a bias (Qwen2), the f32 product plus
    /// bias through the dispatch policy, rounded once. Then `hf_linear_epilogue` stores it,
    /// adds the residual, or applies SwiGLU, with torch's roundings.
    pub(super) fn hf_linear(
        &mut self,
        which: Linear,
        src: Act,
        dst: Act,
        rows: usize,
        mode: OutMode,
    ) -> Result<()> {
        let (lin, bias) = self.weight(which);
        let (n, k, w, wbytes) = (lin.rows, lin.cols, lin.values.ptr, lin.bytes);
        let (acc32, acc16) = if bias.is_some() {
            let acc = match mode {
                OutMode::Store => self.act(dst),
                OutMode::Accumulate | OutMode::Swiglu => self.a.gu.ptr,
            };
            self.linear_into(which, src, acc, 0, rows, OutMode::Store)?;
            (acc, 0)
        } else {
            let out = self
                .hf_out
                .as_ref()
                .map(|b| b.ptr)
                .ok_or_else(|| EngineError::invalid("hf-bf16 numerics without its buffer"))?;
            let x = self.act(src);
            let bytes = wbytes + (rows * k * 2 + rows * n * 2) as u64;
            self.cublas_gemm(
                which,
                w,
                n,
                k,
                x,
                out,
                rows,
                false,
                bytes,
                cudarc::cublas::sys::cudaDataType_t::CUDA_R_16BF,
            )?;
            (0, out)
        };
        let (y, yh, outputs, code) = match mode {
            OutMode::Store => (self.act(dst), 0, rows * n, 0),
            OutMode::Accumulate => (self.act(dst), 0, rows * n, 1),
            OutMode::Swiglu => (0, self.act(dst), rows * n / 2, 2),
        };
        let read = if acc16 != 0 { 2 } else { 4 } * if mode == OutMode::Swiglu { 2 } else { 1 };
        let written = match mode {
            OutMode::Store => 4,
            OutMode::Accumulate => 8,
            OutMode::Swiglu => 2,
        };
        self.kernel(
            Kernel::HfLinearEpilogue,
            which.op(),
            which.layer(),
            "act_elementwise",
            (outputs.div_ceil(256).clamp(1, 65535) as u32, 1, 1),
            256,
            (outputs * (read + written)) as u64,
            outputs as u64,
            &epilogue_args(acc32, acc16, y, yh, outputs, code),
        )
    }

    /// `attn_hf_bf16` over the cache `kc`/`vc` (or its gathered copy) through `table`.
    pub(super) fn hf_attention(
        &mut self,
        layer: usize,
        kc: u64,
        vc: u64,
        table: u64,
        rows: usize,
    ) -> Result<()> {
        let c = &self.cfg;
        let (heads, kv_heads, head_dim, q_stride) = (c.heads, c.kv_heads, c.head_dim, c.qkv_dim());
        let (bytes, flops) = self.attention_cost(rows);
        let args = AttnHfArgs {
            qkv: self.a.qkv.ptr,
            q_stride,
            k: kc,
            v: vc,
            table,
            max_blocks: self.kv.max_blocks,
            row_seq: self.meta_ptr(self.layout.row_seq),
            row_pos: self.meta_ptr(self.layout.row_pos),
            out: self.a.attn.ptr,
            heads,
            kv_heads,
            head_dim,
        }
        .args();
        self.kernel(
            Kernel::AttnHfBf16,
            "attention",
            layer as i32,
            "attention",
            (heads as u32, rows as u32, 1),
            THREADS,
            bytes,
            flops,
            &args,
        )
    }
}

/// Device pointers and shapes of one `attn_hf_bf16` launch.
struct AttnHfArgs {
    qkv: u64,
    q_stride: usize,
    k: u64,
    v: u64,
    table: u64,
    max_blocks: usize,
    row_seq: u64,
    row_pos: u64,
    out: u64,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl AttnHfArgs {
    fn args(&self) -> Vec<Arg> {
        vec![
            Arg::Ptr(self.qkv),
            Arg::I32(self.q_stride as i32),
            Arg::Ptr(self.k),
            Arg::Ptr(self.v),
            Arg::Ptr(self.table),
            Arg::I32(self.max_blocks as i32),
            Arg::I32(crate::kv::BLOCK as i32),
            Arg::Ptr(self.row_seq),
            Arg::Ptr(self.row_pos),
            Arg::Ptr(self.out),
            Arg::I32(self.heads as i32),
            Arg::I32(self.kv_heads as i32),
            Arg::I32(self.head_dim as i32),
            Arg::F32(1.0 / (self.head_dim as f32).sqrt()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::cuda::launch::signature::{kinds, of as signature_in};

    /// `name`'s signature in the hf_numerics module.
    fn signature(name: &str) -> Vec<bool> {
        signature_in(Kernel::AttnHfBf16, name)
    }

    /// The argument lists follow the CUDA signatures (a mismatch is undefined behaviour).
    #[test]
    fn argument_lists_agree_with_the_cuda_source() {
        // The norms take the engine's kernels' arguments, so the backend passes the same list.
        let (_, _, args) = crate::cuda::linear::rms_norm_launch(1, 2, 3, 4, 5, 1e-6);
        assert_eq!(kinds(&args), signature("rms_norm_hf"));
        assert_eq!(
            signature_in(Kernel::HeadRmsNormF32, "head_rms_norm_f32"),
            signature("head_rms_norm_hf")
        );
        let attn = AttnHfArgs {
            qkv: 1,
            q_stride: 2,
            k: 3,
            v: 4,
            table: 5,
            max_blocks: 6,
            row_seq: 7,
            row_pos: 8,
            out: 9,
            heads: 8,
            kv_heads: 2,
            head_dim: 64,
        };
        assert_eq!(kinds(&attn.args()), signature("attn_hf_bf16"));
        let rope = crate::cuda::attention_args::RopeArgs {
            qkv: 1,
            pos: 2,
            slots: 3,
            inv_freq: 4,
            k_cache: 5,
            v_cache: 6,
            heads: 8,
            kv_heads: 2,
            head_dim: 64,
            row_stride: 96,
            rope_dim: 64,
        };
        assert_eq!(kinds(&rope.args()), signature("rope_kv_append_hf"));
        let epilogue = epilogue_args(1, 2, 3, 4, 5, 0);
        assert_eq!(kinds(&epilogue), signature("hf_linear_epilogue"));
        let src = gapscope_kernels::module_of(Kernel::AttnHfBf16).source;
        assert!(src.contains(&format!("#define HF_THREADS {THREADS}")));
        assert!(src.contains(&format!("#define HF_ATT_MAX_CTX {MAX_CTX}")));
        assert!(src.contains(&format!("__shared__ float qs[{MAX_HEAD_DIM}]")));
    }
}
