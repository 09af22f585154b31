//! The CUDA backend: implements the forward pass's ops with the NVRTC kernels and cuBLAS,
//! dispatches linears by batch size, manages the KV cache, captures decode steps as CUDA
//! graphs, and records every launch with its op, layer, bucket, bytes and FLOPs.
//!
//! This file holds the state (buffers, KV cache, metadata), construction and the `Backend`
//! entry points; the ops live beside it: `matmul` (linears), `norm` (RMSNorms and the
//! held-back norm), `attention` (q/k norm, RoPE, attention), `delta` (the hybrid models'
//! gated DeltaNet ops and output gate), `graphs` (steps, capture and
//! replay), `costs` (model-derived bytes and FLOPs), and the numerics' choice of kernels
//! (`numerics_ops`, `hf_numerics`), and the optional capture of each layer's output (`hidden`).

mod attention;
mod costs;
mod delta;
mod graphs;
mod hf_numerics;
mod hidden;
mod matmul;
mod norm;
mod numerics_ops;

use super::device::{Arg, DevBuf, Device};
use super::launch::{self, ARGMAX_MAX_SLICES, ArgmaxArgs};
use super::recorder::{Recorder, Timing};
use super::weights::{DevLinear, DevWeights};
use crate::Numerics;
use crate::config::ModelConfig;
use crate::dispatch::Levers;
use crate::error::{EngineError, Result};
use crate::kv::KvSlots;
use crate::model::{Act, Backend, Batch, Linear, Norm, OutMode};
use crate::records::LaunchMeta;
use crate::weights::ModelWeights;
use cudarc::cublas::{CudaBlas, sys as blas};
use cudarc::driver::CudaStream;
pub use delta::delta_rule_kernel;
use gapscope_kernels::Kernel;
use gapscope_traces::MemopKind;
pub use graphs::StepSpec;
use numerics_ops::NumericsOps;
use std::collections::HashMap;
use std::sync::Arc;

/// Sizes the backend allocates for up front, so buffers (and graph pointers) never move.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Capacity {
    pub max_seqs: usize,
    pub max_ctx: usize,
    /// Largest forward (a prefill of max_seqs x prompt tokens).
    pub max_rows: usize,
}

impl Capacity {
    /// A batched-bench run's: the largest npl, its prompts and generated tokens (plus one),
    /// the prefill of every sequence at once.
    pub fn for_bench(npl: &[usize], npp: usize, ntg: usize) -> Self {
        let maxn = npl.iter().copied().max().unwrap_or(1);
        Self {
            max_seqs: maxn,
            max_ctx: npp + ntg + 1,
            max_rows: maxn * npp,
        }
    }
}

/// Granularity of a split-K attention chunk (positions).
pub(super) const ATT_CHUNK: usize = 16;
const WORKSPACE_BYTES: usize = 64 << 20;

struct Acts {
    tokens: DevBuf,
    x: DevBuf,
    xlast: DevBuf,
    xn: DevBuf,
    qkv: DevBuf,
    /// Hybrid models: the attention output gate `[rows, q_dim]`, a DeltaNet layer's input
    /// projection `[rows, in_proj_rows]` and its recurrence output `[rows, value_width]`
    /// (empty otherwise).
    gate: DevBuf,
    mixed: DevBuf,
    core: DevBuf,
    /// bf16 `[rows, max(q_dim, value_width)]`: the attention or gated-norm output.
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
    /// Row groups, one per sequence: `[max_seqs + 1]` first rows, `[max_seqs]` sequence ids.
    group_start: usize,
    group_seq: usize,
    seq_len: usize,
    table: usize,
    slot_map: usize,
    identity: usize,
    total: usize,
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
    /// Hybrid models: the DeltaNet layers' conv and recurrent states.
    delta: Option<delta::DeltaCaches>,
    /// The sequence of each of the current batch's row groups (one per sequence, in order).
    group_seqs: Vec<i32>,
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
    /// Distinct sequences in the current batch: what the decode attention layout is chosen
    /// by, so a sequence's rows (a speculative verify) get the layout, and the bits, of its
    /// one-row decode step.
    seqs: usize,
    pub rec: Recorder,
    graphs: HashMap<graphs::GraphKey, graphs::GraphEntry>,
    parity: usize,
    next_graph_id: u32,
    max_splits: usize,
    /// `DispatchPolicy::attention_shape` pins the decode attention shape (tuning runs).
    att_shape_override: Option<(usize, usize)>,
    /// The ops of the numerics (where activations are rounded), chosen by `new` and
    /// `set_numerics`; `HfBf16` runs the unfused `hf_numerics` kernels.
    ops: NumericsOps,
    /// bf16 `[rows, widest linear]`: cuBLAS's bf16 output under the hf-bf16 numerics.
    hf_out: Option<DevBuf>,
    /// With hidden-state capture on (`set_capture_hidden`): f32 `[layers, max_seqs, hidden]`,
    /// the residual stream after each layer at the logit rows. `None`: off, and the forward
    /// launches and copies nothing for it.
    hidden: Option<DevBuf>,
}

