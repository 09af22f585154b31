//! The native format: a directory (`run.gst/`) holding `manifest.json` and one Arrow IPC
//! stream per table. Streams are appended batch by batch and flushed, so a writer that dies
//! leaves every complete batch readable.

use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Schema};

use crate::error::{Result, TraceError};
use crate::manifest::{FORMAT_NAME, FORMAT_VERSION, Manifest};
use crate::output_dir;
use crate::stream_read::{CheckedStream, Expected, Next};
use crate::strings::{NO_STR, StringTable};
use crate::tables::{
    InputDimTable, KernelTable, LaunchTable, MarkerTable, MemopTable, SampleTable, ScopeTable,
};
use crate::trace::Trace;

/// Rows per record batch; also the most a crash can lose per table.
pub const CHUNK_ROWS: usize = 64 * 1024;

const MANIFEST: &str = "manifest.json";
const STRINGS: &str = "strings";
/// The memop columns a trace must have: all but the engine's `op` and `layer`, which traces
/// written before they existed lack (they load as none: 0 and -1).
const MEMOP_REQUIRED: [&str; 10] = [
    "device",
    "context",
    "stream",
    "correlation",
    "name",
    "kind",
    "bytes",
    "gpu_start_ns",
    "gpu_end_ns",
    "graph_id",
];

const TABLES: [&str; 7] = [
    "kernels",
    "memops",
    "launches",
    "markers",
    "samples",
    "scopes",
    "input_dims",
];
/// Tables added after format version 1 shipped: a trace written before them has no stream
/// for them (and no manifest batch count), which reads as an empty table, not a truncation.
const LATER_TABLES: [&str; 2] = ["scopes", "input_dims"];

fn stream_file(table: &str) -> String {
    format!("{table}.arrows")
}

fn strings_schema() -> std::sync::Arc<Schema> {
    std::sync::Arc::new(Schema::new(vec![
        Field::new("id", DataType::UInt32, false),
        Field::new("value", DataType::Utf8, false),
    ]))
}

/// True when `path` looks like a native trace directory.
pub fn is_native_trace(path: &Path) -> bool {
    path.is_dir() && path.join(MANIFEST).is_file()
}

/// Appends tables to a native trace as they are produced.
pub struct TraceWriter {
    dir: PathBuf,
    manifest: Manifest,
    strings_written: usize,
    strings: StreamWriter<BufWriter<File>>,
    tables: Vec<StreamWriter<BufWriter<File>>>,
    batches: [u64; 8],
}

impl TraceWriter {
    /// Creates `dir` (or reuses an existing native trace there, replacing its files) and
    /// writes an incomplete manifest, so a reader can tell a crashed writer apart. A path
    /// that is a symbolic link, or a non-empty directory that is not a gapscope trace, is
    /// refused; files are created fresh (never opened through a link already there).
    pub fn create(dir: &Path, manifest: Manifest) -> Result<Self> {
        output_dir::prepare(dir, &written_files())?;
        let mut manifest = manifest;
        manifest.format = FORMAT_NAME.to_owned();
        manifest.format_version = FORMAT_VERSION;
        manifest.complete = false;
        write_manifest(dir, &manifest)?;
        let open = |name: &str, schema: &Schema| -> Result<StreamWriter<BufWriter<File>>> {
            let p = dir.join(stream_file(name));
            let f = output_dir::create_new(&p)?;
            StreamWriter::try_new(BufWriter::with_capacity(1 << 20, f), schema)
                .map_err(|e| TraceError::arrow(&p, e))
        };
        let strings = open(STRINGS, &strings_schema())?;
        let tables = vec![
            open(TABLES[0], &KernelTable::schema())?,
            open(TABLES[1], &MemopTable::schema())?,
            open(TABLES[2], &LaunchTable::schema())?,
            open(TABLES[3], &MarkerTable::schema())?,
            open(TABLES[4], &SampleTable::schema())?,
            open(TABLES[5], &ScopeTable::schema())?,
            open(TABLES[6], &InputDimTable::schema())?,
        ];
        Ok(Self {
            dir: dir.to_owned(),
            manifest,
            strings_written: 0,
            strings,
            tables,
            batches: [0; 8],
        })
    }

