// Long on purpose: one reader per nsys table, plus the legacy schemas.
//! Row readers: one streamed scan per activity table, decoded by position from a query
//! whose shape never changes (absent columns are selected as `NULL`).

use gapscope_traces::{
    GpuInfo, KernelRow, LaunchRow, MarkerRow, MarkerSource, MemopKind, MemopRow, NO_STR,
    StringTable, Trace,
};
use sqlx::Row;
use sqlx::sqlite::{SqliteConnection, SqliteRow};

use super::enums::{ApiClass, CopyKinds, EventClasses, NvtxTypes};
use super::schema::{self, Schema, sql};
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

/// The import's event budget, seen from inside a row callback: passing a limit stops the
/// scan with a placeholder driver error and keeps the real one for the caller.
pub(super) struct Limits {
    pub(super) budget: Budget,
    pub(super) failed: Option<AnalyzerError>,
}

impl Limits {
    fn check(&mut self, r: crate::error::Result<()>) -> Result<(), sqlx::Error> {
        r.map_err(|e| {
            let m = e.to_string();
            self.failed = Some(e);
            sqlx::Error::Protocol(m)
        })
    }

    fn event(&mut self) -> Result<(), sqlx::Error> {
        let r = self.budget.event();
        self.check(r)
    }

    fn names(&mut self, strings: &StringTable) -> Result<(), sqlx::Error> {
        let r = self.budget.names(strings);
        self.check(r)
    }
}

/// Streams every row of `q` through `on_row` and returns how many rows it saw.
/// `fetch_all` on a mapped query collects only the closure's `()` results (a `Vec<()>`
/// never allocates), so rows flow one at a time from SQLite's worker into the trace
/// tables and memory stays bounded by them. (Driving `fetch` as a stream would need the
/// `futures` traits, which this crate does not depend on.)
async fn stream<F>(
    conn: &mut SqliteConnection,
    progress: &dyn ImportProgress,
    q: String,
    mut on_row: F,
) -> Result<u64, sqlx::Error>
where
    F: FnMut(&SqliteRow) -> Result<(), sqlx::Error> + Send,
{
    let mut seen = 0u64;
    let mut pending = 0u64;
    let (seen_ref, pending_ref) = (&mut seen, &mut pending);
    let _: Vec<()> = sqlx::query(sql(q))
        .try_map(|row: SqliteRow| {
            on_row(&row)?;
            *seen_ref += 1;
            *pending_ref += 1;
            if *pending_ref >= PROGRESS_EVERY {
                progress.advance(*pending_ref);
                *pending_ref = 0;
            }
            Ok(())
        })
        .fetch_all(&mut *conn)
        .await?;
    progress.advance(pending);
    Ok(seen)
}

fn decode_err(col: &str, e: sqlx::Error) -> sqlx::Error {
    sqlx::Error::Decode(format!("column {col}: {e}").into())
}

fn int(row: &SqliteRow, i: usize, cols: &[&str]) -> Result<Option<i64>, sqlx::Error> {
    row.try_get::<Option<i64>, _>(i)
        .map_err(|e| decode_err(cols.get(i).copied().unwrap_or("?"), e))
}

