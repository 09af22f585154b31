//! Median, spread and CV over repeats: every figure the bench prints comes with its spread.

#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    /// Coefficient of variation (stddev / mean), 0 for fewer than two samples.
    pub cv: f64,
    pub n: usize,
}

impl Spread {
    pub fn of(samples: &[f64]) -> Self {
        if samples.is_empty() {
            return Self::default();
        }
        let mut v = samples.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let mean = v.iter().sum::<f64>() / n as f64;
        let cv = if n > 1 && mean != 0.0 {
            (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt() / mean
        } else {
            0.0
        };
        Self {
            median,
            min: v[0],
            max: v[n - 1],
            cv,
            n,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed() {
        let s = Spread::of(&[3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 10.0, 4));
        // mean 4, sample sd sqrt((1+9+4+36)/3)
        assert!((s.cv - (50.0f64 / 3.0).sqrt() / 4.0).abs() < 1e-12);
        assert_eq!(Spread::of(&[]).n, 0);
        assert_eq!(Spread::of(&[5.0]).cv, 0.0);
    }
}
