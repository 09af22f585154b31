//! One Parquet file of GPU activity (kernels and memops) with names, buckets, steps and
//! phases resolved, ready for pandas, polars or duckdb. What a row lacks is null, never a
//! sentinel (a kernel without declared bytes, work outside every step, no graph).

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use gapscope_traces::{MemopKind, OutputFile, Phase};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

use crate::bucket::Bucket;
use crate::error::{AnalyzerError, Result};
use crate::session::AnalyzedRun;
use crate::tables::NO_STEP;

const ROWS: usize = 64 * 1024;

/// An activity's step: its position in the run, the report's number, its phase.
type StepOf = (Option<u32>, Option<i64>, Option<&'static str>);

fn schema() -> Arc<Schema> {
    Arc::new(Schema::new(vec![
        Field::new("kind", DataType::Utf8, false),
        Field::new("device", DataType::UInt32, false),
        Field::new("stream", DataType::UInt32, false),
        Field::new("correlation", DataType::UInt64, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("bucket", DataType::Utf8, false),
        Field::new("step", DataType::UInt32, true),
        Field::new("report_step", DataType::Int64, true),
        Field::new("phase", DataType::Utf8, true),
        Field::new("gpu_start_ns", DataType::Int64, false),
        Field::new("gpu_end_ns", DataType::Int64, false),
        Field::new("duration_ns", DataType::Int64, false),
        Field::new("bytes", DataType::Int64, true),
        Field::new("graph_id", DataType::UInt32, true),
    ]))
}

#[derive(Default)]
struct Cols {
    kind: Vec<&'static str>,
    device: Vec<u32>,
    stream: Vec<u32>,
    correlation: Vec<u64>,
    name: Vec<String>,
    bucket: Vec<&'static str>,
    step: Vec<Option<u32>>,
    report_step: Vec<Option<i64>>,
    phase: Vec<Option<&'static str>>,
    start: Vec<i64>,
    end: Vec<i64>,
    bytes: Vec<Option<i64>>,
    graph: Vec<Option<u32>>,
}

impl Cols {
    fn batch(&mut self) -> std::result::Result<RecordBatch, arrow_schema::ArrowError> {
        let dur: Vec<i64> = self
            .start
            .iter()
            .zip(&self.end)
            .map(|(s, e)| e - s)
            .collect();
        let cols: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(std::mem::take(&mut self.kind))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.device))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.stream))),
            Arc::new(UInt64Array::from(std::mem::take(&mut self.correlation))),
            Arc::new(StringArray::from(std::mem::take(&mut self.name))),
            Arc::new(StringArray::from(std::mem::take(&mut self.bucket))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.step))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.report_step))),
            Arc::new(StringArray::from(std::mem::take(&mut self.phase))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.start))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.end))),
            Arc::new(Int64Array::from(dur)),
            Arc::new(Int64Array::from(std::mem::take(&mut self.bytes))),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.graph))),
        ];
        RecordBatch::try_new(schema(), cols)
    }
}

/// Writes the kernels and memops of an analysed run to one Parquet file (snappy) at `out`,
/// which may not be one of `inputs` (written beside it and renamed into place:
/// `gapscope_traces::OutputFile`).
pub fn write_parquet(run: &AnalyzedRun, out: &Path, inputs: &[&Path]) -> Result<()> {
    let err = |m: String| AnalyzerError::Export {
        path: out.to_owned(),
        message: m,
    };
    let (trace, t) = (&run.trace, &run.tables);
    let mut f = OutputFile::create(out, inputs)?;
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .build();
    let mut w =
        ArrowWriter::try_new(f.file(), schema(), Some(props)).map_err(|e| err(e.to_string()))?;
    let mut c = Cols::default();
    let flush = |c: &mut Cols, w: &mut ArrowWriter<&mut File>| -> Result<()> {
        let b = c.batch().map_err(|e| err(e.to_string()))?;
        w.write(&b).map_err(|e| err(e.to_string()))
    };
    // A step's position, the report's number for it and its phase, or nulls outside
    // every step (the number also outside the report).
    let step_of = |steps: &[u32], i: usize| -> StepOf {
        match steps.get(i).copied().filter(|&s| s != NO_STEP) {
            Some(s) => (
                Some(s),
                t.steps
                    .report_step
                    .get(s as usize)
                    .copied()
                    .filter(|&n| n >= 0),
                t.steps
                    .phase
                    .get(s as usize)
                    .map(|&ph| Phase::from_code(ph).as_str()),
            ),
            None => (None, None, None),
        }
    };
    let bucket = |v: &[u8], i: usize| {
        Bucket::ALL[v.get(i).copied().unwrap_or(0) as usize % Bucket::ALL.len()].as_str()
    };
    let k = &trace.kernels;
    let (has_bytes, has_graph) = (k.bytes.len() == k.len, k.graph_id.len() == k.len);
    for i in 0..k.len {
        let (step, report_step, phase) = step_of(&t.kernel_step, i);
        c.kind.push("kernel");
        c.device.push(k.device[i]);
        c.stream.push(k.stream[i]);
        c.correlation.push(k.correlation[i]);
        c.name.push(trace.strings.get(k.name[i]).to_owned());
        c.bucket.push(bucket(&t.kernel_bucket, i));
        c.step.push(step);
        c.report_step.push(report_step);
        c.phase.push(phase);
        c.start.push(k.gpu_start_ns[i]);
        c.end.push(k.gpu_end_ns[i]);
        c.bytes
            .push(has_bytes.then(|| k.bytes[i]).filter(|&b| b >= 0));
        c.graph
            .push(has_graph.then(|| k.graph_id[i]).filter(|&g| g != 0));
        if c.start.len() == ROWS {
            flush(&mut c, &mut w)?;
        }
    }
    let m = &trace.memops;
    for i in 0..m.len {
        let kind = MemopKind::from_code(m.kind[i]);
        let (step, report_step, phase) = step_of(&t.memop_step, i);
        c.kind.push(if kind == MemopKind::Memset {
            "memset"
        } else {
            "memcpy"
        });
        c.device.push(m.device[i]);
        c.stream.push(m.stream[i]);
        c.correlation.push(m.correlation[i]);
        c.name.push(trace.strings.get(m.name[i]).to_owned());
        c.bucket.push(bucket(&t.memop_bucket, i));
        c.step.push(step);
        c.report_step.push(report_step);
        c.phase.push(phase);
        c.start.push(m.gpu_start_ns[i]);
        c.end.push(m.gpu_end_ns[i]);
        c.bytes.push(i64::try_from(m.bytes[i]).ok());
        c.graph.push(m.graph_id.get(i).copied().filter(|&g| g != 0));
        if c.start.len() == ROWS {
            flush(&mut c, &mut w)?;
        }
    }
    if !c.start.is_empty() {
        flush(&mut c, &mut w)?;
    }
    w.close().map_err(|e| err(e.to_string()))?;
    Ok(f.commit()?)
}
