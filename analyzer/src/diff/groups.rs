//! Equivalence groups: buckets that different engines file the same work under. One engine
//! runs a batch-1 linear layer as a GEMV, another as a dense GEMM; one fuses the norm into
//! the next kernel, another runs it as three pointwise kernels. Bucket-to-bucket what-ifs
//! across such a split promise gains that do not exist, so the diff compares these buckets
//! as one group whenever the two traces file them differently.

use serde::Serialize;

use crate::bucket::Bucket;

/// A set of buckets that can hold the same work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Group {
    pub name: &'static str,
    pub buckets: &'static [Bucket],
    pub what: &'static str,
}

/// The multi-bucket groups; every other bucket is a group of its own.
pub const GROUPS: [Group; 2] = [
    Group {
        name: "linear layers",
        buckets: &[Bucket::Gemv, Bucket::GemmQuant, Bucket::GemmDense],
        what: "GEMV, quantized GEMM and dense GEMM kernels run the same linear layers; engines \
               pick between them by batch size and weight format",
    },
    Group {
        name: "pointwise ops",
        buckets: &[
            Bucket::Norm,
            Bucket::Rope,
            Bucket::ActElementwise,
            Bucket::Quantize,
        ],
        what: "norms, rope, activations and activation quantization are fused into each other \
               differently by each engine (a quantize kernel of one engine is another's norm or \
               activation epilogue)",
    },
];

/// Calls-per-step ratio between the two sides beyond which a bucket counts as filed
/// differently (the same work in the same bucket keeps its kernel count within 2x).
pub const MAX_CALLS_RATIO: f64 = 2.0;

/// How the diff treated one multi-bucket group.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Grouping {
    pub group: &'static str,
    pub buckets: Vec<Bucket>,
    /// Whether what-ifs use the group as one lever (the sides file its work differently).
    pub grouped: bool,
    /// Why, in words: which bucket differs and how.
    pub why: String,
}

/// Kernels-per-step ratio beyond which two traces of one engine run different models.
pub const MODEL_KERNELS_RATIO: f64 = 1.5;

/// What the two sides are: one engine (the same step markers and input format) with their
/// kernels per step, or engines that may differ.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sides {
    /// One engine; A's and B's kernels per step.
    SameEngine(f64, f64),
    Engines,
}

impl Sides {
    /// Why the same work is filed differently: different engines fuse differently; one
    /// engine whose kernel counts differ this much runs different models.
    fn cause(self, what: &str) -> String {
        match self {
            Self::SameEngine(a, b)
                if a > 0.0 && b > 0.0 && (a / b > MODEL_KERNELS_RATIO || b / a > MODEL_KERNELS_RATIO) =>
            {
                format!(
                    "A and B run different models (kernels per step {a:.0} vs {b:.0}), so their work is not the same"
                )
            }
            Self::SameEngine(..) => {
                "the two runs of one engine file this work differently (another setting or kernel choice)"
                    .to_owned()
            }
            Self::Engines => what.to_owned(),
        }
    }
}

/// Decides, for each multi-bucket group, whether A and B file its work alike. `calls` gives
/// (A, B) calls per step of a bucket.
pub fn decide(calls: impl Fn(Bucket) -> (f64, f64)) -> Vec<Grouping> {
    decide_for(Sides::Engines, calls)
}

/// [`decide`], saying why in terms of what the two sides are.
pub fn decide_for(sides: Sides, calls: impl Fn(Bucket) -> (f64, f64)) -> Vec<Grouping> {
    GROUPS
        .iter()
        .filter_map(|g| {
            let present: Vec<(Bucket, f64, f64)> = g
                .buckets
                .iter()
                .map(|&b| {
                    let (a, bb) = calls(b);
                    (b, a, bb)
                })
                .filter(|&(_, a, b)| a > 0.0 || b > 0.0)
                .collect();
            if present.is_empty() {
                return None;
            }
            let differs = present.iter().find(|&&(_, a, b)| {
                a == 0.0 || b == 0.0 || a / b > MAX_CALLS_RATIO || b / a > MAX_CALLS_RATIO
            });
            let (grouped, why) = match differs {
                Some(&(bk, a, b)) => (
                    true,
                    format!(
                        "{bk} has {a:.1} calls/step in A and {b:.1} in B: {}",
                        sides.cause(g.what)
                    ),
                ),
                None => (
                    false,
                    "both traces file this work in the same buckets with similar call counts"
                        .to_owned(),
                ),
            };
            Some(Grouping {
                group: g.name,
                buckets: g.buckets.to_vec(),
                grouped,
                why,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemv_against_gemm_is_grouped_and_same_filing_is_not() {
        // A runs its linears as GEMV, B as dense GEMM.
        let g = decide(|b| match b {
            Bucket::Gemv => (224.0, 0.0),
            Bucket::GemmDense => (1.0, 224.0),
            _ => (0.0, 0.0),
        });
        assert_eq!(g.len(), 1);
        assert!(g[0].grouped && g[0].why.starts_with("gemv"), "{g:?}");
        let g = decide(|b| match b {
            Bucket::Gemv => (224.0, 220.0),
            Bucket::Norm => (65.0, 65.0),
            _ => (0.0, 0.0),
        });
        assert_eq!(g.len(), 2);
        assert!(g.iter().all(|x| !x.grouped), "{g:?}");
    }

    #[test]
    fn a_separate_quantize_kernel_groups_with_the_pointwise_ops() {
        // A quantizes activations in its own kernels (vLLM's scaled_fp8_quant), B fuses the
        // quantize into its norm (aiter's add_rmsnorm_quant): the same work, filed apart.
        let g = decide(|b| match b {
            Bucket::Norm => (64.0, 64.0),
            Bucket::Quantize => (64.0, 0.0),
            _ => (0.0, 0.0),
        });
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].group, "pointwise ops");
        assert!(g[0].buckets.contains(&Bucket::Quantize));
        assert!(g[0].grouped && g[0].why.starts_with("quantize"), "{g:?}");
    }
}
