//! The step markers of a speculative run, the contract `gapscope`'s analyzer reads: every
//! forward is its own step record, named `prefill`, `spec_draft` or `spec_verify`. A draft's
//! marker is phase Decode, batch 1, tokens 1 (the row it feeds); a verify's is phase Decode,
//! batch 1, tokens = the tokens its speculative step produced (accepted + 1), and its step
//! number is the speculative step's (the drafts before it carry the same number).

use super::SpecStep;
use crate::error::{EngineError, Result};
use crate::records::StepRecord;
use gapscope_traces::Phase;

/// Which forward of a speculative run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForwardKind {
    Prefill,
    Draft,
    Verify,
}

pub const PREFILL: &str = "prefill";
pub const DRAFT: &str = "spec_draft";
pub const VERIFY: &str = "spec_verify";

/// A forward's marker columns as it is issued. A verify's `tokens` are its rows until
/// [`set_verify_tokens`] puts the tokens its step produced there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ForwardMarker {
    pub kind: ForwardKind,
    pub marker: &'static str,
    pub phase: Phase,
    pub step: i64,
    pub batch: u32,
    pub tokens: u32,
}

impl ForwardKind {
    pub fn marker(self) -> &'static str {
        match self {
            Self::Prefill => PREFILL,
            Self::Draft => DRAFT,
            Self::Verify => VERIFY,
        }
    }

    /// The marker of this forward as step `step` over `rows` rows of the one sequence.
    pub fn at(self, step: i64, rows: usize) -> ForwardMarker {
        ForwardMarker {
            kind: self,
            marker: self.marker(),
            phase: if self == Self::Prefill {
                Phase::Prefill
            } else {
                Phase::Decode
            },
            step,
            batch: 1,
            tokens: rows as u32,
        }
    }
}

/// Sets each `spec_verify` record's tokens to what its speculative step produced (known only
/// after the verify's tokens are read), and its batch to the one sequence. Every verify
/// record must match a step by number.
pub fn set_verify_tokens(records: &mut [StepRecord], steps: &[SpecStep]) -> Result<()> {
    for r in records.iter_mut().filter(|r| r.marker == VERIFY) {
        let s = steps.iter().find(|s| s.step == r.step).ok_or_else(|| {
            EngineError::invalid(format!(
                "a spec_verify record of step {} with no step",
                r.step
            ))
        })?;
        r.tokens = s.produced as u32;
        // The backend records the rows it ran as the batch; the contract's batch is the
        // sequences, one in this mode.
        r.batch = 1;
    }
    Ok(())
}
