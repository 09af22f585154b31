//! A bounded byte feed over a (possibly gzipped) file. A reader thread decompresses into
//! fixed-size chunks while the parser works on the previous ones, so the two cores overlap
//! inflate and parse, and memory stays at a few chunks plus the current JSON value.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use crate::error::{AnalyzerError, Result};
use crate::import::ImportProgress;

const CHUNK: usize = 1 << 20;
const CHANNEL_DEPTH: usize = 8;

/// Counts compressed bytes for the progress bar.
struct Counting<'p, R> {
    inner: R,
    progress: &'p dyn ImportProgress,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.advance(n as u64);
        Ok(n)
    }
}

/// Runs the reader side: decompress `path` into chunks until EOF or error.
pub(crate) fn produce(path: &Path, gz: bool, progress: &dyn ImportProgress, tx: SyncSender<Chunk>) {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) => {
            let _ = tx.send(Err(e));
            return;
        }
    };
    progress.start(file.metadata().ok().map(|m| m.len()));
    let counting = Counting {
        inner: std::io::BufReader::with_capacity(CHUNK, file),
        progress,
    };
    let mut reader: Box<dyn Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(counting))
    } else {
        Box::new(counting)
    };
    loop {
        let mut chunk = vec![0u8; CHUNK];
        let mut filled = 0;
        while filled < CHUNK {
            match reader.read(&mut chunk[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Hand over what was inflated before the error, then the error.
                    chunk.truncate(filled);
                    if filled > 0 {
                        let _ = tx.send(Ok(chunk));
                    }
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        }
        if filled == 0 {
            return;
        }
        chunk.truncate(filled);
        if tx.send(Ok(chunk)).is_err() {
            return; // parser gave up
        }
        if filled < CHUNK {
            return;
        }
    }
}

type Chunk = std::io::Result<Vec<u8>>;

/// Creates the channel the feed reads from.
pub(crate) fn channel() -> (SyncSender<Chunk>, Receiver<Chunk>) {
    sync_channel(CHANNEL_DEPTH)
}

/// The parser's view: a growable window over the decompressed stream.
pub(crate) struct Feed {
    path: PathBuf,
    rx: Receiver<Chunk>,
    pub(crate) buf: Vec<u8>,
    pub(crate) pos: usize,
    /// Decompressed bytes dropped from the front of `buf` so far.
    base: u64,
    eof: bool,
    max_value_bytes: usize,
}

impl Feed {
    pub(crate) fn new(path: &Path, rx: Receiver<Chunk>) -> Self {
        Self {
            path: path.to_owned(),
            rx,
            buf: Vec::with_capacity(2 * CHUNK),
            pos: 0,
            base: 0,
            eof: false,
            max_value_bytes: 512 << 20,
        }
    }

    /// Byte offset of `pos` in the decompressed stream, for error messages.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Drops consumed bytes; call only between values.
    pub(crate) fn compact(&mut self) {
        if self.pos > CHUNK {
            self.buf.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
    }

    /// Appends the next chunk; false at end of input.
    pub(crate) fn more(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        match self.rx.recv() {
            Ok(Ok(chunk)) => {
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
                self.buf.extend_from_slice(&chunk);
                Ok(true)
            }
            Ok(Err(e)) => Err(self.read_error(e)),
            Err(_) => {
                self.eof = true;
                Ok(false)
            }
        }
    }

    fn read_error(&self, e: std::io::Error) -> AnalyzerError {
        let what = match e.kind() {
            std::io::ErrorKind::UnexpectedEof => "gzip stream is truncated".to_owned(),
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
        AnalyzerError::parse(
            &self.path,
            format!(
                "JSON ends early at byte {} {context}; the file is truncated",
                self.offset()
            ),
        )
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
                // Only the opening bracket's own kind changes depth (the other kind nests
                // balanced inside it), so memchr3 can jump between the bytes that matter.
                let (open, close) = if first == b'{' {
                    (b'{', b'}')
                } else {
                    (b'[', b']')
                };
                let mut depth = 0usize;
                let mut in_str = false;
                loop {
                    if i >= self.buf.len() {
                        if !self.more()? {
                            self.pos = i;
                            return Err(self.eof_error(context));
                        }
                        continue;
                    }
                    let hay = &self.buf[i..];
                    if in_str {
                        match memchr::memchr2(b'"', b'\\', hay) {
                            None => i = self.buf.len(),
                            Some(o) => {
                                i += o + 1;
                                if hay[o] == b'\\' {
                                    i += 1;
                                } else {
                                    in_str = false;
                                }
                            }
                        }
                        continue;
                    }
                    match memchr::memchr3(b'"', open, close, hay) {
                        None => i = self.buf.len(),
                        Some(o) => {
                            let c = hay[o];
                            i += o + 1;
                            if c == b'"' {
                                in_str = true;
                            } else if c == open {
                                depth += 1;
                            } else {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
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
