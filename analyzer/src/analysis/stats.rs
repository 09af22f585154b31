//! The order statistics used throughout the report: defined once in
//! [`gapscope_traces::stats`] (shared with the engine), re-exported here.

pub use gapscope_traces::stats::*;
