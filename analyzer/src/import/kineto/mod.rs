//! PyTorch profiler (Kineto) Chrome-trace JSON importer, plain or gzipped.
//!
//! Streaming: a structural scanner finds each element of `traceEvents` and only the events
//! gapscope keeps are deserialised, so memory is bounded by the output tables and one event,
//! never by the JSON size; whitespace and top-level values gapscope does not read stream
//! past unbuffered, and the tables stop at the import's event limit. Both the object form
//! (`{"traceEvents": [...]}`) and the bare array form are accepted, after an optional UTF-8
//! byte order mark.
//!
//! The whole input is read: anything but whitespace after the JSON document is an error
//! (as in Python's `json.load`, which HTA uses, and Chrome's trace viewer), and reading a
//! gzip to its end checks its CRC and length trailers. A file that merely ends early is
//! truncated, which `allow_truncated` accepts; a corrupt one is always an error.

mod decimal;
mod event;
mod feed;
mod fields;
mod scan;

use std::path::Path;

use gapscope_traces::{
    GpuInfo, InputDimRow, KernelRow, LaunchApi, LaunchRow, MODULE_CALL_PREFIX, Manifest, MarkerRow,
    MarkerSource, MemopKind, MemopRow, Phase, ScopeKind, ScopeRow, SourceFormat, Trace,
};
use serde::Deserialize;

use self::event::{Category, Event, category, memcpy_kind};
use self::feed::Feed;
use self::fields::peek_cat;
use super::limits::Budget;
use super::{ImportOptions, ImportProgress};
use crate::error::{AnalyzerError, Result};

/// Input shapes kept per attention op (query and key) and axes per input, and the most rows
/// kept in all (16 MiB of shapes, 131,072 attention ops; a profiled decode run holds a few
/// thousand). Beyond it the trace's notes say that later ops lost their shapes.
const KEPT_INPUTS: usize = 2;
const KEPT_AXES: usize = 4;
const MAX_INPUT_DIM_ROWS: usize = 1 << 20;

/// What the scanning thread hands the building thread, in document order.
enum Item {
    /// A kept event: its bytes at `start..end` of the batch's window, where it starts in
    /// the decompressed stream, and its category.
    Event {
        start: usize,
        end: usize,
        at: u64,
        cat: Category,
    },
    /// A top-level key other than traceEvents, with its raw JSON value.
    Meta(String, Vec<u8>),
}

/// A retired window of the input (no copy of the events in it) and what was kept from it.
struct Batch {
    window: Option<Vec<u8>>,
    items: Vec<Item>,
}

/// The top-level keys [`Builder::meta`] reads; other top-level values are skipped unread.
const META_KEYS: [&str; 7] = [
    "gapscopeManifest",
    "deviceProperties",
    "distributedInfo",
    "baseTimeNanoseconds",
    "displayTimeUnit",
    "cuda_driver_version",
    "cuda_runtime_version",
];

/// The scanning side: walks the document, drops events gapscope does not read after a peek
/// at their category, and ships the rest by reference into the window they sit in; the
/// window itself follows once the feed has moved past it.
struct Batcher {
    tx: std::sync::mpsc::SyncSender<Batch>,
    /// Items of the pinned window (retired or current).
    items: Vec<Item>,
    /// Events kept so far (a truncated load needs at least one).
    kept: u64,
    /// The building side hung up (it hit an error); stop scanning.
    closed: bool,
}

impl Batcher {
    fn send(&mut self, window: Option<Vec<u8>>) {
        if self.items.is_empty() || self.closed {
            return;
        }
        let items = std::mem::take(&mut self.items);
        if self.tx.send(Batch { window, items }).is_err() {
            self.closed = true;
        }
    }

    /// Ships the window the feed has moved past, with the items in it.
    fn retired(&mut self, feed: &mut Feed) {
        if let Some(w) = feed.take_retired() {
            self.send(Some(w));
        }
    }

    /// At the end of input: ships whatever is left.
    fn flush(&mut self, feed: &mut Feed) {
        self.retired(feed);
        let window = feed.is_pinned().then(|| feed.take_window());
        self.send(window);
    }

    /// The event at `r` in the feed's window; `feed.members` (from the scan) tells where its
    /// last object-valued member opened and closed, which lets a trailing `args` be dropped
    /// without scanning it again.
    fn event(&mut self, feed: &mut Feed, r: std::ops::Range<usize>, at: u64) {
        let raw = &feed.buf[r.clone()];
        let Some(cat) = peek_cat(raw).and_then(category) else {
            return;
        };
        self.kept += 1;
        let end = match cat {
            // Host scopes need no args (with record_shapes they hold every input's dims,
            // types and strides: most of a CPU op's bytes), so only the fields before them
            // are parsed: the ',' before `"args"` becomes the closing brace (the event is
            // scanned; nothing reads that byte again).
            Category::CpuOp | Category::PythonFunction => {
                match fields::cut_args(raw, feed.members) {
                    // The attention op keeps its args: its input shapes are read.
                    Some(head) if cat == Category::CpuOp && event::keeps_shapes(head) => r.end,
                    Some(head) => {
                        let comma = r.start + head.len();
                        feed.buf[comma] = b'}';
                        comma + 1
                    }
                    None => r.end,
                }
            }
            _ => r.end,
        };
        self.retired(feed);
        feed.pin();
        self.items.push(Item::Event {
            start: r.start,
            end,
            at,
            cat,
        });
    }

