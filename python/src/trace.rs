//! `open_trace`: one trace imported and analysed by the session exactly as `gapscope report`
//! does it, kept as its report (the CLI's JSON), the analysis tables and, unless asked not
//! to, the trace's own tables, all as Arrow.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{UInt8Type, UInt32Type};
use arrow_array::{Array, ArrayRef, DictionaryArray, RecordBatch, StringArray};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use clap::Parser;
use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::host::GroupBy;
use gapscope_analyzer::bucket::Bucket;
use gapscope_analyzer::session::{self, AnalyzedRun, Run, SessionSettings};
use gapscope_analyzer::tables::Tables;
use gapscope_cli::report_cmd::AnalysisArgs;
use pyo3::prelude::*;

use crate::arrow_export::ArrowTable;
use crate::errors;
use crate::progress::PyProgress;

/// The analysis options, parsed by the CLI's own parser so that every option means and
/// checks the same as on the command line.
#[derive(Parser)]
#[command(name = "gapscope", no_binary_name = true)]
struct Options {
    #[command(flatten)]
    analysis: AnalysisArgs,
    #[arg(long, value_parser = parse_group_by)]
    by: Option<GroupBy>,
}

fn parse_group_by(s: &str) -> Result<GroupBy, String> {
    GroupBy::parse(s).ok_or_else(|| format!("{s:?}: use scope, op, module or layer"))
}

/// One analysed trace as Python sees it.
#[pyclass(frozen, module = "gapscope._native")]
pub struct Trace {
    path: String,
    report_json: String,
    report: Report,
    tables: Tables,
    arrow: Vec<(&'static str, Py<ArrowTable>)>,
}

#[pymethods]
impl Trace {
    /// The path as given.
    #[getter]
    fn path(&self) -> &str {
        &self.path
    }

    /// The report as the CLI's `report --json` prints it for this trace alone.
    #[getter]
    fn report_json(&self) -> &str {
        &self.report_json
    }

    /// The names of the tables held, in order.
    #[getter]
    fn table_names(&self) -> Vec<&'static str> {
        self.arrow.iter().map(|(n, _)| *n).collect()
    }

    /// One table (see `table_names`), as an object pyarrow imports without a copy.
    fn table(&self, py: Python<'_>, name: &str) -> PyResult<Py<ArrowTable>> {
        self.arrow
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| t.clone_ref(py))
            .ok_or_else(|| {
                pyo3::exceptions::PyKeyError::new_err(format!(
                    "no table {name:?}; the tables are {}",
                    self.table_names().join(", ")
                ))
            })
    }

    /// The report as an HTML fragment (headline, bucket table, per-step chart).
    fn html_fragment(&self) -> String {
        gapscope_cli::render::html::report_fragment(&self.report, &self.tables)
    }
}

/// Imports and analyses `path` with `options` (the CLI's analysis flags). `keep_trace`
/// false keeps only the report and the analysis tables (what `gapscope.report` needs).
#[pyfunction]
#[pyo3(signature = (path, options, progress=None, keep_trace=true))]
pub fn open_trace(
    py: Python<'_>,
    path: PathBuf,
    options: Vec<String>,
    progress: Option<Py<PyAny>>,
    keep_trace: bool,
) -> PyResult<Trace> {
    let mut opts = Options::try_parse_from(&options)
        .map_err(|e| errors::UsageError::new_err(errors::one_line(&e.render().to_string())))?;
    // The command line's defaults (GAPSCOPE_RULES, the config file) apply here as they do
    // to `gapscope report` (docs/CLI.md, "Configuration").
    use gapscope_cli::config::{ConfigFlags, Defaults, Env};
    Defaults::resolve(&ConfigFlags::default(), &Env::from_process())
        .and_then(|d| d.fill_rules(&mut opts.analysis.trace.rules))
        .map_err(|e| errors::UsageError::new_err(errors::one_line(&format!("{e:#}"))))?;
    let allow_truncated = opts.analysis.trace.allow_truncated;
    let mut knobs = opts.analysis.knobs();
    knobs.group_by = opts.by;
    // The trace's tables are handed over whole: a projected read would leave columns the
    // analysis does not need unread, and Python would see defaults for them.
    knobs.all_columns = keep_trace;
    let settings = SessionSettings::resolve(&knobs).map_err(|e| errors::analyzer(&e))?;
    let progress = PyProgress::new(progress);
    let label = path.display().to_string();
    let opened = py.detach(|| {
        errors::no_panic(&label, || -> Result<_, PyErr> {
            let run = Run::new(&path);
            let imported = session::import_run(&run, &settings, &progress)
                .map_err(|e| errors::import(&e, allow_truncated))?;
            let analyzed = session::analyze_run(run, imported, &settings);
            build(analyzed, keep_trace)
                .map_err(|e| errors::TraceError::new_err(format!("{label}: {e}")))
        })
    })?;
    let (report_json, report, tables, batches) = opened;
    let arrow = batches
        .into_iter()
        .map(|(n, b)| Ok((n, Py::new(py, ArrowTable::one(b))?)))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(Trace {
        path: label,
        report_json,
        report,
        tables,
        arrow,
    })
}

