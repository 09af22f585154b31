//! Nsight Systems SQLite export importer (placeholder until the nsys work lands).

use std::path::Path;

use gapscope_traces::Trace;

use super::ImportProgress;
use crate::error::{AnalyzerError, Result};

pub fn import_nsys(path: &Path, _progress: &dyn ImportProgress) -> Result<Trace> {
    Err(AnalyzerError::unsupported(path, "nsys import not built yet"))
}
