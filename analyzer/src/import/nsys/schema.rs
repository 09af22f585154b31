//! Which tables and columns this export actually has. Nsight Systems creates tables
//! lazily and adds columns between releases, so every query is built from what
//! `sqlite_master` and `pragma_table_xinfo` report rather than from one assumed layout.
//!
//! Only ordinary tables are read. A view runs arbitrary SQL when it is read (a recursive
//! view never finishes), and virtual tables and generated columns compute their values; nsys
//! writes none of them, so an object of a wanted name that is one of these is left out with
//! a note.

use std::collections::HashMap;

use rusqlite::Connection;

use super::read::{ReadError, collect};

/// Tables the importer reads, in the spelling nsys uses.
pub(super) const STRING_IDS: &str = "StringIds";
pub(super) const KERNEL: &str = "CUPTI_ACTIVITY_KIND_KERNEL";
pub(super) const MEMCPY: &str = "CUPTI_ACTIVITY_KIND_MEMCPY";
pub(super) const MEMSET: &str = "CUPTI_ACTIVITY_KIND_MEMSET";
pub(super) const RUNTIME: &str = "CUPTI_ACTIVITY_KIND_RUNTIME";
pub(super) const NVTX: &str = "NVTX_EVENTS";
pub(super) const TARGET_INFO_GPU: &str = "TARGET_INFO_GPU";
/// The GPU table of nsys 2021.1 to 2021.3 (CUPTI device-record field names).
pub(super) const TARGET_INFO_CUDA_GPU: &str = "TARGET_INFO_CUDA_GPU";
/// Maps a process's CUDA device ordinal (`cudaId`) to a `TARGET_INFO_GPU.id`.
pub(super) const TARGET_INFO_CUDA_DEVICE: &str = "TARGET_INFO_CUDA_DEVICE";
/// Export metadata: `META_DATA_EXPORT` since export schema 3, `EXPORT_META_DATA` before.
pub(super) const META_DATA_EXPORT: &str = "META_DATA_EXPORT";
pub(super) const EXPORT_META_DATA: &str = "EXPORT_META_DATA";
pub(super) const ENUM_MEMCPY_OPER: &str = "ENUM_CUDA_MEMCPY_OPER";
pub(super) const ENUM_EVENT_TYPE: &str = "ENUM_NSYS_EVENT_TYPE";
pub(super) const ENUM_EVENT_CLASS: &str = "ENUM_NSYS_EVENT_CLASS";

/// The CUPTI activity tables whose absence is worth a note.
pub(super) const CUPTI_TABLES: [&str; 4] = [KERNEL, MEMCPY, MEMSET, RUNTIME];

const WANTED: [&str; 15] = [
    STRING_IDS,
    KERNEL,
    MEMCPY,
    MEMSET,
    RUNTIME,
    NVTX,
    TARGET_INFO_GPU,
    TARGET_INFO_CUDA_GPU,
    TARGET_INFO_CUDA_DEVICE,
    META_DATA_EXPORT,
    EXPORT_META_DATA,
    ENUM_MEMCPY_OPER,
    ENUM_EVENT_TYPE,
    ENUM_EVENT_CLASS,
    "ENUM_CUDA_MEM_KIND",
];

/// The wanted tables present in the file, each with its columns. Keys are lowercase
/// because SQLite names are case-insensitive.
#[derive(Debug, Default)]
pub(super) struct Schema {
    tables: HashMap<String, Table>,
    /// Wanted names that are not plain tables, each with why it was left out.
    pub(super) skipped: Vec<String>,
    /// `StringIds` holds an id more than once (set by the importer after counting).
    pub(super) string_ids_repeat: bool,
}

#[derive(Debug)]
struct Table {
    /// The name as the file spells it.
    name: String,
    /// Lowercase column name to the name as the file spells it.
    columns: HashMap<String, String>,
}

