//! The backend's attention ops: Qwen3's q/k head norm, RoPE with the KV append, and attention
//! itself (after gathering a contiguous cache's rows, when the cache is not paged), with RoPE
//! and the append fused into attention at decode when the fusion lever allows.

use super::{ATT_CHUNK, CudaBackend};
use crate::cuda::attention_args::{AttnArgs, RopeArgs};
use crate::cuda::attention_shape::{self, AttentionDims};
use crate::cuda::device::Arg;
use crate::cuda::launch::HeadNormArgs;
use crate::error::{EngineError, Result};
use crate::kv::BLOCK;
use gapscope_kernels::Kernel;

impl CudaBackend {
    /// `Backend::head_norm`: every q and k head of each qkv row normalised in place.
    pub(super) fn qk_norm(&mut self, layer: usize, rows: usize) -> Result<()> {
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

    /// `Backend::rope_kv_append`: q and k rotated, k and v appended to the cache (unless attention
    /// does it itself).
    pub(super) fn rope_append(&mut self, layer: usize, rows: usize) -> Result<()> {
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
            rope_dim: c.rope_dim,
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

    /// `Backend::attention`: contiguous caches gathered per sequence first, then the numerics'
    /// attention.
    pub(super) fn attend(&mut self, layer: usize, rows: usize) -> Result<()> {
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

    /// The engine's decode or prefill attention over `kc`/`vc` (the cache, or its gathered
    /// copy) through `table`, with RoPE and the KV append fused in when `fused_rope` says so.
    pub(super) fn engine_attention(
        &mut self,
        layer: usize,
        kc: u64,
        vc: u64,
        table: u64,
        rows: usize,
    ) -> Result<()> {
        let c = self.cfg.clone();
        let (kw, splits) = self.attention_shape();
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

    /// RoPE and the KV append run inside attention: decode steps with one new position per
    /// sequence (no row reads a slot another row writes), the fusion lever on, and RoPE over
    /// the whole head (the fused kernel has no partial RoPE).
    pub(super) fn fused_rope(&self) -> bool {
        self.levers.fusion
            && self.ops.fusions
            && !self.prefill
            && self.rows_distinct
            && self.cfg.rope_dim == self.cfg.head_dim
    }

    /// (key lanes, splits) of one attention launch: `attention_shape::decode_shape` over the
    /// batch's sequences (each row of a sequence is laid out, and rounds, as its one-row step
    /// would), or the GAPSCOPE_ATTENTION_SHAPE override; prefill runs one split with one lane.
    fn attention_shape(&self) -> (usize, usize) {
        if self.prefill {
            return (1, 1);
        }
        if let Some((kw, splits)) = self.att_shape_override {
            return (kw, splits.clamp(1, self.max_splits));
        }
        attention_shape::decode_shape(AttentionDims {
            heads: self.cfg.heads,
            head_dim: self.cfg.head_dim,
            rows: self.seqs,
            sm_count: self.dev.info.sm_count as usize,
            max_ctx: self.kv.max_ctx,
            max_splits: self.max_splits,
        })
    }
}
