//! Row readers: one streamed scan per activity table, decoded by position from a query
//! whose shape never changes (absent columns are selected as `NULL`).

use gapscope_traces::{
    GpuInfo, KernelRow, LaunchRow, MarkerRow, MarkerSource, MemopKind, MemopRow, NO_STR,
    StringTable, Trace,
};
use rusqlite::types::{Type, ValueRef};
use rusqlite::{Connection, Row};

use super::enums::{ApiClass, CopyKinds, EventClasses, NvtxTypes};
use super::schema::{self, Schema};
use crate::error::AnalyzerError;
use crate::import::ImportProgress;
use crate::import::limits::Budget;

/// How often a scan reports progress, in rows.
const PROGRESS_EVERY: u64 = 4096;

/// Rows a scan dropped, for the manifest notes.
#[derive(Debug, Default)]
pub(super) struct Skipped {
    pub(super) kernels_without_time: u64,
    pub(super) kernels_without_name: u64,
    pub(super) memops_without_time: u64,
    pub(super) launches_without_time: u64,
    pub(super) backtrace_rows: u64,
    pub(super) nvtx_without_end: u64,
}

/// Why a read stopped.
#[derive(Debug)]
pub(super) enum ReadError {
    /// SQLite's own error (a malformed page, the step budget's interruption).
    Sqlite(rusqlite::Error),
    /// A value that is not of the kind its column holds in an export, or text that is not
    /// valid in the database's encoding.
    Decode(String),
    /// The import's event or name limit; [`Limits::failed`] keeps the error to report.
    Limit(String),
}

impl From<rusqlite::Error> for ReadError {
    fn from(e: rusqlite::Error) -> Self {
        Self::Sqlite(e)
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Sqlite(e) => e.fmt(f),
            Self::Decode(m) | Self::Limit(m) => f.write_str(m),
        }
    }
}

/// The import's event budget, seen from inside a row callback: passing a limit stops the
/// scan and keeps the error for the caller.
pub(super) struct Limits {
    pub(super) budget: Budget,
    pub(super) failed: Option<AnalyzerError>,
}

impl Limits {
    fn check(&mut self, r: crate::error::Result<()>) -> Result<(), ReadError> {
        r.map_err(|e| {
            let m = e.to_string();
            self.failed = Some(e);
            ReadError::Limit(m)
        })
    }

    fn event(&mut self) -> Result<(), ReadError> {
        let r = self.budget.event();
        self.check(r)
    }

    fn names(&mut self, strings: &StringTable) -> Result<(), ReadError> {
        let r = self.budget.names(strings);
        self.check(r)
    }
}

/// Streams every row of `q` through `on_row` and returns how many rows it saw: rows flow
/// one at a time from SQLite into the trace tables, so memory stays bounded by them.
fn stream<F>(
    conn: &Connection,
    progress: &dyn ImportProgress,
    q: String,
    mut on_row: F,
) -> Result<u64, ReadError>
where
    F: FnMut(&Row<'_>) -> Result<(), ReadError>,
{
    let mut stmt = conn.prepare(&q)?;
    let mut rows = stmt.query([])?;
    let mut seen = 0u64;
    let mut pending = 0u64;
    while let Some(row) = rows.next()? {
        on_row(row)?;
        seen += 1;
        pending += 1;
        if pending >= PROGRESS_EVERY {
            progress.advance(pending);
            pending = 0;
        }
    }
    progress.advance(pending);
    Ok(seen)
}

/// Every row of `q` (a small table: metadata, GPUs, enums), each mapped by `f`.
pub(super) fn collect<T>(
    conn: &Connection,
    q: &str,
    mut f: impl FnMut(&Row<'_>) -> Result<Option<T>, ReadError>,
) -> Result<Vec<T>, ReadError> {
    let mut stmt = conn.prepare(q)?;
    let mut rows = stmt.query([])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        out.extend(f(row)?);
    }
    Ok(out)
}

/// A value of the wrong kind in column `i`.
fn mismatch(cols: &[&str], i: usize, got: Type, want: &str) -> ReadError {
    let col = cols.get(i).copied().unwrap_or("?");
    ReadError::Decode(format!(
        "column {col}: {} value where {want} was expected",
        match got {
            Type::Null => "a NULL",
            Type::Integer => "an integer",
            Type::Real => "a real",
            Type::Text => "a text",
            Type::Blob => "a blob",
        }
    ))
}

/// An integer column (`None` for NULL); any other kind of value is an error.
pub(super) fn int(row: &Row<'_>, i: usize, cols: &[&str]) -> Result<Option<i64>, ReadError> {
    match row.get_ref(i)? {
        ValueRef::Null => Ok(None),
        ValueRef::Integer(v) => Ok(Some(v)),
        v => Err(mismatch(cols, i, v.data_type(), "an integer")),
    }
}

/// A text column (`None` for NULL), as UTF-8 (SQLite converts a UTF-16 database's text);
/// any other kind of value, or bytes that are not UTF-8, is an error.
pub(super) fn text<'r>(
    row: &'r Row<'_>,
    i: usize,
    cols: &[&str],
) -> Result<Option<&'r str>, ReadError> {
    match row.get_ref(i)? {
        ValueRef::Null => Ok(None),
        ValueRef::Text(b) => std::str::from_utf8(b).map(Some).map_err(|e| {
            let col = cols.get(i).copied().unwrap_or("?");
            ReadError::Decode(format!("column {col}: text that is not UTF-8: {e}"))
        }),
        v => Err(mismatch(cols, i, v.data_type(), "text")),
    }
}

