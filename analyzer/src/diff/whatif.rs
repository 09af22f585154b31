//! Lever what-ifs from one slow run: each lever's step predicted from the slow
//! configuration's report alone ([`levers::hybrid_levers`]), and, for the levers measured
//! since, the measured step and the prediction's error. Both front ends show this output.

use serde::Serialize;

use super::levers::{self, EngineLever, LeverPrediction, LeverWhatIf};
use crate::analysis::Report;

/// The lever sets a what-if knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeverSet {
    /// The hybrid (gated DeltaNet) engine's levers.
    Hybrid,
}

impl LeverSet {
    pub const ALL: [LeverSet; 1] = [Self::Hybrid];

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Hybrid => "hybrid",
        }
    }
}

/// A measured step beside its prediction.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub lever: EngineLever,
    pub path: String,
    pub predicted_step_ms: f64,
    /// Median decode-step span of the measured trace, and its CV, %.
    pub measured_step_ms: f64,
    pub measured_cv_pct: f64,
    /// (predicted - measured) / measured, %.
    pub error_pct: f64,
}

/// The what-if output.
#[derive(Debug, Clone, Serialize)]
pub struct WhatIfOutput {
    pub schema_version: u32,
    #[serde(flatten)]
    pub prediction: LeverWhatIf,
    pub measured: Vec<Comparison>,
}

/// Why a what-if cannot be made or compared.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum WhatIfError {
    /// The slow run gives no prediction.
    #[error("what-if: {0}")]
    Predict(String),
    /// A `--measured` lever the prediction does not name.
    #[error("--measured {lever}: no such lever; the predictions are {known}")]
    UnknownLever { lever: String, known: String },
    /// A measured run that is not the slow run with only that lever switched, or without a
    /// decode span.
    #[error("--measured {lever}: {path}: {why}")]
    Measured {
        lever: String,
        path: String,
        why: String,
    },
    #[error("--measured {lever}: {why}")]
    NoSpan { lever: String, why: String },
}

/// The prediction of the lever a measured run names.
pub fn find_lever<'a>(w: &'a LeverWhatIf, lever: &str) -> Result<&'a LeverPrediction, WhatIfError> {
    w.levers
        .iter()
        .find(|p| p.lever.knob == lever)
        .ok_or_else(|| WhatIfError::UnknownLever {
            lever: lever.to_owned(),
            known: w
                .levers
                .iter()
                .map(|p| p.lever.knob)
                .collect::<Vec<_>>()
                .join(", "),
        })
}

/// Predicts each lever of `set` from `slow` (analysed with the op grouping), and compares
/// with each `(lever, report)` measured since.
pub fn what_if(
    set: LeverSet,
    slow: &Report,
    measured: &[(String, Report)],
) -> Result<WhatIfOutput, WhatIfError> {
    compare(predict(set, slow)?, slow, measured)
}

/// Each lever of `set` predicted from `slow` alone.
pub fn predict(set: LeverSet, slow: &Report) -> Result<LeverWhatIf, WhatIfError> {
    match set {
        LeverSet::Hybrid => levers::hybrid_levers(slow).map_err(WhatIfError::Predict),
    }
}

/// `prediction` (made from `slow`) beside each `(lever, report)` measured since.
pub fn compare(
    prediction: LeverWhatIf,
    slow: &Report,
    measured: &[(String, Report)],
) -> Result<WhatIfOutput, WhatIfError> {
    let mut out = Vec::new();
    for (lever, r) in measured {
        let p = find_lever(&prediction, lever)?;
        if let Err(why) = levers::check_measured(slow, r, lever) {
            return Err(WhatIfError::Measured {
                lever: lever.clone(),
                path: r.source.path.clone(),
                why,
            });
        }
        let span = levers::decode_span(r).map_err(|why| WhatIfError::NoSpan {
            lever: lever.clone(),
            why,
        })?;
        out.push(Comparison {
            lever: p.lever,
            path: r.source.path.clone(),
            predicted_step_ms: p.predicted_step_ms,
            measured_step_ms: span.median,
            measured_cv_pct: span.cv * 100.0,
            error_pct: 100.0 * (p.predicted_step_ms - span.median) / span.median,
        });
    }
    Ok(WhatIfOutput {
        schema_version: 1,
        prediction,
        measured: out,
    })
}