    pub fn manifest_mut(&mut self) -> &mut Manifest {
        &mut self.manifest
    }

    /// Writes names interned since the last call. Call before appending rows that use them.
    pub fn append_strings(&mut self, strings: &StringTable) -> Result<()> {
        let values = strings.values();
        if values.len() <= self.strings_written {
            return Ok(());
        }
        let p = self.dir.join(stream_file(STRINGS));
        for start in (self.strings_written..values.len()).step_by(CHUNK_ROWS) {
            let end = (start + CHUNK_ROWS).min(values.len());
            let ids = arrow_array::UInt32Array::from_iter_values(start as u32..end as u32);
            let vals = arrow_array::StringArray::from_iter_values(values[start..end].iter());
            let batch = RecordBatch::try_new(
                strings_schema(),
                vec![std::sync::Arc::new(ids), std::sync::Arc::new(vals)],
            )
            .map_err(|e| TraceError::arrow(&p, e))?;
            self.strings
                .write(&batch)
                .map_err(|e| TraceError::arrow(&p, e))?;
            self.batches[0] += 1;
        }
        self.strings.flush().map_err(|e| TraceError::arrow(&p, e))?;
        self.strings_written = values.len();
        Ok(())
    }

    fn append_batches(
        &mut self,
        index: usize,
        len: usize,
        to_batch: impl Fn(
            std::ops::Range<usize>,
        ) -> std::result::Result<RecordBatch, arrow_schema::ArrowError>,
    ) -> Result<()> {
        let p = self.dir.join(stream_file(TABLES[index]));
        for start in (0..len).step_by(CHUNK_ROWS) {
            let batch = to_batch(start..(start + CHUNK_ROWS).min(len))
                .map_err(|e| TraceError::arrow(&p, e))?;
            self.tables[index]
                .write(&batch)
                .map_err(|e| TraceError::arrow(&p, e))?;
            self.batches[index + 1] += 1;
        }
        self.tables[index]
            .flush()
            .map_err(|e| TraceError::arrow(&p, e))
    }

    pub fn append_kernels(&mut self, t: &KernelTable) -> Result<()> {
        self.append_batches(0, t.len(), |r| t.to_batch(r))
    }
    pub fn append_memops(&mut self, t: &MemopTable) -> Result<()> {
        self.append_batches(1, t.len(), |r| t.to_batch(r))
    }
    pub fn append_launches(&mut self, t: &LaunchTable) -> Result<()> {
        self.append_batches(2, t.len(), |r| t.to_batch(r))
    }
    pub fn append_markers(&mut self, t: &MarkerTable) -> Result<()> {
        self.append_batches(3, t.len(), |r| t.to_batch(r))
    }
    pub fn append_samples(&mut self, t: &SampleTable) -> Result<()> {
        self.append_batches(4, t.len(), |r| t.to_batch(r))
    }
    pub fn append_scopes(&mut self, t: &ScopeTable) -> Result<()> {
        self.append_batches(5, t.len(), |r| t.to_batch(r))
    }
    pub fn append_input_dims(&mut self, t: &InputDimTable) -> Result<()> {
        self.append_batches(6, t.len(), |r| t.to_batch(r))
    }

    /// Ends every stream and rewrites the manifest as complete.
    pub fn finish(mut self) -> Result<Manifest> {
        let p = self.dir.join(stream_file(STRINGS));
        self.strings
            .finish()
            .map_err(|e| TraceError::arrow(&p, e))?;
        for (i, w) in self.tables.iter_mut().enumerate() {
            let p = self.dir.join(stream_file(TABLES[i]));
            w.finish().map_err(|e| TraceError::arrow(&p, e))?;
        }
        self.manifest.batches.clear();
        self.manifest
            .batches
            .insert(STRINGS.to_owned(), self.batches[0]);
        for (i, t) in TABLES.iter().enumerate() {
            self.manifest
                .batches
                .insert((*t).to_owned(), self.batches[i + 1]);
        }
        self.manifest.complete = true;
        write_manifest(&self.dir, &self.manifest)?;
        Ok(self.manifest)
    }
}

