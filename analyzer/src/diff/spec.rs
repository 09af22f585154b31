//! A speculative run against a plain one: the tokens-per-second change split into the tokens
//! each step gained, the draft's cost and the verify's overhead over a plain step.
//!
//! With `P` the plain step, `T` the speculative step's tokens per sequence, `D` its draft
//! time and `V` its verify time (the rest of the step): speedup = `T * P / (D + V)`, which is
//! exactly the product of three factors: `T` (tokens gained), `P / (P + D)` (the draft's
//! cost) and `(P + D) / (D + V)` (the verify's overhead over a plain step: below 1 when the
//! verify with its bookkeeping costs more than a plain step). Rejected work is the part of
//! the draft and verify kernel time spent on candidates thrown away.

use serde::Serialize;

use super::SideName;
use crate::analysis::Report;

/// The speculative side's tokens-per-second change against the plain side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecDelta {
    pub speculative: SideName,
    /// The plain side's step (ms) and tokens per second per sequence.
    pub plain_step_ms: f64,
    pub plain_tokens_per_s: f64,
    /// The speculative side's step period, tokens per step and tokens per second.
    pub spec_step_ms: f64,
    pub tokens_per_step: f64,
    pub spec_tokens_per_s: f64,
    pub speedup: f64,
    /// Per step, ms: the draft's window, the verify's (the rest of the step), and how much
    /// more the verify costs than a plain step.
    pub draft_ms: f64,
    pub verify_ms: f64,
    pub verify_overhead_ms: f64,
    /// Kernel time spent on rejected candidates per step, ms (when known).
    pub rejected_ms: Option<f64>,
    /// The speedup's factors: tokens gained, the draft's cost, the verify's overhead.
    pub tokens_factor: f64,
    pub draft_factor: f64,
    pub verify_factor: f64,
}

/// The attribution when exactly one side decodes speculatively with known tokens.
pub fn spec_delta(a: &Report, b: &Report) -> Option<SpecDelta> {
    let (name, spec, plain) = match (&a.speculative, &b.speculative) {
        (Some(_), None) => (SideName::A, a, b),
        (None, Some(_)) => (SideName::B, b, a),
        _ => return None,
    };
    let s = spec.speculative.as_ref()?;
    let costs = &s.what_if.as_ref()?.costs;
    let tokens = s.tokens_per_step?;
    let p = plain.steps.tpot_ms.as_ref()?.mean;
    if p <= 0.0 {
        return None;
    }
    let d = costs.draft_ms * s.draft_forwards_per_step;
    let v = costs.verify_ms;
    let step = d + v;
    if step <= 0.0 {
        return None;
    }
    Some(SpecDelta {
        speculative: name,
        plain_step_ms: p,
        plain_tokens_per_s: 1e3 / p,
        spec_step_ms: step,
        tokens_per_step: tokens,
        spec_tokens_per_s: tokens / step * 1e3,
        speedup: tokens * p / step,
        draft_ms: d,
        verify_ms: v,
        verify_overhead_ms: v - p,
        rejected_ms: s.rejected_ms_per_step,
        tokens_factor: tokens,
        draft_factor: p / (p + d),
        verify_factor: (p + d) / step,
    })
}
