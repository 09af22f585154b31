//! Nsight Systems SQLite exports (`nsys export --type sqlite`), from nsys 2023.1 to 2025.x
//! (and the 2021-era GPU table). The layout changes between releases: metadata moved from
//! `EXPORT_META_DATA` to `META_DATA_EXPORT`, columns such as `greenContextId` and
//! `graphId` appeared, and tables are only created when the capture had such events. So
//! nothing here assumes a layout: the importer asks `sqlite_master` and
//! `pragma_table_info` what exists, selects only those columns, resolves names through
//! `StringIds` and enum codes through the file's own `ENUM_*` tables.
//!
//! Times stay as nsys stores them: nanoseconds on the session timeline, which nsys
//! already uses for both GPU activity and host calls (`import_trace` clamps absurd ones).
//!
//! Untrusted files: only plain tables are read (never views, see `schema`), repeated
//! `StringIds` ids are collapsed, the import stops at its event limit, and SQLite's work is
//! bounded by a step budget proportional to the file size, so no file can keep the import
//! busy forever. Committed rows in a `-wal` file beside the export (never checkpointed into
//! it) are read as SQLite reads them, and nothing beside the export is written or created
//! (see `crate::sqlite_file`).

mod enums;
mod read;
mod schema;

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::io::Read;
use std::path::Path;

use gapscope_traces::{GpuInfo, Manifest, SourceFormat, Trace};
use rusqlite::{Connection, OpenFlags};

use super::limits::Budget;
use super::{ImportOptions, ImportProgress};
use crate::error::{AnalyzerError, Result};
use crate::sqlite_file::{self, How, PrepError, ReadOnlyFile};
use enums::{CopyKinds, EventClasses, NvtxTypes};
use read::{Limits, ReadError, Skipped};
use schema::Schema;

/// [`Manifest::source_format`] of traces this importer builds, so reports can say where a
/// trace came from.
pub const SOURCE_FORMAT: SourceFormat = SourceFormat::NsysSqlite;

/// Imports an Nsight Systems SQLite export with the default options; see
/// [`import_nsys_with`].
pub fn import_nsys(path: &Path, progress: &dyn ImportProgress) -> Result<Trace> {
    import_nsys_with(path, &ImportOptions::default(), progress).map(|(t, _)| t)
}

/// Imports an Nsight Systems SQLite export, returning the trace and warnings for the
/// report.
///
/// The file is opened read-only and nothing is written beside it: exports are often on
/// shared or read-only storage. A `-wal` beside it is read too (`crate::sqlite_file`).
/// Synchronous (rusqlite), so it runs on the caller's thread, inside an async runtime or
/// not. Progress counts rows.
pub fn import_nsys_with(
    path: &Path,
    opts: &ImportOptions,
    progress: &dyn ImportProgress,
) -> Result<(Trace, Vec<String>)> {
    import_budgeted(path, opts, progress, None)
}

/// [`import_nsys_with`] with the SQLite step budget given (tests) or computed from the
/// file size (`None`).
fn import_budgeted(
    path: &Path,
    opts: &ImportOptions,
    progress: &dyn ImportProgress,
    steps: Option<u64>,
) -> Result<(Trace, Vec<String>)> {
    let len = check_sqlite_header(path)?;
    let file =
        sqlite_file::prepare(path, None, opts.scratch_dir.as_deref()).map_err(|e| match e {
            PrepError::Io(p, e) => AnalyzerError::io(p, e),
            PrepError::Refused(m) => AnalyzerError::unsupported(path, m),
        })?;
    let len = len.saturating_add(file.wal_bytes);
    let steps = steps
        .unwrap_or_else(|| STEP_BUDGET_BASE.saturating_add(len.saturating_mul(STEPS_PER_BYTE)));
    let limits = Limits {
        budget: Budget::new(path, opts.event_limit()),
        failed: None,
    };
    import(path, &file, len, steps, limits, progress)
}

/// SQLite work allowed per byte of the file, on top of [`STEP_BUDGET_BASE`], in virtual
/// machine steps. Reading a real export takes a few steps per byte; the budget only stops
/// a file built to make SQLite loop or grind.
const STEPS_PER_BYTE: u64 = 2_000;
const STEP_BUDGET_BASE: u64 = 500_000_000;
/// Steps between two checks of the budget. SQLite counts each statement's steps from its
/// start, and a statement shorter than this is never checked: a short period loses little of
/// the short statements (schema and metadata reads take about a hundred each) at the cost of
/// one callback per period.
const STEPS_PER_CHECK: i32 = 100;

