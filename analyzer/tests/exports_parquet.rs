//! The Parquet exports (issue 37): each activity's step and phase, nulls instead of
//! sentinels, and the host tables (launches, scopes) beside the analysis tables.

mod common;

use std::fs::File;
use std::path::PathBuf;

use gapscope_analyzer::export::parquet::write_parquet;
use gapscope_analyzer::export::tables::write_tables;
use gapscope_analyzer::tables::NO_STEP;
use gapscope_traces::arrow_array::cast::AsArray;
use gapscope_traces::arrow_array::types::{Int64Type, UInt32Type};
use gapscope_traces::arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

fn read(path: &std::path::Path) -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(File::open(path).expect("written"))
        .expect("a Parquet file")
        .build()
        .expect("a reader")
        .collect::<Result<Vec<_>, _>>()
        .expect("batches")
}

/// HF eager: its kernels declare no bytes and replay no graph (nulls, not -1 and 0); every
/// activity in a step carries the step and its phase, the others nulls.
#[test]
fn the_activity_file_has_steps_phases_and_nulls() {
    let run = common::open(repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz"));
    let dir = tempfile::tempdir().expect("a temporary folder");
    let out = dir.path().join("acts.parquet");
    write_parquet(&run, &out, &[]).expect("written");
    let batches = read(&out);
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    assert_eq!(rows, run.trace.kernels.len + run.trace.memops.len);
    let schema = batches[0].schema();
    for nullable in ["step", "phase", "bytes", "graph_id"] {
        assert!(
            schema
                .field_with_name(nullable)
                .expect("column")
                .is_nullable(),
            "{nullable}"
        );
    }
    let (mut in_steps, mut decode, mut kernels_without_bytes) = (0usize, 0usize, 0usize);
    for b in &batches {
        let step = b
            .column_by_name("step")
            .expect("step")
            .as_primitive::<UInt32Type>();
        let phase = b.column_by_name("phase").expect("phase").as_string::<i32>();
        let bytes = b
            .column_by_name("bytes")
            .expect("bytes")
            .as_primitive::<Int64Type>();
        let kind = b.column_by_name("kind").expect("kind").as_string::<i32>();
        let graph = b.column_by_name("graph_id").expect("graph_id");
        assert_eq!(
            graph.null_count(),
            b.num_rows(),
            "no graphs in an HF eager trace"
        );
        for i in 0..b.num_rows() {
            assert_eq!(step.is_null(i), phase.is_null(i));
            if !step.is_null(i) {
                in_steps += 1;
                decode += usize::from(phase.value(i) == "decode");
            }
            if kind.value(i) == "kernel" {
                kernels_without_bytes += usize::from(bytes.is_null(i));
                assert!(bytes.is_null(i) || bytes.value(i) >= 0);
            }
        }
    }
    let t = &run.tables;
    let want = t
        .kernel_step
        .iter()
        .chain(&t.memop_step)
        .filter(|&&s| s != NO_STEP)
        .count();
    assert_eq!(in_steps, want);
    assert!(decode > 0);
    assert_eq!(kernels_without_bytes, run.trace.kernels.len);
}

/// `--tables` writes the host side too: one row per launch call and per host scope.
#[test]
fn the_tables_hold_launches_and_scopes() {
    let run = common::open(repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz"));
    let dir = tempfile::tempdir().expect("a temporary folder");
    let out = dir.path().join("tables");
    write_tables(&run, &out, &[]).expect("written");
    let rows = |f: &str| -> usize { read(&out.join(f)).iter().map(RecordBatch::num_rows).sum() };
    assert_eq!(rows("launches.parquet"), run.trace.launches.len);
    assert_eq!(rows("scopes.parquet"), run.trace.scopes.len);
    assert!(run.trace.scopes.len > 0);
}

/// `--parquet` numbers each activity's step twice: `step`, its position in the run (what
/// the tables join on), and `report_step`, the number `report` gives it (null in the
/// prefill, which the report does not cover). The engine trace's prefill is position 0.
#[test]
fn each_activity_carries_the_reports_step_number() {
    let run = common::open(repo("traces/reference/engine-llama3-8b-npl1.gst"));
    let dir = tempfile::tempdir().expect("a temporary folder");
    let out = dir.path().join("acts.parquet");
    write_parquet(&run, &out, &[]).expect("written");
    let batches = read(&out);
    let schema = batches[0].schema();
    assert!(
        schema
            .field_with_name("report_step")
            .expect("column")
            .is_nullable()
    );
    let (mut prefill, mut decode) = (0usize, 0usize);
    for b in &batches {
        let step = b
            .column_by_name("step")
            .expect("step")
            .as_primitive::<UInt32Type>();
        let number = b
            .column_by_name("report_step")
            .expect("report_step")
            .as_primitive::<Int64Type>();
        let phase = b.column_by_name("phase").expect("phase").as_string::<i32>();
        for i in (0..b.num_rows()).filter(|&i| !step.is_null(i)) {
            if phase.value(i) == "prefill" {
                prefill += 1;
                assert!(number.is_null(i));
            } else {
                decode += 1;
                // One prefill before the decode steps: the report's number is one less.
                assert_eq!(number.value(i), i64::from(step.value(i)) - 1);
            }
        }
    }
    assert!(prefill > 0 && decode > 0, "{prefill} {decode}");
    // The steps table says the same.
    let s = &run.tables.steps;
    assert_eq!((s.report_step[0], s.report_step[1]), (-1, 0));
}
