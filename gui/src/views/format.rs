//! The views' number formatting: the analyzer's one formatting module, shared with the CLI.

pub use gapscope_analyzer::text::{bytes, count, cut, dur_ns, ms_label, tick_ns};
