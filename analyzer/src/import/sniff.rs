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

/// Names what a non-regular file is.
fn special_kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() || t.is_block_device() {
            return "a device";
        }
    }
    let _ = meta;
    "not a regular file"
}

/// Decides the format of `path` from its first bytes. Only regular files (and `.gst`
/// directories) are opened.
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
    if !meta.is_file() {
        // Opening a FIFO blocks until a writer appears, and a device never ends.
        return Err(AnalyzerError::unsupported(
            path,
            format!(
                "is {}, not a trace file; gapscope reads regular files and .gst directories",
                special_kind(&meta)
            ),
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
    sniff_bytes(path, &head[..n])
}

/// Decides the format of an input from its first bytes (64 are enough); `name` names it in
/// errors. A native trace is a folder, so bytes are never one.
pub fn sniff_bytes(name: &Path, head: &[u8]) -> Result<InputFormat> {
    if head.is_empty() {
        return Err(AnalyzerError::parse(name, "file is empty"));
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
            name,
            "unrecognised format: expected a Kineto/Chrome trace (.json or .json.gz), an nsys SQLite export (.sqlite) or a gapscope .gst trace",
        )),
    }
}
