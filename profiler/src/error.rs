//! The recorder's one error type: each variant names what was wrong and with which file.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Spool { path: PathBuf, msg: String },
    #[error("CUPTI library {path}: {msg}")]
    Cupti { path: PathBuf, msg: String },
    #[error(
        "no CUPTI library found; searched: {searched}. Pass --cupti-lib PATH (libcupti.so.13 from CUDA 13 or the pip package nvidia-cuda-cupti)"
    )]
    CuptiNotFound { searched: String },
    #[error(transparent)]
    Trace(#[from] gapscope_traces::TraceError),
}

impl RecordError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }

    pub fn spool(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Self::Spool {
            path: path.into(),
            msg: msg.into(),
        }
    }
}

pub type Result<T> = std::result::Result<T, RecordError>;
