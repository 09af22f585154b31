//! The gapscope trace model and its native on-disk format.
//!
//! A trace is a manifest plus seven columnar tables (kernels, memops, launches, markers,
//! samples, host scopes, input shapes) with interned names. On disk it is a directory of Arrow IPC streams, one per
//! table, so pyarrow, polars and duckdb read it without gapscope; see
//! `docs/TRACE_FORMAT.md`.

pub use arrow_array;
pub use arrow_buffer;
pub use arrow_ipc;
pub use arrow_schema;

pub mod columnar;
pub mod error;
pub mod manifest;
pub mod native;
mod output_dir;
pub mod output_file;
pub mod stats;
mod stream_read;
pub mod strings;
pub mod tables;
pub mod trace;

pub use error::{Result, TraceError};
pub use manifest::{FORMAT_VERSION, GpuInfo, Manifest, SourceFormat};
pub use native::{ReadOptions, TraceWriter, is_native_trace, read_trace, write_trace};
pub use output_file::{OutputFile, check_output, write_output};
pub use strings::{NO_STR, StrId, StringTable};
pub use tables::*;
pub use trace::Trace;
