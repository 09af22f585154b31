//! A trace handed over in memory imports and analyses as the same file read from its path:
//! Kineto JSON plain and gzipped, an nsys export (through a private copy in the scratch
//! folder), with truncation and the refusals of what bytes cannot be.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::io::Read;
use std::path::{Path, PathBuf};

use gapscope_analyzer::import::NoProgress;
use gapscope_analyzer::session::{Knobs, Run, SessionSettings, open_bytes, open_run};

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

fn settings(scratch: Option<&Path>, allow_truncated: bool) -> SessionSettings {
    SessionSettings::resolve(&Knobs {
        scratch_dir: scratch.map(Path::to_owned),
        allow_truncated,
        ..Knobs::default()
    })
    .unwrap()
}

fn report_json(r: &gapscope_analyzer::session::AnalyzedRun) -> String {
    serde_json::to_string(&r.report).unwrap()
}

#[test]
fn bytes_give_the_report_of_the_file() {
    let scratch = tempfile::tempdir().unwrap();
    let s = settings(Some(scratch.path()), false);
    for rel in [
        "traces/reference/hf-qwen3-0.6b-npl1.json.gz",
        "traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz",
        "traces/corpus/nsys_rtx5060ti_gemm_nokernels.sqlite",
    ] {
        let path = repo(rel);
        let bytes = std::fs::read(&path).unwrap();
        let from_file = open_run(Run::new(&path), &s, &NoProgress).unwrap();
        let from_bytes = open_bytes(Run::new(&path), &bytes, &s, &NoProgress).unwrap();
        assert!(
            report_json(&from_bytes) == report_json(&from_file),
            "{rel}: the report from bytes differs from the file's"
        );
        assert_eq!(from_bytes.tables.steps.len, from_file.tables.steps.len);
    }
    // The private copy of the nsys export is gone.
    assert_eq!(std::fs::read_dir(scratch.path()).unwrap().count(), 0);

    // Plain JSON: the gzipped trace inflated in memory.
    let gz = std::fs::read(repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz")).unwrap();
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut json)
        .unwrap();
    let mut a = open_bytes(Run::new("a.json"), &json, &s, &NoProgress).unwrap();
    let b = open_bytes(Run::new("a.json"), &gz, &s, &NoProgress).unwrap();
    assert_eq!(a.report.source.format, "kineto-json");
    assert_eq!(b.report.source.format, "kineto-json-gz");
    a.report.source.format = b.report.source.format.clone();
    assert!(
        report_json(&a) == report_json(&b),
        "plain and gzipped JSON differ"
    );
    assert_eq!(a.report.source.path, "a.json");
}

#[test]
fn what_bytes_cannot_be_is_refused_with_its_reason() {
    let nsys = std::fs::read(repo("traces/corpus/nsys_rtx5060ti_gemm_nokernels.sqlite")).unwrap();
    let e = open_bytes(
        Run::new("x.sqlite"),
        &nsys,
        &settings(None, false),
        &NoProgress,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.starts_with("x.sqlite: ") && e.contains("scratch"), "{e}");
    let e = open_bytes(Run::new("e.json"), b"", &settings(None, false), &NoProgress)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(e, "e.json: file is empty");
    let e = open_bytes(
        Run::new("t.bin"),
        b"PK\x03\x04",
        &settings(None, false),
        &NoProgress,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(e.contains("unrecognised format"), "{e}");

    // A gzip cut short: refused, or loaded as truncated when allowed.
    let gz = std::fs::read(repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz")).unwrap();
    let cut = &gz[..gz.len() * 3 / 4];
    let e = open_bytes(
        Run::new("cut.json.gz"),
        cut,
        &settings(None, false),
        &NoProgress,
    )
    .err()
    .unwrap();
    assert!(e.to_string().starts_with("cut.json.gz: "), "{e}");
    let r = open_bytes(
        Run::new("cut.json.gz"),
        cut,
        &settings(None, true),
        &NoProgress,
    )
    .unwrap();
    assert!(r.trace.manifest.truncated);
}
