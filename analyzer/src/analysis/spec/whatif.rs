//! Speculative decoding's what-if: step time and tokens per second at any draft length k
//! and acceptance per position, from the draft and verify costs one trace measured.
//!
//! The model:
//! - a step is k draft forwards and one verify forward of k + 1 rows per sequence:
//!   `step(k) = k * draft + verify`, where `draft` is the measured time per draft forward
//!   (the draft window: from the step's start to its verify forward's first kernel, over
//!   the forwards in it) and `verify` the rest of the step (the verify forward, sampling and
//!   the bookkeeping until the next step starts);
//! - the verify's cost does not depend on k: at a handful of rows per sequence a decode
//!   forward reads its weights once whatever the rows (memory-bound), so a plain decode
//!   step costs about `verify` too;
//! - candidate j is accepted with probability `p_j` when every earlier one was (the
//!   conditional rate at position j), so a step produces
//!   `1 + p_1 + p_1 p_2 + … + p_1 … p_k` tokens per sequence.
//!
//! Positions beyond those measured take the last measured conditional rate.

use serde::Serialize;

use super::{Cycle, SpecReport};
use gapscope_traces::Phase;

/// The costs one trace measured, in ms, and the acceptance it saw.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecCosts {
    /// Time per draft forward (mean over the steps with drafts).
    pub draft_ms: f64,
    /// The rest of the step: the verify forward and what follows it until the next step.
    pub verify_ms: f64,
    /// The same two as kernel time only (GPU idle left out): what the steps cost when
    /// nothing but the GPU's work remains, as when CUDA graphs replay them. A trace recorded
    /// eagerly (per-launch timing) of a run that replays graphs predicts that run this way.
    pub draft_busy_ms: f64,
    pub verify_busy_ms: f64,
    /// Draft forwards per step in the trace.
    pub k: usize,
    /// Measured acceptance at each position given every earlier one was accepted.
    pub conditional: Vec<f64>,
}

/// One setting's prediction.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecPrediction {
    pub k: usize,
    /// Conditional acceptance per position used (k of them).
    pub accept: Vec<f64>,
    pub step_ms: f64,
    pub tokens_per_step: f64,
    /// Tokens per second per sequence.
    pub tokens_per_s: f64,
    /// Against plain decode (one token per `verify_ms`).
    pub speedup: f64,
    /// The same from kernel time only (see [`SpecCosts::draft_busy_ms`]).
    pub busy_step_ms: f64,
    pub busy_tokens_per_s: f64,
}

/// The what-if of a trace: its costs, the predictions over k at the measured acceptance, the
/// best k, and per k the constant acceptance at which speculation only breaks even.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecWhatIf {
    pub costs: SpecCosts,
    /// Plain decode: one token per `verify_ms`.
    pub plain_step_ms: f64,
    pub plain_tokens_per_s: f64,
    pub by_k: Vec<SpecPrediction>,
    pub best_k: usize,
    /// `(k, rate)`: the constant conditional acceptance at which k drafts match plain decode.
    pub break_even: Vec<(usize, f64)>,
    /// Predictions at the settings asked for (`--spec-setting`).
    pub settings: Vec<SpecPrediction>,
}

/// A setting to predict: k drafts, each position's conditional acceptance (shorter lists
/// repeat their last rate).
#[derive(Debug, Clone, PartialEq)]
pub struct SpecSetting {
    pub k: usize,
    pub accept: Vec<f64>,
}

impl std::str::FromStr for SpecSetting {
    type Err = String;

