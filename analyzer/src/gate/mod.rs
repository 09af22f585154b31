//! CI gate: compares per-bucket per-step distributions of a baseline and a current trace
//! with a bootstrap confidence interval on the median difference, a minimum effect size and
//! a noise floor from the baseline's own step-to-step spread, plus structural checks.

use serde::{Deserialize, Serialize};

use crate::analysis::Report;
use crate::analysis::plausibility::PlausibilityProblem;
use crate::analysis::stats::{self, mean, percentile_nearest_sorted};
use crate::analysis::steps::StepSource;
use crate::bucket::Bucket;
use crate::diff::{DiffSide, NameTimes, diff};

mod bootstrap;
mod comparability;
mod judge;
mod policy;
mod runs;
mod verdict;

pub use bootstrap::{bootstrap, judge};
use comparability::*;
use judge::*;
pub use policy::*;
pub use runs::*;
pub use verdict::*;

/// Runs the gate.
pub fn gate(baseline: &Report, current: &Report, p: &Policy) -> GateReport {
    gate_with(baseline, current, p, GateOptions::default())
}

/// [`gate`] with options.
pub fn gate_with(baseline: &Report, current: &Report, p: &Policy, o: GateOptions) -> GateReport {
    gate_on(Base::Trace(baseline), current, p, o)
}

/// The gate of `current` against stored runs' figures ([`RunsBaseline`]) instead of a
/// trace: each bucket's and TPOT's samples are the runs' medians. What the runs do not store
/// (the idle split, CUDA graph replays, defects, batch size, step kind) is not judged.
pub fn gate_runs(
    baseline: &RunsBaseline,
    current: &Report,
    p: &Policy,
    o: GateOptions,
) -> GateReport {
    gate_on(Base::Runs(baseline), current, p, o)
}

#[cfg(test)]
mod tests {
    use super::bootstrap::Rng;
    use super::*;

    #[test]
    fn incomparability_clauses_read_as_before() {
        use crate::analysis::plausibility::PlausibilityCheck;
        let clauses = [
            Incomparability::GpuUnnamed {
                side: GateSide::Baseline,
                other: "NVIDIA H200".into(),
            },
            Incomparability::StepsCutDifferently {
                baseline: StepCut::Automatic,
                current: StepCut::By {
                    source: StepSource::NotFound,
                },
            },
            Incomparability::Implausible {
                side: GateSide::Current,
                problems: vec![PlausibilityProblem {
                    check: PlausibilityCheck::Coverage,
                    detail: "most work is outside them".into(),
                }],
            },
        ];
        let text: Vec<String> = clauses.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "the baseline names no GPU (current NVIDIA H200), so the GPU cannot be checked",
                "steps are cut differently (baseline: automatic periodicity detection; current: none: no step markers and no periodic kernel sequence)",
                "the current's steps look implausible: most work is outside them",
            ]
        );
    }

    fn noisy(n: usize, base: f64, cv: f64, seed: u64) -> Vec<f64> {
        let mut r = Rng(seed | 1);
        (0..n)
            .map(|_| {
                let u = (r.next() >> 11) as f64 / (1u64 << 53) as f64;
                base * (1.0 + cv * (2.0 * u - 1.0))
            })
            .collect()
    }

    #[test]
    fn intervals_of_durations_never_fall_below_minus_100_percent() {
        let p = Policy::default();
        // A skewed baseline (resampled medians up to 10x its median) against zeros.
        let x = [1.0, 1.0, 1.0, 10.0, 10.0, 10.0];
        let (lo, hi, _) = bootstrap(&x, &[0.0; 6], &p);
        assert!(lo >= -1.0 && hi >= lo, "{lo} {hi}");
        let j = judge(&x, &[f64::NAN, 1.0], 0.5, &p);
        assert_eq!(j.verdict, Verdict::Inconclusive, "{}", j.reason);
    }

    #[test]
    fn stored_runs_name_their_gpu_for_the_gpu_check() {
        let b = RunsBaseline {
            runs: vec![3, 2],
            gpus: vec!["NVIDIA H100 80GB HBM3".into(), String::new()],
            ..RunsBaseline::default()
        };
        assert_eq!(b.describe(), "history: median of 2 accepted runs (3, 2)");
        // The run that does not name the current GPU is the one compared.
        assert_eq!(b.gpu(Some("NVIDIA H100 80GB HBM3")), None);
        assert_eq!(
            b.gpu(Some("NVIDIA A100")).as_deref(),
            Some("NVIDIA H100 80GB HBM3")
        );
        assert_eq!(b.gpu(None).as_deref(), Some("NVIDIA H100 80GB HBM3"));
        let same = RunsBaseline {
            gpus: vec!["A; B".into(), "B".into()],
            ..b
        };
        assert_eq!(same.gpu(Some("B")).as_deref(), Some("B"));
    }

    #[test]
    fn verdicts_on_known_shifts() {
        let p = Policy::default();
        let x = noisy(64, 1.0, 0.01, 1);
        assert_eq!(
            judge(&x, &noisy(64, 1.0, 0.01, 2), 0.5, &p).verdict,
            Verdict::Pass
        );
        assert_eq!(
            judge(&x, &noisy(64, 1.10, 0.01, 3), 0.5, &p).verdict,
            Verdict::Regression
        );
        assert_eq!(
            judge(&x, &noisy(64, 0.90, 0.01, 4), 0.5, &p).verdict,
            Verdict::Improvement
        );
        // A 10% shift inside 60% step-to-step noise with 4 steps cannot be called.
        let v = judge(&noisy(4, 1.0, 0.6, 5), &noisy(4, 1.1, 0.6, 6), 0.5, &p);
        assert_ne!(v.verdict, Verdict::Regression, "{v:?}");
    }
}