fn write_manifest(dir: &Path, m: &Manifest) -> Result<()> {
    let p = dir.join(MANIFEST);
    let tmp = dir.join("manifest.json.tmp");
    let text = serde_json::to_vec_pretty(m).map_err(|e| TraceError::Manifest {
        path: p.clone(),
        source: e,
    })?;
    output_dir::remove_file_if_present(&tmp)?;
    let mut f = output_dir::create_new(&tmp)?;
    f.write_all(&text).map_err(|e| TraceError::io(&tmp, e))?;
    f.sync_all().map_err(|e| TraceError::io(&tmp, e))?;
    fs::rename(&tmp, &p).map_err(|e| TraceError::io(&p, e))
}

/// The files a writer creates in a trace directory, and nothing else.
fn written_files() -> Vec<String> {
    let mut v = vec![MANIFEST.to_owned(), "manifest.json.tmp".to_owned()];
    v.push(stream_file(STRINGS));
    v.extend(TABLES.iter().map(|t| stream_file(t)));
    v
}

/// Writes a whole in-memory trace. It is written into a new directory beside `dir` and
/// renamed into place, so a failed write leaves an existing trace at `dir` as it was, and
/// nothing is written through links inside an existing `dir`.
pub fn write_trace(dir: &Path, trace: &Trace) -> Result<Manifest> {
    output_dir::replace_with(dir, |tmp| write_whole(tmp, trace))
}

fn write_whole(dir: &Path, trace: &Trace) -> Result<Manifest> {
    let mut w = TraceWriter::create(dir, trace.manifest.clone())?;
    w.append_strings(&trace.strings)?;
    w.append_kernels(&trace.kernels)?;
    w.append_memops(&trace.memops)?;
    w.append_launches(&trace.launches)?;
    w.append_markers(&trace.markers)?;
    w.append_samples(&trace.samples)?;
    w.append_scopes(&trace.scopes)?;
    w.append_input_dims(&trace.input_dims)?;
    w.finish()
}

/// What to load. Analysis loads a kernel-column subset so huge traces fit in memory.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Kernel columns to load; `None` loads all.
    pub kernel_columns: Option<Vec<String>>,
    /// Refuse a trace with more rows than this, counted over all seven tables (`None`: no
    /// limit; a native trace's memory is bounded by its size on disk anyway).
    pub max_rows: Option<u64>,
    /// Kernel columns to leave unloaded (empty) when every value in the trace is the
    /// column's default (none, -1 or 0: see [`KernelTable`]), for a reader that takes a
    /// missing column as all-default. A column holding any other value loads whole.
    pub sparse_kernel_columns: Vec<String>,
}

/// A manifest is a few KiB; anything this large is not one.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

/// Reads a native trace. A stream that ends mid-batch, or a manifest never marked complete,
/// loads what is there and sets `manifest.truncated` with a note saying where. Any other
/// defect in a stream (bad offsets or lengths, compression, wrong column types) is an error.
pub fn read_trace(dir: &Path, opts: &ReadOptions) -> Result<Trace> {
    read_trace_with(dir, opts, SPLIT_BYTES)
}

