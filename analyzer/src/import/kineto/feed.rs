//! A bounded byte window over a (possibly gzipped) file. The input arrives in chunks (see
//! [`Source`]) and the window *adopts* each chunk rather than copying it: the few unconsumed
//! bytes of the old window (at most [`HEAD`], the start of a value that straddles the chunk
//! boundary) are copied into the headroom in front of the new chunk, and the old window is
//! retired: recycled to the source, or, when it holds events the importer keeps, handed on
//! whole (see [`Feed::pin`]). Memory stays at a few chunks plus the largest single JSON value
//! that is kept (at most [`MAX_VALUE_BYTES`]); whitespace and unread values stream past.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::scan::{ScanState, find_end};
use crate::error::{AnalyzerError, Result};
use crate::import::ImportProgress;

const CHUNK: usize = 1 << 20;

/// Room in front of each chunk for the unconsumed tail of the window before it (an event
/// that straddles the boundary). Longer tails take a window of their own.
const HEAD: usize = 64 << 10;

/// The size of a chunk buffer: headroom, then the chunk. Buffers of exactly this capacity
/// circulate between the source, the window and the importer; others are dropped.
const STD: usize = HEAD + CHUNK;

/// How many chunk buffers circulate from the reading thread. Enough that the reader keeps a
/// buffer while the window holds two and the importer's channel is full.
const POOL: usize = 10;

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
/// thread inside `scope` (see [`Reader`]) so that inflate, scan and build use both cores.
pub(crate) fn open<'s, 'p: 's>(
    path: &Path,
    gz: bool,
    progress: &'p dyn ImportProgress,
    scope: &'s std::thread::Scope<'s, '_>,
) -> Result<Source<'s>> {
    let file = File::open(path).map_err(|e| AnalyzerError::io(path, e))?;
    progress.start(file.metadata().ok().map(|m| m.len()));
    let counting = Counting {
        inner: std::io::BufReader::with_capacity(CHUNK, file),
        progress,
    };
    Ok(if gz {
        Source::Thread(Reader::spawn(
            flate2::read::MultiGzDecoder::new(counting),
            scope,
        ))
    } else {
        Source::from_read(Box::new(counting))
    })
}

/// Reads `bytes` (a trace handed over in memory), counting them; gzip is inflated on its own
/// thread inside `scope` as for a file.
pub(crate) fn from_bytes<'s, 'p: 's>(
    bytes: &'s [u8],
    gz: bool,
    progress: &'p dyn ImportProgress,
    scope: &'s std::thread::Scope<'s, '_>,
) -> Source<'s> {
    progress.start(Some(bytes.len() as u64));
    let counting = Counting {
        inner: std::io::Cursor::new(bytes),
        progress,
    };
    if gz {
        Source::Thread(Reader::spawn(
            flate2::read::MultiGzDecoder::new(counting),
            scope,
        ))
    } else {
        Source::from_read(Box::new(counting))
    }
}

/// A chunk: a buffer of [`STD`] bytes whose data sits at `HEAD..HEAD + n`.
type Filled = std::io::Result<(Vec<u8>, usize)>;

/// Fills `buf[HEAD..]` from `inner`; the bytes filled and how reading stopped.
fn fill(inner: &mut impl Read, buf: &mut Vec<u8>) -> (usize, std::io::Result<()>) {
    buf.resize(STD, 0);
    let mut filled = 0;
    let r = loop {
        match inner.read(&mut buf[HEAD + filled..]) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                filled += n;
                if filled == CHUNK {
                    break Ok(());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Err(e),
        }
    };
    (filled, r)
}

/// Chunks produced by a thread: it reads (inflates) into recycled buffers and hands them over
/// a small channel; the buffers come back through a [`Recycler`].
pub(crate) struct Reader {
    full: std::sync::mpsc::Receiver<Filled>,
    empty: std::sync::mpsc::SyncSender<Vec<u8>>,
    done: bool,
}

impl Reader {
    const DEPTH: usize = 3;

