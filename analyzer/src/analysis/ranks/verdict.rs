//! The multi-rank verdict: which rank sets the step, and why.

use serde::Serialize;

use crate::Bucket;

/// A straggler is named when it arrives last at least at this share of the collectives…
pub const LATE_SHARE: f64 = 0.6;
/// …and the other ranks wait at least this share of the step for it.
pub const WAIT_SHARE: f64 = 0.02;

/// What kept the late rank from arriving earlier, in the windows before its late arrivals
/// compared with the same windows on the other ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum LateBy {
    /// Its GPU sat idle longer (the host did not feed it); `scope` is the host scope or NVTX
    /// range open longest during that idle time, preferring one no other rank has.
    Host {
        excess_idle_ms_per_step: f64,
        scope: Option<String>,
        scope_ms_per_step: f64,
        /// The scope appears in no other rank's trace.
        scope_only_here: bool,
    },
    /// Its GPU was busy longer: the kernel with the most extra time, and its bucket.
    Gpu {
        excess_busy_ms_per_step: f64,
        kernel: String,
        bucket: Bucket,
        kernel_ms_per_step: f64,
        kernel_only_here: bool,
    },
}

/// The rank that sets the step.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Straggler {
    pub rank: u32,
    /// Share of matched collectives it arrived last at.
    pub late_share: f64,
    /// Mean over the other ranks of their median communication wait, ms per step.
    pub others_wait_ms_per_step: f64,
    /// Mean over the other ranks of their median longest wait at one collective, ms.
    pub others_longest_wait_ms: f64,
    pub late_by: LateBy,
}

/// Why no verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// Fewer than two ranks.
    OneRank,
    /// The ranks' steps could not be paired (no common step).
    NoCommonSteps,
    /// No collective inside the aligned steps matched across all ranks.
    NoMatchedCollectives,
    /// The matched kernels do not end together on the ranks (their completions spread more
    /// than [`COMPLETION_RESIDUAL_NS`] around the fitted clock offset): they are not the same
    /// collectives, such as point-to-point transfers with ranks not given, or a rank's
    /// trace is missing kernels.
    CompletionsDisagree,
}

/// Matched collectives' completions must agree within this (median absolute deviation
/// around the clock offset), ns: on one host they agree within a microsecond.
pub const COMPLETION_RESIDUAL_NS: i64 = 100_000;

impl Refusal {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OneRank => "one rank: nothing to compare",
            Self::NoCommonSteps => "the ranks' steps could not be paired",
            Self::NoMatchedCollectives => {
                "no communication kernel inside the steps matched across the ranks"
            }
            Self::CompletionsDisagree => {
                "the communication kernels paired across the ranks do not end together, so they are not the same collectives (point-to-point transfers with ranks not given, or kernels missing from a trace)"
            }
        }
    }
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RanksVerdict {
    /// One rank arrives last at most collectives and the others wait for it.
    Straggler(Straggler),
    /// No rank sets the step: arrivals are spread, or the waits are small.
    Even {
        /// The rank that arrived last most often, and at what share.
        late_rank: u32,
        late_share: f64,
        /// Mean communication wait over all ranks, ms per aligned step.
        wait_ms_per_step: f64,
    },
    Refused {
        reason: Refusal,
    },
}

impl RanksVerdict {
    /// The rank that sets the step, when one does.
    pub fn late_rank(&self) -> Option<u32> {
        match self {
            Self::Straggler(s) => Some(s.rank),
            _ => None,
        }
    }
}
