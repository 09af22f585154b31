//! The analysis tables of one run as Parquet files in a folder: what Python will see as
//! Arrow tables, for pandas, polars or duckdb today. Columns hold ids and codes, as in
//! memory; `strings.parquet` resolves name ids and `codes.parquet` every code.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt8Array, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use gapscope_traces::{OutputFile, Phase};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::bucket::Bucket;
use crate::error::{AnalyzerError, Result};
use crate::session::AnalyzedRun;
use crate::tables::{ActivityKind, ActivityTable, ChargeKind, GapKind, NameScope, Role};

/// Rows per record batch of the activity table.
const ROWS: usize = 64 * 1024;

/// The files [`write_tables`] writes, without the `.parquet` extension.
pub const TABLE_FILES: [&str; 10] = [
    "activities",
    "steps",
    "step_buckets",
    "idle_gaps",
    "step_scopes",
    "names",
    "launches",
    "scopes",
    "strings",
    "codes",
];

/// Writes every table of `run` into `dir` (created when missing; an existing one must be an
/// empty folder). Each file is written beside its name and renamed into place, and may not
/// be one of `inputs`. Returns the files written.
pub fn write_tables(run: &AnalyzedRun, dir: &Path, inputs: &[&Path]) -> Result<Vec<PathBuf>> {
    tables_into(run, dir, inputs, false)
}

/// [`write_tables`]; `ranked` adds the rank to the string table, so that one rank's name ids
/// are told from another's when the partitions are read together.
fn tables_into(
    run: &AnalyzedRun,
    dir: &Path,
    inputs: &[&Path],
    ranked: bool,
) -> Result<Vec<PathBuf>> {
    let err = |m: String| AnalyzerError::Export {
        path: dir.to_owned(),
        message: m,
    };
    prepare_dir(dir)?;
    let mut batches: Vec<(&str, Vec<RecordBatch>)> = Vec::new();
    let acts = ActivityTable::build(&run.trace, &run.tables);
    let chunks = (0..acts.len)
        .step_by(ROWS)
        .map(|lo| acts.to_batch(lo..(lo + ROWS).min(acts.len)))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    batches.push((
        "activities",
        if chunks.is_empty() {
            vec![RecordBatch::new_empty(ActivityTable::schema())]
        } else {
            chunks
        },
    ));
    for (name, b) in run
        .tables
        .record_batches()
        .map_err(|e| err(e.to_string()))?
    {
        batches.push((name, vec![b]));
    }
    // The host side: every launch call and host scope, names as ids into `strings`.
    let t = &run.trace;
    batches.push((
        "launches",
        vec![
            t.launches
                .to_batch(0..t.launches.len)
                .map_err(|e| err(e.to_string()))?,
        ],
    ));
    batches.push((
        "scopes",
        vec![
            t.scopes
                .to_batch(0..t.scopes.len)
                .map_err(|e| err(e.to_string()))?,
        ],
    ));
    batches.push((
        "strings",
        vec![strings(run, ranked).map_err(|e| err(e.to_string()))?],
    ));
    batches.push(("codes", vec![codes().map_err(|e| err(e.to_string()))?]));
    let mut written = Vec::new();
    for (name, bs) in batches {
        let out = dir.join(format!("{name}.parquet"));
        write_one(&out, &bs, inputs)?;
        written.push(out);
    }
    Ok(written)
}

/// `dir` made ready: created when missing, refused when it is anything but an empty folder.
fn prepare_dir(dir: &Path) -> Result<()> {
    let refuse = |m: &str| {
        Err(AnalyzerError::Export {
            path: dir.to_owned(),
            message: m.to_owned(),
        })
    };
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir(dir).map_err(|e| AnalyzerError::io(dir, e))
        }
        Err(e) => Err(AnalyzerError::io(dir, e)),
        Ok(m) if m.file_type().is_symlink() => refuse("is a symbolic link; name a folder"),
        Ok(m) if !m.is_dir() => refuse("is not a folder"),
        Ok(_) => {
            let mut entries = std::fs::read_dir(dir).map_err(|e| AnalyzerError::io(dir, e))?;
            if entries.next().is_some() {
                return refuse("is not empty; name a new or an empty folder");
            }
            Ok(())
        }
    }
}

fn write_one(out: &Path, batches: &[RecordBatch], inputs: &[&Path]) -> Result<()> {
    let err = |m: String| AnalyzerError::Export {
        path: out.to_owned(),
        message: m,
    };
    let Some(first) = batches.first() else {
        return Ok(());
    };
    let mut f = OutputFile::create(out, inputs)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w = ArrowWriter::try_new(f.file(), first.schema(), Some(props))
        .map_err(|e| err(e.to_string()))?;
    for b in batches {
        w.write(b).map_err(|e| err(e.to_string()))?;
    }
    w.close().map_err(|e| err(e.to_string()))?;
    Ok(f.commit()?)
}

