//! Self-speculative decoding on one sequence: the model's first `draft_layers` layers (then
//! the final norm and the LM head) draft `k` tokens, one forward each, sharing the weights and
//! the KV cache of those layers; one forward of the whole model over the pending token and
//! the `k` candidates verifies them. With [`Acceptance::Argmax`] the tokens are plain greedy
//! decode's; [`Acceptance::Synthetic`] accepts each position with a set probability instead
//! (the benchmarking knob vLLM and llama.cpp ship), to run a chosen acceptance profile.
//!
//! `run` holds the loop over a [`SpecForwards`] backend, `accept` the acceptance rule,
//! `cpu` the reference backend's forwards, `cuda` and `bench` the GPU's and its timed runs,
//! `trace` the step-marker contract, `report` the JSON.

pub mod accept;
pub mod bench;
pub mod cpu;
pub mod cuda;
pub mod report;
pub mod run;
pub mod trace;

use crate::config::ModelConfig;
use crate::error::{EngineError, Result};

pub use run::{Proposal, SpecForwards, SpecRun, SpecStep, decode};
pub use trace::ForwardKind;

/// How the verify decides which candidates stand.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Acceptance {
    /// Candidate j stands while it equals the verify's greedy token of row j-1: the tokens are
    /// plain greedy decode's.
    Argmax,
    /// Position j stands with probability `per_position[j-1]` (given that every earlier one
    /// stood), drawn from a generator seeded with `seed`; the tokens differ from greedy's.
    Synthetic { per_position: Vec<f64>, seed: u64 },
}

impl Acceptance {
    /// `argmax`, or per-position probabilities `p1,p2,...` (with `seed`).
    pub fn parse(s: &str, seed: u64) -> Result<Self> {
        let s = s.trim();
        if s == "argmax" {
            return Ok(Self::Argmax);
        }
        let per_position = s
            .split(',')
            .map(|p| {
                p.trim().parse::<f64>().map_err(|_| {
                    EngineError::invalid(format!(
                        "acceptance {s:?}: use argmax or probabilities p1,p2,... in [0, 1]"
                    ))
                })
            })
            .collect::<Result<Vec<f64>>>()?;
        Ok(Self::Synthetic { per_position, seed })
    }

    /// `argmax`, or the probabilities joined by `_` (`0.8_0.6`): a file-name part.
    pub fn label(&self) -> String {
        match self {
            Self::Argmax => "argmax".into(),
            Self::Synthetic { per_position, .. } => {
                let p: Vec<String> = per_position.iter().map(|p| p.to_string()).collect();
                format!("a{}", p.join("_"))
            }
        }
    }
}

/// One speculative setting.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SpecSettings {
    /// The draft runs the model's first `draft_layers` layers.
    pub draft_layers: usize,
    /// Candidates drafted per step.
    pub k: usize,
    pub accept: Acceptance,
}

impl SpecSettings {
    /// Refuses settings the model cannot run: hybrid models (a DeltaNet layer's recurrent
    /// state cannot be rolled back past rejected candidates), a draft of no layers or of every
    /// layer, `k` of 0, and synthetic probabilities that are not one per candidate in [0, 1].
    pub fn check(&self, cfg: &ModelConfig) -> Result<()> {
        if cfg.hybrid.is_some() {
            return Err(EngineError::invalid(
                "speculative decoding needs a KV-cache-only model: a gated DeltaNet layer's recurrent state cannot be rolled back past rejected candidates",
            ));
        }
        if self.draft_layers == 0 || self.draft_layers >= cfg.layers {
            return Err(EngineError::invalid(format!(
                "draft layers {} of a {}-layer model: use 1 to {}",
                self.draft_layers,
                cfg.layers,
                cfg.layers.saturating_sub(1)
            )));
        }
        if self.k == 0 {
            return Err(EngineError::invalid("k must be at least 1"));
        }
        if let Acceptance::Synthetic { per_position, .. } = &self.accept {
            if per_position.len() != self.k {
                return Err(EngineError::invalid(format!(
                    "k={} needs {} acceptance probabilities, got {}",
                    self.k,
                    self.k,
                    per_position.len()
                )));
            }
            if let Some(p) = per_position.iter().find(|p| !(0.0..=1.0).contains(*p)) {
                return Err(EngineError::invalid(format!(
                    "acceptance probability {p} is outside [0, 1]"
                )));
            }
        }
        Ok(())
    }

    /// The setting's trace name: `spec-k{k}-{acceptance}`, with `-d{draft_layers}` unless the
    /// draft depth is `default_draft_layers`.
    pub fn name(&self, default_draft_layers: usize) -> String {
        let mut n = format!("spec-k{}-{}", self.k, self.accept.label());
        if self.draft_layers != default_draft_layers {
            n.push_str(&format!("-d{}", self.draft_layers));
        }
        n
    }
}
