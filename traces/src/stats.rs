//! Summary statistics, defined once for every gapscope crate: the analyzer's reports, the
//! gate, and the engine's bench all print the same median, percentiles and CV.
//!
//! - Percentiles interpolate linearly between order statistics (numpy's default), so the
//!   median of an even count is the mean of the two middles.
//! - CV is the sample standard deviation (n − 1) over the mean; 0 for fewer than two samples
//!   or a zero mean.
//! - Empty input: the percentile functions return NaN, [`Summary::of`] returns all zeros.

use serde::Serialize;

/// Linear-interpolated percentile (numpy's default) of an unsorted slice; NaN when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    percentile_sorted(&v, p)
}

/// [`percentile`] of an already sorted slice.
pub fn percentile_sorted(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0).clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

/// [`percentile`] of integer samples by selection instead of a sort: O(n), and it reorders
/// `v` (the kernel table takes p50 and p99 of 10M durations this way).
pub fn percentile_select(v: &mut [i64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = (p / 100.0).clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let (_, &mut a, rest) = v.select_nth_unstable(lo);
    if rank == lo as f64 || rest.is_empty() {
        return a as f64;
    }
    let b = *rest.iter().min().expect("not empty");
    a as f64 + (b - a) as f64 * (rank - lo as f64)
}

/// Nearest-rank percentile of a sorted slice: the element at `round((n − 1) · p / 100)`, no
/// interpolation (the gate's bootstrap takes its confidence bounds this way); NaN when empty.
pub fn percentile_nearest_sorted(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * (p / 100.0).clamp(0.0, 1.0)).round() as usize]
}

/// Median of an unsorted slice (the mean of the two middles of an even count); NaN when empty.
pub fn median(values: &[f64]) -> f64 {
    percentile(values, 50.0)
}

/// The upper median of integer samples, by selection (the upper middle of an even count, so
/// the result is always one of the samples); `None` when empty. Reorders `v`. Step detection
/// compares gaps and work against it.
pub fn upper_median<T: Ord + Copy>(v: &mut [T]) -> Option<T> {
    if v.is_empty() {
        return None;
    }
    let mid = v.len() / 2;
    Some(*v.select_nth_unstable(mid).1)
}

/// Arithmetic mean; 0 when empty.
pub fn mean(values: &[f64]) -> f64 {
    if values.is_empty() {
        0.0
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    }
}

/// Coefficient of variation: sample standard deviation (n − 1) over the mean; 0 for fewer
/// than two samples or a zero mean.
pub fn cv(values: &[f64]) -> f64 {
    let n = values.len();
    let m = mean(values);
    if n < 2 || m == 0.0 {
        return 0.0;
    }
    let var = values.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (n - 1) as f64;
    var.sqrt() / m
}

/// Distribution summary of one quantity; all zeros when there are no samples.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
    /// Coefficient of variation, see [`cv`].
    pub cv: f64,
}

impl Summary {
    pub fn of(values: &[f64]) -> Self {
        let n = values.len();
        if n == 0 {
            return Self::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        Self {
            n,
            mean: mean(&v),
            median: percentile_sorted(&v, 50.0),
            p10: percentile_sorted(&v, 10.0),
            p90: percentile_sorted(&v, 90.0),
            p99: percentile_sorted(&v, 99.0),
            min: v[0],
            max: v[n - 1],
            cv: cv(&v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_match_numpy() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 50.0), 2.5);
        assert!((percentile(&v, 10.0) - 1.3).abs() < 1e-12);
        assert_eq!(percentile(&v, 100.0), 4.0);
        assert!(percentile(&[], 50.0).is_nan());
        let s = Summary::of(&[2.0, 2.0, 2.0]);
        assert_eq!(s.cv, 0.0);
        assert_eq!(s.median, 2.0);
    }

    #[test]
    fn summary_hand_computed() {
        // The engine's bench figures: median of an even count, sample CV.
        let s = Summary::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 10.0, 4));
        // mean 4, sample sd sqrt((1+9+4+36)/3)
        assert!((s.cv - (50.0f64 / 3.0).sqrt() / 4.0).abs() < 1e-12);
        assert_eq!(Summary::of(&[]), Summary::default());
        assert_eq!(Summary::of(&[5.0]).cv, 0.0);
        assert_eq!(cv(&[0.0, 0.0]), 0.0);
    }

    #[test]
    fn medians_and_ranks() {
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
        assert_eq!(upper_median(&mut [4, 1, 3, 2]), Some(3));
        assert_eq!(upper_median(&mut [5, 1, 3]), Some(3));
        assert_eq!(upper_median::<i64>(&mut []), None);
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(percentile_nearest_sorted(&v, 10.0), 1.0);
        assert_eq!(percentile_nearest_sorted(&v, 90.0), 5.0);
        assert_eq!(percentile_nearest_sorted(&v, 50.0), 3.0);
        assert_eq!(mean(&[]), 0.0);
        let mut ints = [9i64, 1, 5, 3];
        assert_eq!(percentile_select(&mut ints, 50.0), 4.0);
    }
}