/// [`read_trace`], splitting kernel streams of at least `split_bytes` over two threads.
#[expect(
    clippy::too_many_lines,
    reason = "reads the manifest, then each table's stream in turn with the same checks and limits; one block per table"
)]
fn read_trace_with(dir: &Path, opts: &ReadOptions, split_bytes: u64) -> Result<Trace> {
    if !dir.exists() {
        return Err(TraceError::format(dir, "no such file or directory"));
    }
    if !is_native_trace(dir) {
        return Err(TraceError::format(
            dir,
            "not a gapscope native trace (a .gst directory with manifest.json)",
        ));
    }
    let mp = dir.join(MANIFEST);
    let text = read_small(&mp, MAX_MANIFEST_BYTES)?;
    let mut manifest: Manifest =
        serde_json::from_slice(&text).map_err(|e| TraceError::Manifest {
            path: mp.clone(),
            source: e,
        })?;
    if manifest.format != FORMAT_NAME {
        return Err(TraceError::format(
            &mp,
            format!("format is {:?}, expected {FORMAT_NAME:?}", manifest.format),
        ));
    }
    if manifest.format_version > FORMAT_VERSION || manifest.format_version == 0 {
        return Err(TraceError::format(
            &mp,
            format!(
                "format version {} is not supported by this gapscope (reads 1..={FORMAT_VERSION})",
                manifest.format_version
            ),
        ));
    }
    let mut trace = Trace::default();
    let mut ctx = StreamCtx {
        dir,
        manifest: &manifest,
        notes: Vec::new(),
        rows: 0,
        max_rows: opts.max_rows,
        split_bytes,
    };
    if !manifest.complete {
        ctx.notes
            .push("the writer never finished this trace (crash or still recording)".to_owned());
    }

    let mut values = Vec::new();
    let strings = strings_schema();
    ctx.read(
        STRINGS,
        &Expected {
            schema: &strings,
            wanted: None,
            required: &["id", "value"],
        },
        false,
        |b| {
            let ids = b
                .column_by_name("id")
                .and_then(|c| c.as_primitive_opt::<UInt32Type>())
                .ok_or("strings: missing u32 column id")?;
            let vals = b
                .column_by_name("value")
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or("strings: missing utf8 column value")?;
            for (id, v) in ids.values().iter().zip(vals.iter()) {
                if *id as usize != values.len() {
                    return Err(format!(
                        "strings: id {id} out of order (expected {})",
                        values.len()
                    ));
                }
                values.push(v.unwrap_or("").to_owned());
            }
            Ok(())
        },
    )?;
    if values.first().is_some_and(|v| !v.is_empty()) {
        return Err(TraceError::format(
            dir.join(stream_file(STRINGS)),
            "string id 0 must be the empty string",
        ));
    }
    trace.strings = StringTable::from_values(values);

    let kproj = opts
        .kernel_columns
        .as_ref()
        .map(|c| c.iter().map(String::as_str).collect::<Vec<_>>());
    let kreq = kproj
        .clone()
        .unwrap_or_else(|| KernelTable::COLUMNS.to_vec());
    let sparse: Vec<&str> = opts
        .sparse_kernel_columns
        .iter()
        .map(String::as_str)
        .collect();
    let schema = KernelTable::schema();
    ctx.read_split(
        TABLES[0],
        &Expected {
            schema: &schema,
            wanted: kproj.as_deref(),
            required: &kreq,
        },
        &mut trace.kernels,
        |t, n, cols| t.reserve_columns(n, cols, &sparse),
        |t, b| t.append_batch_sparse(b, &sparse),
        |t, other| t.adopt_columns(other),
    )?;
    trace.kernels.release_empty_columns();
    let schema = MemopTable::schema();
    ctx.read(
        TABLES[1],
        &Expected {
            schema: &schema,
            wanted: None,
            required: &MEMOP_REQUIRED,
        },
        true,
        |b| trace.memops.append_batch(b),
    )?;
    // Traces written before the engine's memop columns existed lack them: they read as "none"
    // so the table stays dense (and can be written again).
    let n = trace.memops.len;
    trace.memops.op.resize(n, NO_STR);
    trace.memops.layer.resize(n, -1);
    let schema = LaunchTable::schema();
    ctx.read(
        TABLES[2],
        &Expected {
            schema: &schema,
            wanted: None,
            required: LaunchTable::COLUMNS,
        },
        true,
        |b| trace.launches.append_batch(b),
    )?;
    let schema = MarkerTable::schema();
    ctx.read(
        TABLES[3],
        &Expected {
            schema: &schema,
            wanted: None,
            required: MarkerTable::COLUMNS,
        },
        true,
        |b| trace.markers.append_batch(b),
    )?;
    let schema = SampleTable::schema();
    ctx.read(
        TABLES[4],
        &Expected {
            schema: &schema,
            wanted: None,
            required: SampleTable::COLUMNS,
        },
        true,
        |b| trace.samples.append_batch(b),
    )?;
    let schema = ScopeTable::schema();
    ctx.read(
        TABLES[5],
        &Expected {
            schema: &schema,
            wanted: None,
            required: ScopeTable::COLUMNS,
        },
        true,
        |b| trace.scopes.append_batch(b),
    )?;
    let schema = InputDimTable::schema();
    ctx.read(
        TABLES[6],
        &Expected {
            schema: &schema,
            wanted: None,
            required: InputDimTable::COLUMNS,
        },
        true,
        |b| trace.input_dims.append_batch(b),
    )?;

    let notes = ctx.notes;
    if !notes.is_empty() {
        manifest.truncated = true;
        manifest.truncation.extend(notes.iter().cloned());
        manifest.notes.extend(notes);
    }
    trace.manifest = manifest;
    Ok(trace)
}

