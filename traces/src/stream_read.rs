//! Reads one table's Arrow IPC stream with every message checked before arrow decodes it.
//!
//! arrow-ipc trusts the offsets and lengths in a message's metadata: a buffer that points
//! past the message body panics inside arrow-buffer, and a compressed batch fails only when
//! it is decoded. So messages are framed here and their metadata is checked first: buffers
//! inside the body, flat columns of the expected types, a row count the body can hold, no
//! compression. arrow then builds and fully validates the arrays (offsets, UTF-8, lengths).
//!
//! Only a stream that ends inside a message is a truncated tail (what a writer that died
//! mid-batch leaves); every other defect is an error.
//!
//! A regular file is memory-mapped and each message body is a slice of the mapping: arrow
//! builds its arrays on the mapped bytes, so a column is copied once, into the table, and
//! never through a read buffer. Pages behind the reader are released as it goes, so the
//! mapping adds no more than a window to the resident size. Where a file cannot be mapped
//! it is read instead. A mapped file that another process truncates in place while it is
//! read ends this process with SIGBUS; gapscope's writers only append to fresh files or
//! replace a trace by renaming a new one over it, so they never cause it. The reasons:
//! `docs/decisions/2026-11-28-native-read.md`.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::{Buffer, MutableBuffer};
use arrow_ipc::MessageHeader;
use arrow_schema::{DataType, Schema, SchemaRef};

use crate::error::{Result, TraceError};

/// Metadata (the flatbuffer before each body) larger than this is not something a writer of
/// this format produces; refusing it keeps a corrupt length from sizing an allocation.
const MAX_METADATA_BYTES: u64 = 16 << 20;

/// Mapped bytes the reader leaves behind before it releases them (`MADV_DONTNEED`): a file
/// page costs no memory until touched, and is given back once the batches on it are copied.
const RELEASE_BYTES: usize = 8 << 20;

/// Where a stream's bytes come from.
enum Source {
    /// The whole file, mapped read-only; `whole` owns the mapping and bodies are its slices.
    Map {
        map: Arc<memmap2::Mmap>,
        whole: Buffer,
        /// Next byte to read.
        pos: usize,
        /// Bytes before this are released.
        released: usize,
    },
    Read(BufReader<File>),
}

impl Source {
    /// Maps `file` (`len` bytes, a regular file); `None` when the system refuses.
    fn map(file: &File, len: u64) -> Option<Self> {
        // The opened file itself, not the path checked before it was opened.
        if !file.metadata().ok()?.is_file() {
            return None;
        }
        let len = usize::try_from(len).ok()?;
        // SAFETY: the mapping is read-only and this process never writes the file. A file
        // truncated in place by another process while it is read raises SIGBUS on the lost
        // pages; the module doc says why that risk is taken.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(file) }.ok()?;
        if map.len() != len {
            return None;
        }
        let _ = map.advise(memmap2::Advice::Sequential);
        let map = Arc::new(map);
        let ptr = NonNull::new(map.as_ptr().cast_mut())?;
        // SAFETY: `ptr` and `len` describe the mapping, which the owner keeps alive for as
        // long as any slice of the buffer exists; nothing writes through it.
        let whole = unsafe { Buffer::from_custom_allocation(ptr, len, map.clone()) };
        Some(Self::Map {
            map,
            whole,
            pos: 0,
            released: 0,
        })
    }
}

/// What the stream holds next.
pub(crate) enum Next {
    Batch(RecordBatch),
    /// End of stream: the end-of-stream marker, or end of file at a message boundary.
    End,
    /// The file ends inside a message; the text says where.
    Truncated(String),
}

/// A checked reader over one `.arrows` file.
pub(crate) struct CheckedStream {
    source: Source,
    path: PathBuf,
    /// File bytes not yet consumed: no declared length may exceed it.
    remaining: u64,
    /// The file's schema.
    schema: SchemaRef,
    /// File column indices to decode.
    projection: Vec<usize>,
    /// Messages read so far (the schema is message 0).
    message: u64,
}

/// A column the caller knows: its name and the type it must have.
pub(crate) struct Expected<'a> {
    pub schema: &'a Schema,
    /// Columns to decode (`None`: every column of `schema`); those absent from the file stay
    /// unloaded.
    pub wanted: Option<&'a [&'a str]>,
    /// Columns the file must have.
    pub required: &'a [&'a str],
}

