//! CI gate: compares per-bucket per-step distributions of a baseline and a current trace
//! with a bootstrap confidence interval on the median difference, a minimum effect size and
//! a noise floor from the baseline's own step-to-step spread, plus structural checks.

use serde::{Deserialize, Serialize};

use crate::analysis::Report;
use crate::bucket::Bucket;
use crate::diff::diff;

/// Version of the JSON gate schema.
pub const GATE_SCHEMA_VERSION: u32 = 1;

/// Gate policy (`--policy gate.toml`); every field has a default.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Smallest relative change of a bucket's median ms/step that counts, e.g. 0.03 = 3%.
    pub min_effect: f64,
    /// Confidence level of the bootstrap interval.
    pub confidence: f64,
    pub bootstrap_resamples: usize,
    /// Seed of the bootstrap, so a verdict is reproducible.
    pub seed: u64,
    /// Buckets below this share of the baseline's busy time are reported but never fail.
    pub min_share: f64,
    /// Flag more kernels per step than the baseline by more than this.
    pub max_extra_kernels_per_step: f64,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            min_effect: 0.03,
            confidence: 0.95,
            bootstrap_resamples: 1000,
            seed: 0x5eed,
            min_share: 0.005,
            max_extra_kernels_per_step: 0.5,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Regression,
    Improvement,
    Inconclusive,
}

#[derive(Debug, Clone, Serialize)]
pub struct BucketVerdict {
    pub bucket: Bucket,
    pub verdict: Verdict,
    pub baseline_median_ms: f64,
    pub current_median_ms: f64,
    /// (current - baseline) / baseline median.
    pub rel_change: f64,
    /// Bootstrap CI of the relative median difference.
    pub ci_low: f64,
    pub ci_high: f64,
    /// The effect threshold used: max(min_effect, baseline noise floor).
    pub threshold: f64,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct StructuralCheck {
    pub check: String,
    pub failed: bool,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    pub schema_version: u32,
    pub baseline: String,
    pub current: String,
    pub policy: Policy,
    pub buckets: Vec<BucketVerdict>,
    pub structural: Vec<StructuralCheck>,
    /// Regression when any bucket regressed or any structural check failed.
    pub verdict: Verdict,
}

/// xorshift64*: a small deterministic generator for the bootstrap.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    }
}

/// Bootstrap CI of `median(y) - median(x)` relative to `median(x)`, and the relative
/// half-width of the CI of `median(x)` alone (the baseline's noise floor).
pub fn bootstrap(x: &[f64], y: &[f64], p: &Policy) -> (f64, f64, f64) {
    let mx = median(&mut x.to_vec());
    if x.is_empty() || y.is_empty() || mx <= 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let mut rng = Rng(p.seed | 1);
    let mut diffs = Vec::with_capacity(p.bootstrap_resamples);
    let mut base = Vec::with_capacity(p.bootstrap_resamples);
    let mut bx = vec![0.0; x.len()];
    let mut by = vec![0.0; y.len()];
    for _ in 0..p.bootstrap_resamples.max(10) {
        for v in bx.iter_mut() {
            *v = x[rng.below(x.len())];
        }
        for v in by.iter_mut() {
            *v = y[rng.below(y.len())];
        }
        let (a, b) = (median(&mut bx), median(&mut by));
        diffs.push((b - a) / mx);
        base.push((a - mx) / mx);
    }
    let alpha = (1.0 - p.confidence.clamp(0.5, 0.999)) / 2.0;
    let q = |v: &mut Vec<f64>, f: f64| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[((v.len() - 1) as f64 * f).round() as usize]
    };
    let lo = q(&mut diffs, alpha);
    let hi = q(&mut diffs, 1.0 - alpha);
    let noise = (q(&mut base, 1.0 - alpha) - q(&mut base, alpha)) / 2.0;
    (lo, hi, noise)
}

