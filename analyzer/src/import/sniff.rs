//! Input format detection from content, so a misnamed file still imports and a wrong one
//! gets a clear message.

use std::fs::File;
use std::io::Read;
use std::path::Path;

use crate::error::{AnalyzerError, Result};

/// The formats gapscope reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFormat {
    /// A gapscope `.gst` directory.
    Native,
    KinetoJson,
    KinetoJsonGz,
    NsysSqlite,
}

impl InputFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Native => "native",
            Self::KinetoJson => "kineto-json",
            Self::KinetoJsonGz => "kineto-json-gz",
            Self::NsysSqlite => "nsys-sqlite",
        }
    }
}

/// Decides the format of `path` from its first bytes.
pub fn sniff(path: &Path) -> Result<InputFormat> {
    let meta = std::fs::metadata(path).map_err(|e| AnalyzerError::io(path, e))?;
    if meta.is_dir() {
        if gapscope_traces::is_native_trace(path) {
            return Ok(InputFormat::Native);
        }
        return Err(AnalyzerError::unsupported(
            path,
            "is a directory, not a trace file (a native .gst trace directory holds manifest.json)",
        ));
    }
    let mut head = [0u8; 64];
    let mut f = File::open(path).map_err(|e| AnalyzerError::io(path, e))?;
    let mut n = 0;
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(AnalyzerError::io(path, e)),
        }
    }
    let head = &head[..n];
    if head.is_empty() {
        return Err(AnalyzerError::parse(path, "file is empty"));
    }
    if head.starts_with(&[0x1f, 0x8b]) {
        return Ok(InputFormat::KinetoJsonGz);
    }
    if head.starts_with(b"SQLite format 3\0") {
        return Ok(InputFormat::NsysSqlite);
    }
    let text = head.strip_prefix(&[0xEF, 0xBB, 0xBF][..]).unwrap_or(head);
    match text.iter().find(|b| !b.is_ascii_whitespace()) {
        Some(b'{') | Some(b'[') => Ok(InputFormat::KinetoJson),
        _ => Err(AnalyzerError::unsupported(
            path,
            "unrecognised format: expected a Kineto/Chrome trace (.json or .json.gz), an nsys SQLite export (.sqlite) or a gapscope .gst trace",
        )),
    }
}