/// CUPTI ids are unsigned 32-bit; anything else (NULL, negative, too large) is 0.
fn u32_of(v: Option<i64>) -> u32 {
    v.and_then(|v| u32::try_from(v).ok()).unwrap_or(0)
}

fn u64_of(v: Option<i64>) -> u64 {
    v.and_then(|v| u64::try_from(v).ok()).unwrap_or(0)
}

/// nsys packs a GlobalId as hw/vm id in the top bits, then 24 bits of pid, then 24 bits
/// of tid.
fn pid_of(global_tid: i64) -> u32 {
    ((global_tid >> 24) & 0xFF_FFFF) as u32
}

fn tid_of(global_tid: i64) -> u64 {
    (global_tid & 0xFF_FFFF) as u64
}

fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// `cudaLaunchKernel_v7000` → `cudaLaunchKernel`: nsys keeps the API version suffix,
/// while rules and reports name the call.
fn strip_api_version(name: &str) -> &str {
    match name.rsplit_once("_v") {
        Some((base, ver))
            if !base.is_empty() && !ver.is_empty() && ver.bytes().all(|b| b.is_ascii_digit()) =>
        {
            base
        }
        _ => name,
    }
}

/// Builds `SELECT <cols> FROM <table> AS <alias> <joins> <tail>` where each plain column
/// becomes `NULL` when the file lacks it; `extra` entries are raw expressions.
fn select(schema: &Schema, table: &str, alias: &str, cols: &[Col]) -> String {
    let exprs: Vec<String> = cols
        .iter()
        .map(|c| match c {
            Col::Plain(name) => schema.col(alias, table, name),
            Col::Expr(e) => e.clone(),
        })
        .collect();
    format!(
        "SELECT {} FROM {} AS {alias}",
        exprs.join(", "),
        schema.table_ref(table)
    )
}

