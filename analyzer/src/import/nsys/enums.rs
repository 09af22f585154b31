//! The `ENUM_*` tables an export carries about itself. Their ids are read from the file,
//! because nsys documents the tables, not the numbers; the documented numbers are only a
//! fallback for files that lack a table.

use std::collections::{HashMap, HashSet};

use gapscope_traces::{LaunchApi, MemopKind};
use rusqlite::Connection;

use super::read::{ReadError, collect, int, text};
use super::schema::{self, Schema};

/// One `ENUM_*` row: numeric id, symbol name, human label.
#[derive(Debug, Clone)]
struct EnumRow {
    id: i64,
    name: String,
    label: String,
}

fn read_enum(
    conn: &Connection,
    schema: &Schema,
    table: &str,
) -> Result<Option<Vec<EnumRow>>, ReadError> {
    const NAMES: [&str; 3] = ["id", "name", "label"];
    if !schema.has_table(table) || !schema.has_col(table, "id") {
        return Ok(None);
    }
    let q = format!(
        "SELECT {}, {}, {} FROM {} AS e",
        schema.col("e", table, "id"),
        schema.col("e", table, "name"),
        schema.col("e", table, "label"),
        schema.table_ref(table),
    );
    let rows = collect(conn, &q, |row| {
        let Some(id) = int(row, 0, &NAMES)? else {
            return Ok(None);
        };
        Ok(Some(EnumRow {
            id,
            name: text(row, 1, &NAMES)?.unwrap_or_default().to_owned(),
            label: text(row, 2, &NAMES)?.unwrap_or_default().to_owned(),
        }))
    })?;
    Ok(Some(rows))
}

/// `copyKind` → [`MemopKind`] plus a display label for the memop name.
#[derive(Debug, Default)]
pub(super) struct CopyKinds {
    /// `None` when the file has no `ENUM_CUDA_MEMCPY_OPER`.
    from_file: Option<HashMap<i64, (MemopKind, String)>>,
}

impl CopyKinds {
    pub(super) fn load(conn: &Connection, schema: &Schema) -> Result<Self, ReadError> {
        let rows = read_enum(conn, schema, schema::ENUM_MEMCPY_OPER)?;
        let from_file = rows.map(|rows| {
            rows.into_iter()
                .map(|r| {
                    let kind = classify_copy(&r.name)
                        .or_else(|| classify_copy(&r.label))
                        .unwrap_or(MemopKind::Unknown);
                    let label = if r.label.is_empty() {
                        kind.as_str().to_owned()
                    } else {
                        r.label
                    };
                    (r.id, (kind, label))
                })
                .collect()
        });
        Ok(Self { from_file })
    }

    pub(super) fn has_table(&self) -> bool {
        self.from_file.is_some()
    }

    /// The kind and label of a `copyKind` value. With the file's enum present only it
    /// decides (an id it lacks is Unknown); without it the CUPTI numbering applies.
    pub(super) fn get(&self, code: Option<i64>) -> (MemopKind, String) {
        let Some(code) = code else {
            return (MemopKind::Unknown, MemopKind::Unknown.as_str().to_owned());
        };
        match &self.from_file {
            Some(map) => map
                .get(&code)
                .cloned()
                .unwrap_or_else(|| (MemopKind::Unknown, MemopKind::Unknown.as_str().to_owned())),
            None => {
                let kind = documented_copy_kind(code);
                (kind, kind.as_str().to_owned())
            }
        }
    }
}

/// The CUPTI `CUpti_ActivityMemcpyKind` numbering that nsys's `ENUM_CUDA_MEMCPY_OPER`
/// also uses (arrays are device memory; unified-memory migrations keep their direction).
fn documented_copy_kind(code: i64) -> MemopKind {
    match code {
        1 | 3 | 11 => MemopKind::HtoD,
        2 | 4 | 12 => MemopKind::DtoH,
        5..=8 | 13 => MemopKind::DtoD,
        9 => MemopKind::HtoH,
        10 => MemopKind::PtoP,
        _ => MemopKind::Unknown,
    }
}