/// The SQLite file header is 100 bytes at offset 0.
const HEADER_LEN: usize = 100;
const SQLITE_MAGIC: &[u8; 16] = b"SQLite format 3\0";

/// Rejects what SQLite would misreport: an empty file opens as an empty database, and a
/// truncated one can answer queries that happen to touch only the pages still there.
/// The header's page count is trusted only when its "version-valid-for" number matches
/// the change counter, as the file format specifies.
/// Returns the file's length.
fn check_sqlite_header(path: &Path) -> Result<u64> {
    let io = |e| AnalyzerError::io(path, e);
    // Checked before opening: opening a FIFO blocks until a writer appears.
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        return Err(AnalyzerError::unsupported(
            path,
            "is a directory, not an Nsight Systems SQLite export",
        ));
    }
    if !meta.is_file() {
        return Err(AnalyzerError::unsupported(
            path,
            "is not a regular file (a FIFO, socket or device), not an Nsight Systems SQLite export",
        ));
    }
    let mut f = File::open(path).map_err(io)?;
    let len = meta.len();
    if len == 0 {
        return Err(AnalyzerError::unsupported(
            path,
            "empty file, not an Nsight Systems SQLite export",
        ));
    }
    let mut head = [0u8; HEADER_LEN];
    let mut n = 0;
    while n < HEADER_LEN {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io(e)),
        }
    }
    if n < SQLITE_MAGIC.len() || &head[..SQLITE_MAGIC.len()] != SQLITE_MAGIC {
        return Err(AnalyzerError::unsupported(
            path,
            "not an SQLite database (no \"SQLite format 3\" header), so not an Nsight Systems SQLite export",
        ));
    }
    if n < HEADER_LEN {
        return Err(AnalyzerError::parse(
            path,
            format!(
                "truncated SQLite file: {len} bytes, shorter than the {HEADER_LEN}-byte header"
            ),
        ));
    }
    let be32 = |at: usize| u32::from_be_bytes([head[at], head[at + 1], head[at + 2], head[at + 3]]);
    let page_size = match u16::from_be_bytes([head[16], head[17]]) {
        1 => 65_536u64,
        p => u64::from(p),
    };
    let (change_counter, pages, valid_for) = (be32(24), be32(28), be32(92));
    if page_size >= 512 && pages > 0 && valid_for == change_counter {
        let want = u64::from(pages) * page_size;
        if len < want {
            return Err(AnalyzerError::parse(
                path,
                format!(
                    "truncated SQLite file: its header declares {pages} pages of {page_size} bytes ({want} bytes) but the file has {len} bytes"
                ),
            ));
        }
    }
    Ok(len)
}

/// One line, whatever the driver put in its message.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn sqlite_err(path: &Path, what: &str, e: impl Into<ReadError>) -> AnalyzerError {
    AnalyzerError::sqlite(path, one_line(&format!("{what}: {}", e.into())))
}

fn import(
    path: &Path,
    file: &ReadOnlyFile,
    len: u64,
    budget: u64,
    mut limits: Limits,
    progress: &dyn ImportProgress,
) -> Result<(Trace, Vec<String>)> {
    // A `file:` URI naming the file literally (any bytes), its parameters included; SQLite
    // reads it as a URI with `SQLITE_OPEN_URI`.
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_PRIVATE_CACHE;
    let conn = Connection::open_with_flags(&file.uri, flags)
        .map_err(|e| sqlite_err(path, "opening the database", e))?;
    let exhausted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let exhausted = std::sync::Arc::clone(&exhausted);
        let mut left = budget / STEPS_PER_CHECK as u64;
        // Returning true interrupts the statement.
        conn.progress_handler(
            STEPS_PER_CHECK,
            Some(move || {
                if left == 0 {
                    exhausted.store(true, std::sync::atomic::Ordering::Relaxed);
                    return true;
                }
                left -= 1;
                false
            }),
        )
        .map_err(|e| sqlite_err(path, "opening the database", e))?;
    }
    let mut out = import_from(&conn, path, &mut limits, progress);
    if file.how != How::Immutable
        && file.wal_bytes > 0
        && let Ok((trace, _)) = &mut out
    {
        trace.manifest.notes.push(format!(
            "{} holds {} bytes never checkpointed into the export; the transactions committed in it were read{}",
            file.wal.display(),
            file.wal_bytes,
            if file.how == How::PrivateCopy {
                " (through a private copy)"
            } else {
                ""
            }
        ));
    }
    // The result is already decided; a read-only connection has nothing to flush.
    let _ = conn.close();
    if let Some(e) = limits.failed.take() {
        return Err(e);
    }
    if exhausted.load(std::sync::atomic::Ordering::Relaxed) {
        return Err(AnalyzerError::unsupported(
            path,
            format!(
                "reading it took more than {budget} SQLite steps, far beyond what an export of {len} bytes needs ({STEPS_PER_BYTE} per byte); refusing it"
            ),
        ));
    }
    out
}

