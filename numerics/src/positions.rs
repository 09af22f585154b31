//! Per-position figures of one dump against the reference: KL(reference ‖ other), top-1
//! agreement and the next token's log-probability under each, from logits streamed a few
//! rows at a time on a few threads.

use crate::dump::Dump;
use crate::error::{NumericsError, Result};

/// Rows decoded per read (a 128k-vocabulary float32 row is 512 KiB).
const ROWS_PER_READ: usize = 4;

/// One position of one passage.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct PositionRow {
    pub passage: u32,
    pub position: u32,
    /// KL(reference ‖ other) of the next-token distributions, nats.
    pub kl: f64,
    /// Arg-max token of each (the first on ties).
    pub top1_reference: u32,
    pub top1_other: u32,
    /// The teacher-forced next token and its log-probability under each; `None` at a
    /// passage's last position.
    pub next_token: Option<i64>,
    pub logp_reference: Option<f64>,
    pub logp_other: Option<f64>,
}

impl PositionRow {
    pub fn agrees(&self) -> bool {
        self.top1_reference == self.top1_other
    }

    /// |Δ log p| of the next token.
    pub fn dlogp(&self) -> Option<f64> {
        Some((self.logp_reference? - self.logp_other?).abs())
    }
}

/// Figures of one pair of logit rows.
fn row(r: &[f64], o: &[f64], next: Option<usize>) -> (f64, usize, usize, Option<(f64, f64)>) {
    let argmax = |x: &[f64]| {
        let mut best = 0;
        for (i, &v) in x.iter().enumerate() {
            if v > x[best] {
                best = i;
            }
        }
        best
    };
    let (ar, ao) = (argmax(r), argmax(o));
    let (mr, mo) = (r[ar], o[ao]);
    // KL = Σ p_r (lr − lo) = (Σ e_r (r − o)) / s_r − (lse_r − lse_o), with e_r = exp(r − m_r),
    // s_r = Σ e_r: one exponential per element and side.
    let (mut sr, mut so, mut cross) = (0.0f64, 0.0f64, 0.0f64);
    for (&x, &y) in r.iter().zip(o) {
        let e = (x - mr).exp();
        sr += e;
        so += (y - mo).exp();
        cross += e * (x - y);
    }
    let (lse_r, lse_o) = (mr + sr.ln(), mo + so.ln());
    let kl = (cross / sr - (lse_r - lse_o)).max(0.0);
    let logp = next.map(|n| (r[n] - lse_r, o[n] - lse_o));
    (kl, ar, ao, logp)
}

/// Every position of `other` against `reference` (same tokens and vocabulary), on `threads`
/// threads; memory is `threads × ROWS_PER_READ` rows of each.
pub fn compare_positions(
    reference: &Dump,
    other: &Dump,
    threads: usize,
) -> Result<Vec<PositionRow>> {
    check_pair(reference, other)?;
    let rows = reference.logits.rows;
    let vocab = reference.logits.cols;
    let threads = threads.clamp(1, rows);
    let chunk = rows.div_ceil(threads);
    let work = |lo: usize, hi: usize| -> Result<Vec<PositionRow>> {
        let (mut br, mut bo) = (Vec::new(), Vec::new());
        let mut r = vec![0.0; ROWS_PER_READ * vocab];
        let mut o = vec![0.0; ROWS_PER_READ * vocab];
        let mut out = Vec::with_capacity(hi - lo);
        let mut at = lo;
        while at < hi {
            let n = ROWS_PER_READ.min(hi - at);
            reference.read_rows(&reference.logits, at, &mut br, &mut r[..n * vocab])?;
            other.read_rows(&other.logits, at, &mut bo, &mut o[..n * vocab])?;
            for k in 0..n {
                let i = at + k;
                let (passage, position) = (i / reference.positions, i % reference.positions);
                let next = (position + 1 < reference.positions)
                    .then(|| reference.tokens[i + 1])
                    .filter(|&t| t >= 0 && (t as usize) < vocab);
                let span = k * vocab..(k + 1) * vocab;
                let (kl, ar, ao, logp) = row(&r[span.clone()], &o[span], next.map(|t| t as usize));
                out.push(PositionRow {
                    passage: passage as u32,
                    position: position as u32,
                    kl,
                    top1_reference: ar as u32,
                    top1_other: ao as u32,
                    next_token: next,
                    logp_reference: logp.map(|l| l.0),
                    logp_other: logp.map(|l| l.1),
                });
            }
            at += n;
        }
        Ok(out)
    };
    let parts: Vec<Result<Vec<PositionRow>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (lo, hi) = (t * chunk, ((t + 1) * chunk).min(rows));
                s.spawn(move || work(lo, hi))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut all = Vec::with_capacity(rows);
    for p in parts {
        all.extend(p?);
    }
    Ok(all)
}

/// Two dumps are comparable when they were fed the same tokens and share the vocabulary.
pub fn check_pair(a: &Dump, b: &Dump) -> Result<()> {
    let why = if (a.passages, a.positions) != (b.passages, b.positions) {
        Some(format!(
            "{} passages of {} tokens against {} of {}",
            a.passages, a.positions, b.passages, b.positions
        ))
    } else if let Some(i) = a.tokens.iter().zip(&b.tokens).position(|(x, y)| x != y) {
        Some(format!(
            "different tokens: passage {}, position {}: {} against {}",
            i / a.positions,
            i % a.positions,
            a.tokens[i],
            b.tokens[i]
        ))
    } else if a.logits.cols != b.logits.cols {
        Some(format!(
            "vocabularies of {} and {} entries",
            a.logits.cols, b.logits.cols
        ))
    } else {
        None
    };
    match why {
        Some(w) => Err(NumericsError::mismatch(&a.path, &b.path, w)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kl_of_a_shifted_copy_is_zero_and_of_a_known_pair_matches() {
        let r = [1.0, 2.0, 3.0];
        let o = [11.0, 12.0, 13.0];
        let (kl, ar, ao, lp) = row(&r, &o, Some(0));
        assert!(kl.abs() < 1e-15);
        assert_eq!((ar, ao), (2, 2));
        let (a, b) = lp.expect("a next token");
        assert!((a - b).abs() < 1e-12);
        // p = (0.5, 0.5), q = (0.25, 0.75): KL = 0.5 ln 2 + 0.5 ln(2/3).
        let (kl, ..) = row(&[0.0, 0.0], &[0.0, 3f64.ln()], None);
        let want = 0.5 * 2f64.ln() + 0.5 * (2.0f64 / 3.0).ln();
        assert!((kl - want).abs() < 1e-15, "{kl} {want}");
    }
}