/// Reads a small file whole, refusing what is not a regular file (a FIFO would block) or is
/// larger than `max` bytes.
fn read_small(p: &Path, max: u64) -> Result<Vec<u8>> {
    let f = open_regular(p)?;
    let len = f.metadata().map_err(|e| TraceError::io(p, e))?.len();
    if len > max {
        return Err(TraceError::format(
            p,
            format!("{len} bytes; a manifest is at most {} MiB", max >> 20),
        ));
    }
    let mut text = Vec::with_capacity(len as usize);
    f.take(max + 1)
        .read_to_end(&mut text)
        .map_err(|e| TraceError::io(p, e))?;
    Ok(text)
}

/// Opens `p` for reading only if it is a regular file (following links): opening a FIFO
/// blocks until a writer appears, and a device never ends.
fn open_regular(p: &Path) -> Result<File> {
    let meta = fs::metadata(p).map_err(|e| TraceError::io(p, e))?;
    if !meta.is_file() {
        return Err(TraceError::format(
            p,
            "not a regular file (a directory, FIFO, socket or device)",
        ));
    }
    File::open(p).map_err(|e| TraceError::io(p, e))
}

/// State shared by the table reads of one trace.
struct StreamCtx<'a> {
    dir: &'a Path,
    manifest: &'a Manifest,
    notes: Vec<String>,
    /// Rows loaded so far over all tables.
    rows: u64,
    max_rows: Option<u64>,
    /// Kernel streams at least this long are read by two threads.
    split_bytes: u64,
}

/// A stream at least this large is read by two threads, each loading part of the columns.
const SPLIT_BYTES: u64 = 64 << 20;

/// How one pass over a table's stream ended.
enum PassEnd {
    Done,
    Truncated(String),
    /// The first failure, with where it happened: (message, stage), stages in the order one
    /// message goes through them (decode, row limit, sink).
    Failed(u64, u8, TraceError),
}

/// One pass over a stream: batches and rows loaded, and how it ended.
struct Pass {
    batches: u64,
    rows: u64,
    end: PassEnd,
}

