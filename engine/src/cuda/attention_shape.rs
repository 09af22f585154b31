//! How a decode attention launch is laid out: key lanes inside a block and splits across
//! blocks. Pure functions of the batch and the capacity, so every lever setting (graphs, KV
//! layout, PDL, fusion, threshold) sums the same keys in the same order.

use crate::error::{EngineError, Result};
use gapscope_kernels::Kernel;

/// Query heads one attention block serves (ATT_WARPS in attention.cu).
pub const HEADS_PER_BLOCK: usize = 4;

/// What the layout depends on.
#[derive(Debug, Clone, Copy)]
pub struct AttentionDims {
    pub heads: usize,
    pub head_dim: usize,
    /// One-row decode steps the batch stands for: its sequences (the backend passes those,
    /// so a speculative verify's rows of one sequence get that sequence's one-row layout).
    pub rows: usize,
    pub sm_count: usize,
    /// KV capacity per sequence (positions), which a captured graph must cover.
    pub max_ctx: usize,
    /// Most splits the partial buffers hold.
    pub max_splits: usize,
}

/// Most key lanes per query head for a head size (the hd-256 kernel has half the threads).
pub fn max_key_lanes(head_dim: usize) -> usize {
    if head_dim > 128 { 4 } else { 8 }
}

/// (key lanes, splits) of a decode launch. Measured on an H200 (evidence/engine-h200.tar.xz: engine/round4/experiments/): while
/// the unsplit grid would leave most SMs idle (batch 1-8 of an 8B model), splits come first, up
/// to eight blocks per SM, and key lanes only for splits of more than 128 keys; beyond that,
/// key lanes (combined on chip) up to about eight warps per SM, each keeping at least 32 keys
/// of the capacity.
pub fn decode_shape(d: AttentionDims) -> (usize, usize) {
    let base = d.heads.div_ceil(HEADS_PER_BLOCK) * d.rows.max(1);
    let lane_cap = max_key_lanes(d.head_dim);
    let sms = d.sm_count.max(1);
    if 2 * base < sms {
        let splits = (8 * sms).div_ceil(base).clamp(1, d.max_splits.max(1));
        let chunk = d.max_ctx.div_ceil(splits);
        let kw = prev_power_of_two(chunk / 64).min(lane_cap);
        (kw, splits)
    } else {
        let kw = prev_power_of_two((8 * sms).div_ceil(base))
            .min(lane_cap)
            .min(prev_power_of_two(d.max_ctx / 32));
        (kw, 1)
    }
}

/// Checks a pinned decode attention shape (`DispatchPolicy::attention_shape`, set by
/// `--dispatch attention_shape=KW:SPLITS` or the binary's GAPSCOPE_ATTENTION_SHAPE; tuning runs)
/// against the model's head size: KW a power of two up to `max_key_lanes`, SPLITS at least 1.
pub fn check_override((kw, splits): (usize, usize), head_dim: usize) -> Result<(usize, usize)> {
    let max_kw = max_key_lanes(head_dim);
    if !kw.is_power_of_two() || kw > max_kw || splits == 0 {
        return Err(EngineError::invalid(format!(
            "attention_shape {kw}:{splits}: expected KW:SPLITS with KW a power of two up to {max_kw} (head_dim {head_dim}) and SPLITS >= 1"
        )));
    }
    Ok((kw, splits))
}

/// The key-lane attention kernel of a head size.
pub fn key_lane_kernel(head_dim: usize) -> Result<Kernel> {
    match head_dim {
        64 => Ok(Kernel::AttnDecodeKwHd64Bf16),
        128 => Ok(Kernel::AttnDecodeKwHd128Bf16),
        256 => Ok(Kernel::AttnDecodeKwHd256Bf16),
        d => Err(EngineError::invalid(format!(
            "attention supports head_dim 64, 128 or 256, not {d}"
        ))),
    }
}

/// The largest power of two <= n (1 for n = 0).
fn prev_power_of_two(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.max(1).leading_zeros())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::DispatchPolicy;

    fn llama8b(rows: usize, max_ctx: usize) -> AttentionDims {
        AttentionDims {
            heads: 32,
            head_dim: 128,
            rows,
            sm_count: 132,
            max_ctx,
            max_splits: max_ctx / 16,
        }
    }

    #[test]
    fn powers_of_two_round_down() {
        assert_eq!(
            [0, 1, 2, 3, 7, 8, 9].map(prev_power_of_two),
            [1, 1, 2, 2, 4, 8, 8]
        );
    }

    /// The shapes measured on the H200 (bench --npp 128 --ntg 128: capacity 272 positions).
    #[test]
    fn measured_shapes() {
        // Batch 1: every split of 16 keys (1:17 beat 1:8, 1:12, 2:8, 4:4, 8:1).
        assert_eq!(decode_shape(llama8b(1, 272)), (1, 17));
        // npl 16: eight key lanes, no split (8:1 beat 4:2, 2:4, 1:8).
        assert_eq!(decode_shape(llama8b(16, 272)), (8, 1));
        // npl 128: two lanes. Measured 8.78 and 8.83 ms/step in two runs, 1:1 8.77 and 4:1
        // 9.04 (evidence/engine-h200.tar.xz: engine/round4/experiments/d3-run.log): 2:1 and 1:1 are the same within the spread.
        assert_eq!(decode_shape(llama8b(128, 272)), (2, 1));
    }

    #[test]
    fn long_contexts_get_key_lanes_within_splits_and_caps_hold() {
        // Batch 1 over 8192 positions: 132 splits of 63 keys, no lanes; 4096 splits cap at 256.
        let (kw, splits) = decode_shape(llama8b(1, 8192));
        assert_eq!((kw, splits), (1, 132));
        let d = AttentionDims {
            max_splits: 8,
            ..llama8b(1, 8192)
        };
        // Splits capped at 8: 1024 keys each, so lanes (up to the cap) take them.
        assert_eq!(decode_shape(d), (8, 8));
        // hd 256 kernels have at most 4 lanes.
        let d = AttentionDims { head_dim: 256, ..d };
        assert_eq!(decode_shape(d), (4, 8));
        // Tiny capacity: never more lanes than 32-key groups.
        assert_eq!(decode_shape(llama8b(16, 64)).0, 2);
    }

    #[test]
    fn overrides_parse_or_name_the_problem() {
        // The syntax is the dispatch policy's, the bounds the head size's.
        let shape = |v: &str, head_dim: usize| -> std::result::Result<(usize, usize), String> {
            let p = format!("attention_shape={v}").parse::<DispatchPolicy>()?;
            check_override(p.attention_shape.unwrap(), head_dim).map_err(|e| e.to_string())
        };
        assert_eq!(shape("2:8", 128).unwrap(), (2, 8));
        assert_eq!(shape(" 8 : 1 ", 64).unwrap(), (8, 1));
        for bad in ["", "8", "3:2", "16:1", "2:0", "a:b", "2:-1"] {
            let e = shape(bad, 128).unwrap_err();
            assert!(e.contains("attention_shape"), "{bad}: {e}");
        }
        assert!(shape("8:1", 256).is_err());
        assert!(shape("4:1", 256).is_ok());
    }

    #[test]
    fn key_lane_kernels_exist_for_supported_head_sizes() {
        for hd in [64, 128, 256] {
            assert!(key_lane_kernel(hd).is_ok());
        }
        assert!(key_lane_kernel(96).is_err());
    }
}