    fn meta(&mut self, feed: &mut Feed, key: String, raw: std::ops::Range<usize>) {
        self.retired(feed);
        self.items.push(Item::Meta(key, feed.buf[raw].to_vec()));
    }
}

/// Imports a Kineto trace. With `opts.allow_truncated`, a file that ends early yields the
/// events read so far, flagged as truncated; otherwise it is an error.
///
/// Two threads: one inflates and scans (finding event boundaries and skipping unread
/// categories), the other deserialises the kept events into tables.
pub fn import_kineto(
    path: &Path,
    gz: bool,
    opts: &ImportOptions,
    progress: &dyn ImportProgress,
) -> Result<Trace> {
    import_kineto_from(path, None, gz, opts, progress)
}

/// [`import_kineto`] of a trace held in memory; `name` names it in errors.
pub fn import_kineto_bytes(
    name: &Path,
    bytes: &[u8],
    gz: bool,
    opts: &ImportOptions,
    progress: &dyn ImportProgress,
) -> Result<Trace> {
    import_kineto_from(name, Some(bytes), gz, opts, progress)
}

fn import_kineto_from(
    path: &Path,
    bytes: Option<&[u8]>,
    gz: bool,
    opts: &ImportOptions,
    progress: &dyn ImportProgress,
) -> Result<Trace> {
    let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(4);
    let limit = opts.event_limit();
    let (scanned, built) = std::thread::scope(|s| {
        let opened = match bytes {
            Some(b) => Ok(feed::from_bytes(b, gz, progress, s)),
            None => feed::open(path, gz, progress, s),
        };
        let source = match opened {
            Ok(r) => r,
            Err(e) => return ((Err(e), 0), Ok(Builder::new(path, limit))),
        };
        let recycler = source.recycler();
        let builder = s.spawn(move || {
            let mut b = Builder::new(path, limit);
            for Batch { window, items } in rx {
                let bytes = window.as_deref().unwrap_or_default();
                for item in items {
                    match item {
                        Item::Event {
                            start,
                            end,
                            at,
                            cat,
                        } => b.event(&bytes[start..end], at, cat)?,
                        Item::Meta(key, raw) => b.meta(&key, &raw),
                    }
                }
                if let Some(w) = window {
                    recycler.give(w);
                }
            }
            Ok::<Builder, AnalyzerError>(b)
        });
        let mut feed = Feed::new(path, source);
        let mut batcher = Batcher {
            tx,
            items: Vec::new(),
            kept: 0,
            closed: false,
        };
        let mut r = parse_document(&mut feed, &mut batcher);
        if r.is_ok() && !batcher.closed {
            r = feed.expect_end();
        }
        batcher.flush(&mut feed);
        let kept = batcher.kept;
        drop(batcher); // closes the channel: the builder finishes what was sent
        let built = builder.join().unwrap_or_else(|_| {
            Err(AnalyzerError::parse(
                path,
                "internal error: builder thread panicked",
            ))
        });
        ((r, kept), built)
    });
    progress.finish();
    let (r, kept) = scanned;
    let b = built?;
    match r {
        Ok(()) => Ok(b.finish()),
        Err(e) if opts.allow_truncated && kept > 0 && e.is_truncation() => {
            let mut t = b.finish();
            let why = format!("input ends early: {e}");
            t.manifest.truncated = true;
            t.manifest.truncation.push(why.clone());
            t.manifest.notes.push(why);
            Ok(t)
        }
        Err(e) => Err(e),
    }
}

fn parse_document(feed: &mut Feed, b: &mut Batcher) -> Result<()> {
    feed.skip_bom()?;
    match feed.peek_non_ws()? {
        None => Err(AnalyzerError::parse(
            feed.path(),
            "file holds no JSON (empty or only whitespace)",
        )),
        Some(b'[') => events_array(feed, b, true),
        Some(b'{') => object(feed, b),
        Some(_) => Err(feed.syntax("a trace must start with '{' or '['".into())),
    }
}

fn object(feed: &mut Feed, b: &mut Batcher) -> Result<()> {
    feed.pos += 1;
    let mut saw_events = false;
    loop {
        match feed.peek_non_ws()? {
            Some(b'}') => {
                feed.pos += 1;
                break;
            }
            Some(b'"') => {}
            Some(c) => {
                return Err(feed.syntax(format!("expected an object key, found '{}'", c as char)));
            }
            None => return Err(feed.eof_error("in the top-level object")),
        }
        let r = feed.scan_value("in an object key")?;
        let key: String = serde_json::from_slice(&feed.buf[r])
            .map_err(|e| feed.syntax(format!("bad object key: {e}")))?;
        feed.expect(b':', "after an object key")?;
        if key == "traceEvents" {
            events_array(feed, b, false)?;
            saw_events = true;
        } else if META_KEYS.contains(&key.as_str()) {
            let r = feed.scan_value("in a top-level value")?;
            b.meta(feed, key, r);
        } else {
            feed.skip_value("in a top-level value")?;
        }
        match feed.peek_non_ws()? {
            Some(b',') => feed.pos += 1,
            Some(b'}') => {
                feed.pos += 1;
                break;
            }
            Some(c) => {
                return Err(feed.syntax(format!(
                    "expected ',' or '}}' after a top-level value, found '{}'",
                    c as char
                )));
            }
            None => return Err(feed.eof_error("in the top-level object")),
        }
    }
    if !saw_events {
        return Err(AnalyzerError::unsupported(
            feed.path(),
            "JSON object has no traceEvents array; not a Chrome/Kineto trace",
        ));
    }
    Ok(())
}

