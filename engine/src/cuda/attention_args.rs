//! The argument lists of rope_kv_append_f32 (rope.cu) and the decode attention entries
//! (attention.cu), in the order of their `extern "C"` signatures: the backend and the GPU checks
//! both build them here, so an argument order cannot drift between them.

use super::attention_shape::{self, HEADS_PER_BLOCK};
use super::device::Arg;
use crate::error::Result;
use gapscope_kernels::Kernel;

/// Threads per block of `rope_kv_append_f32`.
pub const ROPE_BLOCK: u32 = 512;

/// Device pointers and shapes of one rope_kv_append_f32 launch (and `rope_kv_append_hf`, which
/// takes the same arguments).
#[derive(Debug, Clone, Copy)]
pub struct RopeArgs {
    pub qkv: u64,
    pub pos: u64,
    pub slots: u64,
    pub inv_freq: u64,
    pub k_cache: u64,
    pub v_cache: u64,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Elements per fused q|k|v row.
    pub row_stride: usize,
    /// Leading dimensions of each head that rotate (`head_dim` unless partial RoPE).
    pub rope_dim: usize,
}

impl RopeArgs {
    pub fn args(&self) -> Vec<Arg> {
        vec![
            Arg::Ptr(self.qkv),
            Arg::Ptr(self.pos),
            Arg::Ptr(self.slots),
            Arg::Ptr(self.inv_freq),
            Arg::Ptr(self.k_cache),
            Arg::Ptr(self.v_cache),
            Arg::I32(self.heads as i32),
            Arg::I32(self.kv_heads as i32),
            Arg::I32(self.head_dim as i32),
            Arg::I32(self.row_stride as i32),
            Arg::I32(self.rope_dim as i32),
        ]
    }

    /// A block per row.
    pub fn grid(rows: usize) -> (u32, u32, u32) {
        (rows as u32, 1, 1)
    }
}

/// Device pointers and shapes of one decode attention launch.
#[derive(Debug, Clone, Copy)]
pub struct AttnArgs {
    pub qkv: u64,
    pub q_stride: usize,
    /// What attention reads: the cache, or the gathered copy of a contiguous cache.
    pub k_read: u64,
    pub v_read: u64,
    pub block_table: u64,
    pub max_blocks: usize,
    pub block_size: usize,
    pub row_seq: u64,
    pub row_pos: u64,
    pub row_slot: u64,
    pub inv_freq: u64,
    /// RoPE and the KV append fused in (decode).
    pub rope: bool,
    /// The cache itself, which the fused append writes at row_slot.
    pub k_cache: u64,
    pub v_cache: u64,
    pub out: u64,
    pub part_acc: u64,
    pub part_ml: u64,
    /// Split tickets for the in-kernel combine (zeroed; the last split resets its ticket).
    pub counters: u64,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Positions per split.
    pub chunk: usize,
}

impl AttnArgs {
    pub fn args(&self) -> Vec<Arg> {
        vec![
            Arg::Ptr(self.qkv),
            Arg::I32(self.q_stride as i32),
            Arg::Ptr(self.k_read),
            Arg::Ptr(self.v_read),
            Arg::Ptr(self.block_table),
            Arg::I32(self.max_blocks as i32),
            Arg::I32(self.block_size as i32),
            Arg::Ptr(self.row_seq),
            Arg::Ptr(self.row_pos),
            Arg::Ptr(self.row_slot),
            Arg::Ptr(self.inv_freq),
            Arg::I32(i32::from(self.rope)),
            Arg::Ptr(self.k_cache),
            Arg::Ptr(self.v_cache),
            Arg::Ptr(self.out),
            Arg::Ptr(self.part_acc),
            Arg::Ptr(self.part_ml),
            Arg::Ptr(self.counters),
            Arg::I32(self.heads as i32),
            Arg::I32(self.kv_heads as i32),
            Arg::I32(self.head_dim as i32),
            Arg::I32(self.chunk as i32),
            Arg::F32(1.0 / (self.head_dim as f32).sqrt()),
        ]
    }

    /// (entry, grid, block) for `rows` query rows with `kw` key lanes and `splits` splits.
    pub fn launch(
        &self,
        rows: usize,
        kw: usize,
        splits: usize,
    ) -> Result<(Kernel, (u32, u32, u32), u32)> {
        let kern = if kw > 1 {
            attention_shape::key_lane_kernel(self.head_dim)?
        } else {
            Kernel::AttnDecodeBf16
        };
        let grid = (
            self.heads.div_ceil(HEADS_PER_BLOCK) as u32,
            rows as u32,
            splits as u32,
        );
        Ok((kern, grid, (32 * HEADS_PER_BLOCK * kw) as u32))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pointer (true) or value (false), parameter by parameter, of a comma-separated list.
    fn kinds_of(params: &str) -> Vec<bool> {
        params.split(',').map(|p| p.contains('*')).collect()
    }

    fn kinds(args: &[Arg]) -> Vec<bool> {
        args.iter().map(|a| matches!(a, Arg::Ptr(_))).collect()
    }

    /// The lists follow the CUDA signatures (a mismatch is undefined behaviour on the device):
    /// rope_kv_append_f32's own, and ATT_PARAMS, which every decode attention entry takes.
    #[test]
    fn lists_agree_with_the_cuda_source() {
        let rope = gapscope_kernels::module_of(Kernel::RopeKvAppendF32).source;
        let at = rope
            .find(" rope_kv_append_f32(")
            .expect("rope kernel in source");
        let body = &rope[at + " rope_kv_append_f32(".len()..];
        let sig = &body[..body.find(')').expect("signature end")];
        let r = RopeArgs {
            qkv: 1,
            pos: 2,
            slots: 3,
            inv_freq: 4,
            k_cache: 5,
            v_cache: 6,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            row_stride: 6144,
            rope_dim: 128,
        };
        assert_eq!(kinds(&r.args()), kinds_of(sig));

        let attn = gapscope_kernels::module_of(Kernel::AttnDecodeBf16).source;
        let at = attn
            .find("#define ATT_PARAMS")
            .expect("ATT_PARAMS in attention.cu");
        let body = &attn[at + "#define ATT_PARAMS".len()..];
        let params = body[..body.find("#define").expect("ATT_ARGS follows")].replace('\\', "");
        for k in [
            Kernel::AttnDecodeBf16,
            Kernel::AttnDecodeKwHd64Bf16,
            Kernel::AttnDecodeKwHd128Bf16,
            Kernel::AttnDecodeKwHd256Bf16,
        ] {
            assert!(
                attn.contains(&format!("{}(\n    ATT_PARAMS)", k.name())),
                "{} takes ATT_PARAMS",
                k.name()
            );
        }
        let a = AttnArgs {
            qkv: 1,
            q_stride: 6144,
            k_read: 2,
            v_read: 3,
            block_table: 4,
            max_blocks: 8,
            block_size: 16,
            row_seq: 5,
            row_pos: 6,
            row_slot: 7,
            inv_freq: 8,
            rope: true,
            k_cache: 9,
            v_cache: 10,
            out: 11,
            part_acc: 12,
            part_ml: 13,
            counters: 14,
            heads: 32,
            kv_heads: 8,
            head_dim: 128,
            chunk: 16,
        };
        assert_eq!(kinds(&a.args()), kinds_of(&params));
        assert_eq!(
            a.launch(3, 1, 17).unwrap(),
            (Kernel::AttnDecodeBf16, (8, 3, 17), 128)
        );
        assert_eq!(
            a.launch(16, 8, 1).unwrap(),
            (Kernel::AttnDecodeKwHd128Bf16, (8, 16, 1), 1024)
        );
    }
}