impl CheckedStream {
    /// Reads and checks the schema message of `file` (`len` bytes, a regular file). A file
    /// that ends inside it is an error: there is nothing to salvage before the schema.
    pub(crate) fn open(file: File, len: u64, path: &Path, expected: &Expected) -> Result<Self> {
        let source = Source::map(&file, len)
            .unwrap_or_else(|| Source::Read(BufReader::with_capacity(1 << 20, file)));
        let mut s = Self {
            source,
            path: path.to_owned(),
            remaining: len,
            schema: Arc::new(Schema::empty()),
            projection: Vec::new(),
            message: 0,
        };
        let (meta, _body) = match s.frame()? {
            Frame::Message(meta, body) => (meta, body),
            Frame::End => return Err(s.err("stream has no schema message")),
            Frame::Truncated(why) => {
                return Err(s.err(format!("stream ends inside its schema message ({why})")));
            }
        };
        let msg = arrow_ipc::root_as_message(&meta).map_err(|e| {
            s.err(format!(
                "schema message is not valid Arrow IPC metadata: {e}"
            ))
        })?;
        let fb = msg
            .header_as_schema()
            .ok_or_else(|| s.err("stream does not start with a schema message"))?;
        let schema = arrow_ipc::convert::try_fb_to_schema(fb)
            .map_err(|e| s.err(format!("invalid schema: {e}")))?;
        for f in schema.fields() {
            if !is_flat(f.data_type()) {
                return Err(s.err(format!(
                    "column {:?} has type {}, which the gapscope format does not use",
                    f.name(),
                    f.data_type()
                )));
            }
        }
        if let Some(missing) = expected
            .required
            .iter()
            .find(|c| schema.index_of(c).is_err())
        {
            return Err(s.err(format!("required column {missing:?} is missing")));
        }
        let mut projection = Vec::new();
        for f in expected.schema.fields() {
            let name = f.name().as_str();
            if expected.wanted.is_some_and(|w| !w.contains(&name)) {
                continue;
            }
            let Ok(ix) = schema.index_of(name) else {
                continue;
            };
            let have = schema.field(ix).data_type();
            if have != f.data_type() {
                return Err(s.err(format!(
                    "column {name} has type {have}, expected {}",
                    f.data_type()
                )));
            }
            projection.push(ix);
        }
        s.schema = Arc::new(schema);
        s.projection = projection;
        Ok(s)
    }

    /// The next record batch, projected to the wanted columns.
    pub(crate) fn next(&mut self) -> Result<Next> {
        let (meta, body) = match self.frame()? {
            Frame::Message(meta, body) => (meta, body),
            Frame::End => return Ok(Next::End),
            Frame::Truncated(why) => return Ok(Next::Truncated(why)),
        };
        let msg = arrow_ipc::root_as_message(&meta)
            .map_err(|e| self.err(format!("invalid Arrow IPC metadata: {e}")))?;
        match msg.header_type() {
            MessageHeader::RecordBatch => {}
            MessageHeader::Schema => return Err(self.err("a second schema message")),
            MessageHeader::DictionaryBatch => {
                return Err(self.err(
                    "a dictionary batch; the gapscope format stores names as ids, not dictionaries",
                ));
            }
            other => return Err(self.err(format!("unexpected {other:?} message"))),
        }
        let rb = msg
            .header_as_record_batch()
            .ok_or_else(|| self.err("record batch message without its header"))?;
        self.check_batch(&rb, body.len() as u64)?;
        let batch = arrow_ipc::reader::read_record_batch(
            &body,
            rb,
            Arc::clone(&self.schema),
            &Default::default(),
            Some(&self.projection),
            &msg.version(),
        )
        .map_err(|e| self.err(format!("undecodable record batch: {e}")))?;
        Ok(Next::Batch(batch))
    }

