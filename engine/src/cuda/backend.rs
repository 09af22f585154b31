//! The CUDA backend: implements the forward pass's ops with the NVRTC kernels and cuBLAS,
//! dispatches linears by batch size, manages the KV cache, captures decode steps as CUDA
//! graphs, and records every launch with its op, layer, bucket, bytes and FLOPs.

mod hf_numerics;
mod numerics_ops;

use super::attention_args::{AttnArgs, RopeArgs};
use super::attention_shape::{self, AttentionDims};
use super::device::{Arg, DevBuf, Device};
use super::launch::{self, ARGMAX_MAX_SLICES, ArgmaxArgs, HeadNormArgs};
use super::linear::{self, LinearPtrs};
use super::recorder::{Recorder, StepInfo, Timing};
use super::weights::{DevLinear, DevWeights};
use crate::Numerics;
use crate::config::ModelConfig;
use crate::dispatch::{Levers, LinearPath};
use crate::error::{EngineError, Result};
use crate::kv::{BLOCK, KvSlots};
use crate::model::{self, Act, Backend, Batch, Linear, Norm, OutMode};
use crate::records::LaunchMeta;
use crate::weights::ModelWeights;
use cudarc::cublas::{CudaBlas, sys as blas};
use cudarc::driver::{CudaGraph, sys};
use gapscope_kernels::Kernel;
use gapscope_traces::{MemopKind, Phase};
use numerics_ops::NumericsOps;
use std::collections::HashMap;

/// Sizes the backend allocates for up front, so buffers (and graph pointers) never move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Capacity {
    pub max_seqs: usize,
    pub max_ctx: usize,
    /// Largest forward (a prefill of max_seqs x prompt tokens).
    pub max_rows: usize,
}

/// Granularity of a split-K attention chunk (positions).
const ATT_CHUNK: usize = 16;
const WORKSPACE_BYTES: usize = 64 << 20;

struct Acts {
    tokens: DevBuf,
    x: DevBuf,
    xlast: DevBuf,
    xn: DevBuf,
    qkv: DevBuf,
    attn: DevBuf,
    gu: DevBuf,
    h: DevBuf,
    logits: DevBuf,
    sampled: DevBuf,
    qx: DevBuf,
    dx: DevBuf,
    sx: DevBuf,
    part_acc: DevBuf,
    part_ml: DevBuf,
    /// Split-completion tickets of the fused attention reduction (zero between launches).
    att_counters: DevBuf,
    /// Slice winners and completion tickets of the multi-block argmax (tickets zero between
    /// launches).
    argmax_v: DevBuf,
    argmax_i: DevBuf,
    argmax_counters: DevBuf,
    meta: DevBuf,
}

/// Offsets (in i32 elements) of each region of the metadata buffer.
#[derive(Clone, Copy)]
struct MetaLayout {
    row_seq: usize,
    row_pos: usize,
    row_slot: usize,
    out_rows: usize,
    seq_len: usize,
    table: usize,
    slot_map: usize,
    identity: usize,
    total: usize,
}

struct GraphEntry {
    graph: CudaGraph,
    pool: usize,
    metas: Vec<LaunchMeta>,
    id: u32,
}

pub struct CudaBackend {
    pub dev: Device,
    pub cfg: ModelConfig,
    pub levers: Levers,
    pub cap: Capacity,
    blas: CudaBlas,
    _workspace: DevBuf,
    w: DevWeights,
    inv_freq: DevBuf,
    a: Acts,
    k_cache: Vec<DevBuf>,
    v_cache: Vec<DevBuf>,
    k_gather: Option<DevBuf>,
    v_gather: Option<DevBuf>,
    pub kv: KvSlots,
    layout: MetaLayout,
    meta_host: Vec<i32>,
    rows: usize,
    /// Sum over the batch's rows of the positions each attends to.
    attended: usize,
    logit_rows: usize,
    prefill: bool,
    /// An RMSNorm (source, which) held back for the next linear to compute in its prologue
    /// (fusion lever, batch-1 bf16 GEMV); any other op launches it first.
    pending_norm: Option<(Act, Norm)>,
    /// Every row of the current batch belongs to a different sequence (the fused KV append
    /// needs it: a row must not read a position another block of the same launch writes).
    rows_distinct: bool,
    pub rec: Recorder,
    graphs: HashMap<(usize, usize, Timing), GraphEntry>,
    parity: usize,
    next_graph_id: u32,
    /// Launch-timed decode steps replay a graph with external event-record nodes instead of
    /// running eagerly with stream event records (the default). Graph event nodes time every
    /// kernel 0.17-0.34 us short of CUPTI on an H200, a bias no probe calibration matched
    /// (docs/ENGINE.md, "Event latency correction"); stream records are within a few percent.
    pub timed_steps_in_graphs: bool,
    max_splits: usize,
    /// GAPSCOPE_ATTENTION_SHAPE=KW:SPLITS pins the decode attention shape (tuning runs).
    att_shape_override: Option<(usize, usize)>,
    /// The ops of the numerics (where activations are rounded), chosen by `new` and
    /// `set_numerics`; `HfBf16` runs the unfused `hf_numerics` kernels.
    ops: NumericsOps,
    /// bf16 `[rows, widest linear]`: cuBLAS's bf16 output under the hf-bf16 numerics.
    hf_out: Option<DevBuf>,
}