/// Classifies an enum symbol (`CUDA_MEMCPY_KIND_HTOD`) or label (`Host-to-Device`,
/// `Unified Device-to-Host`, `Peer-to-Peer`).
fn classify_copy(text: &str) -> Option<MemopKind> {
    let (src, dst) = endpoints_from_symbol(text).or_else(|| endpoints_from_label(text))?;
    Some(match (src, dst) {
        ('P', _) | (_, 'P') => MemopKind::PtoP,
        ('H', 'H') => MemopKind::HtoH,
        ('H', _) => MemopKind::HtoD,
        (_, 'H') => MemopKind::DtoH,
        _ => MemopKind::DtoD,
    })
}

/// `..._HTOD` → ('H', 'D'); arrays count as device memory.
fn endpoints_from_symbol(text: &str) -> Option<(char, char)> {
    let last = text.rsplit('_').next()?.to_ascii_uppercase();
    let b = last.as_bytes();
    if b.len() != 4 || &b[1..3] != b"TO" {
        return None;
    }
    Some((endpoint(b[0] as char)?, endpoint(b[3] as char)?))
}

/// `Host-to-Device` → ('H', 'D').
fn endpoints_from_label(text: &str) -> Option<(char, char)> {
    let lower = text.to_ascii_lowercase();
    let (src, dst) = lower.split_once("-to-")?;
    let first = |s: &str| s.trim().rsplit(' ').next().and_then(|w| w.chars().next());
    Some((
        endpoint(first(src)?.to_ascii_uppercase())?,
        endpoint(first(dst)?.to_ascii_uppercase())?,
    ))
}

fn endpoint(c: char) -> Option<char> {
    match c {
        'H' => Some('H'),
        'D' | 'A' => Some('D'),
        'P' => Some('P'),
        _ => None,
    }
}

/// Which `NVTX_EVENTS.eventType` values are ranges.
#[derive(Debug)]
pub(super) struct NvtxTypes {
    pub(super) ranges: HashSet<i64>,
    pub(super) from_file: bool,
}

/// `ENUM_NSYS_EVENT_TYPE` ids of `NvtxPushPopRange` and `NvtxStartEndRange`.
const DOCUMENTED_NVTX_RANGES: [i64; 2] = [59, 60];

impl NvtxTypes {
    pub(super) fn load(conn: &Connection, schema: &Schema) -> Result<Self, ReadError> {
        Ok(match read_enum(conn, schema, schema::ENUM_EVENT_TYPE)? {
            Some(rows) => Self {
                ranges: rows
                    .into_iter()
                    .filter(|r| is_nvtx_range(&r.name) || is_nvtx_range(&r.label))
                    .map(|r| r.id)
                    .collect(),
                from_file: true,
            },
            None => Self {
                ranges: DOCUMENTED_NVTX_RANGES.into_iter().collect(),
                from_file: false,
            },
        })
    }
}

/// `NvtxPushPopRange`, `NvtxStartEndRange` (and the `Nvtxt` variants some releases list).
fn is_nvtx_range(name: &str) -> bool {
    name.starts_with("Nvtx") && (name.ends_with("PushPopRange") || name.ends_with("StartEndRange"))
}

/// How a `CUPTI_ACTIVITY_KIND_RUNTIME.eventClass` value is treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ApiClass {
    Api(LaunchApi),
    /// `--cudabacktrace` rows repeat a call's interval and correlation id to carry its
    /// stack; counting them would double the launches.
    Backtrace,
}

/// `eventClass` → [`ApiClass`].
#[derive(Debug)]
pub(super) struct EventClasses {
    from_file: Option<HashMap<i64, ApiClass>>,
}

impl EventClasses {
    pub(super) fn load(conn: &Connection, schema: &Schema) -> Result<Self, ReadError> {
        let rows = read_enum(conn, schema, schema::ENUM_EVENT_CLASS)?;
        Ok(Self {
            from_file: rows.map(|rows| {
                rows.into_iter()
                    .map(|r| (r.id, classify_event_class(&r.name)))
                    .collect()
            }),
        })
    }