fn events_array(feed: &mut Feed, b: &mut Batcher, top_level: bool) -> Result<()> {
    feed.expect(b'[', "to open traceEvents")?;
    if feed.peek_non_ws()? == Some(b']') {
        feed.pos += 1;
        return Ok(());
    }
    loop {
        let at = feed.offset();
        feed.members = (None, None);
        let r = feed.scan_value("in traceEvents")?;
        b.event(feed, r, at);
        if b.closed {
            return Ok(()); // the builder failed; its error is the one to report
        }
        match feed.peek_non_ws()? {
            Some(b',') => {
                feed.pos += 1;
                match feed.peek_non_ws()? {
                    Some(b']') => {
                        feed.pos += 1;
                        return Ok(());
                    }
                    // The trace-event format lets the array form omit its closing bracket.
                    None if top_level => return Ok(()),
                    _ => {}
                }
            }
            Some(b']') => {
                feed.pos += 1;
                return Ok(());
            }
            None if top_level => return Ok(()),
            None => return Err(feed.eof_error("inside traceEvents")),
            Some(c) => {
                return Err(feed.syntax(format!(
                    "expected ',' or ']' between events, found '{}'",
                    c as char
                )));
            }
        }
    }
}

/// A collective kernel's message in bytes: `In msg nelems` elements of `dtype`, as
/// torch.distributed records them on NCCL kernels; `None` without both or for an unknown
/// element type.
fn message_bytes(a: &event::Args<'_>) -> Option<i64> {
    let n = a.in_msg_nelems?.0;
    let size: f64 = match a.dtype.as_deref()? {
        "Float" | "Int" | "UInt32" | "Float32" => 4.0,
        "Half" | "BFloat16" | "Short" | "UInt16" => 2.0,
        "Double" | "Long" | "ComplexFloat" | "UInt64" => 8.0,
        "Byte" | "Char" | "Bool" | "Float8_e4m3fn" | "Float8_e5m2" | "Float8_e4m3fnuz"
        | "Float8_e5m2fnuz" => 1.0,
        "ComplexDouble" => 16.0,
        _ => return None,
    };
    let b = n * size;
    (0.0..9.0e15).contains(&b).then_some(b as i64)
}

/// Kineto's `distributedInfo` (torch.distributed's backend, rank and world size).
#[derive(Deserialize)]
struct DistributedInfo {
    #[serde(default)]
    rank: Option<u32>,
    #[serde(default)]
    world_size: Option<u32>,
}

#[derive(Deserialize)]
struct DeviceProp {
    #[serde(default)]
    id: Option<u32>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, rename = "numSms")]
    num_sms: Option<u32>,
    #[serde(default, rename = "totalGlobalMem")]
    total_global_mem: Option<u64>,
    #[serde(default, rename = "computeMajor")]
    compute_major: Option<u32>,
    #[serde(default, rename = "computeMinor")]
    compute_minor: Option<u32>,
    #[serde(default, rename = "warpSize")]
    warp_size: Option<u32>,
}

/// Hashes event names for the builder's lookup: 16 bytes per multiply, and a tail read as
/// (overlapping) words, not byte by byte. A name of Python functions or framework ops is
/// tens of bytes, hashed once per event; FxHash's byte loop over a tail of up to 7 bytes
/// was most of the builder's hashing time. Lookup only: nothing iterates the map.
#[derive(Default, Clone, Copy)]
struct NameHasher(u64);

impl NameHasher {
    const K1: u64 = 0x243f_6a88_85a3_08d3;
    const K2: u64 = 0x1319_8a2e_0370_7344;
    const K3: u64 = 0xa409_3822_299f_31d0;

    fn fold(a: u64, b: u64) -> u64 {
        let p = u128::from(a) * u128::from(b);
        (p as u64) ^ ((p >> 64) as u64)
    }
}

impl std::hash::Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        let word = |b: &[u8], at: usize| -> u64 {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(w)
        };
        let half = |b: &[u8], at: usize| -> u64 {
            let mut w = [0u8; 4];
            w.copy_from_slice(&b[at..at + 4]);
            u64::from(u32::from_le_bytes(w))
        };
        let mut h = self.0 ^ (bytes.len() as u64).wrapping_mul(Self::K3);
        let mut chunks = bytes.chunks_exact(16);
        for c in &mut chunks {
            h = Self::fold(h ^ word(c, 0) ^ Self::K1, word(c, 8) ^ Self::K2);
        }
        let r = chunks.remainder();
        let n = r.len();
        let (a, b) = if n >= 8 {
            (word(r, 0), word(r, n - 8))
        } else if n >= 4 {
            (half(r, 0), half(r, n - 4))
        } else if n > 0 {
            (
                u64::from(r[0]) | u64::from(r[n / 2]) << 8 | u64::from(r[n - 1]) << 16,
                0,
            )
        } else {
            (0, 0)
        };
        self.0 = Self::fold(h ^ a ^ Self::K2, b ^ Self::K1);
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = Self::fold(self.0 ^ n as u64 ^ Self::K3, Self::K1);
    }

    fn finish(&self) -> u64 {
        Self::fold(self.0 ^ Self::K1, Self::K3)
    }
}