/// The trace's string table: id, text (`ranked`: rank, id, text).
fn strings(
    run: &AnalyzedRun,
    ranked: bool,
) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let values = run.trace.strings.values();
    let ids: Vec<u32> = (0..values.len() as u32).collect();
    let mut fields = vec![
        Field::new("id", DataType::UInt32, false),
        Field::new("text", DataType::Utf8, false),
    ];
    let mut cols: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(ids)),
        Arc::new(StringArray::from_iter_values(values.iter())),
    ];
    if ranked {
        fields.insert(0, Field::new("rank", DataType::UInt32, false));
        cols.insert(
            0,
            Arc::new(UInt32Array::from(vec![run.run.rank; values.len()])),
        );
    }
    let schema = Schema::new(fields);
    RecordBatch::try_new(Arc::new(schema), cols)
}

/// What every code means: (column, code, meaning).
pub fn code_rows() -> Vec<(&'static str, u8, &'static str)> {
    let mut rows = Vec::new();
    for b in Bucket::ALL {
        rows.push(("bucket", b.index() as u8, b.as_str()));
    }
    for p in Phase::ALL {
        rows.push(("phase", p as u8, p.as_str()));
    }
    for r in Role::ALL {
        rows.push(("role", r as u8, r.as_str()));
    }
    for (k, s) in [
        (ActivityKind::Kernel, "kernel"),
        (ActivityKind::Memop, "memop"),
    ] {
        rows.push(("kind", k as u8, s));
        rows.push(("next_kind", k as u8, s));
    }
    for (k, s) in [
        (GapKind::InsideStep, "inside_step"),
        (GapKind::BetweenSteps, "between_steps"),
    ] {
        rows.push(("gap_kind", k as u8, s));
    }
    for (k, s) in [(ChargeKind::Scope, "scope"), (ChargeKind::Api, "api")] {
        rows.push(("charge", k as u8, s));
    }
    for (k, s) in [
        (NameScope::Report, "report"),
        (NameScope::Prefill, "prefill"),
    ] {
        rows.push(("scope", k as u8, s));
    }
    // The host tables' codes, named by table: their `kind` is not the activities' `kind`.
    for k in gapscope_traces::ScopeKind::ALL {
        rows.push(("scopes.kind", k as u8, k.as_str()));
    }
    for (code, s) in [(0u8, "other"), (1, "runtime"), (2, "driver")] {
        rows.push(("launches.api", code, s));
    }
    for k in crate::analysis::ranks::CollectiveKind::ALL {
        rows.push(("collective_kind", k as u8, k.as_str()));
    }
    rows
}

fn codes() -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
    let rows = code_rows();
    let schema = Schema::new(vec![
        Field::new("column", DataType::Utf8, false),
        Field::new("code", DataType::UInt8, false),
        Field::new("meaning", DataType::Utf8, false),
    ]);
    let cols: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.0))),
        Arc::new(UInt8Array::from_iter_values(rows.iter().map(|r| r.1))),
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.2))),
    ];
    RecordBatch::try_new(Arc::new(schema), cols)
}

/// Writes a run of several ranks into `dir`: each rank's tables in its own partition folder
/// `rank_R/` (the same files as [`write_tables`]; every table carries its `rank` column, the
/// bucket column is the same code on every rank, and `strings.parquet` adds the rank to each
/// name id), and the multi-rank tables `collectives.parquet` and `rank_steps.parquet` beside
/// them. The folder is not named `rank=R`: a hive partition key would clash with the tables'
/// own `rank` column. Returns the files written.
pub fn write_rank_tables(
    runs: &[&AnalyzedRun],
    ranks: &crate::analysis::ranks::RanksTables,
    dir: &Path,
    inputs: &[&Path],
) -> Result<Vec<PathBuf>> {
    let err = |m: String| AnalyzerError::Export {
        path: dir.to_owned(),
        message: m,
    };
    prepare_dir(dir)?;
    let mut written = Vec::new();
    for run in runs {
        let part = dir.join(format!("rank_{}", run.run.rank));
        written.extend(tables_into(run, &part, inputs, true)?);
    }
    let c = &ranks.collectives;
    let s = &ranks.steps;
    for (name, b) in [
        ("collectives", c.to_batch(0..c.len)),
        ("rank_steps", s.to_batch(0..s.len)),
    ] {
        let out = dir.join(format!("{name}.parquet"));
        write_one(&out, &[b.map_err(|e| err(e.to_string()))?], inputs)?;
        written.push(out);
    }
    Ok(written)
}
