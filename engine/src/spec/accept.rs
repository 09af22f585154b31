//! The acceptance rule: how many of a step's candidates stand.

use super::Acceptance;
use crate::rng;

/// The generator stream synthetic acceptance draws from.
const STREAM: u64 = 0x5bec;

/// Uniform in [0, 1) for (seed, step, position): a pure function, so a run's acceptance
/// pattern repeats exactly.
fn draw(seed: u64, step: u64, position: usize) -> f64 {
    let u = f64::from(rng::uniform(
        seed,
        STREAM,
        step.wrapping_mul(1 << 16) + position as u64,
    ));
    (u + 1.0) / 2.0
}

/// Candidates that stand in step `step`: with `Argmax`, while `candidates[j]` equals
/// `verify[j]` (the verify's greedy token after the pending token and the first j
/// candidates); with `Synthetic`, while each position's draw falls below its probability.
pub fn accepted(a: &Acceptance, step: u64, candidates: &[i32], verify: &[i32]) -> usize {
    match a {
        Acceptance::Argmax => candidates
            .iter()
            .zip(verify)
            .take_while(|(c, v)| c == v)
            .count(),
        Acceptance::Synthetic { per_position, seed } => (0..candidates.len())
            .take_while(|&j| {
                per_position
                    .get(j)
                    .is_some_and(|&p| draw(*seed, step, j) < p)
            })
            .count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argmax_stops_at_the_first_mismatch() {
        let a = Acceptance::Argmax;
        assert_eq!(accepted(&a, 0, &[5, 6, 7], &[5, 6, 9, 1]), 2);
        assert_eq!(accepted(&a, 0, &[5, 6, 7], &[4, 6, 7, 1]), 0);
        assert_eq!(accepted(&a, 0, &[5, 6, 7], &[5, 6, 7, 1]), 3);
    }

    #[test]
    fn synthetic_extremes_accept_all_or_none() {
        let all = Acceptance::Synthetic {
            per_position: vec![1.0; 3],
            seed: 1,
        };
        let none = Acceptance::Synthetic {
            per_position: vec![0.0, 1.0, 1.0],
            seed: 1,
        };
        for step in 0..100 {
            assert_eq!(accepted(&all, step, &[1, 2, 3], &[0; 4]), 3);
            assert_eq!(accepted(&none, step, &[1, 2, 3], &[1, 2, 3, 4]), 0);
        }
    }
}