/// Accumulates rows while events stream past.
struct Builder {
    path: std::path::PathBuf,
    trace: Trace,
    events: u64,
    budget: Budget,
    /// Name ids by the names' raw bytes: a repeated name (most of them) is found without
    /// checking its UTF-8 again or hashing it twice.
    name_ids: std::collections::HashMap<
        Box<[u8]>,
        gapscope_traces::StrId,
        std::hash::BuildHasherDefault<NameHasher>,
    >,
    /// Complete events left out because their `ts` or `dur` is missing, `null` or not a
    /// number, by category: read as 0 they would move busy time and steps silently.
    untimed: std::collections::BTreeMap<&'static str, u64>,
    /// The input-shape rows reached their cap (and the notes say so).
    dims_full: bool,
    /// The recording's facts a gapscope export carries (`gapscopeManifest`).
    native: Option<Box<Manifest>>,
}

impl Builder {
    fn new(path: &Path, max_events: Option<u64>) -> Self {
        Self {
            path: path.to_owned(),
            trace: Trace::new(Manifest::new(SourceFormat::Kineto)),
            events: 0,
            budget: Budget::new(path, max_events),
            name_ids: Default::default(),
            untimed: Default::default(),
            dims_full: false,
            native: None,
        }
    }

    /// A name's bytes as text; an event whose name is not UTF-8 is malformed.
    fn utf8<'r>(&self, raw: &'r [u8], at: u64) -> Result<&'r str> {
        std::str::from_utf8(raw).map_err(|e| {
            AnalyzerError::parse(
                &self.path,
                format!("invalid trace event at byte {at}: string is not UTF-8: {e}"),
            )
        })
    }

    /// The id of a name given as unescaped bytes; an error when they are not UTF-8 (as the
    /// full reader reports it).
    fn name_id(&mut self, raw: &[u8], at: u64) -> Result<gapscope_traces::StrId> {
        if let Some(&id) = self.name_ids.get(raw) {
            return Ok(id);
        }
        let s = self.utf8(raw, at)?;
        let id = self
            .trace
            .strings
            .intern(&crate::import::names::without_addresses(s));
        self.name_ids.insert(raw.into(), id);
        Ok(id)
    }

    /// Start and end in whole nanoseconds: the end is rounded from the exact `ts + dur`,
    /// so events that abut in the text abut here. `None` (and the event counted as left out)
    /// when either time is missing, `null` or not a number.
    fn span(
        &mut self,
        ts: Option<decimal::Nanos>,
        dur: Option<decimal::Nanos>,
        cat: Category,
    ) -> Option<(i64, i64)> {
        match (ts, dur) {
            (Some(start), Some(dur)) => Some((start.round(), start.add(dur).round())),
            _ => {
                *self.untimed.entry(cat.as_str()).or_default() += 1;
                None
            }
        }
    }

    fn meta(&mut self, key: &str, raw: &[u8]) {
        let m = &mut self.trace.manifest;
        match key {
            "gapscopeManifest" => match serde_json::from_slice::<Manifest>(raw) {
                Ok(n) => self.native = Some(Box::new(n)),
                Err(e) => m
                    .notes
                    .push(format!("ignored malformed gapscopeManifest: {e}")),
            },
            "deviceProperties" => match serde_json::from_slice::<Vec<DeviceProp>>(raw) {
                Ok(props) => {
                    for (i, p) in props.into_iter().enumerate() {
                        m.gpus.push(GpuInfo {
                            device: p.id.unwrap_or(i as u32),
                            name: p.name.unwrap_or_default(),
                            sm_count: p.num_sms,
                            total_memory_bytes: p.total_global_mem,
                            compute_capability: p
                                .compute_major
                                .map(|a| format!("{a}.{}", p.compute_minor.unwrap_or(0))),
                            warp_size: p.warp_size,
                            ..Default::default()
                        });
                    }
                }
                Err(e) => m
                    .notes
                    .push(format!("ignored malformed deviceProperties: {e}")),
            },
            "baseTimeNanoseconds" => match base_time_ns(raw) {
                Some(v) => m.source_base_time_ns = Some(v),
                None => m.notes.push(format!(
                    "ignored malformed baseTimeNanoseconds: {}",
                    String::from_utf8_lossy(&raw[..raw.len().min(64)])
                )),
            },
            "displayTimeUnit" => {
                // Kineto writes ts/dur in microseconds whatever this says; it only sets the
                // viewer's display unit (HTA reads it the same way).
                if let Ok(u) = serde_json::from_slice::<String>(raw)
                    && u == "ns"
                {
                    m.notes.push(
                        "displayTimeUnit is \"ns\" (display only; timestamps are microseconds)"
                            .into(),
                    );
                }
            }
            "distributedInfo" => match serde_json::from_slice::<DistributedInfo>(raw) {
                Ok(d) => {
                    if let Some(r) = d.rank
                        && !m.ranks.contains(&r)
                    {
                        m.ranks.push(r);
                    }
                    m.world_size = m.world_size.or(d.world_size);
                    if let (Some(r), Some(w)) = (d.rank, d.world_size)
                        && w > 1
                    {
                        m.notes.push(format!(
                            "rank {r} of {w} ranks: steps and buckets are this rank's"
                        ));
                    }
                }
                Err(e) => m
                    .notes
                    .push(format!("ignored malformed distributedInfo: {e}")),
            },
            "cuda_driver_version" => m.driver_version = Some(String::from_utf8_lossy(raw).into()),
            "cuda_runtime_version" => m.cuda_version = Some(String::from_utf8_lossy(raw).into()),
            _ => {}
        }
    }

    #[expect(
        clippy::too_many_lines,
        reason = "one match arm per Kineto event category"
    )]
    fn event(&mut self, raw: &[u8], at: u64, cat: Category) -> Result<()> {
        self.events += 1;
        if matches!(cat, Category::CpuOp | Category::PythonFunction)
            && let Some(f) = fields::parse_scope(raw)
        {
            return self.scope(&f, cat, at);
        }
        let ev: Event = fields::parse_event(raw).map_err(|e| {
            AnalyzerError::parse(&self.path, format!("invalid trace event at byte {at}: {e}"))
        })?;
        if cat == Category::Telemetry {
            return self.telemetry(&ev, raw);
        }
        if let Some(ph) = ev.ph.as_deref()
            && ph != "X"
        {
            // Still a malformed event when its name is not UTF-8.
            if let Some(raw) = ev.name_raw {
                self.utf8(raw, at)?;
            }
            return Ok(());
        }
        let Some((start, end)) = self.span(ev.ts, ev.dur, cat) else {
            if let Some(raw) = ev.name_raw {
                self.utf8(raw, at)?;
            }
            return Ok(());
        };
        self.budget.event()?;
        let name_id = match ev.name_raw {
            Some(raw) => self.name_id(raw, at)?,
            None => self
                .trace
                .strings
                .intern(&crate::import::names::without_addresses(
                    ev.name.as_deref().unwrap_or(""),
                )),
        };
        let args = ev.args.as_ref();
        let pid = ev.pid.unwrap_or_default().0;
        let tid = ev.tid.unwrap_or_default().0;
        let device = args.and_then(|a| a.device).map(|d| d.0).unwrap_or(pid) as u32;
        let stream = args.and_then(|a| a.stream).map(|d| d.0).unwrap_or(tid) as u32;
        // roctracer traces carry no `correlation`; their `External id` links launch and kernel.
        let correlation = args
            .and_then(|a| a.correlation.or(a.external_id))
            .map(|d| d.0)
            .unwrap_or(0);
        let context = args.and_then(|a| a.context).map(|d| d.0).unwrap_or(0) as u32;
        let t = &mut self.trace;
        match cat {
            Category::Kernel => {
                let dim = |v: Option<&Vec<event::Num>>, i: usize| {
                    v.and_then(|v| v.get(i)).map(|n| n.0 as u32).unwrap_or(0)
                };
                let grid = args.and_then(|a| a.grid.as_ref());
                let block = args.and_then(|a| a.block.as_ref());
                let name = name_id;
                t.kernels.push(KernelRow {
                    device,
                    context,
                    stream,
                    correlation,
                    name,
                    gpu_start_ns: start,
                    gpu_end_ns: end,
                    grid_x: dim(grid, 0),
                    grid_y: dim(grid, 1),
                    grid_z: dim(grid, 2),
                    block_x: dim(block, 0),
                    block_y: dim(block, 1),
                    block_z: dim(block, 2),
                    registers_per_thread: args
                        .and_then(|a| a.registers)
                        .map(|n| n.0 as u32)
                        .unwrap_or(0),
                    static_smem_bytes: args
                        .and_then(|a| a.shared_memory)
                        .map(|n| n.0 as u32)
                        .unwrap_or(0),
                    graph_id: args
                        .and_then(|a| a.graph_id)
                        .map(|n| n.0 as u32)
                        .unwrap_or(0),
                    graph_node_id: args.and_then(|a| a.graph_node_id).map(|n| n.0).unwrap_or(0),
                    // A collective's message (torch.distributed records it on NCCL kernels),
                    // else what an export of an engine recording declared.
                    bytes: args
                        .and_then(message_bytes)
                        .or_else(|| declared(args.and_then(|a| a.bytes)))
                        .unwrap_or(-1),
                    flops: declared(args.and_then(|a| a.flops)).unwrap_or(-1),
                    ..Default::default()
                });
            }
            Category::Memcpy | Category::Memset => {
                let kind = if cat == Category::Memset {
                    MemopKind::Memset
                } else {
                    let from_args = args.and_then(|a| a.kind.as_deref()).map(memcpy_kind);
                    match from_args {
                        Some(k) if k != MemopKind::Unknown => k,
                        _ => memcpy_kind(t.strings.get(name_id)),
                    }
                };
                let name = name_id;
                t.memops.push(MemopRow {
                    device,
                    context,
                    stream,
                    correlation,
                    name,
                    kind: kind as u8,
                    bytes: args
                        .and_then(|a| a.bytes)
                        .map(|n| n.0.max(0.0) as u64)
                        .unwrap_or(0),
                    gpu_start_ns: start,
                    gpu_end_ns: end,
                    graph_id: 0,
                    ..MemopRow::default()
                });
            }
            Category::Runtime | Category::Driver => {
                let name = name_id;
                t.launches.push(LaunchRow {
                    pid: pid as u32,
                    tid,
                    correlation,
                    name,
                    api: if cat == Category::Runtime {
                        LaunchApi::Runtime as u8
                    } else {
                        LaunchApi::Driver as u8
                    },
                    host_start_ns: start,
                    host_end_ns: end,
                });
            }
            Category::UserAnnotation | Category::GpuUserAnnotation => {
                let phase = phase_from_name(t.strings.get(name_id));
                let name = name_id;
                let mut row = MarkerRow {
                    name,
                    phase: phase as u8,
                    device,
                    tid,
                    ..Default::default()
                };
                if cat == Category::GpuUserAnnotation {
                    row.source = MarkerSource::KinetoGpuAnnotation as u8;
                    row.gpu_start_ns = start;
                    row.gpu_end_ns = end;
                } else {
                    row.source = MarkerSource::KinetoUserAnnotation as u8;
                    row.device = 0;
                    row.host_start_ns = start;
                    row.host_end_ns = end;
                }
                if let Some(a) = args {
                    exported_marker(&mut row, a);
                }
                t.markers.push(row);
            }
            // Read before any complete event (`telemetry`).
            Category::Telemetry => {}
            Category::CpuOp | Category::PythonFunction => {
                let kind = scope_kind(cat, t.strings.get(name_id));
                let name = name_id;
                let dims = args.and_then(|a| a.input_dims.as_ref());
                if dims.is_some() && t.input_dims.len() >= MAX_INPUT_DIM_ROWS && !self.dims_full {
                    self.dims_full = true;
                    t.manifest.notes.push(format!(
                        "input shapes kept for the first {} rows only; later attention ops have none",
                        MAX_INPUT_DIM_ROWS
                    ));
                }
                if let Some(dims) = dims
                    && let Ok(scope) = u32::try_from(t.scopes.len())
                    && t.input_dims.len() < MAX_INPUT_DIM_ROWS
                {
                    // The query and the key, four axes each, are what is read: a hostile
                    // trace's longer lists cost nothing.
                    for (input, shape) in dims.0.iter().enumerate().take(KEPT_INPUTS) {
                        for (axis, &size) in shape.iter().enumerate().take(KEPT_AXES) {
                            t.input_dims.push(InputDimRow {
                                scope,
                                input: input as u16,
                                axis: axis as u16,
                                size,
                            });
                        }
                    }
                }
                t.scopes.push(ScopeRow {
                    pid: pid as u32,
                    tid,
                    name,
                    kind: kind as u8,
                    host_start_ns: start,
                    host_end_ns: end,
                });
            }
        }
        self.budget.names(&self.trace.strings)
    }

    /// A host scope read by the fast reader ([`fields::parse_scope`]); the same rows as the
    /// general path below.
    fn scope(&mut self, f: &fields::ScopeFields, cat: Category, at: u64) -> Result<()> {
        if f.ph.is_some_and(|ph| ph != "X") {
            if let Some(raw) = f.name {
                self.utf8(raw, at)?;
            }
            return Ok(());
        }
        let Some((start, end)) = self.span(f.ts, f.dur, cat) else {
            if let Some(raw) = f.name {
                self.utf8(raw, at)?;
            }
            return Ok(());
        };
        self.budget.event()?;
        let name = self.name_id(f.name.unwrap_or_default(), at)?;
        let t = &mut self.trace;
        let kind = scope_kind(cat, t.strings.get(name));
        t.scopes.push(ScopeRow {
            pid: f.pid.unwrap_or_default() as u32,
            tid: f.tid.unwrap_or_default(),
            name,
            kind: kind as u8,
            host_start_ns: start,
            host_end_ns: end,
        });
        self.budget.names(&self.trace.strings)
    }

    /// A telemetry counter of `export --chrome`: one NVML sample.
    fn telemetry(&mut self, ev: &Event, raw: &[u8]) -> Result<()> {
        use crate::export::chrome::telemetry as c;
        let (Some(ts), Ok(v)) = (ev.ts, serde_json::from_slice::<serde_json::Value>(raw)) else {
            return Ok(());
        };
        self.budget.event()?;
        let a = &v["args"];
        let n = |k: &str| a[k].as_u64().unwrap_or(0);
        let n32 = |k: &str| u32::try_from(n(k)).unwrap_or(u32::MAX);
        self.trace.samples.push(gapscope_traces::SampleRow {
            device: u32::try_from(ev.pid.unwrap_or_default().0).unwrap_or(0),
            host_ns: ts.round(),
            sm_clock_mhz: n32(c::SM_CLOCK),
            mem_clock_mhz: n32(c::MEM_CLOCK),
            power_mw: n32(c::POWER),
            temperature_c: n32(c::TEMPERATURE),
            gpu_util_pct: n32(c::GPU_UTIL),
            mem_util_pct: n32(c::MEM_UTIL),
            throttle_reasons: n(c::THROTTLE),
        });
        Ok(())
    }

    fn finish(mut self) -> Trace {
        if let Some(n) = self.native.take() {
            adopt_native_facts(&mut self.trace.manifest, *n);
        }
        let left_out: u64 = self.untimed.values().sum();
        if left_out > 0 {
            let by: Vec<String> = self
                .untimed
                .iter()
                .map(|(c, n)| format!("{c} {n}"))
                .collect();
            let m = &mut self.trace.manifest;
            m.untimed_events += left_out;
            m.notes.push(format!(
                "left out {left_out} events whose ts or dur is missing, null or not a number ({})",
                by.join(", ")
            ));
        }
        if self.trace.kernels.is_empty() && self.trace.memops.is_empty() {
            self.trace
                .manifest
                .notes
                .push("the trace holds no GPU events (kernels, memcpys or memsets)".into());
        }
        self.trace
    }
}

