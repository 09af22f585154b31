//! The speculative loop, written once against [`SpecForwards`] so the CPU reference and the
//! CUDA backend run the same steps.

use super::{SpecSettings, accept};
use crate::error::{EngineError, Result};

/// What one speculative step's forwards give: the drafted candidates and the verify's greedy
/// token after each of its rows (`k + 1` of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub candidates: Vec<i32>,
    pub verify: Vec<i32>,
}

/// The forwards a speculative run needs from a backend.
pub trait SpecForwards {
    /// The prefill of `prompt` as step `step`; its greedy token.
    fn prefill(&mut self, prompt: &[i32], step: i64) -> Result<i32>;
    /// One speculative step, numbered `step`: `k` draft forwards through the first
    /// `draft_layers` layers, one row each at positions `pos..pos+k` (the first feeds `token`,
    /// each next one the previous one's greedy token); then one verify forward through every
    /// layer of the rows `[token, c1..ck]` at positions `pos..=pos+k`, with logits for every
    /// row.
    fn step(
        &mut self,
        token: i32,
        pos: usize,
        k: usize,
        draft_layers: usize,
        step: i64,
    ) -> Result<Proposal>;
    /// The loop accepted `accepted` candidates of the last step: the verify's token after
    /// row `accepted` is the next pending token.
    fn accept(&mut self, accepted: usize);
}

/// One speculative step of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SpecStep {
    /// The step number its markers carry.
    pub step: i64,
    pub drafted: usize,
    pub accepted: usize,
    /// Accepted candidates plus the verify's own token.
    pub produced: usize,
}

/// A speculative run: every token it produced (the prefill's first, then each step's, the
/// last step possibly past `ntg`) and its steps.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecRun {
    pub tokens: Vec<i32>,
    pub steps: Vec<SpecStep>,
}

impl SpecRun {
    /// The first `ntg + 1` tokens: what plain greedy decode of `ntg` steps produces.
    pub fn first(&self, ntg: usize) -> &[i32] {
        &self.tokens[..self.tokens.len().min(ntg + 1)]
    }
}

/// A prefill of `prompt` (step `step0`), then speculative steps (`step0 + 1`, ...) until at
/// least `ntg` tokens follow the prefill's.
pub fn decode(
    fw: &mut dyn SpecForwards,
    s: &SpecSettings,
    prompt: &[i32],
    ntg: usize,
    step0: i64,
) -> Result<SpecRun> {
    if prompt.is_empty() {
        return Err(EngineError::invalid("an empty prompt"));
    }
    let mut tokens = vec![fw.prefill(prompt, step0)?];
    let mut steps = Vec::new();
    let mut pos = prompt.len();
    while tokens.len() < ntg + 1 {
        let i = steps.len() as u64;
        let step = step0 + 1 + i as i64;
        let t = tokens[tokens.len() - 1];
        let p = fw.step(t, pos, s.k, s.draft_layers, step)?;
        if p.candidates.len() != s.k || p.verify.len() != s.k + 1 {
            return Err(EngineError::invalid(format!(
                "a speculative step gave {} candidates and {} verify tokens for k={}",
                p.candidates.len(),
                p.verify.len(),
                s.k
            )));
        }
        let a = accept::accepted(&s.accept, i, &p.candidates, &p.verify);
        fw.accept(a);
        tokens.extend_from_slice(&p.candidates[..a]);
        tokens.push(p.verify[a]);
        steps.push(SpecStep {
            step,
            drafted: s.k,
            accepted: a,
            produced: a + 1,
        });
        pos += a + 1;
    }
    Ok(SpecRun { tokens, steps })
}

/// Per candidate position j (1..=k): the share of steps that accepted at least j candidates,
/// and the share of those that accepted j - 1 that also accepted j (the conditional rate a
/// synthetic profile sets). Positions never reached give `None`.
pub fn acceptance_by_position(steps: &[SpecStep], k: usize) -> (Vec<f64>, Vec<Option<f64>>) {
    let n = steps.len().max(1) as f64;
    let reached = |j: usize| steps.iter().filter(|s| s.accepted >= j).count();
    let rate = (1..=k).map(|j| reached(j) as f64 / n).collect();
    let conditional = (1..=k)
        .map(|j| {
            let before = if j == 1 { steps.len() } else { reached(j - 1) };
            (before > 0).then(|| reached(j) as f64 / before as f64)
        })
        .collect();
    (rate, conditional)
}
