//! From a trace to a report: classification, steps, decomposition, telemetry.

pub mod decompose;
pub mod distortion;
pub mod graph_capture;
pub mod graphs;
pub mod host;
pub mod intervals;
pub mod plausibility;
pub mod prepared;
pub mod ranks;
pub mod report;
pub mod spec;
pub mod stats;
pub mod steps;
pub mod telemetry;

pub use decompose::{AnalysisSettings, Analyzed, DEFAULT_MAX_STEPS, analyze, analyze_tables};
pub use plausibility::{Plausibility, PlausibilityCheck, PlausibilityProblem};
pub use report::*;
pub use steps::{DEFAULT_STEP_REGEX, StepSettings};
pub use telemetry::TelemetryReport;