fn text<'r>(row: &'r SqliteRow, i: usize, cols: &[&str]) -> Result<Option<&'r str>, sqlx::Error> {
    row.try_get::<Option<&str>, _>(i)
        .map_err(|e| decode_err(cols.get(i).copied().unwrap_or("?"), e))
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
pub(super) async fn repeated_string_ids(
    conn: &mut SqliteConnection,
    schema: &Schema,
) -> Result<u64, sqlx::Error> {
    if !strings_usable(schema) {
        return Ok(0);
    }
    let id = schema.col("s", schema::STRING_IDS, "id");
    let q = format!(
        "SELECT COUNT(*) - COUNT(DISTINCT {id}) FROM {} AS s",
        schema.table_ref(schema::STRING_IDS)
    );
    let n: i64 = sqlx::query_scalar(sql(q)).fetch_one(&mut *conn).await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub(super) fn strings_usable(schema: &Schema) -> bool {
    schema.has_col(schema::STRING_IDS, "id") && schema.has_col(schema::STRING_IDS, "value")
}

/// Row count of a table, for the progress total.
pub(super) async fn count(
    conn: &mut SqliteConnection,
    schema: &Schema,
    table: &str,
) -> Result<u64, sqlx::Error> {
    if !schema.has_table(table) {
        return Ok(0);
    }
    let q = format!("SELECT COUNT(*) FROM {}", schema.table_ref(table));
    let n: i64 = sqlx::query_scalar(sql(q)).fetch_one(&mut *conn).await?;
    Ok(u64::try_from(n).unwrap_or(0))
}

pub(super) async fn kernels(
    conn: &mut SqliteConnection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, sqlx::Error> {
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
    .await
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

pub(super) async fn memcpys(
    conn: &mut SqliteConnection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    copy_kinds: &CopyKinds,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, sqlx::Error> {
    let cols: Vec<Col> = MEMOP_NAMES.iter().map(|&n| Col::Plain(n)).collect();
    let q = select(schema, schema::MEMCPY, "m", &cols);
    let strings = &mut trace.strings;
    let table = &mut trace.memops;
    stream(conn, progress, q, |row| {
        let (kind, label) = copy_kinds.get(int(row, 8, &MEMOP_NAMES)?);
        let name = strings.intern(&format!("[CUDA memcpy {label}]"));
        push_memop(row, kind, name, table, skipped, limits)
    })
    .await
}

pub(super) async fn memsets(
    conn: &mut SqliteConnection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, sqlx::Error> {
    let cols: Vec<Col> = MEMOP_NAMES[..8].iter().map(|&n| Col::Plain(n)).collect();
    let q = select(schema, schema::MEMSET, "m", &cols);
    let name = trace.strings.intern("[CUDA memset]");
    let table = &mut trace.memops;
    stream(conn, progress, q, |row| {
        push_memop(row, MemopKind::Memset, name, table, skipped, limits)
    })
    .await
}

fn push_memop(
    row: &SqliteRow,
    kind: MemopKind,
    name: u32,
    table: &mut gapscope_traces::MemopTable,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<(), sqlx::Error> {
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

pub(super) async fn launches(
    conn: &mut SqliteConnection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    classes: &EventClasses,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, sqlx::Error> {
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
    .await
}

pub(super) async fn nvtx_ranges(
    conn: &mut SqliteConnection,
    schema: &Schema,
    progress: &dyn ImportProgress,
    types: &NvtxTypes,
    trace: &mut Trace,
    skipped: &mut Skipped,
    limits: &mut Limits,
) -> Result<u64, sqlx::Error> {
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
    .await
}

/// `(name, value)` rows of the export's metadata table.
pub(super) async fn meta(
    conn: &mut SqliteConnection,
    schema: &Schema,
    table: &str,
) -> Result<Vec<(String, String)>, sqlx::Error> {
    let cols = [Col::Plain("name"), Col::Plain("value")];
    let q = select(schema, table, "m", &cols);
    let mut out = Vec::new();
    for row in sqlx::query(sql(q)).fetch_all(&mut *conn).await? {
        let name: Option<String> = row.try_get(0)?;
        let value: Option<String> = row.try_get(1)?;
        if let Some(name) = name {
            out.push((name, value.unwrap_or_default()));
        }
    }
    Ok(out)
}

/// GPUs from `TARGET_INFO_GPU` (nsys 2021.3 and later), keyed by the device id the
/// activity tables use.
pub(super) async fn gpus(
    conn: &mut SqliteConnection,
    schema: &Schema,
) -> Result<Vec<GpuInfo>, sqlx::Error> {
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
    let mut out = Vec::new();
    for row in sqlx::query(sql(q)).fetch_all(&mut *conn).await? {
        let Some(id) = int(&row, 0, &NAMES)? else {
            continue;
        };
        let pos = |i: usize| -> Result<Option<u64>, sqlx::Error> {
            Ok(int(&row, i, &NAMES)?
                .and_then(|v| u64::try_from(v).ok())
                .filter(|&v| v > 0))
        };
        out.push(GpuInfo {
            device: u32_of(Some(id)),
            name: text(&row, 1, &NAMES)?.unwrap_or_default().to_owned(),
            sm_count: pos(2)?.and_then(|v| u32::try_from(v).ok()),
            total_memory_bytes: pos(3)?,
            // nsys documents the unit loosely; the values it stores are bytes per second.
            memory_bandwidth_bytes_per_s: pos(4)?.map(|v| v as f64),
            l2_cache_bytes: pos(5)?,
            // clockRate is in Hz.
            sm_clock_khz: pos(6)?.map(|hz| hz / 1000),
            compute_capability: compute_capability(int(&row, 7, &NAMES)?, int(&row, 8, &NAMES)?),
        });
    }
    Ok(out)
}

/// GPUs from `TARGET_INFO_CUDA_GPU`, the table nsys 2021.1 and 2021.2 wrote instead of
/// `TARGET_INFO_GPU`. Its columns carry CUPTI's device-record names and units (clock in
/// kHz, bandwidth in KB/s).
pub(super) async fn legacy_gpus(
    conn: &mut SqliteConnection,
    schema: &Schema,
) -> Result<Vec<GpuInfo>, sqlx::Error> {
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
    let mut out = Vec::new();
    for row in sqlx::query(sql(q)).fetch_all(&mut *conn).await? {
        let Some(id) = int(&row, 0, &NAMES)?.or(int(&row, 1, &NAMES)?) else {
            continue;
        };
        let pos = |i: usize| -> Result<Option<u64>, sqlx::Error> {
            Ok(int(&row, i, &NAMES)?
                .and_then(|v| u64::try_from(v).ok())
                .filter(|&v| v > 0))
        };
        out.push(GpuInfo {
            device: u32_of(Some(id)),
            name: text(&row, 2, &NAMES)?.unwrap_or_default().to_owned(),
            sm_count: pos(3)?.and_then(|v| u32::try_from(v).ok()),
            total_memory_bytes: pos(4)?,
            memory_bandwidth_bytes_per_s: pos(5)?.map(|kb| kb as f64 * 1000.0),
            l2_cache_bytes: pos(6)?,
            sm_clock_khz: pos(7)?,
            compute_capability: compute_capability(int(&row, 8, &NAMES)?, int(&row, 9, &NAMES)?),
        });
    }
    Ok(out)
}

/// `(cudaId, gpuId)` pairs from `TARGET_INFO_CUDA_DEVICE`: activity rows name a GPU by
/// the process's CUDA ordinal, which differs from `TARGET_INFO_GPU.id` under
/// `CUDA_VISIBLE_DEVICES`.
pub(super) async fn cuda_device_map(
    conn: &mut SqliteConnection,
    schema: &Schema,
) -> Result<Vec<(i64, i64)>, sqlx::Error> {
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
    let mut out = Vec::new();
    for row in sqlx::query(sql(q)).fetch_all(&mut *conn).await? {
        if let (Some(cuda), Some(gpu)) = (int(&row, 0, &NAMES)?, int(&row, 1, &NAMES)?) {
            out.push((cuda, gpu));
        }
    }
    Ok(out)
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
