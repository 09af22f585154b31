//! One error enum for the trace crate; every variant names the file involved.

use std::path::PathBuf;

/// Errors from reading or writing native traces.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: invalid Arrow IPC data: {source}")]
    Arrow {
        path: PathBuf,
        #[source]
        source: arrow_schema::ArrowError,
    },
    #[error("{path}: invalid manifest: {source}")]
    Manifest {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
}

impl TraceError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn arrow(path: impl Into<PathBuf>, source: arrow_schema::ArrowError) -> Self {
        Self::Arrow {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn format(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Format {
            path: path.into(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = TraceError> = std::result::Result<T, E>;
