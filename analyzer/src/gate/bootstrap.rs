//! One metric's judgement: a bootstrap confidence interval on the median difference, a
//! minimum effect size and a noise floor from the baseline's own spread.

use super::*;

/// xorshift64*: a small deterministic generator for the bootstrap.
pub(super) struct Rng(pub(super) u64);
impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// [`stats::median`], but 0 for an empty side (which [`judge`] calls inconclusive).
pub(super) fn median(v: &[f64]) -> f64 {
    if v.is_empty() { 0.0 } else { stats::median(v) }
}

/// Bootstrap CI of `median(y) - median(x)` relative to `median(x)`, and the relative
/// half-width of the CI of `median(x)` alone (the baseline's noise floor).
pub fn bootstrap(x: &[f64], y: &[f64], p: &Policy) -> (f64, f64, f64) {
    let mx = median(x);
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
        let (a, b) = (median(&bx), median(&by));
        diffs.push((b - a) / mx);
        base.push((a - mx) / mx);
    }
    let alpha = (1.0 - p.confidence.clamp(0.5, 0.999)) / 2.0;
    let q = |v: &mut Vec<f64>, f: f64| {
        v.sort_by(f64::total_cmp);
        percentile_nearest_sorted(v, 100.0 * f)
    };
    // A duration cannot fall by more than all of it: with non-negative samples the change
    // is at least -100%, whatever the resampled baseline median was.
    let floor = if x.iter().chain(y).all(|&v| v >= 0.0) {
        -1.0
    } else {
        f64::NEG_INFINITY
    };
    let lo = q(&mut diffs, alpha).max(floor);
    let hi = q(&mut diffs, 1.0 - alpha).max(floor);
    let noise = (q(&mut base, 1.0 - alpha) - q(&mut base, alpha)) / 2.0;
    (lo, hi, noise)
}

/// Judges one metric's per-step samples. `share` is the metric's weight in the baseline
/// (share of busy time for a bucket, of the step for an idle metric): below the policy's
/// `min_share` a metric never fails.
pub fn judge(x: &[f64], y: &[f64], share: f64, p: &Policy) -> Judgement {
    let (mx, my) = (median(x), median(y));
    let rel = if mx > 0.0 {
        (my - mx) / mx
    } else if my > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let (lo, hi, noise) = bootstrap(x, y, p);
    let threshold = p.min_effect.max(noise);
    let present = |v: &[f64]| v.iter().any(|&t| t > 0.0);
    let (verdict, reason) = if x.is_empty() || y.is_empty() {
        (Verdict::Inconclusive, "no samples on one side".to_owned())
    } else if !x.iter().chain(y).all(|v| v.is_finite()) {
        (
            Verdict::Inconclusive,
            "a sample is not a number (a broken trace or history)".to_owned(),
        )
    } else if !present(x) {
        if present(y) {
            (
                Verdict::Regression,
                "appears in the current trace".to_owned(),
            )
        } else {
            (Verdict::Pass, "absent in both".to_owned())
        }
    } else if !present(y) {
        if share < p.min_share {
            (
                Verdict::Pass,
                format!(
                    "absent from the current trace ({:.2}% of the baseline, below the policy's floor)",
                    100.0 * share
                ),
            )
        } else {
            (
                Verdict::Improvement,
                format!(
                    "absent from the current trace (was {:.2}% of the baseline)",
                    100.0 * share
                ),
            )
        }
    } else if share < p.min_share {
        (
            Verdict::Pass,
            format!(
                "{:.2}% of the baseline, below the policy's floor",
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
    } else if noise > p.max_noise && rel.abs() > p.min_effect {
        (
            Verdict::Inconclusive,
            format!(
                "median {:+.1}% (CI {:+.1}%..{:+.1}%), but the baseline's own spread is ±{:.1}%, wider than the policy's max_noise ±{:.1}%: it cannot judge this change (more steps, or a quieter baseline)",
                100.0 * rel,
                100.0 * lo,
                100.0 * hi,
                100.0 * noise,
                100.0 * p.max_noise
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
    let too_noisy =
        verdict == Verdict::Inconclusive && noise > p.max_noise && rel.abs() > p.min_effect;
    Judgement {
        too_noisy,
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