fn import_from(
    conn: &Connection,
    path: &Path,
    limits: &mut Limits,
    progress: &dyn ImportProgress,
) -> Result<(Trace, Vec<String>)> {
    let mut schema =
        Schema::load(conn).map_err(|e| sqlite_err(path, "reading the table list", e))?;
    let mut warnings = std::mem::take(&mut schema.skipped);
    let repeated = read::repeated_string_ids(conn, &schema)
        .map_err(|e| sqlite_err(path, "checking StringIds", e))?;
    if repeated > 0 {
        schema.string_ids_repeat = true;
        warnings.push(format!(
            "StringIds repeats {repeated} ids; each id's smallest value names it, so no kernel or call is counted twice"
        ));
    }
    let has_cupti = schema::CUPTI_TABLES.iter().any(|t| schema.has_table(t));
    if !has_cupti && !schema.has_table(schema::STRING_IDS) {
        return Err(AnalyzerError::unsupported(
            path,
            "not an Nsight Systems export: it has no CUPTI_ACTIVITY_KIND_* tables and no StringIds table",
        ));
    }

    let mut notes = Vec::new();
    notes.push(version_note(conn, &schema, path)?);
    let gpus = gpu_infos(conn, &schema, path, &mut notes)?;
    notes.extend(missing_table_notes(&schema));

    let err = |what: &'static str| move |e: ReadError| sqlite_err(path, what, e);
    let copy_kinds =
        CopyKinds::load(conn, &schema).map_err(err("reading ENUM_CUDA_MEMCPY_OPER"))?;
    let nvtx_types = NvtxTypes::load(conn, &schema).map_err(err("reading ENUM_NSYS_EVENT_TYPE"))?;
    let classes =
        EventClasses::load(conn, &schema).map_err(err("reading ENUM_NSYS_EVENT_CLASS"))?;
    if schema.has_table(schema::MEMCPY) && !copy_kinds.has_table() {
        notes.push(
            "no ENUM_CUDA_MEMCPY_OPER table: copy kinds read with the documented CUPTI codes"
                .to_owned(),
        );
    }
    if schema.has_col(schema::RUNTIME, "eventClass") && !classes.has_table() {
        notes.push(
            "no ENUM_NSYS_EVENT_CLASS table: CUDA API rows classed with the documented codes (0 runtime, 1 driver, 67 backtrace)"
                .to_owned(),
        );
    }
    if schema.has_table(schema::NVTX) && !nvtx_types.from_file {
        notes.push(
            "no ENUM_NSYS_EVENT_TYPE table: NVTX ranges read as the documented event types 59 (push/pop) and 60 (start/end)"
                .to_owned(),
        );
    }

    let scanned = [
        schema::KERNEL,
        schema::MEMCPY,
        schema::MEMSET,
        schema::RUNTIME,
        schema::NVTX,
    ];
    let mut totals = HashMap::new();
    for t in scanned {
        let n = read::count(conn, &schema, t)
            .map_err(|e| sqlite_err(path, &format!("counting {t}"), e))?;
        totals.insert(t, n);
    }
    progress.start(Some(totals.values().sum()));

    let mut trace = Trace::new(Manifest::new(SOURCE_FORMAT));
    let mut skipped = Skipped::default();
    for t in scanned {
        if !schema.has_table(t) {
            continue;
        }
        let seen = match t {
            schema::KERNEL => {
                read::kernels(conn, &schema, progress, &mut trace, &mut skipped, limits)
            }
            schema::MEMCPY => read::memcpys(
                conn,
                &schema,
                progress,
                &copy_kinds,
                &mut trace,
                &mut skipped,
                limits,
            ),
            schema::MEMSET => {
                read::memsets(conn, &schema, progress, &mut trace, &mut skipped, limits)
            }
            schema::RUNTIME => read::launches(
                conn,
                &schema,
                progress,
                &classes,
                &mut trace,
                &mut skipped,
                limits,
            ),
            _ => read::nvtx_ranges(
                conn,
                &schema,
                progress,
                &nvtx_types,
                &mut trace,
                &mut skipped,
                limits,
            ),
        }
        .map_err(|e| sqlite_err(path, &format!("reading {t}"), e))?;
        // Scans that filter rows (NVTX keeps only ranges) still finish their share.
        let total = totals.get(t).copied().unwrap_or(0);
        if total > seen {
            progress.advance(total - seen);
        }
    }
    progress.finish();

    tracing::debug!(?skipped, "nsys rows skipped");
    notes.extend(skipped_notes(&skipped));
    trace.manifest.source_path = Some(path.display().to_string());
    trace.manifest.gpus = gpus;
    trace.manifest.notes = notes;
    Ok((trace, warnings))
}

