//! The eframe explorer. Filled by the GUI work; the foundation only establishes the crate and its allowed dependencies (analyzer, traces).