/// A count an export declared (bytes, FLOPs): a non-negative whole number.
fn declared(n: Option<event::Num>) -> Option<i64> {
    n.map(|n| n.0)
        .filter(|v| v.is_finite() && *v >= 0.0 && *v < i64::MAX as f64)
        .map(|v| v as i64)
}

/// What `export --chrome` wrote beside a marker: where it came from and what its engine
/// said (Kineto's own annotations carry none of these arguments).
fn exported_marker(row: &mut MarkerRow, a: &event::Args) {
    if let Some(src) = a.marker_source.as_deref().and_then(MarkerSource::parse) {
        row.source = src as u8;
    }
    if let Some(p) = a.phase.as_deref().and_then(gapscope_traces::Phase::parse) {
        row.phase = p as u8;
    }
    if let Some(s) = a.step.map(|n| n.0).filter(|v| v.is_finite()) {
        row.step = s as i64;
    }
    if let Some(b) = a
        .batch_size
        .map(|n| n.0)
        .filter(|v| v.is_finite() && *v >= 0.0)
    {
        row.batch_size = b as u32;
    }
    if let Some(t) = a.tokens.map(|n| n.0).filter(|v| v.is_finite() && *v >= 0.0) {
        row.tokens = t as u32;
    }
}

/// The recording's facts an export carried, over what the Chrome form could say: GPUs in
/// full, versions, configs, the capture tool's overhead and drops, ranks. The file's own
/// import notes and truncation stay this import's.
fn adopt_native_facts(m: &mut Manifest, n: Manifest) {
    if !n.gpus.is_empty() {
        m.gpus = n.gpus;
    }
    m.driver_version = n.driver_version.or(m.driver_version.take());
    m.cuda_version = n.cuda_version.or(m.cuda_version.take());
    m.command_line = n.command_line.or(m.command_line.take());
    m.model_config = n.model_config.or(m.model_config.take());
    m.engine_config = n.engine_config.or(m.engine_config.take());
    m.dropped_records = m.dropped_records.max(n.dropped_records);
    m.capture_overhead_ns = n.capture_overhead_ns;
    if m.ranks.is_empty() {
        m.ranks = n.ranks;
    }
    m.world_size = m.world_size.or(n.world_size);
    m.local_rank = m.local_rank.or(n.local_rank);
    m.source_base_time_ns = m.source_base_time_ns.or(n.source_base_time_ns);
    m.raw_names.extend(n.raw_names);
    m.notes.push(format!(
        "written by gapscope export --chrome from a {} trace",
        if n.source_format.as_str().is_empty() {
            "native"
        } else {
            n.source_format.as_str()
        }
    ));
}