fn bf16_bytes(n: usize) -> u64 {
    2 * n as u64
}

/// A cuBLAS handle on `stream` with its own workspace (which must outlive it).
fn open_cublas(stream: &Arc<CudaStream>) -> Result<(CudaBlas, DevBuf)> {
    // SAFETY: is_culib_present only tries to load the library (dlopen) and reports whether it
    // could; it touches no memory of ours.
    if !unsafe { blas::is_culib_present() } {
        return Err(EngineError::Cuda(
            "no cuBLAS library (libcublas.so.13) found: add CUDA's lib directory to LD_LIBRARY_PATH".into(),
        ));
    }
    let blas = CudaBlas::new(stream.clone())?;
    let workspace = DevBuf::alloc(WORKSPACE_BYTES)?;
    // SAFETY: the workspace outlives the handle (both owned by the backend).
    let st = unsafe {
        blas::cublasSetWorkspace_v2(*blas.handle(), workspace.ptr as *mut _, WORKSPACE_BYTES)
    };
    st.result()?;
    Ok((blas, workspace))
}

impl Acts {
    /// Every activation and scratch buffer at capacity (`meta` empty until its layout is
    /// known).
    fn alloc(
        cfg: &ModelConfig,
        cap: Capacity,
        max_splits: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<Self> {
        let (r, s) = (cap.max_rows.max(cap.max_seqs), cap.max_seqs);
        let hy = cfg.hybrid.as_ref();
        let value_width = hy.map_or(0, |h| h.value_width());
        let kmax = cfg
            .hidden
            .max(cfg.intermediate)
            .max(cfg.q_dim())
            .max(value_width);
        let f32b = 4usize;
        Ok(Self {
            tokens: DevBuf::alloc(r * 4)?,
            x: DevBuf::alloc(r * cfg.hidden * f32b)?,
            xlast: DevBuf::alloc(s * cfg.hidden * f32b)?,
            xn: DevBuf::alloc(r * cfg.hidden * 2)?,
            qkv: DevBuf::alloc(r * cfg.qkv_dim() * f32b)?,
            gate: DevBuf::alloc(if cfg.attn_output_gate {
                r * cfg.q_dim() * f32b
            } else {
                0
            })?,
            mixed: DevBuf::alloc(r * hy.map_or(0, |h| h.in_proj_rows()) * f32b)?,
            core: DevBuf::alloc(r * value_width * f32b)?,
            attn: DevBuf::alloc(r * cfg.q_dim().max(value_width) * 2)?,
            gu: DevBuf::alloc(r * 2 * cfg.intermediate * f32b)?,
            h: DevBuf::alloc(r * cfg.intermediate * 2)?,
            logits: DevBuf::alloc(s * cfg.vocab * f32b)?,
            sampled: DevBuf::alloc(s * 4)?,
            qx: DevBuf::alloc(r * kmax)?,
            dx: DevBuf::alloc(r * kmax / 32 * f32b)?,
            sx: DevBuf::alloc(r * kmax / 32 * f32b)?,
            part_acc: DevBuf::alloc(s * cfg.heads * max_splits * cfg.head_dim * f32b)?,
            part_ml: DevBuf::alloc(s * cfg.heads * max_splits * 2 * f32b)?,
            att_counters: DevBuf::upload(&vec![0i32; s * cfg.heads.div_ceil(4)], stream)?,
            argmax_v: DevBuf::alloc(s * ARGMAX_MAX_SLICES * f32b)?,
            argmax_i: DevBuf::alloc(s * ARGMAX_MAX_SLICES * 4)?,
            argmax_counters: DevBuf::upload(&vec![0i32; s], stream)?,
            meta: DevBuf::alloc(0)?,
        })
    }
}

impl MetaLayout {
    /// The regions for `cap`'s rows and sequences and `kv`'s tables, back to back.
    fn new(cap: Capacity, kv: &KvSlots) -> Self {
        let (r, s) = (cap.max_rows.max(cap.max_seqs), cap.max_seqs);
        let mut off = 0;
        let mut region = |n: usize| {
            let o = off;
            off += n;
            o
        };
        Self {
            row_seq: region(r),
            row_pos: region(r),
            row_slot: region(r),
            out_rows: region(s),
            group_start: region(s + 1),
            group_seq: region(s),
            seq_len: region(s),
            table: region(s * kv.max_blocks),
            slot_map: region(s * kv.max_ctx),
            identity: region(s * kv.max_blocks),
            total: off,
        }
    }
}

/// Per layer: the K and V caches; and for a contiguous cache the buffers attention reads each
/// sequence's gathered rows from.
type KvBuffers = (Vec<DevBuf>, Vec<DevBuf>, Option<DevBuf>, Option<DevBuf>);

fn alloc_kv(cfg: &ModelConfig, kv: &KvSlots) -> Result<KvBuffers> {
    let slots = kv.capacity();
    let kv_row = cfg.kv_dim() * 2;
    let mut k_cache = Vec::with_capacity(cfg.layers);
    let mut v_cache = Vec::with_capacity(cfg.layers);
    for l in 0..cfg.layers {
        // A gated DeltaNet layer keeps no KV cache.
        let n = if cfg.is_linear(l) { 0 } else { slots * kv_row };
        k_cache.push(DevBuf::alloc(n)?);
        v_cache.push(DevBuf::alloc(n)?);
    }
    let (k_gather, v_gather) = if kv.paged {
        (None, None)
    } else {
        (
            Some(DevBuf::alloc(slots * kv_row)?),
            Some(DevBuf::alloc(slots * kv_row)?),
        )
    };
    Ok((k_cache, v_cache, k_gather, v_gather))
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
        let (blas, workspace) = open_cublas(&stream)?;
        let w = DevWeights::upload(weights, &stream)?;
        let inv_freq = DevBuf::upload(&cfg.inv_freq(), &stream)?;
        if cap.max_ctx > 16 * 1024 {
            return Err(EngineError::invalid(format!(
                "context of {} tokens: the attention kernel keeps a block table of at most 1024 blocks (16384 tokens)",
                cap.max_ctx
            )));
        }
        let kv = KvSlots::new(levers.paged_kv, cap.max_seqs, cap.max_ctx);
        let max_splits = kv.max_ctx.div_ceil(ATT_CHUNK).max(1);
        let mut a = Acts::alloc(cfg, cap, max_splits, &stream)?;
        let layout = MetaLayout::new(cap, &kv);
        a.meta = DevBuf::alloc(layout.total * 4)?;
        let mut meta_host = vec![0i32; layout.total];
        meta_host[layout.identity..layout.identity + cap.max_seqs * kv.max_blocks]
            .copy_from_slice(&kv.identity_table());
        let (k_cache, v_cache, k_gather, v_gather) = alloc_kv(cfg, &kv)?;
        let delta = match &cfg.hybrid {
            Some(hy) => Some(delta::DeltaCaches::alloc(hy, cap.max_seqs)?),
            None => None,
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
            delta,
            group_seqs: Vec::new(),
            layout,
            meta_host,
            rows: 0,
            attended: 0,
            logit_rows: 0,
            prefill: false,
            pending_norm: None,
            rows_distinct: false,
            seqs: 0,
            rec,
            graphs: HashMap::new(),
            parity: 0,
            next_graph_id: 1,
            max_splits,
            att_shape_override: match levers.dispatch.attention_shape {
                Some(s) => Some(crate::cuda::attention_shape::check_override(
                    s,
                    cfg.head_dim,
                )?),
                None => None,
            },
            ops: NumericsOps::of(Numerics::Engine),
            hf_out: None,
            hidden: None,
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

    /// The next forward's input tokens on the device (`argmax` copies its tokens here).
    pub fn tokens_ptr(&self) -> u64 {
        self.a.tokens.ptr
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
            Act::Gate => self.a.gate.ptr,
            Act::Mixed => self.a.mixed.ptr,
            Act::Core => self.a.core.ptr,
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
        self.d2d_layer(op, -1, dst, src, bytes)
    }

    /// One recorded D2D copy of `bytes` on the stream, attributed to `layer`.
    fn d2d_layer(
        &mut self,
        op: &'static str,
        layer: i32,
        dst: u64,
        src: u64,
        bytes: usize,
    ) -> Result<()> {
        let i = self.rec.before_launch()?;
        self.dev.memcpy_dtod(dst, src, bytes)?;
        self.rec.after_launch(
            i,
            LaunchMeta {
                name: "cuMemcpyDtoDAsync",
                op,
                layer,
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
            Linear::InProj(i) => (&self.w.layers[i].wqkv, None),
            Linear::O(i) | Linear::OutProj(i) => (&self.w.layers[i].wo, None),
            Linear::Gate(i) => (
                self.w.layers[i]
                    .w_gate
                    .as_ref()
                    .expect("forward runs gate_proj only with attn_output_gate"),
                None,
            ),
            Linear::GateUp(i) => (&self.w.layers[i].w_gate_up, None),
            Linear::Down(i) => (&self.w.layers[i].w_down, None),
            Linear::LmHead => (&self.w.lm_head, None),
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
        self.set_groups(batch)?;
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
        self.seqs = seqs.len();
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
        self.qk_norm(layer, rows)
    }

    fn rope_kv_append(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.rope_append(layer, rows)
    }

    fn attention(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.attend(layer, rows)
    }

    fn attn_gate(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.sigmoid_gate(layer, rows)
    }

    fn conv_step(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.conv(layer, rows)
    }

    fn delta_rule(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.recurrence(layer, rows)
    }

    fn gated_norm(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.gated_rms_norm(layer, rows)
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

    fn layer_output(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.capture_layer_output(layer, rows)
    }
}