    /// Everything arrow-ipc would otherwise trust.
    fn check_batch(&self, rb: &arrow_ipc::RecordBatch, body_len: u64) -> Result<()> {
        if let Some(c) = rb.compression() {
            return Err(self.err(format!(
                "record batch is compressed ({}); gapscope reads uncompressed streams only (write them with compression off)",
                c.codec().variant_name().unwrap_or("unknown codec")
            )));
        }
        let rows = rb.length();
        // Every column of this format takes at least a bit per row.
        if rows < 0 || (rows as u64) > body_len.saturating_mul(8) {
            return Err(self.err(format!(
                "record batch declares {rows} rows but its body holds {body_len} bytes"
            )));
        }
        let nodes = rb.nodes().map(|n| n.len()).unwrap_or(0);
        if nodes != self.schema.fields().len() {
            return Err(self.err(format!(
                "record batch has {nodes} field nodes for {} columns",
                self.schema.fields().len()
            )));
        }
        if let Some(nodes) = rb.nodes() {
            for &ix in &self.projection {
                let n = nodes.get(ix);
                if n.length() != rows || n.null_count() < 0 || n.null_count() > rows {
                    return Err(self.err(format!(
                        "column {:?} declares {} rows ({} null) in a batch of {rows}",
                        self.schema.field(ix).name(),
                        n.length(),
                        n.null_count()
                    )));
                }
            }
        }
        for (i, b) in rb.buffers().into_iter().flatten().enumerate() {
            let end = (b.offset() >= 0 && b.length() >= 0)
                .then(|| b.offset().checked_add(b.length()))
                .flatten();
            if end.is_none_or(|e| e as u64 > body_len) {
                return Err(self.err(format!(
                    "buffer {i} (offset {}, length {}) lies outside the {body_len}-byte message body",
                    b.offset(),
                    b.length()
                )));
            }
        }
        Ok(())
    }

    /// One message: its metadata and body bytes.
    fn frame(&mut self) -> Result<Frame> {
        let mut word = [0u8; 4];
        match self.fill(&mut word)? {
            0 => return Ok(Frame::End),
            4 => {}
            n => return Ok(self.truncated(format!("{n} of 4 length bytes"))),
        }
        if word == [0xff; 4] {
            match self.fill(&mut word)? {
                4 => {}
                n => return Ok(self.truncated(format!("{n} of 4 length bytes"))),
            }
        }
        let meta_len = i32::from_le_bytes(word);
        if meta_len == 0 {
            return Ok(Frame::End);
        }
        if meta_len < 0 || meta_len as u64 > MAX_METADATA_BYTES {
            return Err(self.err(format!("invalid metadata length {meta_len}")));
        }
        let meta_len = meta_len as u64;
        if meta_len > self.remaining {
            return Ok(self.truncated(format!(
                "{meta_len} metadata bytes declared, {} left",
                self.remaining
            )));
        }
        let mut meta = vec![0u8; meta_len as usize];
        let got = self.fill(&mut meta)?;
        if got < meta.len() {
            return Ok(self.truncated(format!("{got} of {meta_len} metadata bytes")));
        }
        let msg = arrow_ipc::root_as_message(&meta)
            .map_err(|e| self.err(format!("invalid Arrow IPC metadata: {e}")))?;
        let body_len = msg.bodyLength();
        if body_len < 0 {
            return Err(self.err(format!("invalid body length {body_len}")));
        }
        let body_len = body_len as u64;
        if body_len > self.remaining {
            return Ok(self.truncated(format!(
                "{body_len} body bytes declared, {} left",
                self.remaining
            )));
        }
        let body = match &mut self.source {
            Source::Map { whole, pos, .. } => {
                // Within the mapping: `body_len <= remaining`, the bytes after `pos`.
                let body = whole.slice_with_length(*pos, body_len as usize);
                *pos += body_len as usize;
                self.remaining -= body_len;
                body
            }
            Source::Read(_) => {
                // 64-byte aligned, so arrow uses the columns in place instead of copying them.
                let mut body = MutableBuffer::from_len_zeroed(body_len as usize);
                let got = self.fill(body.as_slice_mut())?;
                if got < body.len() {
                    return Ok(self.truncated(format!("{got} of {body_len} body bytes")));
                }
                body.into()
            }
        };
        self.message += 1;
        Ok(Frame::Message(meta, body))
    }

    /// Messages read so far (the schema is message 0).
    pub(crate) fn message(&self) -> u64 {
        self.message
    }

