//! Model-derived bytes and FLOPs of the launches whose cost grows with the context (attention,
//! RoPE with the KV append, the contiguous-KV gather): the minimum the model needs at the
//! current lengths, independent of the device and the kernel. A replayed graph's launch list
//! is restated with them (`refresh_costs`).

use super::CudaBackend;
use crate::records::LaunchMeta;

impl CudaBackend {
    /// Model-derived minimum of one attention launch at the current lengths: each sequence's
    /// cached K and V read once, q read and the output written; 4 FLOPs per (query, position,
    /// dim) for the scores and the weighted sum.
    pub(super) fn attention_cost(&self, rows: usize) -> (u64, u64) {
        let c = &self.cfg;
        let live: usize = self.kv.seq_len.iter().map(|&l| l as usize).sum();
        let bytes = live * c.kv_dim() * 2 * 2 + rows * c.q_dim() * 6;
        (bytes as u64, (4 * self.attended * c.q_dim()) as u64)
    }

    /// Model-derived minimum of RoPE and the KV append: q rotated in place, k and v read as
    /// f32 and written to the cache as bf16.
    pub(super) fn rope_cost(&self, rows: usize) -> (u64, u64) {
        let c = &self.cfg;
        let bytes = (rows * (c.q_dim() * 8 + c.kv_dim() * 4 * 2 + c.kv_dim() * 2 * 2)) as u64;
        let flops = (rows * (c.q_dim() + c.kv_dim()) * 3) as u64;
        (bytes, flops)
    }

    /// Bytes the contiguous-KV gather moves: each live K and V row read and written.
    pub(super) fn kv_gather_bytes(&self) -> u64 {
        let live: usize = self.kv.seq_len.iter().map(|&l| l as usize).sum();
        (live * self.cfg.kv_dim() * 2 * 4) as u64
    }

    /// A graph's launch list carries the costs of the step it was captured from; attention
    /// and the KV gather grow with the context, so restate them for the replayed step.
    pub(super) fn refresh_costs(&self, metas: &mut [LaunchMeta], rows: usize) {
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
}
