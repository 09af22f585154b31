//! The residual stream layer by layer: the relative error of each layer's hidden state
//! against the reference, where it first leaves the noise floor, its largest jump, and the
//! final gap split into a baseline shift and compounding.

use crate::dump::Dump;
use crate::error::{NumericsError, Result};

/// Rows of hidden state decoded per read.
const ROWS_PER_READ: usize = 64;
/// Without an identity pair, a layer has diverged once its relative error exceeds this.
pub const EXACT_THRESHOLD: f64 = 1e-6;
/// With one, once it exceeds this multiple of the identity pair's error at that layer (and
/// `EXACT_THRESHOLD`).
pub const FLOOR_FACTOR: f64 = 10.0;
/// The baseline shift is the error after this many layers (the first layers' share).
pub const BASELINE_LAYERS: usize = 2;

/// `‖h_other − h_reference‖₂ / ‖h_reference‖₂` of each layer over every position.
pub fn relative_errors(reference: &Dump, other: &Dump) -> Result<Vec<f64>> {
    if reference.hidden.len() != other.hidden.len() {
        return Err(NumericsError::mismatch(
            &reference.path,
            &other.path,
            format!(
                "{} and {} hidden layers",
                reference.hidden.len(),
                other.hidden.len()
            ),
        ));
    }
    let mut errors = Vec::with_capacity(reference.hidden.len());
    let (mut br, mut bo) = (Vec::new(), Vec::new());
    for (hr, ho) in reference.hidden.iter().zip(&other.hidden) {
        if hr.cols != ho.cols {
            return Err(NumericsError::mismatch(
                &reference.path,
                &other.path,
                format!("{} is {} wide against {}", hr.name, hr.cols, ho.cols),
            ));
        }
        let mut r = vec![0.0; ROWS_PER_READ * hr.cols];
        let mut o = vec![0.0; ROWS_PER_READ * hr.cols];
        let (mut diff, mut norm) = (0.0f64, 0.0f64);
        let mut at = 0;
        while at < hr.rows {
            let n = ROWS_PER_READ.min(hr.rows - at);
            reference.read_rows(hr, at, &mut br, &mut r[..n * hr.cols])?;
            other.read_rows(ho, at, &mut bo, &mut o[..n * hr.cols])?;
            for (&x, &y) in r[..n * hr.cols].iter().zip(&o[..n * hr.cols]) {
                diff += (y - x) * (y - x);
                norm += x * x;
            }
            at += n;
        }
        errors.push(if norm > 0.0 {
            (diff / norm).sqrt()
        } else {
            diff.sqrt()
        });
    }
    Ok(errors)
}

/// What the per-layer errors say.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LayerReport {
    /// Relative error per layer (layer N at index N).
    pub error: Vec<f64>,
    /// The identity pair's error per layer, when one was given.
    pub floor: Option<Vec<f64>>,
    /// The first layer whose error leaves the floor (`FLOOR_FACTOR` × the identity pair's
    /// error, at least `EXACT_THRESHOLD`; without an identity pair, `EXACT_THRESHOLD`).
    pub first_diverging: Option<usize>,
    /// The layer whose error grew most over the previous layer's (layer 0 over nothing).
    pub largest_jump: Option<Jump>,
    /// The final gap split: the error after the first `BASELINE_LAYERS` layers (a shift
    /// already there) and what the later layers added (compounding), as shares of the last
    /// layer's error.
    pub split: Option<GapSplit>,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Jump {
    pub layer: usize,
    pub from: f64,
    pub to: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct GapSplit {
    pub final_error: f64,
    pub baseline: f64,
    pub compounding: f64,
    pub baseline_pct: f64,
    pub compounding_pct: f64,
}

impl LayerReport {
    pub fn new(error: Vec<f64>, floor: Option<Vec<f64>>) -> Self {
        let threshold = |l: usize| {
            floor
                .as_ref()
                .and_then(|f| f.get(l))
                .map_or(EXACT_THRESHOLD, |&f| {
                    (FLOOR_FACTOR * f).max(EXACT_THRESHOLD)
                })
        };
        let first_diverging = error
            .iter()
            .enumerate()
            .find(|&(l, &e)| e > threshold(l))
            .map(|(l, _)| l);
        let largest_jump = error
            .iter()
            .enumerate()
            .map(|(l, &to)| Jump {
                layer: l,
                from: if l == 0 { 0.0 } else { error[l - 1] },
                to,
            })
            .max_by(|a, b| (a.to - a.from).total_cmp(&(b.to - b.from)))
            .filter(|j| j.to > j.from);
        let split = error.last().filter(|&&e| e > 0.0).map(|&final_error| {
            let baseline = error[BASELINE_LAYERS.min(error.len()) - 1].min(final_error);
            let compounding = final_error - baseline;
            GapSplit {
                final_error,
                baseline,
                compounding,
                baseline_pct: 100.0 * baseline / final_error,
                compounding_pct: 100.0 * compounding / final_error,
            }
        });
        Self {
            error,
            floor,
            first_diverging,
            largest_jump,
            split,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fault_at_layer_two_is_the_first_to_leave_the_floor() {
        let r = LayerReport::new(vec![0.0, 0.0, 0.02, 0.03], Some(vec![0.0; 4]));
        assert_eq!(r.first_diverging, Some(2));
        assert_eq!(r.largest_jump.map(|j| j.layer), Some(2));
        let s = r.split.expect("a gap");
        assert_eq!((s.baseline, s.compounding), (0.0, 0.03));
    }

    #[test]
    fn a_floor_raises_the_threshold() {
        let r = LayerReport::new(vec![0.001, 0.002, 0.05], Some(vec![0.001, 0.001, 0.001]));
        assert_eq!(r.first_diverging, Some(2));
        let r = LayerReport::new(vec![0.001, 0.002, 0.05], None);
        assert_eq!(r.first_diverging, Some(0));
        let s = r.split.expect("a gap");
        assert!((s.baseline_pct - 4.0).abs() < 1e-12 && (s.compounding_pct - 96.0).abs() < 1e-12);
    }
}