/// Judges one bucket's per-step samples.
pub fn judge(bucket: Bucket, x: &[f64], y: &[f64], share: f64, p: &Policy) -> BucketVerdict {
    let mx = median(&mut x.to_vec());
    let my = median(&mut y.to_vec());
    let rel = if mx > 0.0 {
        (my - mx) / mx
    } else if my > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let (lo, hi, noise) = bootstrap(x, y, p);
    let threshold = p.min_effect.max(noise);
    let (verdict, reason) = if x.is_empty() || y.is_empty() {
        (Verdict::Inconclusive, "no steps on one side".to_owned())
    } else if mx <= 0.0 {
        if my > 0.0 {
            (
                Verdict::Regression,
                "bucket appears in the current trace".to_owned(),
            )
        } else {
            (Verdict::Pass, "absent in both".to_owned())
        }
    } else if share < p.min_share {
        (
            Verdict::Pass,
            format!(
                "{:.2}% of baseline busy time, below the policy's floor",
                100.0 * share
            ),
        )
    } else if lo > 0.0 && rel > threshold {
        (
            Verdict::Regression,
            format!(
                "median +{:.1}% (CI {:+.1}%..{:+.1}%) exceeds {:.1}%",
                100.0 * rel,
                100.0 * lo,
                100.0 * hi,
                100.0 * threshold
            ),
        )
    } else if hi < 0.0 && rel < -threshold {
        (
            Verdict::Improvement,
            format!(
                "median {:.1}% (CI {:+.1}%..{:+.1}%) beyond -{:.1}%",
                100.0 * rel,
                100.0 * lo,
                100.0 * hi,
                100.0 * threshold
            ),
        )
    } else if lo >= -threshold && hi <= threshold {
        (
            Verdict::Pass,
            format!(
                "CI {:+.1}%..{:+.1}% within ±{:.1}%",
                100.0 * lo,
                100.0 * hi,
                100.0 * threshold
            ),
        )
    } else if rel.abs() <= threshold && (lo <= 0.0 && hi >= 0.0) {
        (
            Verdict::Pass,
            format!(
                "median {:+.1}% within ±{:.1}%, CI {:+.1}%..{:+.1}% includes 0",
                100.0 * rel,
                100.0 * threshold,
                100.0 * lo,
                100.0 * hi
            ),
        )
    } else {
        (
            Verdict::Inconclusive,
            format!(
                "median {:+.1}%, CI {:+.1}%..{:+.1}% straddles the {:.1}% threshold",
                100.0 * rel,
                100.0 * lo,
                100.0 * hi,
                100.0 * threshold
            ),
        )
    };
    BucketVerdict {
        bucket,
        verdict,
        baseline_median_ms: mx,
        current_median_ms: my,
        rel_change: rel,
        ci_low: lo,
        ci_high: hi,
        threshold,
        reason,
    }
}

/// Runs the gate.
pub fn gate(baseline: &Report, current: &Report, p: &Policy) -> GateReport {
    let busy: f64 = baseline.buckets.iter().map(|b| b.total_ms).sum();
    let mut buckets = Vec::new();
    for bk in Bucket::ALL {
        let x = baseline.buckets.iter().find(|b| b.bucket == bk);
        let y = current.buckets.iter().find(|b| b.bucket == bk);
        let (xs, ys): (&[f64], &[f64]) = (
            x.map(|b| b.per_step_ms.as_slice()).unwrap_or(&[]),
            y.map(|b| b.per_step_ms.as_slice()).unwrap_or(&[]),
        );
        let present = |s: &[f64]| s.iter().any(|&v| v > 0.0);
        if !present(xs) && !present(ys) {
            continue;
        }
        let share = if busy > 0.0 {
            x.map(|b| b.total_ms).unwrap_or(0.0) / busy
        } else {
            0.0
        };
        let xs_or_zero: Vec<f64> = if xs.is_empty() {
            vec![0.0; ys.len()]
        } else {
            xs.to_vec()
        };
        buckets.push(judge(
            bk,
            &xs_or_zero,
            ys,
            if present(xs) { share } else { 1.0 },
            p,
        ));
    }
    let d = diff(current, baseline, 5);
    let st = &d.structural;
    let structural = vec![
        StructuralCheck {
            check: "kernels per step".into(),
            failed: st.a_kernels_per_step - st.b_kernels_per_step > p.max_extra_kernels_per_step,
            detail: format!(
                "{:.1} vs baseline {:.1}",
                st.a_kernels_per_step, st.b_kernels_per_step
            ),
        },
        StructuralCheck {
            check: "new copies per step".into(),
            failed: st.extra_copies_per_step > 0.5,
            detail: format!("{:+.1} copy calls per step", st.extra_copies_per_step),
        },
        StructuralCheck {
            check: "new gathers per step".into(),
            failed: st.extra_gathers_per_step > 0.5,
            detail: format!("{:+.1} gather calls per step", st.extra_gathers_per_step),
        },
        StructuralCheck {
            check: "CUDA graph replays".into(),
            failed: d.b.graph_kernels > 0 && d.a.graph_kernels == 0,
            detail: st.graph_replays.clone(),
        },
    ];
    let failed = buckets.iter().any(|b| b.verdict == Verdict::Regression)
        || structural.iter().any(|s| s.failed);
    GateReport {
        schema_version: GATE_SCHEMA_VERSION,
        baseline: baseline.source.path.clone(),
        current: current.source.path.clone(),
        policy: p.clone(),
        buckets,
        structural,
        verdict: if failed {
            Verdict::Regression
        } else {
            Verdict::Pass
        },
    }
}

