//! A bounded byte window over a (possibly gzipped) file: the reader inflates straight into
//! the window, consumed bytes are dropped between values and while whitespace or an unread
//! value streams past, so memory stays at about one chunk plus the largest single JSON value
//! that is kept (at most [`MAX_VALUE_BYTES`]).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::scan::{ScanState, find_end};
use crate::error::{AnalyzerError, Result};
use crate::import::ImportProgress;

const CHUNK: usize = 1 << 20;

/// The largest single JSON value (one event, or a top-level value gapscope reads) held in
/// memory. Real events are a few KiB; values gapscope does not read stream past unbuffered.
pub(crate) const MAX_VALUE_BYTES: usize = 64 << 20;

/// Counts compressed bytes for the progress bar.
pub(crate) struct Counting<'p, R> {
    pub inner: R,
    pub progress: &'p dyn ImportProgress,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

/// Opens `path` for reading, counting compressed bytes. A gzip file is inflated on its own
/// thread inside `scope` (see [`Inflater`]) so that inflate, scan and build use both cores.
pub(crate) fn open<'s, 'p: 's>(
    path: &Path,
    gz: bool,
    progress: &'p dyn ImportProgress,
    scope: &'s std::thread::Scope<'s, '_>,
) -> Result<Box<dyn Read + 's>> {
    let file = File::open(path).map_err(|e| AnalyzerError::io(path, e))?;
    progress.start(file.metadata().ok().map(|m| m.len()));
    let counting = Counting {
        inner: std::io::BufReader::with_capacity(CHUNK, file),
        progress,
    };
    Ok(if gz {
        Box::new(Inflater::spawn(
            flate2::read::MultiGzDecoder::new(counting),
            scope,
        ))
    } else {
        Box::new(counting)
    })
}

type Filled = std::io::Result<(Vec<u8>, usize)>;

/// A reader whose data is produced by a thread: it inflates into recycled buffers and hands
/// them over a small channel, so at most `DEPTH + 2` chunks exist at once.
pub(crate) struct Inflater {
    full: std::sync::mpsc::Receiver<Filled>,
    empty: std::sync::mpsc::SyncSender<Vec<u8>>,
    cur: Vec<u8>,
    cur_len: usize,
    cur_pos: usize,
    done: bool,
}

impl Inflater {
    const DEPTH: usize = 3;

    fn spawn<'s, R: Read + Send + 's>(mut inner: R, scope: &'s std::thread::Scope<'s, '_>) -> Self {
        let (full_tx, full) = std::sync::mpsc::sync_channel::<Filled>(Self::DEPTH);
        let (empty, empty_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(Self::DEPTH + 2);
        for _ in 0..Self::DEPTH + 1 {
            let _ = empty.send(vec![0u8; CHUNK]);
        }
        scope.spawn(move || {
            while let Ok(mut buf) = empty_rx.recv() {
                let mut filled = 0;
                let r = loop {
                    match inner.read(&mut buf[filled..]) {
                        Ok(0) => break Ok(()),
                        Ok(n) => {
                            filled += n;
                            if filled == buf.len() {
                                break Ok(());
                            }
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => break Err(e),
                    }
                };
                let end = filled < buf.len();
                if filled > 0 && full_tx.send(Ok((buf, filled))).is_err() {
                    return;
                }
                if let Err(e) = r {
                    let _ = full_tx.send(Err(e));
                    return;
                }
                if end {
                    return;
                }
            }
        });
        Self {
            full,
            empty,
            cur: Vec::new(),
            cur_len: 0,
            cur_pos: 0,
            done: false,
        }
    }
}

impl Read for Inflater {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.cur_pos == self.cur_len {
            if self.done {
                return Ok(0);
            }
            if !self.cur.is_empty() {
                let _ = self.empty.send(std::mem::take(&mut self.cur));
            }
            match self.full.recv() {
                Ok(Ok((buf, n))) => {
                    self.cur = buf;
                    self.cur_len = n;
                    self.cur_pos = 0;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Ok(0);
                }
            }
        }
        let n = out.len().min(self.cur_len - self.cur_pos);
        out[..n].copy_from_slice(&self.cur[self.cur_pos..self.cur_pos + n]);
        self.cur_pos += n;
        Ok(n)
    }
}

/// The parser's view: a growable window over the decompressed stream.
pub(crate) struct Feed<'r> {
    path: PathBuf,
    reader: Box<dyn Read + 'r>,
    pub(crate) buf: Vec<u8>,
    pub(crate) pos: usize,
    /// Decompressed bytes dropped from the front of `buf` so far.
    base: u64,
    eof: bool,
    /// A read error met after some bytes arrived; reported on the next read.
    pending_error: Option<std::io::Error>,
    max_value_bytes: usize,
    /// Of the last object [`Self::scan_value`] scanned: where its last member value that is
    /// itself an object opened and closed, relative to the object's start.
    pub(crate) members: (Option<usize>, Option<usize>),
}

