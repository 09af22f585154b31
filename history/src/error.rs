//! The history's one error enum. Every variant renders as a single line that names the
//! database (a URL's password masked) or the file.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum HistoryError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A database that does not exist, when reading.
    #[error("no history database at {db}; `gapscope history add` creates one")]
    Missing { db: String },
    /// What went wrong with a database: `history DB: MESSAGE`, secrets scrubbed.
    #[error("history {db}: {message}")]
    Database { db: String, message: String },
}

impl HistoryError {
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

pub type Result<T, E = HistoryError> = std::result::Result<T, E>;