    pub(super) fn has_table(&self) -> bool {
        self.from_file.is_some()
    }

    /// The class of a row; `None` (no column, NULL) reads as a runtime call.
    pub(super) fn get(&self, code: Option<i64>) -> ApiClass {
        let Some(code) = code else {
            return ApiClass::Api(LaunchApi::Runtime);
        };
        match &self.from_file {
            Some(map) => map
                .get(&code)
                .copied()
                .unwrap_or(ApiClass::Api(LaunchApi::Other)),
            None => match code {
                0 => ApiClass::Api(LaunchApi::Runtime),
                1 => ApiClass::Api(LaunchApi::Driver),
                67 => ApiClass::Backtrace,
                _ => ApiClass::Api(LaunchApi::Other),
            },
        }
    }
}

fn classify_event_class(name: &str) -> ApiClass {
    if name.contains("BACKTRACE") {
        ApiClass::Backtrace
    } else if name.ends_with("CUDA_RUNTIME") {
        ApiClass::Api(LaunchApi::Runtime)
    } else if name.ends_with("CUDA_DRIVER") {
        ApiClass::Api(LaunchApi::Driver)
    } else {
        ApiClass::Api(LaunchApi::Other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_kinds_from_symbols_and_labels() {
        let cases = [
            ("CUDA_MEMCPY_KIND_HTOD", MemopKind::HtoD),
            ("CUDA_MEMCPY_KIND_DTOH", MemopKind::DtoH),
            ("CUDA_MEMCPY_KIND_HTOA", MemopKind::HtoD),
            ("CUDA_MEMCPY_KIND_ATOD", MemopKind::DtoD),
            ("CUDA_MEMCPY_KIND_DTOD", MemopKind::DtoD),
            ("CUDA_MEMCPY_KIND_HTOH", MemopKind::HtoH),
            ("CUDA_MEMCPY_KIND_PTOP", MemopKind::PtoP),
            ("CUDA_MEMCPY_KIND_UVM_DTOH", MemopKind::DtoH),
            ("Host-to-Device", MemopKind::HtoD),
            ("Unified Device-to-Host", MemopKind::DtoH),
            ("Peer-to-Peer", MemopKind::PtoP),
            ("Array-to-Array", MemopKind::DtoD),
        ];
        for (text, want) in cases {
            assert_eq!(classify_copy(text), Some(want), "{text}");
        }
        assert_eq!(classify_copy("CUDA_MEMCPY_KIND_UNKNOWN"), None);
        assert_eq!(classify_copy("Unknown"), None);
    }

    #[test]
    fn documented_copy_codes() {
        assert_eq!(documented_copy_kind(1), MemopKind::HtoD);
        assert_eq!(documented_copy_kind(2), MemopKind::DtoH);
        assert_eq!(documented_copy_kind(8), MemopKind::DtoD);
        assert_eq!(documented_copy_kind(10), MemopKind::PtoP);
        assert_eq!(documented_copy_kind(0), MemopKind::Unknown);
        assert_eq!(documented_copy_kind(99), MemopKind::Unknown);
    }

    #[test]
    fn event_classes_by_name() {
        assert_eq!(
            classify_event_class("TRACE_PROCESS_EVENT_CUDA_RUNTIME"),
            ApiClass::Api(LaunchApi::Runtime)
        );
        assert_eq!(
            classify_event_class("TRACE_PROCESS_EVENT_CUDA_DRIVER"),
            ApiClass::Api(LaunchApi::Driver)
        );
        assert_eq!(
            classify_event_class("TRACE_PROCESS_EVENT_CUDABACKTRACE"),
            ApiClass::Backtrace
        );
        assert!(is_nvtx_range("NvtxPushPopRange"));
        assert!(is_nvtx_range("NvtxStartEndRange"));
        assert!(!is_nvtx_range("NvtxMark"));
        assert!(!is_nvtx_range("NvtxDomainCreate"));
    }
}
