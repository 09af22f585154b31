//! The roofline's wording, the CLI's (`gapscope roofline`): a measured time is "X× the
//! floor" (measured ÷ floor) with its efficiency (floor ÷ measured, the analyzer's
//! `pct_of_floor`); never "% of floor", which reads the wrong way round. The words against
//! a floor, and where the context and the tensor-parallel degree come from, are
//! `gapscope_analyzer::text`'s, which the CLI prints too.

use gapscope_analyzer::roofline::report::{ContextSource, TpSource};

/// `TPOT median 73.465 ms = 23.46× the floor (efficiency 4.3%)` and `23.46× the floor`:
/// the CLI's words, from the one copy in the analyzer.
pub use gapscope_analyzer::text::{floor_headline, times_floor};

/// A bucket's label: `attention 3.4× floor`, or `norm (no floor)`.
pub fn bucket_label(bucket: &str, ms: f64, floor_ms: f64) -> String {
    gapscope_analyzer::text::bucket_vs_floor(bucket, ms, floor_ms)
}

/// The context the floors are taken at, and where it comes from.
pub fn context_label(ctx: u64, source: ContextSource) -> String {
    let from = gapscope_analyzer::text::context_from(source, "given");
    format!("context {ctx} tokens ({from})")
}

/// The tensor-parallel degree the floors are one rank's of, and where it comes from:
/// `tensor parallel 2 (from the trace's world size; per rank: 1/2 of the weights, 4 of 8 KV
/// heads)`, or `1 GPU (assumed; pass --tp)`.
pub fn tp_label(tp: u64, source: TpSource, kv_per_rank: u64, kv_heads: u64) -> String {
    let from = gapscope_analyzer::text::tp_from(source, "given");
    if tp == 1 {
        format!("1 GPU ({from})")
    } else {
        format!(
            "tensor parallel {tp} ({from}; per rank: 1/{tp} of the weights, {kv_per_rank} of {kv_heads} KV heads)"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efficiency_reads_as_floor_over_measured_with_its_name() {
        // A 73.465 ms step over a 3.131 ms floor: 23.46 times the floor, 4.3% efficient;
        // the old view printed "= 4% of floor".
        let h = floor_headline(73.465, 3.131, 100.0 * 3.131 / 73.465);
        assert_eq!(
            h,
            "TPOT median 73.465 ms = 23.46× the floor (efficiency 4.3%)"
        );
        assert!(!h.contains("% of floor"));
        assert_eq!(bucket_label("attention", 2.0, 0.5), "attention 4.0× floor");
        assert_eq!(bucket_label("norm", 2.0, 0.0), "norm (no floor)");
        assert_eq!(
            context_label(4096, ContextSource::Assumed),
            "context 4096 tokens (assumed; pass --ctx)"
        );
        assert_eq!(
            tp_label(2, TpSource::TraceWorldSize, 4, 8),
            "tensor parallel 2 (from the trace's world size; per rank: 1/2 of the weights, 4 of 8 KV heads)"
        );
        assert_eq!(
            tp_label(1, TpSource::Assumed, 8, 8),
            "1 GPU (assumed; pass --tp)"
        );
    }
}
