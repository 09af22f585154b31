//! Exports of a trace to formats other tools open: Chrome JSON (Perfetto, chrome://tracing)
//! and Parquet (pandas, polars, duckdb).

pub mod chrome;
pub mod parquet;
pub mod tables;
