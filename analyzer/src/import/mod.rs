//! Importers: every supported input becomes a [`Trace`]. `import_trace` sniffs the format
//! from the file's first bytes, not its name.

pub mod clamp;
pub mod defects;
pub mod kineto;
pub mod limits;
pub mod names;
pub mod nsys;
pub mod sniff;
pub mod validate;

use std::path::Path;

use gapscope_traces::{ReadOptions, Trace};

use crate::error::{AnalyzerError, Result};
pub use limits::DEFAULT_MAX_EVENTS;
pub use sniff::InputFormat;

/// Kernel columns the analysis reads as all-default when they are missing (an engine bucket
/// of none, no graph, unknown bytes and FLOPs): a projected native read leaves them unloaded
/// when every value is the default, which spares 24 bytes a kernel on traces without them.
pub const SPARSE_ANALYSIS_COLUMNS: &[&str] = &["graph_id", "bucket", "bytes", "flops"];

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
    /// For native traces: load only these kernel columns (`None` = all). A projected read
    /// also leaves [`SPARSE_ANALYSIS_COLUMNS`] unloaded where every value is the default.
    pub kernel_columns: Option<Vec<String>>,
    /// Load what a truncated JSON or gzip file holds instead of failing. Only an input that
    /// ends early qualifies; a corrupt one (bad gzip checksum, invalid JSON) stays an error.
    pub allow_truncated: bool,
    /// The most events (kernel, memop, launch, marker and sample rows together) an import
    /// loads before it refuses the input with a one-line error. `None`: the default,
    /// [`DEFAULT_MAX_EVENTS`], for every format (a native trace's size on disk bounds its
    /// tables, not the analysis and the explorer built on them). `Some(u64::MAX)` lifts it.
    pub max_events: Option<u64>,
    /// Where a private copy of an input may be made when it cannot be read in place without
    /// writing beside it (an nsys export whose `-wal` lost its `-shm`). `None`: such an input
    /// is refused with the reason. Binaries pass the system's temporary directory.
    pub scratch_dir: Option<std::path::PathBuf>,
}

impl ImportOptions {
    /// The event limit that applies, `None` for none.
    pub fn event_limit(&self) -> Option<u64> {
        match self.max_events {
            Some(u64::MAX) => None,
            Some(n) => Some(n),
            None => Some(DEFAULT_MAX_EVENTS),
        }
    }
}

/// An imported trace plus what the importer noticed along the way.
#[derive(Debug)]
pub struct Imported {
    pub trace: Trace,
    pub format: InputFormat,
    /// Odd values and recoverable problems, one line each, for the report.
    pub warnings: Vec<String>,
    /// What makes the trace unfit to vouch for its figures (the gate never passes one).
    pub defects: Vec<defects::SourceDefect>,
}

/// Imports any supported trace file. Whatever the format, kernel and memop names are then
/// canonicalised once ([`names::canonicalise`]: one kernel identity across sources), times
/// are clamped once ([`clamp::clamp_times`]) and what that changed is reported among the
/// warnings.
pub fn import_trace(
    path: &Path,
    opts: &ImportOptions,
    progress: &dyn ImportProgress,
) -> Result<Imported> {
    let _span = tracing::debug_span!("import", path = %path.display()).entered();
    let format = sniff::sniff(path)?;
    tracing::debug!(?format, "sniffed input format");
    let mut importer_warnings = Vec::new();
    let trace = match format {
        InputFormat::Native => gapscope_traces::read_trace(
            path,
            &ReadOptions {
                kernel_columns: opts.kernel_columns.clone(),
                max_rows: opts.event_limit(),
                sparse_kernel_columns: if opts.kernel_columns.is_some() {
                    SPARSE_ANALYSIS_COLUMNS
                        .iter()
                        .map(|s| s.to_string())
                        .collect()
                } else {
                    Vec::new()
                },
            },
        )?,
        InputFormat::KinetoJson | InputFormat::KinetoJsonGz => {
            kineto::import_kineto(path, format == InputFormat::KinetoJsonGz, opts, progress)?
        }
        InputFormat::NsysSqlite => {
            let (trace, w) = nsys::import_nsys_with(path, opts, progress)?;
            importer_warnings = w;
            trace
        }
    };
    finish(
        trace,
        format,
        importer_warnings,
        &path.display().to_string(),
    )
}