/// `baseTimeNanoseconds` (a number or a numeric string) read exactly.
fn base_time_ns(raw: &[u8]) -> Option<i64> {
    let raw = raw.trim_ascii();
    let text = if raw.first() == Some(&b'"') {
        serde_json::from_slice::<String>(raw)
            .ok()?
            .trim()
            .as_bytes()
            .to_vec()
    } else {
        raw.to_vec()
    };
    decimal::Nanos::from_nanos(&text)?.map(decimal::Nanos::round)
}

/// A host scope's kind: a CPU op, or a Python function that may be an `nn.Module` call.
fn scope_kind(cat: Category, name: &str) -> ScopeKind {
    if cat == Category::CpuOp {
        ScopeKind::Op
    } else if name.starts_with(MODULE_CALL_PREFIX) {
        ScopeKind::Module
    } else {
        ScopeKind::Python
    }
}

/// Phase from an annotation name: "prefill", "decode" and "sample" anywhere in it.
pub fn phase_from_name(name: &str) -> Phase {
    // "decoder" (a model part) is not the decode phase.
    let n = name.to_ascii_lowercase().replace("decoder", "");
    if n.contains("prefill") {
        Phase::Prefill
    } else if n.contains("decode") {
        Phase::Decode
    } else if n.contains("sampl") {
        Phase::Sample
    } else {
        Phase::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::import::NoProgress;
    use std::io::Write;

    /// The attention op keeps its query's and key's shapes, four axes each, however long a
    /// hostile `Input Dims` is; other ops keep none, and the kept rows point at their scope.
    #[test]
    fn attention_shapes_are_kept_and_bounded() {
        let long: Vec<String> = (0..50)
            .map(|i| format!("[{}]", vec![i.to_string(); 300].join(",")))
            .collect();
        let doc = format!(
            r#"{{"traceEvents":[
{{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":2,"ts":1,"dur":1,"args":{{"Input Dims":[[1,2],[2,3]]}}}},
{{"ph":"X","cat":"cpu_op","name":"aten::scaled_dot_product_attention","pid":1,"tid":2,"ts":2,"dur":1,"args":{{"External id":1,"Input Dims":[[1, 32, 5, 64], [1, 8, 69, 64], [], "x"]}}}},
{{"ph":"X","cat":"cpu_op","name":"aten::scaled_dot_product_attention","pid":1,"tid":2,"ts":4,"dur":1,"args":{{"Input Dims":[{}]}}}}
]}}"#,
            long.join(",")
        );
        let t = import_kineto_bytes(
            Path::new("shapes.json"),
            doc.as_bytes(),
            false,
            &ImportOptions::default(),
            &NoProgress,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let d = &t.input_dims;
        let rows: Vec<(u32, u16, u16, i64)> = (0..d.len())
            .map(|i| (d.scope[i], d.input[i], d.axis[i], d.size[i]))
            .collect();
        // The first attention op is scope 1: query [1,32,5,64], key [1,8,69,64].
        let first: Vec<i64> = rows.iter().filter(|r| r.0 == 1).map(|r| r.3).collect();
        assert_eq!(first, vec![1, 32, 5, 64, 1, 8, 69, 64]);
        // The hostile one keeps 2 inputs x 4 axes; aten::mm keeps nothing.
        assert_eq!(rows.iter().filter(|r| r.0 == 2).count(), 8);
        assert!(rows.iter().all(|r| r.0 != 0));
    }

    /// Events straddle the reader's chunks (some longer than a chunk's headroom, some
    /// longer than a chunk) and host scopes lose their `args` in the window itself; the plain
    /// and the gzipped file import to the same rows.
    #[test]
    fn events_across_chunks_import_whole_from_plain_and_gzip() {
        let n = 3000;
        let mut doc = String::from(r#"{"schemaVersion":1,"traceEvents":["#);
        for i in 0..n {
            if i > 0 {
                doc.push_str(" ,\n");
            }
            let pad = "p".repeat(match i % 1000 {
                7 => 200_000,
                8 => 1_500_000,
                _ => i * 13 % 2000,
            });
            doc += &if i % 3 == 0 {
                format!(
                    r#"{{"ph":"X","cat":"kernel","name":"k{i}","pid":0,"tid":7,"ts":{i}.5,"dur":1,"args":{{"correlation":{i},"pad":"{pad}"}}}}"#
                )
            } else {
                format!(
                    r#"{{"ph":"X","cat":"cpu_op","name":"op{i}","pid":1,"tid":2,"ts":{i},"dur":0.25,"args":{{"Input Dims":"{pad}"}}}}"#
                )
            };
        }
        doc += r#"],"deviceProperties":[{"id":0,"name":"G"}]}"#;
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("t.json");
        std::fs::write(&plain, &doc).unwrap();
        let gz = dir.path().join("t.json.gz");
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(doc.as_bytes()).unwrap();
        std::fs::write(&gz, enc.finish().unwrap()).unwrap();
        let rows = |t: &Trace| {
            let kernels: Vec<_> = (0..t.kernels.len())
                .map(|i| {
                    let k = t.kernels.row(i);
                    let name = t.strings.get(k.name).to_owned();
                    (name, k.correlation, k.gpu_start_ns, k.gpu_end_ns)
                })
                .collect();
            let scopes: Vec<_> = (0..t.scopes.len())
                .map(|i| {
                    let s = t.scopes.row(i);
                    let name = t.strings.get(s.name).to_owned();
                    (name, s.tid, s.host_start_ns, s.host_end_ns)
                })
                .collect();
            (kernels, scopes, t.manifest.gpus[0].name.clone())
        };
        let opts = ImportOptions::default();
        let a = rows(&import_kineto(&plain, false, &opts, &NoProgress).unwrap());
        let b = rows(&import_kineto(&gz, true, &opts, &NoProgress).unwrap());
        assert_eq!(a, b);
        let (kernels, scopes, gpu) = a;
        assert_eq!(
            (kernels.len(), scopes.len(), gpu.as_str()),
            (1000, 2000, "G")
        );
        for (k, i) in kernels.iter().zip((0..n).step_by(3)) {
            let at = i as i64 * 1000 + 500;
            assert_eq!(*k, (format!("k{i}"), i as u64, at, at + 1000));
        }
        for (s, i) in scopes.iter().zip((0..n).filter(|i| i % 3 != 0)) {
            let at = i as i64 * 1000;
            assert_eq!(*s, (format!("op{i}"), 2, at, at + 250));
        }
    }
}
