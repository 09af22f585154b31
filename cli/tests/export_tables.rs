//! `gapscope export --tables DIR`: the analysis tables as Parquet, read back here with the
//! parquet crate and checked against the report of the same trace (the tables are what the
//! report is made from, so its figures must come back out of them).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;

use gapscope_tests::{repo, run, s};
use gapscope_traces::arrow_array::RecordBatch;
use gapscope_traces::arrow_array::cast::AsArray;
use gapscope_traces::arrow_array::types::{Int64Type, UInt8Type, UInt32Type};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

const HF_QWEN: &str = "traces/reference/hf-qwen3-0.6b-npl1.json.gz";
const ENGINE_8B: &str = "traces/reference/engine-llama3-8b-npl1.gst";

fn read(path: &Path) -> Vec<RecordBatch> {
    let f = File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    ParquetRecordBatchReaderBuilder::try_new(f)
        .unwrap()
        .build()
        .unwrap()
        .map(|b| b.unwrap())
        .collect()
}

fn col_i64(bs: &[RecordBatch], c: &str) -> Vec<i64> {
    bs.iter()
        .flat_map(|b| {
            b.column_by_name(c)
                .unwrap_or_else(|| panic!("no column {c}"))
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect()
}

fn col_u32(bs: &[RecordBatch], c: &str) -> Vec<u32> {
    bs.iter()
        .flat_map(|b| {
            b.column_by_name(c)
                .unwrap()
                .as_primitive::<UInt32Type>()
                .values()
                .to_vec()
        })
        .collect()
}

fn col_u8(bs: &[RecordBatch], c: &str) -> Vec<u8> {
    bs.iter()
        .flat_map(|b| {
            b.column_by_name(c)
                .unwrap()
                .as_primitive::<UInt8Type>()
                .values()
                .to_vec()
        })
        .collect()
}

fn report(trace: &str) -> serde_json::Value {
    let o = run(&["report", "-q", "--json", s(&repo(trace))]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["reports"][0].clone()
}

#[test]
#[expect(
    clippy::too_many_lines,
    reason = "one export read back and checked table by table against the same report"
)]
fn the_tables_give_back_the_reports_figures() {
    for trace in [HF_QWEN, ENGINE_8B] {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("tables");
        let o = run(&["export", "-q", s(&repo(trace)), "--tables", s(&out)]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let r = report(trace);
        let t = |name: &str| read(&out.join(format!("{name}.parquet")));

        // Bucket codes, from the legend.
        let codes = t("codes");
        let mut bucket_code: HashMap<String, u8> = HashMap::new();
        for b in &codes {
            let (col, code, meaning) = (
                b.column(0).as_string::<i32>(),
                b.column(1).as_primitive::<UInt8Type>(),
                b.column(2).as_string::<i32>(),
            );
            for i in 0..b.num_rows() {
                if col.value(i) == "bucket" {
                    bucket_code.insert(meaning.value(i).to_owned(), code.value(i));
                }
            }
        }

        // Steps: the report's decode steps are the rows in the report.
        let steps = t("steps");
        let in_report = col_u8(&steps, "in_report");
        let scope: Vec<u32> = (0..in_report.len() as u32)
            .filter(|&i| in_report[i as usize] == 1)
            .collect();
        assert_eq!(
            scope.len() as u64,
            r["steps"]["decode_steps"].as_u64().unwrap(),
            "{trace}"
        );
        // TPOT: start-to-start periods of consecutive report steps.
        let starts = col_i64(&steps, "gpu_start_ns");
        let periods: Vec<f64> = scope
            .windows(2)
            .filter(|w| w[1] == w[0] + 1)
            .map(|w| (starts[w[1] as usize] - starts[w[0] as usize]) as f64 / 1e6)
            .collect();
        let mean = periods.iter().sum::<f64>() / periods.len() as f64;
        let want = r["steps"]["tpot_ms"]["mean"].as_f64().unwrap();
        assert!(
            (mean - want).abs() <= 1e-9 * want,
            "{trace}: {mean} vs {want}"
        );

        // Step x bucket: each bucket's ms/step over the report's steps.
        let sb = t("step_buckets");
        let (sb_step, sb_bucket, sb_ns) = (
            col_u32(&sb, "step"),
            col_u8(&sb, "bucket"),
            col_i64(&sb, "ns"),
        );
        for row in r["buckets"].as_array().unwrap() {
            let code = bucket_code[row["bucket"].as_str().unwrap()];
            let total: i64 = (0..sb_ns.len())
                .filter(|&i| sb_bucket[i] == code && in_report[sb_step[i] as usize] == 1)
                .map(|i| sb_ns[i])
                .sum();
            let want = row["total_ms"].as_f64().unwrap();
            let got = total as f64 / 1e6;
            assert!(
                (got - want).abs() <= 1e-9 * want.max(1e-9),
                "{trace} {row}: {got}"
            );
        }

        // Activities: every kernel and memop, those in report steps in their bucket.
        let acts = t("activities");
        let n: usize = acts.iter().map(|b| b.num_rows()).sum();
        let want =
            r["source"]["kernels"].as_u64().unwrap() + r["source"]["memops"].as_u64().unwrap();
        assert_eq!(n as u64, want, "{trace}");
        let (a_step, a_start, a_end) = (
            col_u32(&acts, "step"),
            col_i64(&acts, "gpu_start_ns"),
            col_i64(&acts, "gpu_end_ns"),
        );
        let in_steps: i64 = (0..n)
            .filter(|&i| a_step[i] != u32::MAX && in_report[a_step[i] as usize] == 1)
            .map(|i| (a_end[i] - a_start[i]).max(0))
            .sum();
        assert_eq!(
            in_steps,
            sb_ns
                .iter()
                .zip(&sb_step)
                .filter(|(_, s)| in_report[**s as usize] == 1)
                .map(|(n, _)| n)
                .sum::<i64>(),
            "{trace}"
        );

        // Idle gaps: causes add up to each gap.
        let gaps = t("idle_gaps");
        let (gs, ge) = (col_i64(&gaps, "gpu_start_ns"), col_i64(&gaps, "gpu_end_ns"));
        let parts: Vec<Vec<i64>> = [
            "launch_ns",
            "host_compute_ns",
            "sync_ns",
            "gpu_wait_ns",
            "unexplained_ns",
        ]
        .iter()
        .map(|c| col_i64(&gaps, c))
        .collect();
        for i in 0..gs.len() {
            let sum: i64 = parts.iter().map(|p| p[i]).sum();
            assert_eq!(sum, ge[i] - gs[i], "{trace}: gap {i}");
        }
        if let Some(idle) = r["host_idle"].as_object() {
            // The report's idle attribution is the sum of the table's gaps.
            assert_eq!(idle["gaps"].as_u64().unwrap(), gs.len() as u64, "{trace}");
            let kinds = col_u8(&gaps, "kind");
            let steps_n = idle["steps"].as_f64().unwrap();
            let inside_launch: i64 = (0..gs.len())
                .filter(|&i| kinds[i] == 0)
                .map(|i| parts[0][i])
                .sum();
            let want = idle["inside_steps"]["launch_ms_per_step"].as_f64().unwrap();
            let got = inside_launch as f64 / 1e6 / steps_n;
            assert!(
                (got - want).abs() <= 1e-9 * want.max(1e-9),
                "{trace}: launch {got} vs {want}"
            );
            // The top scope's host time, from the per-step scope table and the string legend.
            let top = &idle["top_scopes"][0];
            let strings = t("strings");
            let id = strings
                .iter()
                .flat_map(|b| {
                    let (ids, text) = (
                        b.column(0).as_primitive::<UInt32Type>(),
                        b.column(1).as_string::<i32>(),
                    );
                    (0..b.num_rows())
                        .filter(move |&i| text.value(i) == top["name"].as_str().unwrap())
                        .map(move |i| ids.value(i))
                })
                .next()
                .unwrap();
            let sc = t("step_scopes");
            let (names, gk, ns) = (
                col_u32(&sc, "name"),
                col_u8(&sc, "gap_kind"),
                col_i64(&sc, "host_ns"),
            );
            let got: i64 = (0..names.len())
                .filter(|&i| names[i] == id && gk[i] == 0)
                .map(|i| ns[i])
                .sum();
            let got = got as f64 / 1e6 / steps_n;
            let want = top["ms_per_step"].as_f64().unwrap();
            assert!(
                (got - want).abs() <= 1e-9 * want,
                "{trace}: {} {got} vs {want}",
                top["name"]
            );
        }
        assert!(!t("strings").is_empty() && !t("names").is_empty());
    }
}

#[test]
fn the_tables_folder_must_be_new_or_empty() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("keep.txt"), b"x").unwrap();
    let o = run(&[
        "export",
        "-q",
        s(&repo(ENGINE_8B)),
        "--tables",
        s(dir.path()),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("is not empty"), "{e}");
    assert_eq!(std::fs::read(dir.path().join("keep.txt")).unwrap(), b"x");
    #[cfg(unix)]
    {
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        let o = run(&["export", "-q", s(&repo(ENGINE_8B)), "--tables", s(&link)]);
        assert_eq!(o.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&o.stderr).contains("symbolic link"));
    }
}

