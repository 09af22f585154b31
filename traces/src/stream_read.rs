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

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_buffer::MutableBuffer;
use arrow_ipc::MessageHeader;
use arrow_schema::{DataType, Schema, SchemaRef};

use crate::error::{Result, TraceError};

/// Metadata (the flatbuffer before each body) larger than this is not something a writer of
/// this format produces; refusing it keeps a corrupt length from sizing an allocation.
const MAX_METADATA_BYTES: u64 = 16 << 20;

/// What the stream holds next.
pub(crate) enum Next {
    Batch(RecordBatch),
    /// End of stream: the end-of-stream marker, or end of file at a message boundary.
    End,
    /// The file ends inside a message; the text says where.
    Truncated(String),
}

/// A checked reader over one `.arrows` file.
pub(crate) struct CheckedStream<R> {
    reader: R,
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

impl<R: Read> CheckedStream<R> {
    /// Reads and checks the schema message. A file that ends inside it is an error: there is
    /// nothing to salvage before the schema.
    pub(crate) fn open(reader: R, len: u64, path: &Path, expected: &Expected) -> Result<Self> {
        let mut s = Self {
            reader,
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
        let body: arrow_buffer::Buffer = body.into();
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
        // 64-byte aligned, so arrow uses the columns in place instead of copying them.
        let mut body = MutableBuffer::from_len_zeroed(body_len as usize);
        let got = self.fill(body.as_slice_mut())?;
        if got < body.len() {
            return Ok(self.truncated(format!("{got} of {body_len} body bytes")));
        }
        self.message += 1;
        Ok(Frame::Message(meta, body))
    }

    fn truncated(&self, why: String) -> Frame {
        Frame::Truncated(format!("message {} cut short: {why}", self.message))
    }

    /// Reads up to `buf.len()` bytes; fewer only at end of file.
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.reader.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(TraceError::io(&self.path, e)),
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
    Message(Vec<u8>, MutableBuffer),
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