/// A baseline built from stored runs: each bucket's samples are the per-run medians of the
/// accepted runs (so the bootstrap sees run-to-run spread), calls per step their mean. Graph
/// replays are not stored, so that check takes the current trace's value.
pub fn baseline_from_history(
    current: &Report,
    runs: &[(crate::history::RunSummary, Vec<crate::history::RunBucket>)],
) -> Report {
    let mut base = current.clone();
    base.source.path = format!(
        "history: median of {} accepted runs ({})",
        runs.len(),
        runs.iter()
            .map(|(r, _)| r.id.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    base.steps.decode_steps = runs.len();
    let mut rows = Vec::new();
    for bk in Bucket::ALL {
        let vals: Vec<&crate::history::RunBucket> = runs
            .iter()
            .filter_map(|(_, b)| b.iter().find(|x| x.bucket == bk.as_str()))
            .collect();
        if vals.is_empty() {
            continue;
        }
        let per: Vec<f64> = vals.iter().filter_map(|v| v.ms_per_step_median).collect();
        let calls: Vec<f64> = vals.iter().filter_map(|v| v.calls_per_step).collect();
        let share = vals.iter().map(|v| v.share_of_busy_pct).sum::<f64>() / vals.len() as f64;
        let mean_calls =
            (!calls.is_empty()).then(|| calls.iter().sum::<f64>() / calls.len() as f64);
        rows.push(crate::analysis::BucketRow {
            bucket: bk,
            total_ms: share,
            ms_per_step: (!per.is_empty()).then(|| crate::analysis::stats::Summary::of(&per)),
            calls: 0,
            calls_per_step: mean_calls,
            share_of_busy_pct: share,
            share_of_step_pct: None,
            top: Vec::new(),
            per_step_ms: per,
            cost: None,
        });
    }
    base.buckets = rows;
    base
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn verdicts_on_known_shifts() {
        let p = Policy::default();
        let x = noisy(64, 1.0, 0.01, 1);
        assert_eq!(
            judge(Bucket::Gemv, &x, &noisy(64, 1.0, 0.01, 2), 0.5, &p).verdict,
            Verdict::Pass
        );
        assert_eq!(
            judge(Bucket::Gemv, &x, &noisy(64, 1.10, 0.01, 3), 0.5, &p).verdict,
            Verdict::Regression
        );
        assert_eq!(
            judge(Bucket::Gemv, &x, &noisy(64, 0.90, 0.01, 4), 0.5, &p).verdict,
            Verdict::Improvement
        );
        // A 10% shift inside 60% step-to-step noise with 4 steps cannot be called.
        let v = judge(
            Bucket::Gemv,
            &noisy(4, 1.0, 0.6, 5),
            &noisy(4, 1.1, 0.6, 6),
            0.5,
            &p,
        );
        assert_ne!(v.verdict, Verdict::Regression, "{v:?}");
    }
}
