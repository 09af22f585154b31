//! From a trace to a report: classification, steps, decomposition.

pub mod decompose;
pub mod intervals;
pub mod prepared;
pub mod report;
pub mod stats;
pub mod steps;

pub use decompose::{AnalysisSettings, analyze};
pub use report::*;
pub use steps::{DEFAULT_STEP_REGEX, StepSettings};