    fn spawn<'s, R: Read + Send + 's>(mut inner: R, scope: &'s std::thread::Scope<'s, '_>) -> Self {
        let (full_tx, full) = std::sync::mpsc::sync_channel::<Filled>(Self::DEPTH);
        let (empty, empty_rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(POOL);
        for _ in 0..POOL {
            let _ = empty.send(vec![0u8; STD]);
        }
        scope.spawn(move || {
            while let Ok(mut buf) = empty_rx.recv() {
                let (filled, r) = fill(&mut inner, &mut buf);
                let end = filled < CHUNK;
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
            done: false,
        }
    }
}

/// Chunks read synchronously from any reader (a plain file); after a read error that followed some
/// bytes, those bytes come first and the error with the next chunk.
pub(crate) struct ReadChunks<'r> {
    reader: Box<dyn Read + 'r>,
    /// Buffers given back (by the window or by a [`Recycler`]).
    pool: std::sync::mpsc::Receiver<Vec<u8>>,
    give: std::sync::mpsc::SyncSender<Vec<u8>>,
    pending: Option<std::io::Error>,
    done: bool,
}

/// Where the window's chunks come from.
pub(crate) enum Source<'r> {
    Thread(Reader),
    Read(ReadChunks<'r>),
}

impl<'r> Source<'r> {
    pub(crate) fn from_read(reader: Box<dyn Read + 'r>) -> Self {
        let (give, pool) = std::sync::mpsc::sync_channel(POOL);
        Source::Read(ReadChunks {
            reader,
            pool,
            give,
            pending: None,
            done: false,
        })
    }

    /// The next chunk; None at the end of input.
    fn next(&mut self) -> Option<Filled> {
        match self {
            Source::Thread(t) => {
                if t.done {
                    return None;
                }
                match t.full.recv() {
                    Ok(Ok(c)) => Some(Ok(c)),
                    Ok(Err(e)) => {
                        t.done = true;
                        Some(Err(e))
                    }
                    Err(_) => {
                        t.done = true;
                        None
                    }
                }
            }
            Source::Read(s) => {
                if let Some(e) = s.pending.take() {
                    s.done = true;
                    return Some(Err(e));
                }
                if s.done {
                    return None;
                }
                let mut buf = s.pool.try_recv().unwrap_or_else(|_| vec![0u8; STD]);
                let (filled, r) = fill(&mut s.reader, &mut buf);
                match r {
                    Err(e) if filled == 0 => {
                        s.done = true;
                        Some(Err(e))
                    }
                    Err(e) => {
                        s.pending = Some(e);
                        Some(Ok((buf, filled)))
                    }
                    Ok(()) if filled == 0 => {
                        s.done = true;
                        None
                    }
                    Ok(()) => Some(Ok((buf, filled))),
                }
            }
        }
    }

    /// Gives a buffer back for reuse (only chunk-sized ones are kept).
    fn recycle(&mut self, buf: Vec<u8>) {
        match self {
            Source::Thread(t) => give_to(&t.empty, buf),
            Source::Read(s) => give_to(&s.give, buf),
        }
    }

    /// A handle that gives buffers back from another thread.
    pub(crate) fn recycler(&self) -> Recycler {
        match self {
            Source::Thread(t) => Recycler(t.empty.clone()),
            Source::Read(s) => Recycler(s.give.clone()),
        }
    }
}

/// Gives chunk buffers back to the reading thread (from the thread that built from them).
pub(crate) struct Recycler(std::sync::mpsc::SyncSender<Vec<u8>>);

impl Recycler {
    pub(crate) fn give(&self, buf: Vec<u8>) {
        give_to(&self.0, buf);
    }
}

fn give_to(tx: &std::sync::mpsc::SyncSender<Vec<u8>>, buf: Vec<u8>) {
    if buf.capacity() == STD {
        // Never blocks: the channel holds every buffer there is.
        let _ = tx.try_send(buf);
    }
}

/// The parser's view: a window over the decompressed stream.
pub(crate) struct Feed<'r> {
    path: PathBuf,
    src: Source<'r>,
    pub(crate) buf: Vec<u8>,
    pub(crate) pos: usize,
    /// Offset in the decompressed stream of `buf[0]` (negative while `buf` starts with
    /// headroom in front of the stream's first byte).
    base: i64,
    eof: bool,
    max_value_bytes: usize,
    /// Of the last object [`Self::scan_value`] scanned: where its last member value that is
    /// itself an object opened and closed, relative to the object's start.
    pub(crate) members: (Option<usize>, Option<usize>),
    /// `buf` holds bytes someone still reads by index (see [`Self::pin`]).
    pinned: bool,
    /// A pinned window that was replaced, waiting for [`Self::take_retired`].
    retired: Option<Vec<u8>>,
}

impl<'r> Feed<'r> {
    pub(crate) fn new(path: &Path, src: Source<'r>) -> Self {
        Self {
            path: path.to_owned(),
            src,
            buf: Vec::new(),
            pos: 0,
            members: (None, None),
            base: 0,
            eof: false,
            max_value_bytes: MAX_VALUE_BYTES,
            pinned: false,
            retired: None,
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Byte offset of `pos` in the decompressed stream, for error messages.
    pub(crate) fn offset(&self) -> u64 {
        (self.base + self.pos as i64) as u64
    }

    /// Marks the window as holding bytes that are read later by their index in `buf`: it is
    /// then never compacted, and when it is replaced it waits in [`Self::take_retired`]
    /// instead of being recycled.
    pub(crate) fn pin(&mut self) {
        self.pinned = true;
    }

    pub(crate) fn is_pinned(&self) -> bool {
        self.pinned
    }

    /// The last pinned window, once a newer one has replaced it.
    pub(crate) fn take_retired(&mut self) -> Option<Vec<u8>> {
        self.retired.take()
    }

    /// Takes the current window (at the end of input, for the bytes it pins).
    pub(crate) fn take_window(&mut self) -> Vec<u8> {
        self.pinned = false;
        self.base += self.buf.len() as i64;
        self.pos = 0;
        std::mem::take(&mut self.buf)
    }

    /// Drops the whole window (everything in it has been consumed or is being skipped).
    fn discard_all(&mut self) {
        self.pos = self.buf.len();
    }

    /// Skips a UTF-8 byte order mark at the very start (editors on Windows write one).
    pub(crate) fn skip_bom(&mut self) -> Result<()> {
        const BOM: &[u8] = &[0xEF, 0xBB, 0xBF];
        while self.offset() == 0 && self.buf.len() - self.pos < BOM.len() {
            if !self.more()? {
                break;
            }
        }
        if self.offset() == 0 && self.buf[self.pos..].starts_with(BOM) {
            self.pos += BOM.len();
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

    /// Replaces the window by `new` and retires the old one.
    fn replace(&mut self, new: Vec<u8>, pos: usize, stream_pos: i64) {
        let old = std::mem::replace(&mut self.buf, new);
        self.pos = pos;
        self.base = stream_pos - pos as i64;
        if std::mem::take(&mut self.pinned) {
            debug_assert!(self.retired.is_none());
            self.retired = Some(old);
        } else {
            self.src.recycle(old);
        }
    }

    /// Brings in the next chunk; false at end of input. The unconsumed bytes `buf[pos..]`
    /// stay, followed by the new ones, but may move: callers keep their indices relative to
    /// `pos` across the call.
    pub(crate) fn more(&mut self) -> Result<bool> {
        if self.eof {
            return Ok(false);
        }
        let rem = self.buf.len() - self.pos;
        if rem > self.max_value_bytes {
            return Err(AnalyzerError::parse(
                &self.path,
                format!(
                    "a single JSON value at byte {} exceeds {} MiB; refusing to buffer it",
                    self.offset(),
                    self.max_value_bytes >> 20
                ),
            ));
        }
        let (mut chunk, n) = match self.src.next() {
            None => {
                self.eof = true;
                return Ok(false);
            }
            Some(Err(e)) => return Err(self.read_error(e)),
            Some(Ok(c)) => c,
        };
        let stream_pos = self.base + self.pos as i64;
        if rem <= HEAD {
            // The common case: adopt the chunk, the tail of the old window in front of it.
            chunk[HEAD - rem..HEAD].copy_from_slice(&self.buf[self.pos..]);
            chunk.truncate(HEAD + n);
            self.replace(chunk, HEAD - rem, stream_pos);
            return Ok(true);
        }
        // A long value straddles the boundary: it grows in a window of its own.
        let data = &chunk[HEAD..HEAD + n];
        if self.pinned || self.buf.capacity() == STD {
            // A pinned window must keep its bytes where they are, and a chunk buffer never
            // grows (it would stop being one): the value moves to a new window, once.
            let mut w = Vec::with_capacity(2 * (rem + CHUNK));
            w.extend_from_slice(&self.buf[self.pos..]);
            w.extend_from_slice(data);
            self.replace(w, 0, stream_pos);
        } else {
            if self.pos > 0 {
                self.buf.drain(..self.pos);
                self.base = stream_pos;
                self.pos = 0;
            }
            self.buf.extend_from_slice(data);
        }
        self.src.recycle(chunk);
        Ok(true)
    }

    fn read_error(&self, e: std::io::Error) -> AnalyzerError {
        let read = self.base + self.buf.len() as i64;
        let what = match e.kind() {
            std::io::ErrorKind::UnexpectedEof => {
                return AnalyzerError::truncated(
                    &self.path,
                    format!("gzip stream is truncated (after {read} decompressed bytes)"),
                );
            }
            std::io::ErrorKind::InvalidInput | std::io::ErrorKind::InvalidData => {
                format!("corrupt gzip data ({e})")
            }
            _ => e.to_string(),
        };
        AnalyzerError::parse(
            &self.path,
            format!("{what} (after {read} decompressed bytes)"),
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
                    if !self.more()? {
                        return Err(self.eof_error(context));
                    }
                    i = self.pos;
                }
            }
            b'"' => {
                i += 1;
                let mut escape = false;
                loop {
                    if i >= self.buf.len() {
                        self.discard_all();
                        if !self.more()? {
                            return Err(self.eof_error(context));
                        }
                        i = self.pos;
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
                    if !self.more()? {
                        return Ok(());
                    }
                    i = self.pos;
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

    /// [`Self::more`] for a caller scanning at `i` (at or after `pos`): `i` moves with the
    /// window.
    fn more_at(&mut self, i: &mut usize) -> Result<bool> {
        let rel = *i - self.pos;
        let r = self.more();
        *i = self.pos + rel;
        r
    }

    /// Scans one JSON value starting at `pos` (after whitespace) and returns its byte range
    /// in `buf`, leaving `pos` after it. Strings, nesting and escapes are tracked; numbers and
    /// literals end at a delimiter.
    pub(crate) fn scan_value(&mut self, context: &str) -> Result<std::ops::Range<usize>> {
        let Some(first) = self.peek_non_ws()? else {
            return Err(self.eof_error(context));
        };
        // `pos` stays at the value's start until it is scanned.
        let mut i = self.pos;
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
                            let start = self.pos;
                            self.members = (
                                state.member_open.map(|o| o - start),
                                state.member_close.map(|c| c - start),
                            );
                            break;
                        }
                        None => {
                            i = self.buf.len();
                            let before = self.pos;
                            let more = self.more_at(&mut i)?;
                            // The scan state holds indices into the window.
                            let after = self.pos;
                            for m in [&mut state.member_open, &mut state.member_close] {
                                *m = m.map(|x| x - before + after);
                            }
                            if !more {
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
                        if !self.more_at(&mut i)? {
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
                    if !self.more_at(&mut i)? {
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
        let start = self.pos;
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
        Feed::new(Path::new("t.json"), Source::from_read(Box::new(r)))
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

    /// Returns at most `step` bytes a read, then (optionally) an error.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        step: usize,
        error: bool,
    }

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            if self.at == self.data.len() && self.error {
                return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "bad"));
            }
            let n = out.len().min(self.step).min(self.data.len() - self.at);
            out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    /// Values that straddle chunk boundaries come out whole: short ones (the window's tail
    /// copied in front of the next chunk) and long ones (a window of their own), whether or
    /// not the window is pinned; ranges in a pinned window stay valid once it is retired.
    #[test]
    fn values_straddling_chunks_come_out_whole_and_pinned_windows_keep_them() {
        let mut doc = b"[".to_vec();
        let mut want = Vec::new();
        let mut n = 0;
        while doc.len() < 9 * CHUNK {
            let len = match n % 23 {
                _ if n == 40 || n == 41 => 3 * CHUNK / 2,
                0 => HEAD + 5000,
                _ => 100 + n * 37 % 3000,
            };
            let v = format!(
                r#"{{"i":{n},"s":"{}\"","args":{{"x":"a\"}}b"}}}}"#,
                "y".repeat(len)
            );
            if n > 0 {
                doc.extend_from_slice(b" ,\n");
            }
            doc.extend_from_slice(v.as_bytes());
            want.push(v);
            n += 1;
        }
        doc.push(b']');
        let mut f = feed(Trickle {
            data: doc,
            at: 0,
            step: 100_000,
            error: false,
        });
        f.expect(b'[', "test").unwrap();
        let mut pending: Vec<(std::ops::Range<usize>, usize)> = Vec::new();
        let check = |w: &[u8], pending: &mut Vec<(std::ops::Range<usize>, usize)>| {
            for (r, k) in pending.drain(..) {
                assert_eq!(&w[r], want[k].as_bytes(), "value {k}");
            }
        };
        let (mut retired, mut skipped) = (0, 0);
        for (k, v) in want.iter().enumerate() {
            if k % 5 == 4 {
                f.skip_value("test").unwrap();
                skipped += 1;
            } else {
                let start = f.offset();
                f.members = (None, None);
                let r = f.scan_value("test").unwrap();
                assert_eq!(&f.buf[r.clone()], v.as_bytes(), "value {k} at {start}");
                let (open, close) = f.members;
                assert_eq!(&v[open.unwrap()..close.unwrap() + 1], r#"{"x":"a\"}b"}"#);
                if let Some(w) = f.take_retired() {
                    check(&w, &mut pending);
                    retired += 1;
                }
                if k % 3 != 2 {
                    f.pin();
                    pending.push((r, k));
                }
            }
            let sep = f.peek_non_ws().unwrap();
            assert_eq!(sep, Some(if k + 1 == want.len() { b']' } else { b',' }));
            f.pos += 1;
        }
        f.expect_end().unwrap();
        if let Some(w) = f.take_retired() {
            check(&w, &mut pending);
        }
        if f.is_pinned() {
            let w = f.take_window();
            check(&w, &mut pending);
        }
        assert!(pending.is_empty());
        assert!(retired > 3 && skipped > 5, "{retired} {skipped}");
    }

    /// Long values that are all kept (each pins its window) do not make the window grow
    /// with the input: each long value that straddles a boundary moves to a new window.
    #[test]
    fn kept_long_values_keep_the_window_bounded() {
        let v = format!("\"{}\"", "x".repeat(700 << 10));
        let doc = format!("[{}]", vec![v.as_str(); 40].join(","));
        let mut f = feed(std::io::Cursor::new(doc.into_bytes()));
        f.expect(b'[', "test").unwrap();
        let mut most = 0;
        for k in 0..40 {
            let r = f.scan_value("test").unwrap();
            assert_eq!(f.buf[r.clone()], *v.as_bytes(), "value {k}");
            f.take_retired();
            f.pin();
            most = most.max(f.buf.capacity());
            f.pos += 1;
        }
        assert!(most <= 4 * CHUNK, "{most}");
    }

    /// Bytes read before a read error are delivered first; the error follows, with how many
    /// bytes were read.
    #[test]
    fn a_read_error_follows_the_bytes_before_it() {
        let mut f = feed(Trickle {
            data: b"[1, 22".to_vec(),
            at: 0,
            step: 2,
            error: true,
        });
        f.expect(b'[', "test").unwrap();
        let r = f.scan_value("test").unwrap();
        assert_eq!(&f.buf[r], b"1");
        f.expect(b',', "test").unwrap();
        let e = f.scan_value("test").unwrap_err().to_string();
        assert!(
            e.contains("corrupt gzip data (bad) (after 6 decompressed bytes)"),
            "{e}"
        );
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