/// Names the nsys release and export schema, which decide how far the data can be
/// trusted (and what to ask for when a user reports a problem).
fn version_note(conn: &Connection, schema: &Schema, path: &Path) -> Result<String> {
    let table = [schema::META_DATA_EXPORT, schema::EXPORT_META_DATA]
        .into_iter()
        .find(|t| schema.has_table(t) && schema.has_col(t, "name") && schema.has_col(t, "value"));
    let Some(table) = table else {
        return Ok(
            "no META_DATA_EXPORT or EXPORT_META_DATA table: Nsight Systems version unknown"
                .to_owned(),
        );
    };
    let rows = read::meta(conn, schema, table)
        .map_err(|e| sqlite_err(path, &format!("reading {table}"), e))?;
    let get = |key: &str| {
        rows.iter()
            .find(|(k, v)| k == key && !v.trim().is_empty())
            .map(|(_, v)| v.trim().to_owned())
    };
    let product = get("EXPORT_PRODUCT_VERSION");
    let export_schema = get("EXPORT_SCHEMA_VERSION").or_else(|| {
        let parts: Option<Vec<String>> = ["MAJOR", "MINOR", "MICRO"]
            .iter()
            .map(|p| get(&format!("EXPORT_SCHEMA_VERSION_{p}")))
            .collect();
        parts.map(|p| p.join("."))
    });
    Ok(match (product, export_schema) {
        (Some(p), Some(s)) => format!("Nsight Systems {p} export (export schema {s}, {table})"),
        (Some(p), None) => format!("Nsight Systems {p} export ({table})"),
        (None, Some(s)) => {
            format!("Nsight Systems export schema {s} ({table} names no product version)")
        }
        (None, None) => format!("{table} names no Nsight Systems version"),
    })
}

fn gpu_infos(
    conn: &Connection,
    schema: &Schema,
    path: &Path,
    notes: &mut Vec<String>,
) -> Result<Vec<GpuInfo>> {
    let mut gpus = if schema.has_table(schema::TARGET_INFO_GPU) {
        read::gpus(conn, schema).map_err(|e| sqlite_err(path, "reading TARGET_INFO_GPU", e))?
    } else if schema.has_table(schema::TARGET_INFO_CUDA_GPU) {
        notes.push("GPU facts from the nsys 2021 TARGET_INFO_CUDA_GPU table".to_owned());
        read::legacy_gpus(conn, schema)
            .map_err(|e| sqlite_err(path, "reading TARGET_INFO_CUDA_GPU", e))?
    } else {
        notes.push(
            "no TARGET_INFO_GPU table: GPU name, SM count and peak memory bandwidth unknown"
                .to_owned(),
        );
        return Ok(Vec::new());
    };
    let map = read::cuda_device_map(conn, schema)
        .map_err(|e| sqlite_err(path, "reading TARGET_INFO_CUDA_DEVICE", e))?;
    if !map.is_empty() {
        gpus = by_cuda_ordinal(gpus, &map, notes);
    }
    gpus.sort_by_key(|g| g.device);
    Ok(gpus)
}