impl Schema {
    pub(super) fn load(conn: &Connection) -> Result<Self, ReadError> {
        // Names, kinds and SQL as bytes, checked here rather than trusted to be text. The
        // bytes are in the database's text encoding (SQLite converts text, not blobs).
        let enc = Encoding::of(conn)?;
        let rows: Vec<[Vec<u8>; 3]> = collect(
            conn,
            "SELECT CAST(name AS BLOB), CAST(type AS BLOB), CAST(sql AS BLOB) FROM sqlite_master WHERE type IN ('table', 'view')",
            |r| Ok(Some([bytes(r, 0)?, bytes(r, 1)?, bytes(r, 2)?])),
        )?;
        let mut tables = HashMap::new();
        let mut skipped = Vec::new();
        for [name, kind, sql] in &rows {
            let Some(name) = enc.decode(name) else {
                continue;
            };
            if !WANTED.iter().any(|w| w.eq_ignore_ascii_case(&name)) {
                continue;
            }
            let kind = enc.decode(kind).unwrap_or_default();
            let sql = enc.decode_lossy(sql).to_ascii_uppercase();
            if kind != "table" {
                skipped.push(format!("{name} is a view, not a table; it was not read"));
                continue;
            }
            if sql.trim_start().starts_with("CREATE VIRTUAL") {
                skipped.push(format!(
                    "{name} is a virtual table, not a plain table; it was not read"
                ));
                continue;
            }
            // Names and declared types are read as bytes and checked here: a declared type
            // that is not valid text marks a corrupt schema (sqlx-sqlite, the driver before
            // rusqlite, panicked on one; found by the nsys_import fuzz target).
            // `hidden` is 2 or 3 for a generated column.
            let mut stmt = conn.prepare(
                "SELECT CAST(name AS BLOB), CAST(type AS BLOB), hidden FROM pragma_table_xinfo(?1)",
            )?;
            let mut rows = stmt.query([&name])?;
            let mut cols: Vec<String> = Vec::new();
            let mut generated = false;
            while let Some(r) = rows.next()? {
                let (col, ty) = (bytes(r, 0)?, bytes(r, 1)?);
                let hidden: i64 = r.get::<_, Option<i64>>(2)?.unwrap_or(0);
                let (Some(col), Some(_)) = (enc.decode(&col), enc.decode(&ty)) else {
                    return Err(ReadError::Decode(format!(
                        "table {name} has a column name or declared type that is not {} (corrupt schema)",
                        enc.name()
                    )));
                };
                generated |= hidden == 2 || hidden == 3;
                cols.push(col);
            }
            if generated {
                skipped.push(format!(
                    "{name} has generated columns, which nsys never writes; it was not read"
                ));
                continue;
            }
            let columns = cols
                .into_iter()
                .map(|c| (c.to_ascii_lowercase(), c))
                .collect();
            tables.insert(name.to_ascii_lowercase(), Table { name, columns });
        }
        Ok(Self {
            tables,
            skipped,
            string_ids_repeat: false,
        })
    }

    pub(super) fn has_table(&self, table: &str) -> bool {
        self.tables.contains_key(&table.to_ascii_lowercase())
    }

    pub(super) fn has_col(&self, table: &str, col: &str) -> bool {
        self.table(table)
            .is_some_and(|t| t.columns.contains_key(&col.to_ascii_lowercase()))
    }

    /// `alias."col"` when the column exists, else `NULL`, so a query keeps one shape
    /// across releases and missing columns decode as `None`.
    pub(super) fn col(&self, alias: &str, table: &str, col: &str) -> String {
        match self
            .table(table)
            .and_then(|t| t.columns.get(&col.to_ascii_lowercase()))
        {
            Some(real) => format!("{alias}.{}", quote(real)),
            None => "NULL".to_owned(),
        }
    }

    /// The quoted table name as the file spells it.
    pub(super) fn table_ref(&self, table: &str) -> String {
        quote(self.table(table).map_or(table, |t| t.name.as_str()))
    }

    fn table(&self, table: &str) -> Option<&Table> {
        self.tables.get(&table.to_ascii_lowercase())
    }
}

/// A blob column (`CAST(... AS BLOB)`), empty for NULL.
fn bytes(r: &rusqlite::Row<'_>, i: usize) -> Result<Vec<u8>, ReadError> {
    Ok(r.get::<_, Option<Vec<u8>>>(i)?.unwrap_or_default())
}

/// The database's text encoding (`PRAGMA encoding`): SQLite hands text over as UTF-8
/// whatever it is, but a text cast to a blob keeps the stored bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Utf8,
    Utf16Le,
    Utf16Be,
}

impl Encoding {
    fn of(conn: &Connection) -> Result<Self, ReadError> {
        let name: String = conn.query_row("PRAGMA encoding", [], |r| r.get(0))?;
        Ok(match name.to_ascii_uppercase().as_str() {
            "UTF-16LE" => Self::Utf16Le,
            "UTF-16BE" => Self::Utf16Be,
            _ => Self::Utf8,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Self::Utf8 => "UTF-8",
            Self::Utf16Le => "UTF-16le",
            Self::Utf16Be => "UTF-16be",
        }
    }

    fn units(self, b: &[u8]) -> Option<Vec<u16>> {
        if !b.len().is_multiple_of(2) {
            return None;
        }
        Some(
            b.chunks_exact(2)
                .map(|c| match self {
                    Self::Utf16Be => u16::from_be_bytes([c[0], c[1]]),
                    _ => u16::from_le_bytes([c[0], c[1]]),
                })
                .collect(),
        )
    }

    /// The text, or `None` when the bytes are not valid in this encoding.
    fn decode(self, b: &[u8]) -> Option<String> {
        match self {
            Self::Utf8 => String::from_utf8(b.to_vec()).ok(),
            _ => String::from_utf16(&self.units(b)?).ok(),
        }
    }

    fn decode_lossy(self, b: &[u8]) -> String {
        match self {
            Self::Utf8 => String::from_utf8_lossy(b).into_owned(),
            _ => String::from_utf16_lossy(&self.units(&b[..b.len() & !1]).unwrap_or_default()),
        }
    }
}

/// A double-quoted SQL identifier (nsys names never contain quotes, but a foreign file
/// might).
pub(super) fn quote(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}
