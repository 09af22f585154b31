//! Model-derived bytes and FLOPs of the launches whose cost grows with the context (attention,
//! RoPE with the KV append, the contiguous-KV gather): the minimum the model needs at the
//! current lengths, from the config alone, independent of the device and the kernel. A
//! replayed graph's launch list is restated with them (`refresh_costs`).

use super::CudaBackend;
use crate::config::ModelConfig;
use crate::records::LaunchMeta;

/// One attention launch over `rows` query rows, with `live` cached positions over all
/// sequences and `attended` positions summed over the rows: each sequence's cached K and V
/// read once, q read and the output written; 4 FLOPs per (query, position, dim) for the scores
/// and the weighted sum.
fn attention(c: &ModelConfig, live: usize, attended: usize, rows: usize) -> (u64, u64) {
    let bytes = live * c.kv_dim() * 2 * 2 + rows * c.q_dim() * 6;
    (bytes as u64, (4 * attended * c.q_dim()) as u64)
}

/// RoPE and the KV append over `rows` rows: q rotated in place, k and v read as f32 and
/// written to the cache as bf16.
fn rope(c: &ModelConfig, rows: usize) -> (u64, u64) {
    let bytes = (rows * (c.q_dim() * 8 + c.kv_dim() * 4 * 2 + c.kv_dim() * 2 * 2)) as u64;
    let flops = (rows * (c.q_dim() + c.kv_dim()) * 3) as u64;
    (bytes, flops)
}

/// The contiguous-KV gather of `live` cached positions: each K and V row read and written.
fn kv_gather(c: &ModelConfig, live: usize) -> u64 {
    (live * c.kv_dim() * 2 * 4) as u64
}

impl CudaBackend {
    /// Cached positions over every sequence.
    fn live_positions(&self) -> usize {
        self.kv.seq_len.iter().map(|&l| l as usize).sum()
    }

    pub(super) fn attention_cost(&self, rows: usize) -> (u64, u64) {
        attention(&self.cfg, self.live_positions(), self.attended, rows)
    }

    pub(super) fn rope_cost(&self, rows: usize) -> (u64, u64) {
        rope(&self.cfg, rows)
    }

    pub(super) fn kv_gather_bytes(&self) -> u64 {
        kv_gather(&self.cfg, self.live_positions())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// 8 query heads and 2 KV heads of 64: q 512 wide, k and v 128 each.
    fn cfg() -> ModelConfig {
        ModelConfig::from_json(&serde_json::json!({
            "model_type": "llama", "hidden_size": 512, "intermediate_size": 1024,
            "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 2,
            "head_dim": 64, "vocab_size": 100
        }))
        .unwrap()
    }

    #[test]
    fn attention_reads_each_cached_row_once_and_counts_attended_positions() {
        let c = cfg();
        // Two sequences of 10 and 30 cached positions, one decode row each.
        let (bytes, flops) = attention(&c, 40, 40, 2);
        assert_eq!(bytes, (40 * 128 * 2 * 2 + 2 * 512 * 6) as u64);
        assert_eq!(flops, (4 * 40 * 512) as u64);
    }

    #[test]
    fn rope_and_gather_scale_with_rows_and_live_positions() {
        let c = cfg();
        assert_eq!(
            rope(&c, 3),
            (3 * (512 * 8 + 128 * 8 + 128 * 4), 3 * 640 * 3)
        );
        assert_eq!(kv_gather(&c, 40), 40 * 128 * 8);
    }
}