    /// `K:P1,P2,...` (`4:0.8,0.6,0.4,0.2`), or `K` alone for the measured acceptance.
    fn from_str(s: &str) -> Result<Self, String> {
        let (k, rates) = s.split_once(':').unwrap_or((s, ""));
        let k: usize = k
            .trim()
            .parse()
            .map_err(|_| format!("{s:?}: expected K or K:P1,P2,… (k a whole number)"))?;
        if k == 0 || k > 64 {
            return Err(format!("{s:?}: k must be 1 to 64"));
        }
        let mut accept = Vec::new();
        for r in rates.split(',').filter(|r| !r.trim().is_empty()) {
            let p: f64 = r
                .trim()
                .parse()
                .map_err(|_| format!("{s:?}: {r:?} is not a rate"))?;
            if !(0.0..=1.0).contains(&p) {
                return Err(format!("{s:?}: rate {p} is outside 0 to 1"));
            }
            accept.push(p);
        }
        Ok(Self { k, accept })
    }
}

const MAX_K: usize = 8;

/// Conditional rates for k positions from `rates` (the last repeats; none: 0).
fn extend(rates: &[f64], k: usize) -> Vec<f64> {
    (0..k)
        .map(|j| rates.get(j).or(rates.last()).copied().unwrap_or(0.0))
        .collect()
}

fn tokens(accept: &[f64]) -> f64 {
    let mut run = 1.0;
    let mut sum = 1.0;
    for p in accept {
        run *= p;
        sum += run;
    }
    sum
}

impl SpecCosts {
    /// The costs the decode steps with known tokens measured; `None` without them or
    /// without a draft window.
    pub fn measure(cycles: &[Cycle], report: &SpecReport) -> Option<Self> {
        Self::measure_over(cycles, report, |c| c.tokens.is_some())
    }

    /// [`Self::measure`] over every decode step (tokens known only on average).
    pub fn measure_all(cycles: &[Cycle], report: &SpecReport) -> Option<Self> {
        Self::measure_over(cycles, report, |_| true)
    }

    fn measure_over(
        cycles: &[Cycle],
        report: &SpecReport,
        keep: impl Fn(&Cycle) -> bool,
    ) -> Option<Self> {
        let mut draft = (0.0, 0_u64);
        let mut verify = (0.0, 0_u64);
        let mut busy = (0.0, 0.0);
        for i in 0..cycles.len().saturating_sub(1) {
            let c = &cycles[i];
            if c.phase != Phase::Decode || !keep(c) {
                continue;
            }
            let next = cycles[i + 1].gpu_start_ns;
            // Markers that do not count the draft's forwards (vLLM): one per candidate, as a
            // draft model, an EAGLE or an MTP head proposes them.
            let forwards = match c.draft_forwards {
                0 if c.verify_start_ns > c.gpu_start_ns => c
                    .candidates()
                    .and_then(|k| u32::try_from(k).ok())
                    .unwrap_or(0),
                n => n,
            };
            if forwards > 0 {
                draft.0 += (c.verify_start_ns - c.gpu_start_ns) as f64 / 1e6;
                draft.1 += u64::from(forwards);
                busy.0 += c.draft_ns as f64 / 1e6;
            }
            verify.0 += (next - c.verify_start_ns) as f64 / 1e6;
            verify.1 += 1;
            busy.1 += c.verify_ns as f64 / 1e6;
        }
        // No what-if from steps whose verify takes no time: its rates would be infinite.
        if verify.1 == 0 || verify.0 <= 0.0 {
            return None;
        }
        let marginal: Vec<f64> = report.per_position.iter().map(|p| p.rate).collect();
        let conditional = marginal
            .iter()
            .enumerate()
            .map(|(j, &m)| match j {
                0 => m,
                _ if marginal[j - 1] > 0.0 => (m / marginal[j - 1]).min(1.0),
                _ => 0.0,
            })
            .collect();
        Some(Self {
            draft_ms: if draft.1 > 0 {
                draft.0 / draft.1 as f64
            } else {
                0.0
            },
            verify_ms: verify.0 / verify.1 as f64,
            draft_busy_ms: if draft.1 > 0 {
                busy.0 / draft.1 as f64
            } else {
                0.0
            },
            verify_busy_ms: busy.1 / verify.1 as f64,
            k: report.max_candidates,
            conditional,
        })
    }

