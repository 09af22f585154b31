//! Importers: every supported input becomes a [`Trace`]. `import_trace` sniffs the format
//! from the file's first bytes, not its name.

pub mod kineto;
pub mod nsys;
pub mod sniff;
pub mod validate;

use std::path::Path;

use gapscope_traces::{ReadOptions, Trace};

use crate::error::Result;
pub use sniff::InputFormat;

/// Receives import progress; the CLI draws a bar, libraries and tests pass [`NoProgress`].
pub trait ImportProgress: Sync {
    /// Called once with the input size in bytes, when known.
    fn start(&self, _total_bytes: Option<u64>) {}
    /// Called with bytes consumed since the last call.
    fn advance(&self, _bytes: u64) {}
    fn finish(&self) {}
}

/// Progress that goes nowhere.
pub struct NoProgress;
impl ImportProgress for NoProgress {}

/// Settings common to all importers.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// For native traces: load only these kernel columns (`None` = all).
    pub kernel_columns: Option<Vec<String>>,
    /// Load what a truncated JSON or gzip file holds instead of failing.
    pub allow_truncated: bool,
}

/// An imported trace plus what the importer noticed along the way.
#[derive(Debug)]
pub struct Imported {
    pub trace: Trace,
    pub format: InputFormat,
    /// Odd values and recoverable problems, one line each, for the report.
    pub warnings: Vec<String>,
}

/// Imports any supported trace file.
pub fn import_trace(
    path: &Path,
    opts: &ImportOptions,
    progress: &dyn ImportProgress,
) -> Result<Imported> {
    let format = sniff::sniff(path)?;
    let mut trace = match format {
        InputFormat::Native => gapscope_traces::read_trace(
            path,
            &ReadOptions {
                kernel_columns: opts.kernel_columns.clone(),
            },
        )?,
        InputFormat::KinetoJson | InputFormat::KinetoJsonGz => {
            kineto::import_kineto(path, format == InputFormat::KinetoJsonGz, opts, progress)?
        }
        InputFormat::NsysSqlite => nsys::import_nsys(path, progress)?,
    };
    if trace.manifest.source_path.is_none() {
        trace.manifest.source_path = Some(path.display().to_string());
    }
    let mut warnings = validate::odd_values(&trace);
    if trace.manifest.truncated {
        let why = if trace.manifest.notes.is_empty() {
            String::new()
        } else {
            format!(": {}", trace.manifest.notes.join("; "))
        };
        warnings.insert(
            0,
            format!("trace is truncated; loaded what could be read{why}"),
        );
    }
    Ok(Imported {
        trace,
        format,
        warnings,
    })
}