/// Re-keys GPU facts by the CUDA ordinal the activity tables use. An ordinal that means
/// different GPUs in different processes keeps its first mapping, with a note.
fn by_cuda_ordinal(
    gpus: Vec<GpuInfo>,
    map: &[(i64, i64)],
    notes: &mut Vec<String>,
) -> Vec<GpuInfo> {
    let mut chosen: HashMap<i64, i64> = HashMap::new();
    let mut ambiguous = BTreeSet::new();
    let mut out = Vec::new();
    for &(cuda, gpu) in map {
        match chosen.get(&cuda) {
            Some(&g) if g != gpu => {
                ambiguous.insert(cuda);
                continue;
            }
            Some(_) => continue,
            None => {}
        }
        let (Ok(device), Some(info)) = (
            u32::try_from(cuda),
            gpus.iter().find(|g| i64::from(g.device) == gpu),
        ) else {
            continue;
        };
        chosen.insert(cuda, gpu);
        out.push(GpuInfo {
            device,
            ..info.clone()
        });
    }
    if !ambiguous.is_empty() {
        let list: Vec<String> = ambiguous.iter().map(i64::to_string).collect();
        notes.push(format!(
            "CUDA device {} names different GPUs in different processes; GPU facts use the first mapping",
            list.join(", ")
        ));
    }
    if out.is_empty() { gpus } else { out }
}

fn missing_table_notes(schema: &Schema) -> Vec<String> {
    let mut notes = Vec::new();
    for (table, what) in [
        (schema::KERNEL, "no kernel executions"),
        (schema::MEMCPY, "no memory copies"),
        (schema::MEMSET, "no memory sets"),
        (
            schema::RUNTIME,
            "no CUDA API calls, so launch gaps cannot be attributed",
        ),
    ] {
        if !schema.has_table(table) {
            notes.push(format!("no {table} table: the capture recorded {what}"));
        }
    }
    if !schema.has_table(schema::NVTX) {
        notes.push("no NVTX_EVENTS table: no NVTX ranges to mark steps".to_owned());
    }
    if !read::strings_usable(schema) {
        notes.push(
            "no usable StringIds table: kernel, API and registered NVTX names are unresolved"
                .to_owned(),
        );
    }
    notes
}

fn skipped_notes(s: &Skipped) -> Vec<String> {
    [
        (
            s.kernels_without_time,
            "kernel rows without start or end were skipped",
        ),
        (s.kernels_without_name, "kernels have no name in StringIds"),
        (
            s.memops_without_time,
            "memcpy/memset rows without start or end were skipped",
        ),
        (
            s.launches_without_time,
            "CUDA API rows without start or end were skipped",
        ),
        (
            s.backtrace_rows,
            "CUDA backtrace rows (stacks repeating an API call) were not counted as launches",
        ),
        (
            s.nvtx_without_end,
            "NVTX ranges without an end (still open when the capture stopped) were skipped",
        ),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::NoProgress;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/nsys")
            .join(name)
    }

    /// The step budget stops SQLite mid-query with a one-line refusal; the default budget
    /// leaves a real export far below it.
    #[test]
    fn the_step_budget_interrupts_sqlite() {
        let p = fixture("nsys-2025.3.sqlite");
        let opts = ImportOptions::default();
        let e = import_budgeted(&p, &opts, &NoProgress, Some(0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("SQLite steps") && !e.contains('\n'), "{e}");
        let (t, _) = import_budgeted(&p, &opts, &NoProgress, None).unwrap();
        assert_eq!(t.kernels.len(), 6);
        // Measure what a real read of this fixture costs, against its default budget.
        let used = (0..40)
            .map(|i| 1u64 << i)
            .find(|&b| import_budgeted(&p, &opts, &NoProgress, Some(b)).is_ok())
            .unwrap();
        let len = std::fs::metadata(&p).unwrap().len();
        eprintln!("fixture: {len} bytes read within {used} steps");
        assert!(used * 10 < STEP_BUDGET_BASE);
    }
}
