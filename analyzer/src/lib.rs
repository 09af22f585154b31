//! gapscope analysis: importers, bucket rules, step detection, decomposition and exports.
//! Libraries here take typed settings and emit `tracing` events; they never read env vars.

pub mod error;
pub mod import;

pub use error::{AnalyzerError, Result};
pub mod bucket;
pub mod config_file;
pub mod rules;

pub use bucket::Bucket;
pub use rules::RuleSet;
pub mod analysis;
pub mod diff;
pub mod explore;
pub mod export;
pub mod gate;
pub mod join;
pub mod roofline;
pub mod session;
pub mod sqlite_file;
pub mod tables;
pub mod text;