enum Col {
    Plain(&'static str),
    Expr(String),
}

/// A name column resolved through `StringIds`: a join plus the `value` expression, or a
/// bare `NULL` when the file has no usable `StringIds` or no such column.
fn string_join(
    schema: &Schema,
    table: &str,
    alias: &str,
    col: &str,
    join_alias: &str,
) -> (Col, String) {
    if strings_usable(schema) && schema.has_col(table, col) {
        (
            Col::Expr(format!("{join_alias}.\"value\"")),
            format!(
                " LEFT JOIN {} AS {join_alias} ON {join_alias}.\"id\" = {}",
                strings_source(schema),
                schema.col(alias, table, col)
            ),
        )
    } else {
        (Col::Expr("NULL".to_owned()), String::new())
    }
}

/// `StringIds`, or when its ids repeat, one row per id (the smallest value): joining a
/// repeated id would repeat the kernel or call that names it.
fn strings_source(schema: &Schema) -> String {
    let t = schema.table_ref(schema::STRING_IDS);
    if schema.string_ids_repeat {
        let id = schema.col("s", schema::STRING_IDS, "id");
        let value = schema.col("s", schema::STRING_IDS, "value");
        format!("(SELECT {id} AS \"id\", MIN({value}) AS \"value\" FROM {t} AS s GROUP BY {id})")
    } else {
        t
    }
}

/// How many rows of `StringIds` repeat an id already there.
pub(super) fn repeated_string_ids(conn: &Connection, schema: &Schema) -> Result<u64, ReadError> {
    if !strings_usable(schema) {
        return Ok(0);
    }
    let id = schema.col("s", schema::STRING_IDS, "id");
    let q = format!(
        "SELECT COUNT(*) - COUNT(DISTINCT {id}) FROM {} AS s",
        schema.table_ref(schema::STRING_IDS)
    );
    let n: i64 = conn.query_row(&q, [], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub(super) fn strings_usable(schema: &Schema) -> bool {
    schema.has_col(schema::STRING_IDS, "id") && schema.has_col(schema::STRING_IDS, "value")
}

/// Row count of a table, for the progress total.
pub(super) fn count(conn: &Connection, schema: &Schema, table: &str) -> Result<u64, ReadError> {
    if !schema.has_table(table) {
        return Ok(0);
    }
    let q = format!("SELECT COUNT(*) FROM {}", schema.table_ref(table));
    let n: i64 = conn.query_row(&q, [], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub(super) fn kernels(
    conn: &Connection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, ReadError> {
    let t = schema::KERNEL;
    let (demangled, join_d) = string_join(schema, t, "k", "demangledName", "d");
    let (short, join_s) = string_join(schema, t, "k", "shortName", "s");
    const NAMES: [&str; 19] = [
        "start",
        "end",
        "deviceId",
        "contextId",
        "streamId",
        "correlationId",
        "demangledName",
        "shortName",
        "gridX",
        "gridY",
        "gridZ",
        "blockX",
        "blockY",
        "blockZ",
        "registersPerThread",
        "staticSharedMemory",
        "dynamicSharedMemory",
        "graphNodeId",
        "graphId",
    ];
    let mut cols: Vec<Col> = NAMES[..6].iter().map(|&n| Col::Plain(n)).collect();
    cols.push(demangled);
    cols.push(short);
    cols.extend(NAMES[8..].iter().map(|&n| Col::Plain(n)));
    let q = format!("{}{join_d}{join_s}", select(schema, t, "k", &cols));

    let strings: &mut StringTable = &mut trace.strings;
    let table = &mut trace.kernels;
    stream(conn, progress, q, |row| {
        let (Some(start), Some(end)) = (int(row, 0, &NAMES)?, int(row, 1, &NAMES)?) else {
            skipped.kernels_without_time += 1;
            return Ok(());
        };
        limits.event()?;
        let name = match non_empty(text(row, 6, &NAMES)?).or(non_empty(text(row, 7, &NAMES)?)) {
            Some(n) => strings.intern(n),
            None => {
                skipped.kernels_without_name += 1;
                NO_STR
            }
        };
        limits.names(strings)?;
        let u = |i: usize| int(row, i, &NAMES).map(u32_of);
        table.push(KernelRow {
            device: u(2)?,
            context: u(3)?,
            stream: u(4)?,
            correlation: u64_of(int(row, 5, &NAMES)?),
            name,
            gpu_start_ns: start,
            gpu_end_ns: end,
            grid_x: u(8)?,
            grid_y: u(9)?,
            grid_z: u(10)?,
            block_x: u(11)?,
            block_y: u(12)?,
            block_z: u(13)?,
            registers_per_thread: u(14)?,
            static_smem_bytes: u(15)?,
            dynamic_smem_bytes: u(16)?,
            graph_node_id: u64_of(int(row, 17, &NAMES)?),
            graph_id: u(18)?,
            ..Default::default()
        });
        Ok(())
    })
}

const MEMOP_NAMES: [&str; 9] = [
    "start",
    "end",
    "deviceId",
    "contextId",
    "streamId",
    "correlationId",
    "bytes",
    "graphId",
    "copyKind",
];

pub(super) fn memcpys(
    conn: &Connection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    copy_kinds: &CopyKinds,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, ReadError> {
    let cols: Vec<Col> = MEMOP_NAMES.iter().map(|&n| Col::Plain(n)).collect();
    let q = select(schema, schema::MEMCPY, "m", &cols);
    let strings = &mut trace.strings;
    let table = &mut trace.memops;
    stream(conn, progress, q, |row| {
        let (kind, label) = copy_kinds.get(int(row, 8, &MEMOP_NAMES)?);
        let name = strings.intern(&format!("[CUDA memcpy {label}]"));
        push_memop(row, kind, name, table, skipped, limits)
    })
}

pub(super) fn memsets(
    conn: &Connection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, ReadError> {
    let cols: Vec<Col> = MEMOP_NAMES[..8].iter().map(|&n| Col::Plain(n)).collect();
    let q = select(schema, schema::MEMSET, "m", &cols);
    let name = trace.strings.intern("[CUDA memset]");
    let table = &mut trace.memops;
    stream(conn, progress, q, |row| {
        push_memop(row, MemopKind::Memset, name, table, skipped, limits)
    })
}

fn push_memop(
    row: &Row<'_>,
    kind: MemopKind,
    name: u32,
    table: &mut gapscope_traces::MemopTable,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<(), ReadError> {
    let n = &MEMOP_NAMES;
    let (Some(start), Some(end)) = (int(row, 0, n)?, int(row, 1, n)?) else {
        skipped.memops_without_time += 1;
        return Ok(());
    };
    limits.event()?;
    table.push(MemopRow {
        device: u32_of(int(row, 2, n)?),
        context: u32_of(int(row, 3, n)?),
        stream: u32_of(int(row, 4, n)?),
        correlation: u64_of(int(row, 5, n)?),
        name,
        kind: kind as u8,
        bytes: u64_of(int(row, 6, n)?),
        gpu_start_ns: start,
        gpu_end_ns: end,
        graph_id: u32_of(int(row, 7, n)?),
        ..MemopRow::default()
    });
    Ok(())
}

pub(super) fn launches(
    conn: &Connection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    classes: &EventClasses,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, ReadError> {
    const NAMES: [&str; 6] = [
        "start",
        "end",
        "globalTid",
        "correlationId",
        "eventClass",
        "nameId",
    ];
    let t = schema::RUNTIME;
    let (name_col, join) = string_join(schema, t, "r", "nameId", "n");
    let mut cols: Vec<Col> = NAMES[..5].iter().map(|&n| Col::Plain(n)).collect();
    cols.push(name_col);
    let q = format!("{}{join}", select(schema, t, "r", &cols));
    let strings = &mut trace.strings;
    let table = &mut trace.launches;
    stream(conn, progress, q, |row| {
        let api = match classes.get(int(row, 4, &NAMES)?) {
            ApiClass::Backtrace => {
                skipped.backtrace_rows += 1;
                return Ok(());
            }
            ApiClass::Api(api) => api,
        };
        let (Some(start), Some(end)) = (int(row, 0, &NAMES)?, int(row, 1, &NAMES)?) else {
            skipped.launches_without_time += 1;
            return Ok(());
        };
        limits.event()?;
        let gtid = int(row, 2, &NAMES)?.unwrap_or(0);
        let name = non_empty(text(row, 5, &NAMES)?)
            .map_or(NO_STR, |n| strings.intern(strip_api_version(n)));
        limits.names(strings)?;
        table.push(LaunchRow {
            pid: pid_of(gtid),
            tid: tid_of(gtid),
            correlation: u64_of(int(row, 3, &NAMES)?),
            name,
            api: api as u8,
            host_start_ns: start,
            host_end_ns: end,
        });
        Ok(())
    })
}

pub(super) fn nvtx_ranges(
    conn: &Connection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    types: &NvtxTypes,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, ReadError> {
    const NAMES: [&str; 5] = ["start", "end", "globalTid", "text", "textId"];
    let t = schema::NVTX;
    if types.ranges.is_empty() || !schema.has_col(t, "eventType") {
        return Ok(0);
    }
    let (registered, join) = string_join(schema, t, "e", "textId", "s");
    let mut cols: Vec<Col> = NAMES[..4].iter().map(|&n| Col::Plain(n)).collect();
    cols.push(registered);
    let mut ids: Vec<i64> = types.ranges.iter().copied().collect();
    ids.sort_unstable();
    let ids: Vec<String> = ids.iter().map(i64::to_string).collect();
    let q = format!(
        "{}{join} WHERE {} IN ({})",
        select(schema, t, "e", &cols),
        schema.col("e", t, "eventType"),
        ids.join(", ")
    );
    let strings = &mut trace.strings;
    let table = &mut trace.markers;
    stream(conn, progress, q, |row| {
        let (Some(start), Some(end)) = (int(row, 0, &NAMES)?, int(row, 1, &NAMES)?) else {
            skipped.nvtx_without_end += 1;
            return Ok(());
        };
        limits.event()?;
        let name = non_empty(text(row, 3, &NAMES)?)
            .or(non_empty(text(row, 4, &NAMES)?))
            .map_or(NO_STR, |n| strings.intern(n));
        limits.names(strings)?;
        // `i64::MIN` means "no range on this clock" in the marker table; a real time of
        // that value is one nanosecond later (and `import::clamp` bounds it anyway).
        table.push(MarkerRow {
            name,
            source: MarkerSource::Nvtx as u8,
            tid: int(row, 2, &NAMES)?.map_or(0, tid_of),
            host_start_ns: start.max(i64::MIN + 1),
            host_end_ns: end.max(i64::MIN + 1),
            ..Default::default()
        });
        Ok(())
    })
}

/// `(name, value)` rows of the export's metadata table.
pub(super) fn meta(
    conn: &Connection,
    schema: &Schema,
    table: &str,
) -> Result<Vec<(String, String)>, ReadError> {
    const NAMES: [&str; 2] = ["name", "value"];
    let cols = [Col::Plain("name"), Col::Plain("value")];
    let q = select(schema, table, "m", &cols);
    collect(conn, &q, |row| {
        let name = text(row, 0, &NAMES)?;
        let value = text(row, 1, &NAMES)?;
        Ok(name.map(|n| (n.to_owned(), value.unwrap_or_default().to_owned())))
    })
}

/// GPUs from `TARGET_INFO_GPU` (nsys 2021.3 and later), keyed by the device id the
/// activity tables use.
pub(super) fn gpus(conn: &Connection, schema: &Schema) -> Result<Vec<GpuInfo>, ReadError> {
    let t = schema::TARGET_INFO_GPU;
    const NAMES: [&str; 9] = [
        "id",
        "name",
        "smCount",
        "totalMemory",
        "memoryBandwidth",
        "l2CacheSize",
        "clockRate",
        "computeMajor",
        "computeMinor",
    ];
    let cols: Vec<Col> = NAMES.iter().map(|&n| Col::Plain(n)).collect();
    let q = format!("{} ORDER BY 1", select(schema, t, "g", &cols));
    collect(conn, &q, |row| {
        let Some(id) = int(row, 0, &NAMES)? else {
            return Ok(None);
        };
        let pos = |i: usize| -> Result<Option<u64>, ReadError> {
            Ok(int(row, i, &NAMES)?
                .and_then(|v| u64::try_from(v).ok())
                .filter(|&v| v > 0))
        };
        Ok(Some(GpuInfo {
            device: u32_of(Some(id)),
            name: text(row, 1, &NAMES)?.unwrap_or_default().to_owned(),
            sm_count: pos(2)?.and_then(|v| u32::try_from(v).ok()),
            total_memory_bytes: pos(3)?,
            // nsys documents the unit loosely; the values it stores are bytes per second.
            memory_bandwidth_bytes_per_s: pos(4)?.map(|v| v as f64),
            l2_cache_bytes: pos(5)?,
            // clockRate is in Hz.
            sm_clock_khz: pos(6)?.map(|hz| hz / 1000),
            compute_capability: compute_capability(int(row, 7, &NAMES)?, int(row, 8, &NAMES)?),
            warp_size: None,
        }))
    })
}

/// GPUs from `TARGET_INFO_CUDA_GPU`, the table nsys 2021.1 and 2021.2 wrote instead of
/// `TARGET_INFO_GPU`. Its columns carry CUPTI's device-record names and units (clock in
/// kHz, bandwidth in KB/s).
pub(super) fn legacy_gpus(conn: &Connection, schema: &Schema) -> Result<Vec<GpuInfo>, ReadError> {
    let t = schema::TARGET_INFO_CUDA_GPU;
    const NAMES: [&str; 10] = [
        "deviceId",
        "id",
        "name",
        "numMultiprocessors",
        "globalMemorySize",
        "globalMemoryBandwidth",
        "l2CacheSize",
        "coreClockRate",
        "computeCapabilityMajor",
        "computeCapabilityMinor",
    ];
    let cols: Vec<Col> = NAMES.iter().map(|&n| Col::Plain(n)).collect();
    let q = select(schema, t, "g", &cols);
    collect(conn, &q, |row| {
        let Some(id) = int(row, 0, &NAMES)?.or(int(row, 1, &NAMES)?) else {
            return Ok(None);
        };
        let pos = |i: usize| -> Result<Option<u64>, ReadError> {
            Ok(int(row, i, &NAMES)?
                .and_then(|v| u64::try_from(v).ok())
                .filter(|&v| v > 0))
        };
        Ok(Some(GpuInfo {
            device: u32_of(Some(id)),
            name: text(row, 2, &NAMES)?.unwrap_or_default().to_owned(),
            sm_count: pos(3)?.and_then(|v| u32::try_from(v).ok()),
            total_memory_bytes: pos(4)?,
            memory_bandwidth_bytes_per_s: pos(5)?.map(|kb| kb as f64 * 1000.0),
            l2_cache_bytes: pos(6)?,
            sm_clock_khz: pos(7)?,
            compute_capability: compute_capability(int(row, 8, &NAMES)?, int(row, 9, &NAMES)?),
            warp_size: None,
        }))
    })
}

/// `(cudaId, gpuId)` pairs from `TARGET_INFO_CUDA_DEVICE`: activity rows name a GPU by
/// the process's CUDA ordinal, which differs from `TARGET_INFO_GPU.id` under
/// `CUDA_VISIBLE_DEVICES`.
pub(super) fn cuda_device_map(
    conn: &Connection,
    schema: &Schema,
) -> Result<Vec<(i64, i64)>, ReadError> {
    let t = schema::TARGET_INFO_CUDA_DEVICE;
    if !schema.has_col(t, "cudaId") || !schema.has_col(t, "gpuId") {
        return Ok(Vec::new());
    }
    const NAMES: [&str; 2] = ["cudaId", "gpuId"];
    let cols = [Col::Plain("cudaId"), Col::Plain("gpuId")];
    let q = format!(
        "SELECT DISTINCT * FROM ({}) ORDER BY 1, 2",
        select(schema, t, "c", &cols)
    );
    collect(conn, &q, |row| {
        Ok(match (int(row, 0, &NAMES)?, int(row, 1, &NAMES)?) {
            (Some(cuda), Some(gpu)) => Some((cuda, gpu)),
            _ => None,
        })
    })
}

fn compute_capability(major: Option<i64>, minor: Option<i64>) -> Option<String> {
    match (major, minor) {
        (Some(a), Some(b)) if a > 0 => Some(format!("{a}.{b}")),
        (Some(a), None) if a > 0 => Some(format!("{a}")),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_tid_decodes_pid_and_tid_below_the_vm_bits() {
        let g = (1i64 << 48) | (4242 << 24) | 4243;
        assert_eq!(pid_of(g), 4242);
        assert_eq!(tid_of(g), 4243);
    }

    #[test]
    fn api_version_suffix_is_stripped_only_when_numeric() {
        assert_eq!(
            strip_api_version("cudaLaunchKernel_v7000"),
            "cudaLaunchKernel"
        );
        assert_eq!(strip_api_version("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(
            strip_api_version("cudaGraphLaunch_v10000"),
            "cudaGraphLaunch"
        );
        assert_eq!(strip_api_version("my_vector_add"), "my_vector_add");
        assert_eq!(strip_api_version("_v12"), "_v12");
    }

    #[test]
    fn compute_capability_formats() {
        assert_eq!(compute_capability(Some(9), Some(0)).as_deref(), Some("9.0"));
        assert_eq!(compute_capability(Some(0), Some(0)), None);
        assert_eq!(compute_capability(None, None), None);
    }
}
