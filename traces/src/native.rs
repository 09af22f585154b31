//! The native format: a directory (`run.gst/`) holding `manifest.json` and one Arrow IPC
//! stream per table. Streams are appended batch by batch and flushed, so a writer that dies
//! leaves every complete batch readable.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_array::cast::AsArray;
use arrow_array::types::UInt32Type;
use arrow_ipc::reader::StreamReader;
use arrow_ipc::writer::StreamWriter;
use arrow_schema::{DataType, Field, Schema};

use crate::error::{Result, TraceError};
use crate::manifest::{FORMAT_NAME, FORMAT_VERSION, Manifest};
use crate::strings::StringTable;
use crate::tables::{KernelTable, LaunchTable, MarkerTable, MemopTable, SampleTable};
use crate::trace::Trace;

/// Rows per record batch; also the most a crash can lose per table.
pub const CHUNK_ROWS: usize = 64 * 1024;

const MANIFEST: &str = "manifest.json";
const STRINGS: &str = "strings";
const TABLES: [&str; 5] = ["kernels", "memops", "launches", "markers", "samples"];

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
    batches: [u64; 6],
}

impl TraceWriter {
    /// Creates `dir` (or reuses an existing native trace there, replacing it) and writes
    /// an incomplete manifest, so a reader can tell a crashed writer apart.
    pub fn create(dir: &Path, manifest: Manifest) -> Result<Self> {
        if dir.exists() {
            if !dir.is_dir() {
                return Err(TraceError::format(
                    dir,
                    "output exists and is not a directory; a native trace is a directory",
                ));
            }
            let empty = fs::read_dir(dir)
                .map_err(|e| TraceError::io(dir, e))?
                .next()
                .is_none();
            if !empty && !is_native_trace(dir) {
                return Err(TraceError::format(
                    dir,
                    "output directory is not empty and is not a gapscope trace; refusing to overwrite it",
                ));
            }
        }
        fs::create_dir_all(dir).map_err(|e| TraceError::io(dir, e))?;
        let mut manifest = manifest;
        manifest.format = FORMAT_NAME.to_owned();
        manifest.format_version = FORMAT_VERSION;
        manifest.complete = false;
        write_manifest(dir, &manifest)?;
        let open = |name: &str, schema: &Schema| -> Result<StreamWriter<BufWriter<File>>> {
            let p = dir.join(stream_file(name));
            let f = File::create(&p).map_err(|e| TraceError::io(&p, e))?;
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
        ];
        Ok(Self {
            dir: dir.to_owned(),
            manifest,
            strings_written: 0,
            strings,
            tables,
            batches: [0; 6],
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
    let mut f = File::create(&tmp).map_err(|e| TraceError::io(&tmp, e))?;
    f.write_all(&text).map_err(|e| TraceError::io(&tmp, e))?;
    f.sync_all().map_err(|e| TraceError::io(&tmp, e))?;
    fs::rename(&tmp, &p).map_err(|e| TraceError::io(&p, e))
}

/// Writes a whole in-memory trace.
pub fn write_trace(dir: &Path, trace: &Trace) -> Result<Manifest> {
    let mut w = TraceWriter::create(dir, trace.manifest.clone())?;
    w.append_strings(&trace.strings)?;
    w.append_kernels(&trace.kernels)?;
    w.append_memops(&trace.memops)?;
    w.append_launches(&trace.launches)?;
    w.append_markers(&trace.markers)?;
    w.append_samples(&trace.samples)?;
    w.finish()
}

/// What to load. Analysis loads a kernel-column subset so huge traces fit in memory.
#[derive(Debug, Clone, Default)]
pub struct ReadOptions {
    /// Kernel columns to load; `None` loads all.
    pub kernel_columns: Option<Vec<String>>,
}

/// Reads a native trace. A stream that ends mid-batch, or a manifest never marked complete,
/// loads what is there and sets `manifest.truncated` with a note saying where.
pub fn read_trace(dir: &Path, opts: &ReadOptions) -> Result<Trace> {
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
    let text = fs::read(&mp).map_err(|e| TraceError::io(&mp, e))?;
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
    let mut notes = Vec::new();
    if !manifest.complete {
        notes.push("the writer never finished this trace (crash or still recording)".to_owned());
    }

    let mut values = Vec::new();
    read_stream(
        dir,
        STRINGS,
        None,
        &["id", "value"],
        &manifest,
        &mut notes,
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
    read_stream(
        dir,
        TABLES[0],
        kproj.as_deref(),
        &kreq,
        &manifest,
        &mut notes,
        |b| trace.kernels.append_batch(b),
    )?;
    read_stream(
        dir,
        TABLES[1],
        None,
        MemopTable::COLUMNS,
        &manifest,
        &mut notes,
        |b| trace.memops.append_batch(b),
    )?;
    read_stream(
        dir,
        TABLES[2],
        None,
        LaunchTable::COLUMNS,
        &manifest,
        &mut notes,
        |b| trace.launches.append_batch(b),
    )?;
    read_stream(
        dir,
        TABLES[3],
        None,
        MarkerTable::COLUMNS,
        &manifest,
        &mut notes,
        |b| trace.markers.append_batch(b),
    )?;
    read_stream(
        dir,
        TABLES[4],
        None,
        SampleTable::COLUMNS,
        &manifest,
        &mut notes,
        |b| trace.samples.append_batch(b),
    )?;

    if !notes.is_empty() {
        manifest.truncated = true;
        manifest.notes.extend(notes);
    }
    trace.manifest = manifest;
    Ok(trace)
}

/// Reads one table's stream, handing each batch to `sink`. Errors after the first batch
/// (a partial write) become a truncation note; a bad header is an error.
fn read_stream(
    dir: &Path,
    table: &str,
    projection: Option<&[&str]>,
    required: &[&str],
    manifest: &Manifest,
    notes: &mut Vec<String>,
    mut sink: impl FnMut(&RecordBatch) -> std::result::Result<(), String>,
) -> Result<()> {
    let p = dir.join(stream_file(table));
    let f = match File::open(&p) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            notes.push(format!("{table}: stream file missing"));
            return Ok(());
        }
        Err(e) => return Err(TraceError::io(&p, e)),
    };
    if f.metadata().map(|m| m.len()).unwrap_or(0) == 0 {
        notes.push(format!(
            "{table}: stream is empty (writer died before its header)"
        ));
        return Ok(());
    }
    let reader = BufReader::with_capacity(1 << 20, f);
    let mut r = StreamReader::try_new(reader, None).map_err(|e| TraceError::arrow(&p, e))?;
    {
        let schema = r.schema();
        if let Some(missing) = required.iter().find(|c| schema.index_of(c).is_err()) {
            return Err(TraceError::format(
                &p,
                format!("required column {missing:?} is missing"),
            ));
        }
    }
    let projection: Option<Vec<usize>> = projection.map(|names| {
        let schema = r.schema();
        names
            .iter()
            .filter_map(|n| schema.index_of(n).ok())
            .collect()
    });
    let mut n = 0u64;
    loop {
        match r.next() {
            None => break,
            Some(Ok(batch)) => {
                let batch = match &projection {
                    Some(ix) => batch.project(ix).map_err(|e| TraceError::arrow(&p, e))?,
                    None => batch,
                };
                sink(&batch).map_err(|m| TraceError::format(&p, m))?;
                n += 1;
            }
            Some(Err(e)) => {
                notes.push(format!(
                    "{table}: truncated after {n} complete batches ({e})"
                ));
                return Ok(());
            }
        }
    }
    if manifest.complete
        && let Some(&expected) = manifest.batches.get(table)
        && expected != n
    {
        notes.push(format!(
            "{table}: {n} batches read, manifest says {expected}"
        ));
    }
    Ok(())
}