fn bf16_bytes(n: usize) -> u64 {
    2 * n as u64
}

impl CudaBackend {
    pub fn new(
        dev: Device,
        cfg: &ModelConfig,
        weights: &ModelWeights,
        levers: Levers,
        cap: Capacity,
        timing: Timing,
    ) -> Result<Self> {
        let stream = dev.stream.clone();
        if !unsafe { blas::is_culib_present() } {
            return Err(EngineError::Cuda(
                "no cuBLAS library (libcublas.so.13) found: add CUDA's lib directory to LD_LIBRARY_PATH".into(),
            ));
        }
        let blas = CudaBlas::new(stream.clone())
            .map_err(|e| EngineError::Cuda(format!("cuBLAS: {e:?}")))?;
        let workspace = DevBuf::alloc(WORKSPACE_BYTES)?;
        // SAFETY: the workspace outlives the handle (both owned by self).
        let st = unsafe {
            blas::cublasSetWorkspace_v2(*blas.handle(), workspace.ptr as *mut _, WORKSPACE_BYTES)
        };
        if st != blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(EngineError::Cuda(format!("cublasSetWorkspace: {st:?}")));
        }
        let w = DevWeights::upload(weights, &stream)?;
        let inv_freq = DevBuf::upload(&cfg.inv_freq(), &stream)?;
        let (r, s) = (cap.max_rows.max(cap.max_seqs), cap.max_seqs);
        let kmax = cfg.hidden.max(cfg.intermediate).max(cfg.q_dim());
        if cap.max_ctx > 16 * 1024 {
            return Err(EngineError::invalid(format!(
                "context of {} tokens: the attention kernel keeps a block table of at most 1024 blocks (16384 tokens)",
                cap.max_ctx
            )));
        }
        let kv = KvSlots::new(levers.paged_kv, cap.max_seqs, cap.max_ctx);
        let max_splits = kv.max_ctx.div_ceil(ATT_CHUNK).max(1);
        let f32b = 4usize;
        let a = Acts {
            tokens: DevBuf::alloc(r * 4)?,
            x: DevBuf::alloc(r * cfg.hidden * f32b)?,
            xlast: DevBuf::alloc(s * cfg.hidden * f32b)?,
            xn: DevBuf::alloc(r * cfg.hidden * 2)?,
            qkv: DevBuf::alloc(r * cfg.qkv_dim() * f32b)?,
            attn: DevBuf::alloc(r * cfg.q_dim() * 2)?,
            gu: DevBuf::alloc(r * 2 * cfg.intermediate * f32b)?,
            h: DevBuf::alloc(r * cfg.intermediate * 2)?,
            logits: DevBuf::alloc(s * cfg.vocab * f32b)?,
            sampled: DevBuf::alloc(s * 4)?,
            qx: DevBuf::alloc(r * kmax)?,
            dx: DevBuf::alloc(r * kmax / 32 * f32b)?,
            sx: DevBuf::alloc(r * kmax / 32 * f32b)?,
            part_acc: DevBuf::alloc(s * cfg.heads * max_splits * cfg.head_dim * f32b)?,
            part_ml: DevBuf::alloc(s * cfg.heads * max_splits * 2 * f32b)?,
            att_counters: DevBuf::upload(&vec![0i32; s * cfg.heads.div_ceil(4)], &stream)?,
            argmax_v: DevBuf::alloc(s * ARGMAX_MAX_SLICES * f32b)?,
            argmax_i: DevBuf::alloc(s * ARGMAX_MAX_SLICES * 4)?,
            argmax_counters: DevBuf::upload(&vec![0i32; s], &stream)?,
            meta: DevBuf::alloc(0)?,
        };
        let mut off = 0;
        let mut region = |n: usize| {
            let o = off;
            off += n;
            o
        };
        let layout = MetaLayout {
            row_seq: region(r),
            row_pos: region(r),
            row_slot: region(r),
            out_rows: region(s),
            seq_len: region(s),
            table: region(s * kv.max_blocks),
            slot_map: region(s * kv.max_ctx),
            identity: region(s * kv.max_blocks),
            total: off,
        };
        let mut a = a;
        a.meta = DevBuf::alloc(layout.total * 4)?;
        let mut meta_host = vec![0i32; layout.total];
        meta_host[layout.identity..layout.identity + s * kv.max_blocks]
            .copy_from_slice(&kv.identity_table());
        let slots = kv.capacity();
        let kv_row = cfg.kv_dim() * 2;
        let mut k_cache = Vec::with_capacity(cfg.layers);
        let mut v_cache = Vec::with_capacity(cfg.layers);
        for _ in 0..cfg.layers {
            k_cache.push(DevBuf::alloc(slots * kv_row)?);
            v_cache.push(DevBuf::alloc(slots * kv_row)?);
        }
        let (k_gather, v_gather) = if levers.paged_kv {
            (None, None)
        } else {
            (
                Some(DevBuf::alloc(slots * kv_row)?),
                Some(DevBuf::alloc(slots * kv_row)?),
            )
        };
        let rec = Recorder::new(dev.ctx.clone(), stream, timing);
        Ok(Self {
            dev,
            cfg: cfg.clone(),
            levers,
            cap,
            blas,
            _workspace: workspace,
            w,
            inv_freq,
            a,
            k_cache,
            v_cache,
            k_gather,
            v_gather,
            kv,
            layout,
            meta_host,
            rows: 0,
            attended: 0,
            logit_rows: 0,
            prefill: false,
            pending_norm: None,
            rows_distinct: false,
            rec,
            graphs: HashMap::new(),
            parity: 0,
            next_graph_id: 1,
            timed_steps_in_graphs: false,
            max_splits,
            att_shape_override: attention_shape::override_from_env(cfg.head_dim)?,
            ops: NumericsOps::of(Numerics::Engine),
            hf_out: None,
        })
    }

    /// Bytes of weights one decode step reads (all linears; the embedding by rows).
    pub fn weight_bytes_per_step(&self, rows: usize) -> u64 {
        self.w.linear_bytes + rows as u64 * bf16_bytes(self.cfg.hidden)
    }

    /// Switches the timing mode; graphs captured under the old mode are dropped (their event
    /// nodes belong to it).
    pub fn set_timing(&mut self, t: Timing) {
        if self.rec.timing != t {
            self.graphs.clear();
            self.rec.timing = t;
        }
    }

    pub fn w_format(&self) -> crate::quant::WeightFormat {
        self.w.lm_head.format
    }

    /// Clears the KV cache bookkeeping for a new set of sequences.
    pub fn reset(&mut self) {
        self.kv.reset();
    }

    /// Overrides the next forward's input tokens (prefill prompts, teacher forcing).
    pub fn set_tokens(&mut self, tokens: &[i32]) -> Result<()> {
        self.a.tokens.write(tokens, &self.dev.stream)
    }

    pub fn read_logits(&self) -> Result<Vec<f32>> {
        self.a
            .logits
            .read(self.logit_rows * self.cfg.vocab, &self.dev.stream)
    }

    pub fn read_sampled(&self, n: usize) -> Result<Vec<i32>> {
        self.a.sampled.read(n, &self.dev.stream)
    }

    pub fn sampled_ptr(&self) -> u64 {
        self.a.sampled.ptr
    }

    fn act(&self, a: Act) -> u64 {
        match a {
            Act::X => self.a.x.ptr,
            Act::XLast => self.a.xlast.ptr,
            Act::Xn => self.a.xn.ptr,
            Act::Qkv => self.a.qkv.ptr,
            Act::Attn => self.a.attn.ptr,
            Act::H => self.a.h.ptr,
            Act::Logits => self.a.logits.ptr,
        }
    }

    fn meta_ptr(&self, region: usize) -> u64 {
        self.a.meta.at(region * 4)
    }

    /// One timed, recorded kernel launch.
    #[allow(clippy::too_many_arguments)]
    fn kernel(
        &mut self,
        k: Kernel,
        op: &'static str,
        layer: i32,
        bucket: &'static str,
        grid: (u32, u32, u32),
        block: u32,
        bytes: u64,
        flops: u64,
        args: &[Arg],
    ) -> Result<()> {
        let (registers, static_smem) = self.dev.attrs(k);
        let i = self.rec.before_launch()?;
        let pdl = self.levers.pdl && self.dev.supports_pdl() && !self.rec.times_launches();
        self.dev.launch_ex(k, grid, block, args, pdl)?;
        self.rec.after_launch(
            i,
            LaunchMeta {
                name: k.name(),
                op,
                layer,
                bucket,
                grid: [grid.0, grid.1, grid.2],
                block,
                bytes,
                flops,
                memop: None,
                registers,
                static_smem,
            },
        )
    }

    fn d2d(&mut self, op: &'static str, dst: u64, src: u64, bytes: usize) -> Result<()> {
        let i = self.rec.before_launch()?;
        self.dev.memcpy_dtod(dst, src, bytes)?;
        self.rec.after_launch(
            i,
            LaunchMeta {
                name: "cuMemcpyDtoDAsync",
                op,
                layer: -1,
                bucket: "copy",
                grid: [0; 3],
                block: 0,
                bytes: 2 * bytes as u64,
                flops: 0,
                memop: Some(MemopKind::DtoD),
                registers: 0,
                static_smem: 0,
            },
        )
    }

    fn weight(&self, l: Linear) -> (&DevLinear, Option<u64>) {
        match l {
            Linear::Qkv(i) => (
                &self.w.layers[i].wqkv,
                self.w.layers[i].bqkv.as_ref().map(|b| b.ptr),
            ),
            Linear::O(i) => (&self.w.layers[i].wo, None),
            Linear::GateUp(i) => (&self.w.layers[i].w_gate_up, None),
            Linear::Down(i) => (&self.w.layers[i].w_down, None),
            Linear::LmHead => (&self.w.lm_head, None),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn cublas_gemm(
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
        if st != blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Err(EngineError::Cuda(format!("cublasGemmEx: {st:?}")));
        }
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

    /// Runs one forward of `batch` as a prefill or a decode step, as a CUDA graph replay when
    /// the lever is on and the step is a decode (launch-timed decode steps run eagerly unless
    /// `timed_steps_in_graphs`).
    pub fn step(&mut self, batch: &Batch, phase: Phase, step: i64) -> Result<()> {
        self.begin(batch)?;
        let rows = batch.rows();
        let info = StepInfo {
            phase,
            step,
            batch: batch.logit_rows() as u32,
            tokens: rows as u32,
            graph_id: 0,
        };
        let timing = self.rec.step_timing(phase, step);
        let graphed = self.levers.graphs
            && phase == Phase::Decode
            && (timing != Timing::Launch || self.timed_steps_in_graphs);
        if !graphed {
            let pool = self.rec.take_pool()?;
            self.rec.begin_step(pool, timing, info)?;
            let cfg = self.cfg.clone();
            model::forward(self, &cfg, batch)?;
            self.rec.end_step()?;
        } else {
            let key = (rows, self.parity, timing);
            if !self.graphs.contains_key(&key) {
                let pool = self.rec.take_pool()?;
                let id = self.next_graph_id;
                self.next_graph_id += 1;
                self.dev
                    .stream
                    .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
                self.rec.capturing = true;
                let cfg = self.cfg.clone();
                let captured = (|| {
                    self.rec.begin_step(
                        pool,
                        timing,
                        StepInfo {
                            graph_id: id,
                            ..info
                        },
                    )?;
                    model::forward(self, &cfg, batch)?;
                    self.rec.end_step()
                })();
                self.rec.capturing = false;
                let graph = self
                    .dev
                    .stream
                    .end_capture(sys::CUgraphInstantiate_flags(0));
                let metas = captured?;
                let graph = graph?
                    .ok_or_else(|| EngineError::Cuda("stream capture produced no graph".into()))?;
                graph.upload()?;
                self.graphs.insert(
                    key,
                    GraphEntry {
                        graph,
                        pool,
                        metas,
                        id,
                    },
                );
            }
            let e = &self.graphs[&key];
            e.graph.launch()?;
            let (pool, mut metas, id) = (e.pool, e.metas.clone(), e.id);
            self.refresh_costs(&mut metas, rows);
            self.rec.replayed(
                pool,
                timing,
                StepInfo {
                    graph_id: id,
                    ..info
                },
                metas,
            );
            self.parity ^= 1;
        }
        let pools: Vec<usize> = self.graphs.values().map(|g| g.pool).collect();
        self.rec.harvest(1, &pools)
    }

    /// Waits for the GPU and reads every pending step's events.
    pub fn finish_steps(&mut self) -> Result<()> {
        let pools: Vec<usize> = self.graphs.values().map(|g| g.pool).collect();
        self.rec.flush(&pools)
    }

    /// Model-derived minimum of one attention launch at the current lengths: each sequence's
    /// cached K and V read once, q read and the output written; 4 FLOPs per (query, position,
    /// dim) for the scores and the weighted sum.
    fn attention_cost(&self, rows: usize) -> (u64, u64) {
        let c = &self.cfg;
        let live: usize = self.kv.seq_len.iter().map(|&l| l as usize).sum();
        let bytes = live * c.kv_dim() * 2 * 2 + rows * c.q_dim() * 6;
        (bytes as u64, (4 * self.attended * c.q_dim()) as u64)
    }

    /// Model-derived minimum of RoPE and the KV append: q rotated in place, k and v read as
    /// f32 and written to the cache as bf16.
    fn rope_cost(&self, rows: usize) -> (u64, u64) {
        let c = &self.cfg;
        let bytes = (rows * (c.q_dim() * 8 + c.kv_dim() * 4 * 2 + c.kv_dim() * 2 * 2)) as u64;
        let flops = (rows * (c.q_dim() + c.kv_dim()) * 3) as u64;
        (bytes, flops)
    }

    /// Bytes the contiguous-KV gather moves: each live K and V row read and written.
    fn kv_gather_bytes(&self) -> u64 {
        let live: usize = self.kv.seq_len.iter().map(|&l| l as usize).sum();
        (live * self.cfg.kv_dim() * 2 * 4) as u64
    }

    /// A graph's launch list carries the costs of the step it was captured from; attention
    /// and the KV gather grow with the context, so restate them for the replayed step.
    fn refresh_costs(&self, metas: &mut [LaunchMeta], rows: usize) {
        let (ab, af) = self.attention_cost(rows);
        let gb = self.kv_gather_bytes();
        for m in metas {
            match m.op {
                "attention" => {
                    m.bytes = ab;
                    m.flops = af;
                }
                "rope_attention" => {
                    let (rb, rf) = self.rope_cost(rows);
                    m.bytes = ab + rb;
                    m.flops = af + rf;
                }
                "kv_gather" => m.bytes = gb,
                _ => {}
            }
        }
    }

    fn norm_weight(&self, norm: Norm) -> u64 {
        match norm {
            Norm::Attn(l) => self.w.layers[l].attn_norm.ptr,
            Norm::Ffn(l) => self.w.layers[l].ffn_norm.ptr,
            Norm::Final => self.w.final_norm.ptr,
        }
    }

    /// One rms_norm_f32 launch.
    fn launch_norm(&mut self, src: Act, norm: Norm, dst: Act, rows: usize) -> Result<()> {
        let h = self.cfg.hidden;
        let w = self.norm_weight(norm);
        let layer = match norm {
            Norm::Attn(l) | Norm::Ffn(l) => l as i32,
            Norm::Final => -1,
        };
        let (s, d) = (self.act(src), self.act(dst));
        let (grid, block, args) = linear::rms_norm_launch(s, w, d, rows, h, self.cfg.rms_eps);
        let (kern, own_block) = self.ops.rms_norm;
        let block = own_block.unwrap_or(block);
        self.kernel(
            kern,
            "rms_norm",
            layer,
            "norm",
            grid,
            block,
            (rows * h * 6 + h * 4) as u64,
            (rows * h * 4) as u64,
            &args,
        )
    }

    /// Launches a held-back RMSNorm (before any op other than the linear that fuses it).
    fn flush_norm(&mut self) -> Result<()> {
        match self.pending_norm.take() {
            Some((src, norm)) => self.launch_norm(src, norm, Act::Xn, 1),
            None => Ok(()),
        }
    }

    /// Whether the linear after this RMSNorm computes it itself: the attention and final norms
    /// (into q|k|v and the LM head) at decode batch 1 on the bf16 GEMV with the fusion lever on.
    /// (The FFN norm stays separate: see `linear::norm_kernel`.)
    fn norm_fusible(&self, norm: Norm, rows: usize) -> bool {
        let consumer = match norm {
            Norm::Attn(l) => Linear::Qkv(l),
            Norm::Final => Linear::LmHead,
            Norm::Ffn(_) => return false,
        };
        self.levers.fusion
            && self.ops.fusions
            && rows == 1
            && !self.prefill
            && self.cfg.hidden <= linear::GEMV_NORM_MAX
            && self.levers.dispatch.path(self.weight(consumer).0.format, 1) == LinearPath::GemvBf16
    }

    /// RoPE and the KV append run inside attention: decode steps with one new position per
    /// sequence (no row reads a slot another row writes) and the fusion lever on.
    fn fused_rope(&self) -> bool {
        self.levers.fusion && self.ops.fusions && !self.prefill && self.rows_distinct
    }

    /// (key lanes, splits) of one attention launch: `attention_shape::decode_shape`, or the
    /// GAPSCOPE_ATTENTION_SHAPE override; prefill runs one split with one lane.
    fn attention_shape(&self, rows: usize) -> (usize, usize) {
        if self.prefill {
            return (1, 1);
        }
        if let Some((kw, splits)) = self.att_shape_override {
            return (kw, splits.clamp(1, self.max_splits));
        }
        attention_shape::decode_shape(AttentionDims {
            heads: self.cfg.heads,
            head_dim: self.cfg.head_dim,
            rows,
            sm_count: self.dev.info.sm_count as usize,
            max_ctx: self.kv.max_ctx,
            max_splits: self.max_splits,
        })
    }

    /// One linear `W src` written to `y` (f32: store, accumulate) or `yh` (bf16: SwiGLU),
    /// through the dispatch policy's path at this batch.
    fn linear_into(
        &mut self,
        which: Linear,
        src: Act,
        y: u64,
        yh: u64,
        rows: usize,
        mode: OutMode,
    ) -> Result<()> {
        let (lin, bias) = self.weight(which);
        let (fmt, n, k, wv, ws, wbytes) = (
            lin.format,
            lin.rows,
            lin.cols,
            lin.values.ptr,
            lin.scales_ptr(),
            lin.bytes,
        );
        let path = self.levers.dispatch.path(fmt, rows);
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
        let x = self.act(src);
        let layer = which.layer();
        let op = which.op();
        let mode_code = match mode {
            OutMode::Store => 0,
            OutMode::Accumulate => 1,
            OutMode::Swiglu => 2,
        };
        let n_out = if mode == OutMode::Swiglu { n / 2 } else { n };
        let out_elem = if mode == OutMode::Swiglu {
            2
        } else if mode == OutMode::Accumulate {
            8
        } else {
            4
        };
        let bias_ptr = bias.unwrap_or(0);
        let base = LinearPtrs {
            w: wv,
            scales: ws,
            bias: bias_ptr,
            ..LinearPtrs::default()
        };
        match path {
            // Our own kernels: the GEMV/MMVQ in launches of at most 8 rows (each re-reading
            // the weights), or the small bf16 GEMM in one launch over every row (weights read
            // once, the GEMV's bits per row).
            LinearPath::GemvBf16 | LinearPath::Mmvq | LinearPath::GemmBf16Small => {
                let quant = path == LinearPath::Mmvq;
                if quant {
                    self.quantize(x, rows, k, layer, false)?;
                }
                let small_gemm = path == LinearPath::GemmBf16Small;
                let (kern, chunk, bucket) = if small_gemm {
                    (Kernel::GemmBf16Small, rows.max(1), "gemm_dense")
                } else {
                    let vector = linear::vector_kernel(fmt, rows, mode == OutMode::Swiglu);
                    let kern = linear::b1_entry(vector, n_out, k, &self.levers.dispatch);
                    (kern, 8, "gemv")
                };
                for c in (0..rows).step_by(chunk) {
                    let nb = (rows - c).min(chunk);
                    let at = |p: u64, bytes_per_row: usize| {
                        if p == 0 {
                            0
                        } else {
                            p + (c * bytes_per_row) as u64
                        }
                    };
                    let ptrs = if quant {
                        LinearPtrs {
                            x: at(self.a.qx.ptr, k),
                            dx: at(self.a.dx.ptr, k / 32 * 4),
                            sx: at(self.a.sx.ptr, k / 32 * 4),
                            ..base
                        }
                    } else {
                        LinearPtrs {
                            x: at(x, k * 2),
                            ..base
                        }
                    };
                    let ptrs = LinearPtrs {
                        y: at(y, n_out * 4),
                        yh: at(yh, n_out * 2),
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
                    // Outputs per block and pass (GEMV_B1_T, the MMVQ warps, or a 16-row tile
                    // of the tensor-core GEMV), over the resident capacity of the entry
                    // actually launched (the fused-norm entries have their own registers and
                    // shared memory).
                    let per_block = linear::outputs_per_block(kern, mode == OutMode::Swiglu);
                    let grid = (self.dev.stride_grid(kern, n_out, per_block), 1, 1);
                    let block = super::device::launch_block(kern);
                    let bytes = norm_bytes
                        + wbytes
                        + (nb * k) as u64 * if quant { 1 } else { 2 }
                        + (nb * n_out * out_elem) as u64;
                    let flops = 2 * (n * k * nb) as u64;
                    let args = linear::vector_args(kern, &ptrs, n_out, k, nb, mode_code);
                    self.kernel(kern, op, layer, bucket, grid, block, bytes, flops, &args)?;
                }
                Ok(())
            }
            LinearPath::CublasBf16 | LinearPath::Mmq => {
                // The GEMM writes f32 [rows, n]; SwiGLU runs as its own kernel afterwards.
                let target = if mode == OutMode::Swiglu {
                    self.a.gu.ptr
                } else {
                    y
                };
                let accumulate = mode == OutMode::Accumulate;
                let out_bytes = (rows * n) as u64 * if accumulate { 8 } else { 4 };
                if path == LinearPath::CublasBf16 {
                    let bytes = wbytes + (rows * k * 2) as u64 + out_bytes;
                    self.cublas_gemm(
                        which,
                        wv,
                        n,
                        k,
                        x,
                        target,
                        rows,
                        accumulate,
                        bytes,
                        blas::cudaDataType_t::CUDA_R_32F,
                    )?;
                    if mode == OutMode::Store && bias_ptr != 0 {
                        let total = rows * n;
                        let (grid, block, args) =
                            launch::add_bias_launch(target, bias_ptr, n, total);
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
                    self.quantize(x, rows, k, layer, k_major)?;
                    let kern = linear::mmq_kernel(fmt, k_major);
                    let bytes = wbytes + (rows * k) as u64 + out_bytes;
                    let ptrs = LinearPtrs {
                        x: self.a.qx.ptr,
                        dx: self.a.dx.ptr,
                        sx: self.a.sx.ptr,
                        y: target,
                        ..base
                    };
                    let args = linear::mmq_args(&ptrs, n, k, rows, i32::from(accumulate));
                    self.kernel(
                        kern,
                        op,
                        layer,
                        "gemm_quant",
                        linear::mmq_grid(n, rows),
                        128,
                        bytes,
                        2 * (n * k * rows) as u64,
                        &args,
                    )?;
                }
                if mode == OutMode::Swiglu {
                    self.swiglu(layer, rows)?;
                }
                Ok(())
            }
        }
    }
}

impl Backend for CudaBackend {
    fn begin(&mut self, batch: &Batch) -> Result<()> {
        let rows = batch.rows();
        if rows > self.cap.max_rows.max(self.cap.max_seqs) || batch.logit_rows() > self.cap.max_seqs
        {
            return Err(EngineError::invalid(format!(
                "batch of {rows} rows exceeds the allocated capacity {:?}",
                self.cap
            )));
        }
        let l = self.layout;
        for r in 0..rows {
            let (s, p) = (batch.seq[r], batch.pos[r]);
            let slot = self
                .kv
                .slot(s as usize, p as usize)
                .map_err(EngineError::Invalid)?;
            self.meta_host[l.row_seq + r] = s;
            self.meta_host[l.row_pos + r] = p;
            self.meta_host[l.row_slot + r] = slot;
        }
        if let Some(o) = &batch.out_rows {
            self.meta_host[l.out_rows..l.out_rows + o.len()].copy_from_slice(o);
        }
        let s = self.cap.max_seqs;
        self.meta_host[l.seq_len..l.seq_len + s].copy_from_slice(&self.kv.seq_len);
        if self.kv.paged {
            let t = self.kv.block_table.len();
            self.meta_host[l.table..l.table + t].copy_from_slice(&self.kv.block_table);
        } else {
            let t = self.kv.slot_map.len();
            self.meta_host[l.slot_map..l.slot_map + t].copy_from_slice(&self.kv.slot_map);
        }
        // One upload per step (outside any graph): row metadata, lengths and tables.
        self.dev
            .memcpy_htod_async(self.a.meta.ptr, &self.meta_host[..l.total])?;
        self.rows = rows;
        self.attended = batch.pos.iter().map(|&p| p as usize + 1).sum();
        self.logit_rows = batch.logit_rows();
        self.prefill = batch.out_rows.is_some();
        self.pending_norm = None;
        let mut seqs: Vec<i32> = batch.seq.clone();
        seqs.sort_unstable();
        seqs.dedup();
        self.rows_distinct = seqs.len() == batch.seq.len();
        Ok(())
    }

    fn embed(&mut self, rows: usize) -> Result<()> {
        self.flush_norm()?;
        let h = self.cfg.hidden;
        let (grid, block, args) =
            launch::get_rows_launch(self.w.embed.ptr, self.a.tokens.ptr, self.a.x.ptr, rows, h);
        self.kernel(
            Kernel::GetRowsBf16,
            "embed",
            -1,
            "embed_gather",
            grid,
            block,
            (rows * h * 6) as u64,
            0,
            &args,
        )
    }

    fn rms_norm(&mut self, src: Act, norm: Norm, dst: Act, rows: usize) -> Result<()> {
        self.flush_norm()?;
        if dst == Act::Xn && self.norm_fusible(norm, rows) {
            self.pending_norm = Some((src, norm));
            return Ok(());
        }
        self.launch_norm(src, norm, dst, rows)
    }

    fn linear(
        &mut self,
        which: Linear,
        src: Act,
        dst: Act,
        rows: usize,
        mode: OutMode,
    ) -> Result<()> {
        (self.ops.linear)(self, which, src, dst, rows, mode)
    }

    fn head_norm(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.flush_norm()?;
        let lw = &self.w.layers[layer];
        let (Some(q), Some(k)) = (
            lw.q_norm.as_ref().map(|b| b.ptr),
            lw.k_norm.as_ref().map(|b| b.ptr),
        ) else {
            return Err(EngineError::invalid(
                "head_norm on a model without q/k norms",
            ));
        };
        let c = &self.cfg;
        let heads = c.heads + c.kv_heads;
        let bytes = (rows * heads * c.head_dim * 8) as u64;
        let head_norm = HeadNormArgs {
            qkv: self.a.qkv.ptr,
            q_weight: q,
            k_weight: k,
            heads: c.heads,
            kv_heads: c.kv_heads,
            head_dim: c.head_dim,
            row_stride: c.qkv_dim(),
            eps: c.rms_eps,
        };
        let (kern, block) = self.ops.head_norm;
        self.kernel(
            kern,
            "qk_norm",
            layer as i32,
            "norm",
            head_norm.grid(rows),
            block,
            bytes,
            bytes,
            &head_norm.args(),
        )
    }

    fn rope_kv_append(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.flush_norm()?;
        if self.fused_rope() {
            // attention() applies RoPE and appends K and V in its own launch.
            return Ok(());
        }
        let (bytes, flops) = self.rope_cost(rows);
        let c = &self.cfg;
        let args = RopeArgs {
            qkv: self.a.qkv.ptr,
            pos: self.meta_ptr(self.layout.row_pos),
            slots: self.meta_ptr(self.layout.row_slot),
            inv_freq: self.inv_freq.ptr,
            k_cache: self.k_cache[layer].ptr,
            v_cache: self.v_cache[layer].ptr,
            heads: c.heads,
            kv_heads: c.kv_heads,
            head_dim: c.head_dim,
            row_stride: c.qkv_dim(),
        }
        .args();
        let (kern, block) = self.ops.rope;
        self.kernel(
            kern,
            "rope_kv_append",
            layer as i32,
            "rope",
            RopeArgs::grid(rows),
            block,
            bytes,
            flops,
            &args,
        )
    }

    fn attention(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.flush_norm()?;
        let c = self.cfg.clone();
        let kv_row_bytes = c.kv_dim() * 2;
        let s = self.cap.max_seqs;
        let (kc, vc, table) = if self.kv.paged {
            (
                self.k_cache[layer].ptr,
                self.v_cache[layer].ptr,
                self.meta_ptr(self.layout.table),
            )
        } else {
            let (kg, vg) = match (&self.k_gather, &self.v_gather) {
                (Some(k), Some(v)) => (k.ptr, v.ptr),
                _ => return Err(EngineError::invalid("contiguous KV without gather buffers")),
            };
            // Gather each sequence's K and V rows into a per-sequence contiguous buffer.
            let args = [
                Arg::Ptr(self.k_cache[layer].ptr),
                Arg::Ptr(self.v_cache[layer].ptr),
                Arg::Ptr(kg),
                Arg::Ptr(vg),
                Arg::Ptr(self.meta_ptr(self.layout.slot_map)),
                Arg::Ptr(self.meta_ptr(self.layout.seq_len)),
                Arg::I32(self.kv.max_ctx as i32),
                Arg::I32((kv_row_bytes / 16) as i32),
            ];
            // Grid covers the capacity so a captured graph stays valid as sequences grow.
            let grid = (self.kv.max_ctx as u32, s as u32, 2);
            self.kernel(
                Kernel::KvGatherBf16,
                "kv_gather",
                layer as i32,
                "kv_gather",
                grid,
                128,
                self.kv_gather_bytes(),
                0,
                &args,
            )?;
            (kg, vg, self.meta_ptr(self.layout.identity))
        };
        (self.ops.attention)(self, layer, kc, vc, table, rows)
    }

    fn gather_last(&mut self, n: usize) -> Result<()> {
        self.flush_norm()?;
        let h = self.cfg.hidden;
        let ids = self.meta_ptr(self.layout.out_rows);
        let (grid, block, args) =
            launch::get_rows_launch(self.a.x.ptr, ids, self.a.xlast.ptr, n, h);
        self.kernel(
            Kernel::GetRowsF32,
            "gather_last",
            -1,
            "embed_gather",
            grid,
            block,
            (n * h * 8) as u64,
            0,
            &args,
        )
    }

    fn argmax(&mut self, rows: usize) -> Result<()> {
        self.flush_norm()?;
        let v = self.cfg.vocab;
        let s = self.a.sampled.ptr;
        let argmax = ArgmaxArgs {
            logits: self.a.logits.ptr,
            vocab: v,
            out: s,
            slice_values: self.a.argmax_v.ptr,
            slice_indices: self.a.argmax_i.ptr,
            counters: self.a.argmax_counters.ptr,
        };
        let (grid, block, args) = argmax.launch(rows, launch::argmax_slices(v));
        self.kernel(
            Kernel::ArgmaxF32,
            "argmax",
            -1,
            "sampling",
            grid,
            block,
            (rows * v * 4) as u64,
            (rows * v) as u64,
            &args,
        )?;
        // Feed the sampled tokens back as the next step's input, on the device.
        let t = self.a.tokens.ptr;
        self.d2d("next_tokens", t, s, rows * 4)
    }
}

impl CudaBackend {
    /// The engine's linear: f32 out for store and accumulate, bf16 for SwiGLU.
    fn engine_linear(
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

    /// The engine's decode or prefill attention over `kc`/`vc` (the cache, or its gathered
    /// copy) through `table`, with RoPE and the KV append fused in when `fused_rope` says so.
    fn engine_attention(
        &mut self,
        layer: usize,
        kc: u64,
        vc: u64,
        table: u64,
        rows: usize,
    ) -> Result<()> {
        let c = self.cfg.clone();
        let (kw, splits) = self.attention_shape(rows);
        let chunk = self.kv.max_ctx.div_ceil(splits).div_ceil(ATT_CHUNK) * ATT_CHUNK;
        let (bytes, flops) = self.attention_cost(rows);
        let fused = self.fused_rope();
        let attn = AttnArgs {
            qkv: self.a.qkv.ptr,
            q_stride: c.qkv_dim(),
            k_read: kc,
            v_read: vc,
            block_table: table,
            max_blocks: self.kv.max_blocks,
            block_size: BLOCK,
            row_seq: self.meta_ptr(self.layout.row_seq),
            row_pos: self.meta_ptr(self.layout.row_pos),
            row_slot: self.meta_ptr(self.layout.row_slot),
            inv_freq: self.inv_freq.ptr,
            rope: fused,
            k_cache: self.k_cache[layer].ptr,
            v_cache: self.v_cache[layer].ptr,
            out: self.a.attn.ptr,
            part_acc: self.a.part_acc.ptr,
            part_ml: self.a.part_ml.ptr,
            counters: self.a.att_counters.ptr,
            heads: c.heads,
            kv_heads: c.kv_heads,
            head_dim: c.head_dim,
            chunk,
        };
        let (kern, grid, block) = attn.launch(rows, kw, splits)?;
        // The fused append also writes the new K and V rows and reads their qkv row.
        let (bytes, flops) = if fused {
            let (rb, rf) = self.rope_cost(rows);
            (bytes + rb, flops + rf)
        } else {
            (bytes, flops)
        };
        self.kernel(
            kern,
            if fused { "rope_attention" } else { "attention" },
            layer as i32,
            "attention",
            grid,
            block,
            bytes,
            flops,
            &attn.args(),
        )?;
        Ok(())
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
