//! `export --chrome` loses nothing the report reads (issue 37): host scopes (ops, Python
//! frames, module calls), launches and their flows, markers and steps come back, and the
//! re-imported trace gives the same report as the one it was written from.

mod common;

use std::path::PathBuf;

use gapscope_analyzer::export::chrome::write_chrome_to;
use gapscope_analyzer::import::NoProgress;
use gapscope_analyzer::session::{Run, open_bytes};

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// The report as JSON, without what names the file (`source`) and the import's own notes
/// about the source's clock quirks (`warnings`: a trace written from clamped times has none
/// to report).
fn figures(r: &gapscope_analyzer::analysis::Report) -> serde_json::Value {
    let mut v = serde_json::to_value(r).expect("serialisable");
    let o = v.as_object_mut().expect("an object");
    o.remove("source");
    o.remove("warnings");
    v
}

fn round_trip(path: &str) {
    let run = common::open(repo(path));
    let mut json = Vec::new();
    write_chrome_to(
        &run.trace,
        &common::settings(&Default::default()).rules,
        &mut json,
    )
    .expect("written");
    let text = String::from_utf8(json.clone()).expect("UTF-8");
    let back = open_bytes(
        Run::new("round-trip.json"),
        &json,
        &common::settings(&Default::default()),
        &NoProgress,
    )
    .expect("read back");
    let (a, b) = (&run.report.source, &back.report.source);
    assert_eq!(
        (a.kernels, a.memops, a.launches, a.markers, a.scopes),
        (b.kernels, b.memops, b.launches, b.markers, b.scopes),
        "{path}: counts"
    );
    assert_eq!(
        figures(&run.report),
        figures(&back.report),
        "{path}: report"
    );
    // Perfetto's arrows: one flow per launch that issued GPU work (an engine recording has
    // no launch records).
    let flows = text.matches(r#""ph":"s","id":"#).count();
    assert!(
        (flows > 0 || a.launches == 0) && flows <= a.launches,
        "{path}: {flows} flows"
    );
    // NVML samples come back as the counter tracks Perfetto draws.
    assert_eq!(
        text.matches(r#""cat":"gpu_telemetry""#).count(),
        run.trace.samples.len,
        "{path}: telemetry"
    );
    assert_eq!(back.trace.samples.len, run.trace.samples.len, "{path}");
    assert_eq!(flows, text.matches(r#""ph":"f","id":"#).count());
    assert!(text.contains(r#""name":"thread_name""#));
}

/// HF eager with Python frames, module calls and ops (with_stack, with_modules).
#[test]
fn an_hf_trace_with_its_python_stack_round_trips() {
    round_trip("traces/reference/hf-llama3.2-1b-npl8-stack-math.json.gz");
}

/// HF eager with ops only, and its GPU step markers.
#[test]
fn an_hf_trace_with_ops_round_trips() {
    round_trip("traces/reference/hf-qwen3-0.6b-npl1.json.gz");
}

/// A gapscope-record CUPTI recording: NVTX step ranges, NVML telemetry, the capture tool's
/// overhead (before: the report lost its telemetry and distortion sections, and its steps
/// read as `user_annotation` ranges).
#[test]
fn a_cupti_recording_round_trips() {
    round_trip("traces/reference/cupti-qwen3next-small-npl1.gst");
}

/// gapscope-engine's recording: engine step markers with phase and batch, kernels with
/// declared bytes and FLOPs (before: every bucket's cost and the batch size were lost).
#[test]
fn an_engine_recording_round_trips() {
    round_trip("traces/reference/engine-llama3-8b-npl1.gst");
}

/// llama.cpp under gapscope-record.
#[test]
fn a_llamacpp_recording_round_trips() {
    round_trip("traces/reference/llamacpp-llama3-8b-q8_0-npl1.gst");
}