type Built = (String, Report, Tables, Vec<(&'static str, RecordBatch)>);

/// The report's JSON and every table as a record batch, the trace's columns moved.
fn build(run: AnalyzedRun, keep_trace: bool) -> Result<Built, String> {
    let report_json = gapscope_cli::render::json::reports(std::slice::from_ref(&run.report))
        .map_err(|e| e.to_string())?;
    let AnalyzedRun {
        trace,
        mut tables,
        report,
        ..
    } = run;
    let strings: ArrayRef = Arc::new(StringArray::from_iter_values(trace.strings.values().iter()));
    let mut out = Vec::new();
    for (name, b) in tables.record_batches().map_err(|e| e.to_string())? {
        out.push((name, decode(b, &strings).map_err(|e| e.to_string())?));
    }
    if keep_trace {
        let kernel_bucket = std::mem::take(&mut tables.kernel_bucket);
        let kernel_step = std::mem::take(&mut tables.kernel_step);
        let memop_bucket = std::mem::take(&mut tables.memop_bucket);
        let memop_step = std::mem::take(&mut tables.memop_step);
        let t = trace;
        let raw = [
            (
                "kernels",
                with_analysis(t.kernels.into_batch(), kernel_bucket, kernel_step),
            ),
            (
                "memops",
                with_analysis(t.memops.into_batch(), memop_bucket, memop_step),
            ),
            ("launches", t.launches.into_batch()),
            ("markers", t.markers.into_batch()),
            ("samples", t.samples.into_batch()),
            ("scopes", t.scopes.into_batch()),
        ];
        for (name, b) in raw {
            out.push((
                name,
                decode(b.map_err(|e| e.to_string())?, &strings).map_err(|e| e.to_string())?,
            ));
        }
    }
    out.push((
        "strings",
        strings_batch(&strings).map_err(|e| e.to_string())?,
    ));
    Ok((report_json, report, tables, out))
}

/// A kernel or memop batch with the analysis's bucket (code) and step added; the trace's
/// own bucket column (engine traces) is renamed `engine_bucket`.
fn with_analysis(
    batch: Result<RecordBatch, ArrowError>,
    bucket: Vec<u8>,
    step: Vec<u32>,
) -> Result<RecordBatch, ArrowError> {
    let batch = batch?;
    let n = batch.num_rows();
    let bucket = if bucket.len() == n {
        bucket
    } else {
        vec![Bucket::Other.index() as u8; n]
    };
    let step = if step.len() == n {
        step
    } else {
        vec![u32::MAX; n]
    };
    let mut fields: Vec<Field> = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        let name = if f.name() == "bucket" {
            "engine_bucket"
        } else {
            f.name().as_str()
        };
        fields.push(Field::new(name, f.data_type().clone(), f.is_nullable()));
        cols.push(c.clone());
    }
    fields.push(Field::new("bucket", DataType::UInt8, false));
    cols.push(Arc::new(arrow_array::UInt8Array::from(bucket)));
    fields.push(Field::new("step", DataType::UInt32, false));
    cols.push(Arc::new(arrow_array::UInt32Array::from(step)));
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
}

/// Name ids as dictionary columns over the trace's strings (the ids stay the keys, so
/// nothing is copied), and bucket codes as dictionary columns over the bucket names.
fn decode(batch: RecordBatch, strings: &ArrayRef) -> Result<RecordBatch, ArrowError> {
    let buckets: ArrayRef = Arc::new(StringArray::from_iter_values(
        Bucket::ALL.iter().map(|b| b.as_str()),
    ));
    let mut fields: Vec<Field> = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for (f, c) in batch.schema().fields().iter().zip(batch.columns()) {
        let name = f.name().as_str();
        let named = matches!(name, "name" | "op" | "engine_bucket");
        if named && *f.data_type() == DataType::UInt32 {
            let keys = c.as_primitive::<UInt32Type>().clone();
            let d = DictionaryArray::<UInt32Type>::try_new(keys, strings.clone())?;
            fields.push(Field::new(name, d.data_type().clone(), false));
            cols.push(Arc::new(d));
        } else if name == "bucket" && *f.data_type() == DataType::UInt8 {
            let keys = c.as_primitive::<UInt8Type>().clone();
            let d = DictionaryArray::<UInt8Type>::try_new(keys, buckets.clone())?;
            fields.push(Field::new(name, d.data_type().clone(), false));
            cols.push(Arc::new(d));
        } else {
            fields.push(f.as_ref().clone());
            cols.push(c.clone());
        }
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols)
}

fn strings_batch(strings: &ArrayRef) -> Result<RecordBatch, ArrowError> {
    let ids = arrow_array::UInt32Array::from_iter_values(0..strings.len() as u32);
    RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("id", DataType::UInt32, false),
            Field::new("text", DataType::Utf8, false),
        ])),
        vec![Arc::new(ids), strings.clone()],
    )
}