    /// The prediction at k drafts with conditional acceptance `accept` per position.
    pub fn predict(&self, k: usize, accept: &[f64]) -> SpecPrediction {
        let accept = extend(accept, k);
        let step_ms = k as f64 * self.draft_ms + self.verify_ms;
        let busy_step_ms = k as f64 * self.draft_busy_ms + self.verify_busy_ms;
        let t = tokens(&accept);
        let tps = t / step_ms * 1e3;
        SpecPrediction {
            k,
            accept,
            step_ms,
            tokens_per_step: t,
            tokens_per_s: tps,
            speedup: tps / (1e3 / self.verify_ms),
            busy_step_ms,
            busy_tokens_per_s: if busy_step_ms > 0.0 {
                t / busy_step_ms * 1e3
            } else {
                0.0
            },
        }
    }

    /// The constant conditional acceptance at which k drafts produce tokens as fast as plain
    /// decode (bisection; 1.0 when even full acceptance does not pay).
    pub fn break_even(&self, k: usize) -> f64 {
        let gain = |a: f64| self.predict(k, &[a]).speedup - 1.0;
        if gain(1.0) < 0.0 {
            return 1.0;
        }
        let (mut lo, mut hi) = (0.0, 1.0);
        for _ in 0..60 {
            let mid = 0.5 * (lo + hi);
            if gain(mid) < 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        hi
    }

    /// The what-if over k = 1..8 at the measured acceptance, and the settings asked for.
    pub fn what_if(&self, settings: &[SpecSetting]) -> SpecWhatIf {
        let by_k: Vec<SpecPrediction> = (1..=MAX_K)
            .map(|k| self.predict(k, &self.conditional))
            .collect();
        let best_k = by_k
            .iter()
            .max_by(|a, b| a.tokens_per_s.total_cmp(&b.tokens_per_s))
            .map_or(0, |p| p.k);
        SpecWhatIf {
            plain_step_ms: self.verify_ms,
            plain_tokens_per_s: 1e3 / self.verify_ms,
            break_even: (1..=MAX_K).map(|k| (k, self.break_even(k))).collect(),
            by_k,
            best_k,
            settings: settings
                .iter()
                .map(|s| {
                    let accept = if s.accept.is_empty() {
                        &self.conditional
                    } else {
                        &s.accept
                    };
                    self.predict(s.k, accept)
                })
                .collect(),
            costs: self.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn costs() -> SpecCosts {
        SpecCosts {
            draft_ms: 1.0,
            verify_ms: 10.0,
            draft_busy_ms: 0.5,
            verify_busy_ms: 8.0,
            k: 4,
            conditional: vec![0.8, 0.5],
        }
    }

    #[test]
    fn tokens_follow_the_chain_of_acceptances() {
        let p = costs().predict(3, &[0.8, 0.5]);
        // 1 + 0.8 + 0.4 + 0.2 (the last rate repeats).
        assert!((p.tokens_per_step - 2.4).abs() < 1e-12);
        assert!((p.step_ms - 13.0).abs() < 1e-12);
        assert!((p.speedup - 2.4 / 13.0 * 10.0).abs() < 1e-12);
    }

    #[test]
    fn break_even_is_where_speculation_stops_paying() {
        let c = costs();
        let a = c.break_even(1);
        // 1 + a tokens per 11 ms against 1 per 10 ms: a = 0.1.
        assert!((a - 0.1).abs() < 1e-9, "{a}");
        // A draft as dear as the verify never pays at k = 1: 2 tokens per 21 ms.
        let never = SpecCosts {
            draft_ms: 11.0,
            ..costs()
        };
        assert_eq!(never.break_even(1), 1.0);
    }

    #[test]
    fn settings_parse() {
        let s: SpecSetting = "4:0.8,0.6".parse().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            s,
            SpecSetting {
                k: 4,
                accept: vec![0.8, 0.6]
            }
        );
        assert!("0".parse::<SpecSetting>().is_err());
        assert!("2:1.5".parse::<SpecSetting>().is_err());
        assert!("x".parse::<SpecSetting>().is_err());
    }
}
