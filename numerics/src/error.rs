//! Errors: one line each, naming the file and what is wrong with it.

use std::path::{Path, PathBuf};

/// What went wrong reading or comparing dumps.
#[derive(Debug, thiserror::Error)]
pub enum NumericsError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Not a safetensors file, or one whose header or layout is broken or cut short.
    #[error("{path}: not a readable safetensors dump: {why}")]
    Format { path: PathBuf, why: String },
    /// A tensor is missing, has the wrong type or shape.
    #[error("{path}: {why}")]
    Tensor { path: PathBuf, why: String },
    /// Two dumps that cannot be compared (tokens, vocabulary, layers, passages).
    #[error("{a} and {b} cannot be compared: {why}")]
    Mismatch { a: PathBuf, b: PathBuf, why: String },
    /// A NaN or an infinity in a tensor.
    #[error("{path}: {tensor} holds {what} at {at}")]
    NotFinite {
        path: PathBuf,
        tensor: String,
        what: &'static str,
        at: String,
    },
}

pub type Result<T, E = NumericsError> = std::result::Result<T, E>;

impl NumericsError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_owned(),
            source,
        }
    }

    pub(crate) fn format(path: &Path, why: impl Into<String>) -> Self {
        Self::Format {
            path: path.to_owned(),
            why: why.into(),
        }
    }

    pub(crate) fn tensor(path: &Path, why: impl Into<String>) -> Self {
        Self::Tensor {
            path: path.to_owned(),
            why: why.into(),
        }
    }

    pub(crate) fn mismatch(a: &Path, b: &Path, why: impl Into<String>) -> Self {
        Self::Mismatch {
            a: a.to_owned(),
            b: b.to_owned(),
            why: why.into(),
        }
    }
}
