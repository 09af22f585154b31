//! Small order statistics used throughout the report.

use serde::Serialize;

/// Linear-interpolated percentile (numpy's default) of an unsorted slice; NaN when empty.
pub fn percentile(values: &[f64], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    percentile_sorted(&v, p)
}

/// Percentile of an already sorted slice.
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

/// Distribution summary of one quantity.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct Summary {
    pub n: usize,
    pub mean: f64,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub p99: f64,
    pub min: f64,
    pub max: f64,
    /// Coefficient of variation (stddev / mean), 0 when the mean is 0.
    pub cv: f64,
}

impl Summary {
    pub fn of(values: &[f64]) -> Self {
        let n = values.len();
        if n == 0 {
            return Self {
                n,
                mean: 0.0,
                median: 0.0,
                p10: 0.0,
                p90: 0.0,
                p99: 0.0,
                min: 0.0,
                max: 0.0,
                cv: 0.0,
            };
        }
        let mut v = values.to_vec();
        v.sort_by(|a, b| a.total_cmp(b));
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        Self {
            n,
            mean,
            median: percentile_sorted(&v, 50.0),
            p10: percentile_sorted(&v, 10.0),
            p90: percentile_sorted(&v, 90.0),
            p99: percentile_sorted(&v, 99.0),
            min: v[0],
            max: v[n - 1],
            cv: if mean != 0.0 { var.sqrt() / mean } else { 0.0 },
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
}
