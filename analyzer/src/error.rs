//! The analyzer's one error enum. Every variant renders as a single line that names the
//! file and what is wrong with it.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum AnalyzerError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The file is of a known kind but its content is broken.
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// The input ends early (a cut file); `--allow-truncated` loads what came before.
    #[error("{path}: {message}")]
    Truncated { path: PathBuf, message: String },
    /// The input is larger than a configured limit (events, names).
    #[error("{path}: {message}")]
    Limit { path: PathBuf, message: String },
    /// The file is not something gapscope can read.
    #[error("{path}: {message}")]
    Unsupported { path: PathBuf, message: String },
    #[error("{path}: SQLite: {message}")]
    Sqlite { path: PathBuf, message: String },
    #[error(transparent)]
    Trace(#[from] gapscope_traces::TraceError),
    #[error("{origin}: {message}")]
    Rules { origin: String, message: String },
    #[error("{path}: {message}")]
    Export { path: PathBuf, message: String },
    #[error("{0}")]
    Invalid(String),
}

impl AnalyzerError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
    pub fn parse(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Parse {
            path: path.into(),
            message: message.into(),
        }
    }
    pub fn truncated(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Truncated {
            path: path.into(),
            message: message.into(),
        }
    }
    pub fn limit(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Limit {
            path: path.into(),
            message: message.into(),
        }
    }
    /// The same error naming `to` where it named `from` (a private copy of an input).
    pub fn renamed(self, from: &std::path::Path, to: &std::path::Path) -> Self {
        let fix = |p: PathBuf| if p == from { to.to_owned() } else { p };
        match self {
            Self::Io { path, source } => Self::Io {
                path: fix(path),
                source,
            },
            Self::Parse { path, message } => Self::Parse {
                path: fix(path),
                message,
            },
            Self::Truncated { path, message } => Self::Truncated {
                path: fix(path),
                message,
            },
            Self::Limit { path, message } => Self::Limit {
                path: fix(path),
                message,
            },
            Self::Unsupported { path, message } => Self::Unsupported {
                path: fix(path),
                message,
            },
            Self::Sqlite { path, message } => Self::Sqlite {
                path: fix(path),
                message,
            },
            Self::Export { path, message } => Self::Export {
                path: fix(path),
                message,
            },
            other => other,
        }
    }

    /// Whether the input merely ends early, rather than holding something wrong.
    pub fn is_truncation(&self) -> bool {
        matches!(self, Self::Truncated { .. })
    }
    pub fn unsupported(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        Self::Unsupported {
            path: path.into(),
            message: message.into(),
        }
    }
    pub fn sqlite(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        Self::Sqlite {
            path: path.into(),
            message: message.to_string(),
        }
    }
}

pub type Result<T, E = AnalyzerError> = std::result::Result<T, E>;