impl<'r> Feed<'r> {
    pub(crate) fn new(path: &Path, reader: Box<dyn Read + 'r>) -> Self {
        Self {
            path: path.to_owned(),
            reader,
            buf: Vec::with_capacity(2 * CHUNK),
            pos: 0,
            members: (None, None),
            base: 0,
            eof: false,
            pending_error: None,
            max_value_bytes: MAX_VALUE_BYTES,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Byte offset of `pos` in the decompressed stream, for error messages.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Drops the whole window (everything in it has been consumed or is being skipped).
    fn discard_all(&mut self) {
        self.base += self.buf.len() as u64;
        self.buf.clear();
        self.pos = 0;
    }

    /// Skips a UTF-8 byte order mark at the very start (editors on Windows write one).
    pub(crate) fn skip_bom(&mut self) -> Result<()> {
        const BOM: &[u8] = &[0xEF, 0xBB, 0xBF];
        while self.offset() == 0 && self.buf.len() < BOM.len() {
            if !self.more()? {
                break;
            }
        }
        if self.offset() == 0 && self.buf.starts_with(BOM) {
            self.pos = BOM.len();
        }
        Ok(())
    }

    /// After the document: only whitespace may follow. Reading to the end also makes the
    /// gzip decoder check the CRC and length trailers.
    pub(crate) fn expect_end(&mut self) -> Result<()> {
        match self.peek_non_ws()? {
            None => Ok(()),
            Some(b) => Err(self.syntax(format!(
                "unexpected '{}' after the end of the JSON document; a trace holds one JSON value",
                printable(b)
            ))),
        }
    }

    /// Drops consumed bytes; call only between values.
    pub(crate) fn compact(&mut self) {
        if self.pos > CHUNK {
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
    }

    /// Reads the next chunk straight into the buffer; false at end of input.
    pub(crate) fn more(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.buf.len() - self.pos > self.max_value_bytes {
            return Err(AnalyzerError::parse(
                &self.path,
                format!(
                    "a single JSON value at byte {} exceeds {} MiB; refusing to buffer it",
                    self.offset(),
                    self.max_value_bytes >> 20
                ),
            ));
        }
        let old = self.buf.len();
        self.buf.resize(old + CHUNK, 0);
        let mut filled = 0;
        let r = loop {
            match self.reader.read(&mut self.buf[old + filled..]) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    filled += n;
                    if old + filled == self.buf.len() {
                        break Ok(());
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        self.buf.truncate(old + filled);
        match r {
            // Bytes inflated before a gzip error stay usable for a truncated load.
            Err(e) if filled == 0 => Err(self.read_error(e)),
            Err(e) => {
                self.pending_error = Some(e);
                Ok(true)
            }
            Ok(()) if filled == 0 => match self.pending_error.take() {
                Some(e) => Err(self.read_error(e)),
                None => {
                    self.eof = true;
                    Ok(false)
                }
            },
            Ok(()) => Ok(true),
        }
    }

    fn read_error(&self, e: std::io::Error) -> AnalyzerError {
        let what = match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                return AnalyzerError::truncated(
                    &self.path,
                    format!(
                        "gzip stream is truncated (after {} decompressed bytes)",
                        self.base + self.buf.len() as u64
                    ),
                );
            }
            std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => {
                format!("corrupt gzip data ({e})")
            }
            _ => e.to_string(),
        };
        AnalyzerError::parse(
            &self.path,
            format!(
                "{what} (after {} decompressed bytes)",
                self.base + self.buf.len() as u64
            ),
        )
    }

    /// Skips whitespace; returns the next byte without consuming it, or None at EOF.
    pub(crate) fn peek_non_ws(&mut self) -> Result<Option<u8>> {
        loop {
            while self.pos < self.buf.len() {
                let b = self.buf[self.pos];
                if b.is_ascii_whitespace() {
                    self.pos += 1;
                } else {
                    return Ok(Some(b));
                }
            }
            // Everything in the window is consumed: whitespace streams past unbuffered.
            self.discard_all();
            if !self.more()? {
                return Ok(None);
            }
        }
    }

    pub(crate) fn expect(&mut self, want: u8, context: &str) -> Result<()> {
        match self.peek_non_ws()? {
            Some(b) if b == want => {
                self.pos += 1;
                Ok(())
            }
            Some(b) => Err(self.syntax(format!(
                "expected '{}' {context}, found '{}'",
                want as char,
                printable(b)
            ))),
            None => Err(self.eof_error(context)),
        }
    }

    pub(crate) fn syntax(&self, msg: String) -> AnalyzerError {
        AnalyzerError::parse(
            &self.path,
            format!("invalid JSON at byte {}: {msg}", self.offset()),
        )
    }

    pub(crate) fn eof_error(&self, context: &str) -> AnalyzerError {
        AnalyzerError::truncated(
            &self.path,
            format!(
                "JSON ends early at byte {} {context}; the file is truncated",
                self.offset()
            ),
        )
    }

    /// Skips one JSON value without keeping it: the window is dropped as the value streams
    /// past, so a value of any size costs no memory.
    pub(crate) fn skip_value(&mut self, context: &str) -> Result<()> {
        let Some(first) = self.peek_non_ws()? else {
            return Err(self.eof_error(context));
        };
        let mut i = self.pos;
        match first {
            b'{' | b'[' => {
                let close = if first == b'{' { b'}' } else { b']' };
                let mut state = ScanState::default();
                loop {
                    if let Some(end) = find_end(&self.buf, i, &mut state, first, close) {
                        self.pos = end;
                        return Ok(());
                    }
                    self.discard_all();
                    i = 0;
                    if !self.more()? {
                        return Err(self.eof_error(context));
                    }
                }
            }
            b'"' => {
                i += 1;
                let mut escape = false;
                loop {
                    if i >= self.buf.len() {
                        self.discard_all();
                        i = 0;
                        if !self.more()? {
                            return Err(self.eof_error(context));
                        }
                        continue;
                    }
                    let b = self.buf[i];
                    i += 1;
                    if escape {
                        escape = false;
                    } else if b == b'\\' {
                        escape = true;
                    } else if b == b'"' {
                        self.pos = i;
                        return Ok(());
                    }
                }
            }
            _ => loop {
                if i >= self.buf.len() {
                    self.discard_all();
                    i = 0;
                    if !self.more()? {
                        return Ok(());
                    }
                    continue;
                }
                let b = self.buf[i];
                if b == b',' || b == b'}' || b == b']' || b.is_ascii_whitespace() {
                    self.pos = i;
                    return Ok(());
                }
                i += 1;
            },
        }
    }

    /// Scans one JSON value starting at `pos` (after whitespace) and returns its byte range
    /// in `buf`, leaving `pos` after it. Strings, nesting and escapes are tracked; numbers and
    /// literals end at a delimiter.
    pub(crate) fn scan_value(&mut self, context: &str) -> Result<std::ops::Range<usize>> {
        let Some(first) = self.peek_non_ws()? else {
            return Err(self.eof_error(context));
        };
        let start = self.pos;
        let mut i = start;
        match first {
            b'{' | b'[' => {
                let (open, close) = if first == b'{' {
                    (b'{', b'}')
                } else {
                    (b'[', b']')
                };
                let mut state = ScanState::default();
                loop {
                    match find_end(&self.buf, i, &mut state, open, close) {
                        Some(end) => {
                            i = end;
                            self.members = (
                                state.member_open.map(|o| o - start),
                                state.member_close.map(|c| c - start),
                            );
                            break;
                        }
                        None => {
                            i = self.buf.len();
                            if !self.more()? {
                                self.pos = i;
                                return Err(self.eof_error(context));
                            }
                        }
                    }
                }
            }
            b'"' => {
                i += 1;
                loop {
                    if i >= self.buf.len() {
                        if !self.more()? {
                            self.pos = i;
                            return Err(self.eof_error(context));
                        }
                        continue;
                    }
                    let b = self.buf[i];
                    i += 1;
                    match b {
                        b'\\' => i += 1,
                        b'"' => break,
                        _ => {}
                    }
                }
            }
            _ => loop {
                if i >= self.buf.len() {
                    if !self.more()? {
                        break;
                    }
                    continue;
                }
                let b = self.buf[i];
                if b == b',' || b == b'}' || b == b']' || b.is_ascii_whitespace() {
                    break;
                }
                i += 1;
            },
        }
        // An escape at the very end can step past the buffer; that is a truncated string.
        if i > self.buf.len() {
            self.pos = self.buf.len();
            return Err(self.eof_error(context));
        }
        self.pos = i;
        Ok(start..i)
    }
}

fn printable(b: u8) -> String {
    if b.is_ascii_graphic() {
        (b as char).to_string()
    } else {
        format!("\\x{b:02x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn feed(r: impl Read + 'static) -> Feed<'static> {
        Feed::new(Path::new("t.json"), Box::new(r))
    }

    /// Before: whitespace between values accumulated in the window (4 GiB of spaces in a
    /// gzip took 4.1 GB of memory).
    #[test]
    fn whitespace_streams_past_unbuffered() {
        let mut f = feed(std::io::repeat(b' ').take(80 << 20).chain(&b" 1"[..]));
        assert_eq!(f.peek_non_ws().unwrap(), Some(b'1'));
        assert_eq!(f.offset(), (80 << 20) + 1);
        assert!(f.buf.capacity() <= 4 * CHUNK, "{}", f.buf.capacity());
    }

    #[test]
    fn skipped_values_stream_past_unbuffered() {
        for (open, close) in [(&b"\""[..], &b"\"]"[..]), (b"[\"", b"\"]]"), (b"", b"]")] {
            let body = std::io::repeat(b'x').take(80 << 20);
            let mut f = feed(open.chain(body).chain(close));
            f.skip_value("test").unwrap();
            assert_eq!(f.peek_non_ws().unwrap(), Some(b']'));
            assert!(f.buf.capacity() <= 4 * CHUNK, "{}", f.buf.capacity());
        }
        let mut f = feed(&b"\"abc"[..]);
        assert!(f.skip_value("test").unwrap_err().is_truncation());
    }

    #[test]
    fn a_kept_value_is_bounded() {
        let mut f = feed(
            (&b"\""[..])
                .chain(std::io::repeat(b'x').take(MAX_VALUE_BYTES as u64 + (2 << 20)))
                .chain(&b"\""[..]),
        );
        let e = f.scan_value("test").unwrap_err().to_string();
        assert!(e.contains("refusing to buffer it"), "{e}");
    }

    #[test]
    fn a_leading_byte_order_mark_is_skipped_once() {
        let mut f = feed(&b"\xEF\xBB\xBF {}"[..]);
        f.skip_bom().unwrap();
        assert_eq!(f.peek_non_ws().unwrap(), Some(b'{'));
        let mut f = feed(&b"{}"[..]);
        f.skip_bom().unwrap();
        assert_eq!(f.peek_non_ws().unwrap(), Some(b'{'));
    }
}