impl StreamCtx<'_> {
    /// Reads one table's stream, handing each batch to `sink`. A stream cut inside a message
    /// (a partial write) becomes a truncation note; any other defect is an error.
    fn read(
        &mut self,
        table: &str,
        expected: &Expected,
        counted: bool,
        mut sink: impl FnMut(&RecordBatch) -> std::result::Result<(), String>,
    ) -> Result<()> {
        let Some((f, len)) = self.open(table)? else {
            return Ok(());
        };
        let p = self.dir.join(stream_file(table));
        let pass = self.pass(
            &p,
            f,
            len,
            table,
            expected,
            counted,
            &mut (),
            |_, _| {},
            |_, b| sink(b),
        );
        self.finish(table, counted, pass)
    }

    /// [`Self::read`] for a large table: two threads read the stream, one loading the first
    /// half of the wanted columns (by bytes per row) into `into`, the other the rest into a
    /// second table that `merge` then moves into `into`. Both meet the same messages in the
    /// same order, so the outcome is the one a single pass would have: the earliest failure
    /// (the first half's at a tie, its columns coming first), or the same end.
    fn read_split<T: Default + Send>(
        &mut self,
        table: &str,
        expected: &Expected,
        into: &mut T,
        reserve: impl Fn(&mut T, usize, &[&str]) + Sync,
        append: impl Fn(&mut T, &RecordBatch) -> std::result::Result<(), String> + Sync,
        merge: impl FnOnce(&mut T, T),
    ) -> Result<()> {
        let Some((f, len)) = self.open(table)? else {
            return Ok(());
        };
        let p = self.dir.join(stream_file(table));
        let wanted: Vec<&str> = expected
            .schema
            .fields()
            .iter()
            .map(|f| f.name().as_str())
            .filter(|n| expected.wanted.is_none_or(|w| w.contains(n)))
            .collect();
        let widths: Vec<usize> = wanted
            .iter()
            .map(|n| {
                expected
                    .schema
                    .field_with_name(n)
                    .ok()
                    .and_then(|f| f.data_type().primitive_width())
                    .unwrap_or(8)
            })
            .collect();
        let total: usize = widths.iter().sum();
        let mut cut = 0;
        let mut acc = 0;
        while cut < wanted.len() && 2 * (acc + widths[cut]) <= total {
            acc += widths[cut];
            cut += 1;
        }
        let cut = cut.max(1);
        if len < self.split_bytes || wanted.len() < 2 || cut >= wanted.len() {
            let pass = self.pass(
                &p,
                f,
                len,
                table,
                expected,
                true,
                into,
                |t, n| reserve(t, n, &wanted),
                &append,
            );
            return self.finish(table, true, pass);
        }
        let (first, second) = wanted.split_at(cut);
        let half = |cols: &[&str], f: File, t: &mut T| {
            let e = Expected {
                schema: expected.schema,
                wanted: Some(cols),
                required: expected.required,
            };
            self.pass(
                &p,
                f,
                len,
                table,
                &e,
                true,
                t,
                |t, n| reserve(t, n, cols),
                &append,
            )
        };
        let f2 = f.try_clone().map_err(|e| TraceError::io(&p, e))?;
        let mut other = T::default();
        let (a, b) = std::thread::scope(|s| {
            let b = s.spawn(|| half(second, f2, &mut other));
            let a = half(first, f, into);
            (a, b.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
        });
        let pass = match (&a.end, &b.end) {
            (PassEnd::Failed(ma, sa, _), PassEnd::Failed(mb, sb, _)) if (mb, sb) < (ma, sa) => b,
            (PassEnd::Failed(..), _) => a,
            (_, PassEnd::Failed(..)) => b,
            _ => {
                merge(into, other);
                a
            }
        };
        self.finish(table, true, pass)
    }

    /// Opens a table's stream; `None` (with a note where one is due) when there is nothing
    /// to read.
    fn open(&mut self, table: &str) -> Result<Option<(File, u64)>> {
        let p = self.dir.join(stream_file(table));
        let f = match open_regular(&p) {
            Ok(f) => f,
            Err(TraceError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                let predates =
                    LATER_TABLES.contains(&table) && !self.manifest.batches.contains_key(table);
                if !predates {
                    self.notes.push(format!("{table}: stream file missing"));
                }
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        let len = f.metadata().map_err(|e| TraceError::io(&p, e))?.len();
        if len == 0 {
            self.notes.push(format!(
                "{table}: stream is empty (writer died before its header)"
            ));
            return Ok(None);
        }
        Ok(Some((f, len)))
    }

    /// One pass over the stream at `p`: each batch to `sink`, after `reserve` was told how
    /// many rows the stream seems to hold (when that is cheap to know and plausible).
    #[allow(clippy::too_many_arguments)]
    fn pass<S>(
        &self,
        p: &Path,
        f: File,
        len: u64,
        table: &str,
        expected: &Expected,
        counted: bool,
        state: &mut S,
        reserve: impl FnOnce(&mut S, usize),
        mut sink: impl FnMut(&mut S, &RecordBatch) -> std::result::Result<(), String>,
    ) -> Pass {
        let mut pass = Pass {
            batches: 0,
            rows: 0,
            end: PassEnd::Done,
        };
        let mut r = match CheckedStream::open(f, len, p, expected) {
            Ok(r) => r,
            Err(e) => {
                pass.end = PassEnd::Failed(0, 0, e);
                return pass;
            }
        };
        if let Some(rows) = r.rows_ahead() {
            // The wanted columns of `rows` rows lie in the file: more is a crafted count.
            let width: u64 = r.row_width().max(1) as u64;
            let plausible = rows.saturating_mul(width) <= len;
            let within = !counted || self.max_rows.is_none_or(|m| self.rows + rows <= m);
            if plausible && within {
                reserve(state, rows as usize);
            }
        }
        loop {
            let message = r.message();
            match r.next() {
                Err(e) => {
                    pass.end = PassEnd::Failed(message, 0, e);
                    return pass;
                }
                Ok(Next::End) => return pass,
                Ok(Next::Batch(batch)) => {
                    if counted
                        && let Some(max) = self.max_rows
                        && self.rows + pass.rows + batch.num_rows() as u64 > max
                    {
                        pass.end = PassEnd::Failed(
                            message,
                            1,
                            TraceError::format(
                                self.dir,
                                format!(
                                    "holds more than {max} events (reached in {table}); refusing to load it (raise --max-events to read it)"
                                ),
                            ),
                        );
                        return pass;
                    }
                    if let Err(m) = sink(state, &batch) {
                        pass.end = PassEnd::Failed(message, 2, TraceError::format(p, m));
                        return pass;
                    }
                    pass.batches += 1;
                    pass.rows += batch.num_rows() as u64;
                    drop(batch);
                    r.release_read();
                }
                Ok(Next::Truncated(why)) => {
                    pass.end = PassEnd::Truncated(why);
                    return pass;
                }
            }
        }
    }

    /// Applies a pass: its rows, and a note for a truncated stream or a batch count that is
    /// not the manifest's.
    fn finish(&mut self, table: &str, counted: bool, pass: Pass) -> Result<()> {
        let Pass {
            batches: n,
            rows: got,
            end,
        } = pass;
        if counted {
            self.rows += got;
        }
        match end {
            PassEnd::Failed(_, _, e) => return Err(e),
            PassEnd::Truncated(why) => {
                let of = match self.manifest.batches.get(table) {
                    Some(&expected) if self.manifest.complete => format!(" of {expected}"),
                    _ => String::new(),
                };
                self.notes.push(format!(
                    "{table}: truncated after {n} complete batches{of}, {got} rows ({why})"
                ));
                return Ok(());
            }
            PassEnd::Done => {}
        }
        if self.manifest.complete
            && let Some(&expected) = self.manifest.batches.get(table)
            && expected != n
        {
            self.notes.push(format!(
                "{table}: {n} batches read ({got} rows), manifest says {expected}"
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::{KERNEL_ANALYSIS_COLUMNS, KernelRow};

    /// A trace whose kernels come in four batches of 10; only the third batch has byte
    /// counts.
    fn batched(dir: &Path) {
        let mut strings = StringTable::new();
        let name = strings.intern("gemv");
        let mut w = TraceWriter::create(dir, Manifest::new("test")).unwrap();
        w.append_strings(&strings).unwrap();
        for b in 0..4i64 {
            let mut t = KernelTable::default();
            for i in 0..10i64 {
                let n = b * 10 + i;
                t.push(KernelRow {
                    device: (n % 2) as u32,
                    stream: 7,
                    correlation: n as u64 + 1,
                    name,
                    gpu_start_ns: n * 1_000,
                    gpu_end_ns: n * 1_000 + 600,
                    bytes: if b == 2 { 4096 } else { -1 },
                    ..Default::default()
                });
            }
            w.append_kernels(&t).unwrap();
        }
        w.finish().unwrap();
    }

    fn projected() -> ReadOptions {
        ReadOptions {
            kernel_columns: Some(
                KERNEL_ANALYSIS_COLUMNS
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            ),
            max_rows: None,
            sparse_kernel_columns: vec!["bytes".into(), "flops".into(), "bucket".into()],
        }
    }

    /// The trace read by one thread and by two, as text (the tables have no `PartialEq`).
    fn both(dir: &Path, opts: &ReadOptions) -> (String, String) {
        let show = |r: Result<Trace>| match r {
            Ok(t) => format!("{:?} {:?}", t.kernels, t.manifest.notes),
            Err(e) => format!("error: {e}"),
        };
        (
            show(read_trace_with(dir, opts, u64::MAX)),
            show(read_trace_with(dir, opts, 1)),
        )
    }

    #[test]
    fn two_threads_read_what_one_reads() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t.gst");
        batched(&dir);
        for opts in [ReadOptions::default(), projected()] {
            let (one, two) = both(&dir, &opts);
            assert_eq!(one, two);
            assert!(!one.starts_with("error"), "{one}");
        }
        let t = read_trace_with(&dir, &projected(), 1).unwrap();
        assert_eq!(t.kernels.len(), 40);
        assert_eq!(t.kernels.bytes[25], 4096);
        assert_eq!(t.kernels.bytes[5], -1);
        assert!(t.kernels.flops.is_empty() && t.kernels.bucket.is_empty());
        assert!(t.kernels.grid_x.is_empty(), "not projected");

        // A tail cut inside the third batch: both load the first two and say so.
        let k = dir.join("kernels.arrows");
        let bytes = fs::read(&k).unwrap();
        // Ranges: the schema, then one per batch.
        let cut = metadata_ranges(&bytes)[4].start - 20;
        fs::write(&k, &bytes[..cut]).unwrap();
        let (one, two) = both(&dir, &projected());
        assert_eq!(one, two);
        assert!(one.contains("truncated after 2 complete batches"), "{one}");
    }

    /// Each thread decodes only its columns, so each meets only its columns' defects; the
    /// error is still the one a single pass meets first.
    #[test]
    fn two_threads_report_the_first_defect() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("t.gst");
        batched(&dir);
        let k = dir.join("kernels.arrows");
        // gpu_end_ns (column 6, the second thread's) too short in batch 2, device (column 0,
        // the first thread's) in batch 3. Errors count messages from 1, the schema's.
        let mut bytes = fs::read(&k).unwrap();
        patch_length(&mut bytes, 2, 2 * 6 + 1, 8);
        patch_length(&mut bytes, 3, 1, 4);
        fs::write(&k, &bytes).unwrap();
        for opts in [ReadOptions::default(), projected()] {
            let (one, two) = both(&dir, &opts);
            assert_eq!(one, two);
            assert!(one.contains("message 3:") && one.contains("Int64"), "{one}");
        }
    }

    /// Byte ranges of each message's metadata in an IPC stream, in order.
    fn metadata_ranges(stream: &[u8]) -> Vec<std::ops::Range<usize>> {
        let mut out = Vec::new();
        let mut at = 0;
        while at + 8 <= stream.len() {
            let mut len_at = at;
            if stream[at..at + 4] == [0xff; 4] {
                len_at += 4;
            }
            let len = i32::from_le_bytes(stream[len_at..len_at + 4].try_into().unwrap());
            if len <= 0 {
                break;
            }
            let meta = len_at + 4..len_at + 4 + len as usize;
            let msg = arrow_ipc::root_as_message(&stream[meta.clone()]).unwrap();
            at = meta.end + msg.bodyLength() as usize;
            out.push(meta);
        }
        out
    }

    /// Sets the length of buffer `buffer` in message `message` of a stream.
    fn patch_length(bytes: &mut [u8], message: usize, buffer: usize, value: i64) {
        let meta = metadata_ranges(bytes)[message].clone();
        let at = {
            let msg = arrow_ipc::root_as_message(&bytes[meta.clone()]).unwrap();
            let buffers = msg.header_as_record_batch().unwrap().buffers().unwrap();
            buffers.bytes().as_ptr() as usize - bytes[meta.clone()].as_ptr() as usize
        };
        let pos = meta.start + at + 16 * buffer + 8;
        bytes[pos..pos + 8].copy_from_slice(&value.to_le_bytes());
    }
}