    /// Bytes per row of the decoded columns (fixed-width ones; 8 for any other).
    pub(crate) fn row_width(&self) -> usize {
        self.projection
            .iter()
            .map(|&ix| {
                self.schema
                    .field(ix)
                    .data_type()
                    .primitive_width()
                    .unwrap_or(8)
            })
            .sum()
    }

    /// The rows the record batches ahead declare, read from their metadata without
    /// decoding them, up to the first message that is not a plain record batch; `None` for
    /// a file that is read rather than mapped. A hint for sizing the tables: a crafted file
    /// can declare anything, so callers bound it.
    pub(crate) fn rows_ahead(&self) -> Option<u64> {
        let Source::Map { whole, pos, .. } = &self.source else {
            return None;
        };
        let bytes = whole.as_slice();
        let mut at = *pos;
        let mut rows = 0u64;
        let word = |at: usize| -> Option<i32> {
            let b = bytes.get(at..at.checked_add(4)?)?;
            Some(i32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        while let Some(mut len) = word(at) {
            at += 4;
            if len == -1 {
                let Some(l) = word(at) else { break };
                len = l;
                at += 4;
            }
            if len <= 0 || len as u64 > MAX_METADATA_BYTES {
                break;
            }
            let Some(meta) = bytes.get(at..at + len as usize) else {
                break;
            };
            let Ok(msg) = arrow_ipc::root_as_message(meta) else {
                break;
            };
            let Some(rb) = msg.header_as_record_batch() else {
                break;
            };
            let (Ok(body), Ok(n)) = (
                usize::try_from(msg.bodyLength()),
                u64::try_from(rb.length()),
            ) else {
                break;
            };
            at = match (at + len as usize).checked_add(body) {
                Some(end) if end <= bytes.len() => end,
                _ => break,
            };
            rows = rows.saturating_add(n);
        }
        Some(rows)
    }

    /// Gives back the mapped pages before the current position once enough have gathered
    /// (call when the batches read so far are copied out; reading them again stays correct,
    /// it only faults the pages in again).
    pub(crate) fn release_read(&mut self) {
        if let Source::Map {
            map, pos, released, ..
        } = &mut self.source
            && *pos - *released >= RELEASE_BYTES
        {
            // Whole pages only: the page holding `pos` may hold the next message.
            let page = 4096;
            let end = *pos / page * page;
            if end > *released {
                // SAFETY: a read-only shared file mapping: dropping its pages loses nothing,
                // a later access reads them from the file again.
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        *released,
                        end - *released,
                    )
                };
                *released = end;
            }
        }
    }

    fn truncated(&self, why: String) -> Frame {
        Frame::Truncated(format!("message {} cut short: {why}", self.message))
    }

    /// Reads up to `buf.len()` bytes; fewer only at end of file.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut n = 0;
        match &mut self.source {
            Source::Map { whole, pos, .. } => {
                let rest = &whole.as_slice()[*pos..];
                n = buf.len().min(rest.len());
                buf[..n].copy_from_slice(&rest[..n]);
                *pos += n;
            }
            Source::Read(reader) => {
                while n < buf.len() {
                    match reader.read(&mut buf[n..]) {
                        Ok(0) => break,
                        Ok(k) => n += k,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(TraceError::io(&self.path, e)),
                    }
                }
            }
        }
        self.remaining = self.remaining.saturating_sub(n as u64);
        Ok(n)
    }

    /// A one-line error (flatbuffers' verifier reports span several lines).
    fn err(&self, message: impl std::fmt::Display) -> TraceError {
        let message = message.to_string();
        let message = message.split_whitespace().collect::<Vec<_>>().join(" ");
        TraceError::format(&self.path, format!("message {}: {message}", self.message))
    }
}

enum Frame {
    Message(Vec<u8>, Buffer),
    End,
    Truncated(String),
}

/// Column types that map to one field node and need no child arrays.
fn is_flat(t: &DataType) -> bool {
    t.is_primitive()
        || matches!(
            t,
            DataType::Boolean
                | DataType::Utf8
                | DataType::LargeUtf8
                | DataType::Binary
                | DataType::LargeBinary
                | DataType::FixedSizeBinary(_)
                | DataType::Null
        )
}