/// Imports a trace handed over in memory: a Kineto JSON (plain or gzipped) or an nsys SQLite
/// export; `name` names it in the report and in errors. SQLite reads files, so an nsys
/// export is written to a private file in `opts.scratch_dir` first (refused without one); a
/// native `.gst` trace is a folder, so bytes never are one.
pub fn import_bytes(
    name: &str,
    bytes: &[u8],
    opts: &ImportOptions,
    progress: &dyn ImportProgress,
) -> Result<Imported> {
    let _span = tracing::debug_span!("import", name).entered();
    let path = Path::new(name);
    let format = sniff::sniff_bytes(path, &bytes[..bytes.len().min(64)])?;
    let mut importer_warnings = Vec::new();
    let trace = match format {
        InputFormat::KinetoJson | InputFormat::KinetoJsonGz => kineto::import_kineto_bytes(
            path,
            bytes,
            format == InputFormat::KinetoJsonGz,
            opts,
            progress,
        )?,
        InputFormat::NsysSqlite => {
            let dir = opts.scratch_dir.as_deref().ok_or_else(|| {
                AnalyzerError::unsupported(
                    path,
                    "an nsys export in memory needs a scratch folder to be read from (ImportOptions::scratch_dir)",
                )
            })?;
            let mut f = tempfile::Builder::new()
                .prefix("gapscope-nsys-")
                .suffix(".sqlite")
                .tempfile_in(dir)
                .map_err(|e| AnalyzerError::io(dir, e))?;
            std::io::Write::write_all(&mut f, bytes).map_err(|e| AnalyzerError::io(f.path(), e))?;
            let spooled = f.path().to_owned();
            let (trace, w) = nsys::import_nsys_with(&spooled, opts, progress)
                .map_err(|e| e.renamed(&spooled, path))?;
            importer_warnings = w;
            trace
        }
        InputFormat::Native => {
            return Err(AnalyzerError::unsupported(
                path,
                "a native .gst trace is a folder; open it by its path",
            ));
        }
    };
    let mut trace = trace;
    trace.manifest.source_path = Some(name.to_owned());
    finish(trace, format, importer_warnings, name)
}

/// What every import does after reading: names canonicalised, defects found on the times as
/// written, times clamped, and the warnings of all three.
fn finish(
    mut trace: Trace,
    format: InputFormat,
    importer_warnings: Vec<String>,
    source: &str,
) -> Result<Imported> {
    if trace.manifest.source_path.is_none() {
        trace.manifest.source_path = Some(source.to_owned());
    }
    names::canonicalise(&mut trace);
    // On the times as the source wrote them, before anything moves them.
    let defects = defects::find(&trace);
    let merged = defects
        .iter()
        .any(|d| matches!(d, defects::SourceDefect::MergedProcesses { .. }));
    let clamped = clamp::clamp_times(&mut trace);
    let mut warnings = importer_warnings;
    warnings.extend(clamped.warning());
    if !merged {
        // Merged processes overlap on a shared stream id; that is not early launch.
        warnings.extend(validate::odd_values(&mut trace));
    }
    for d in defects.iter().rev() {
        if !matches!(d, defects::SourceDefect::Truncated { .. }) {
            warnings.insert(
                0,
                format!("this trace {}; its figures cannot be trusted", d.describe()),
            );
        }
    }
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
        defects,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_format_has_the_default_event_limit() {
        let o = ImportOptions::default();
        assert_eq!(o.event_limit(), Some(DEFAULT_MAX_EVENTS));
        let lifted = ImportOptions {
            max_events: Some(u64::MAX),
            ..ImportOptions::default()
        };
        assert_eq!(lifted.event_limit(), None);
    }
}
