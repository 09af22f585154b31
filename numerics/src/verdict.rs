//! The verdict on a comparison: ACCEPT, MARGINAL or REJECT from |Δppl| and top-1 agreement.

use crate::summary::Summary;

/// Thresholds of the verdict (defaults: the campaigns' |Δppl| ≤ 1% and top-1 ≥ 95%).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Thresholds {
    /// ACCEPT at or under this |Δppl|, %.
    pub max_dppl_pct: f64,
    /// ... and at or over this top-1 agreement, %.
    pub min_top1_pct: f64,
    /// MARGINAL at or under this |Δppl| and at or over `marginal_top1_pct`; REJECT beyond.
    pub marginal_dppl_pct: f64,
    pub marginal_top1_pct: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            max_dppl_pct: 1.0,
            min_top1_pct: 95.0,
            marginal_dppl_pct: 2.0,
            marginal_top1_pct: 90.0,
        }
    }
}

/// Worse verdicts compare greater.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Verdict {
    Accept,
    Marginal,
    Reject,
}

impl Verdict {
    pub fn of(s: &Summary, t: &Thresholds) -> Self {
        let d = s.dppl_pct.abs();
        if !d.is_finite() {
            Self::Reject
        } else if d <= t.max_dppl_pct && s.top1_agreement_pct >= t.min_top1_pct {
            Self::Accept
        } else if d <= t.marginal_dppl_pct && s.top1_agreement_pct >= t.marginal_top1_pct {
            Self::Marginal
        } else {
            Self::Reject
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Accept => "ACCEPT",
            Self::Marginal => "MARGINAL",
            Self::Reject => "REJECT",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Accept, Self::Marginal, Self::Reject]
            .into_iter()
            .find(|v| v.as_str().eq_ignore_ascii_case(s))
    }
}