/// The steps table keeps its positional `step` (what activities join on) and adds
/// `report_step`: the number `report` gives a step (`worst_stall.step`, `--step N`, the
/// explorer's `step N`), null outside the report. The engine trace's prefill is position 0
/// and has none; its first decode step is the report's step 0.
#[test]
fn the_steps_table_numbers_steps_as_the_report_does() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("tables");
    let o = run(&["export", "-q", s(&repo(ENGINE_8B)), "--tables", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let steps = read(&out.join("steps.parquet"));
    let field = steps[0]
        .schema()
        .field_with_name("report_step")
        .unwrap()
        .clone();
    assert!(field.is_nullable());
    let numbers: Vec<Option<i64>> = steps
        .iter()
        .flat_map(|b| {
            b.column_by_name("report_step")
                .unwrap()
                .as_primitive::<Int64Type>()
                .iter()
                .collect::<Vec<_>>()
        })
        .collect();
    let (position, in_report) = (col_u32(&steps, "step"), col_u8(&steps, "in_report"));
    let starts = col_i64(&steps, "gpu_start_ns");
    let ends = col_i64(&steps, "gpu_end_ns");
    assert_eq!(position[..3], [0, 1, 2]);
    assert_eq!(numbers[..3], [None, Some(0), Some(1)]);
    let r = report(ENGINE_8B);
    let decode = r["steps"]["decode_steps"].as_u64().unwrap() as usize;
    let mut n = 0;
    for (k, (num, covered)) in numbers.iter().zip(&in_report).enumerate() {
        if *covered == 1 {
            assert_eq!(*num, Some(n), "row {k}");
            n += 1;
        } else {
            assert_eq!(*num, None, "row {k}");
        }
    }
    assert_eq!(n as usize, decode);
    // The report's worst stall names the step it ends in by that number.
    let w = &r["steps"]["worst_stall"];
    let end = w["gpu_start_ns"].as_i64().unwrap() + (w["ms"].as_f64().unwrap() * 1e6) as i64;
    let k = numbers
        .iter()
        .position(|x| *x == w["step"].as_i64())
        .unwrap();
    assert!(
        starts[k] <= end + 1 && end <= ends[k],
        "{} {end} {}",
        starts[k],
        ends[k]
    );
}
