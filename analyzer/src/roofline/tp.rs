//! Tensor parallelism: the floors of one rank of a model split `tp` ways, Megatron-style.
//! Attention heads and KV heads are split `tp` ways (a rank holds at least one KV head, so
//! with fewer KV heads than ranks each KV head is replicated), the MLP (and each expert's)
//! intermediate width and the DeltaNet heads too, and the LM head is vocab-parallel. Norms,
//! routers and the embedding rows a step gathers stay whole on every rank (they are small).
//! Each rank then reads 1/tp of the linear weights and of the KV cache and does 1/tp of the
//! FLOPs; its floor is the step's floor, since the ranks run side by side.

use serde::Serialize;

use super::ModelSpec;
use crate::analysis::Report;

/// The largest tensor-parallel degree the floors are computed for.
pub const MAX_TP: u64 = 64;

/// Where a tensor-parallel degree comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TpSource {
    /// The trace says how many ranks the run had (Kineto's `distributedInfo.world_size`,
    /// the recorded `WORLD_SIZE`).
    TraceWorldSize,
    /// Given by the caller (`--tp`).
    Given,
    /// Nothing says; one GPU holding the whole model is assumed.
    Assumed,
}

/// The tensor-parallel degree the caller asks for: `ranks`, given explicitly or only a
/// default that a trace's own world size replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TpChoice {
    pub ranks: u64,
    pub given: bool,
}

impl Default for TpChoice {
    /// Not given: the trace's world size, else one GPU.
    fn default() -> Self {
        Self::new(None)
    }
}

impl TpChoice {
    /// `given` when the caller named a degree (clamped to 1..=[`MAX_TP`]), else 1 (assumed
    /// where a trace says nothing).
    pub fn new(given: Option<u64>) -> Self {
        Self {
            ranks: given.unwrap_or(1).clamp(1, MAX_TP),
            given: given.is_some(),
        }
    }
}

impl TpSource {
    /// The degree of a trace's run: the caller's when given, else the trace's world size
    /// (when it is 1..=[`MAX_TP`]), else the default (assumed).
    pub fn resolve(report: &Report, choice: TpChoice) -> (u64, Self) {
        match (choice.given, report.source.world_size) {
            (true, _) => (choice.ranks, Self::Given),
            (false, Some(w)) if (1..=MAX_TP).contains(&u64::from(w)) => {
                (u64::from(w), Self::TraceWorldSize)
            }
            _ => (choice.ranks, Self::Assumed),
        }
    }
}

fn split(n: u64, tp: u64) -> u64 {
    if n == 0 { 0 } else { n.div_ceil(tp).max(1) }
}

impl ModelSpec {
    /// The shapes one rank of `tp` holds (see the module's header); the model itself at
    /// `tp` 1 (and 0, taken as 1).
    pub fn per_rank(&self, tp: u64) -> ModelSpec {
        let tp = tp.clamp(1, MAX_TP);
        if tp == 1 {
            return self.clone();
        }
        let mut m = self.clone();
        m.heads = split(self.heads, tp);
        m.kv_heads = split(self.kv_heads, tp);
        m.intermediate = split(self.intermediate, tp);
        // The LM head's rows; the embedding rows a step gathers stay one per sequence
        // (`batch.min(vocab)`, and a shard still has far more rows than a batch).
        m.vocab = split(self.vocab, tp);
        if let Some(moe) = &mut m.moe {
            moe.expert_intermediate = split(moe.expert_intermediate, tp);
            moe.shared_intermediate = split(moe.shared_intermediate, tp);
        }
        if let Some(l) = &mut m.linear {
            l.key_heads = split(l.key_heads, tp);
            l.value_heads = split(l.value_heads, tp);
        }
        m
    }

    /// KV heads one rank of `tp` holds: ceil(kv_heads / tp), at least one.
    pub fn kv_heads_per_rank(&self, tp: u64) -> u64 {
        self.per_rank(tp).kv_heads
    }
}

#[cfg(test)]
mod tests {
    use super::super::{WeightFormat, hw, step_floor};
    use super::*;
    use serde_json::json;

    fn llama3_8b() -> ModelSpec {
        ModelSpec::from_hf_config(&json!({
            "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256
        }))
        .expect("llama config")
    }

    #[test]
    fn two_ranks_read_half_the_linear_weights_and_the_kv_cache() {
        let m = llama3_8b();
        let h = hw::lookup("h200").expect("h200");
        let one = step_floor(&m, &h, WeightFormat::Bf16, 1, 4096);
        let two = step_floor(&m.per_rank(2), &h, WeightFormat::Bf16, 1, 4096);
        // Replicated: the embedding row (4096 x 2 B) and the norms (65 x 4096 x 2 B).
        let replicated = 4096.0 * 2.0 + m.norm_bytes();
        assert_eq!(
            two.weight_bytes - replicated,
            (one.weight_bytes - replicated) / 2.0
        );
        assert_eq!(two.kv_bytes, one.kv_bytes / 2.0);
        assert_eq!(two.flops, one.flops / 2.0);
        assert!(two.step_floor_s < 0.51 * one.step_floor_s);
        assert_eq!(m.per_rank(1), m);
    }

    #[test]
    fn fewer_kv_heads_than_ranks_replicates_them() {
        let m = llama3_8b();
        // 8 KV heads over 16 ranks: one each, so each rank reads 1/8 of the KV cache, not 1/16.
        assert_eq!(m.kv_heads_per_rank(16), 1);
        assert_eq!(m.kv_heads_per_rank(3), 3);
        let r = m.per_rank(16);
        assert_eq!(r.heads, 2);
        assert_eq!(
            r.kv_bytes_per_step(1, 100, 2.0),
            m.kv_bytes_per_step(1, 100, 2.0) / 8.0
        );
        // A model with 2 KV heads at tp 8 keeps one per rank.
        let mut mqa = m.clone();
        mqa.kv_heads = 2;
        assert_eq!(
            mqa.per_rank(8).kv_bytes_per_token(2.0),
            mqa.kv_bytes_per_token(2.0) / 2.0
        );
    }

    #[test]
    fn the_choice_is_clamped_and_says_whether_it_was_given() {
        assert_eq!(
            TpChoice::new(Some(0)),
            TpChoice {
                ranks: 1,
                given: true
            }
        );
        assert_eq!(TpChoice::new(Some(1000)).ranks, MAX_TP);
        assert_eq!(
            TpChoice::default(),
            TpChoice {
                ranks: 1,
                given: false
            }
        );
    }
}
