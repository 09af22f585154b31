//! The roofline view reads right (issue 36): efficiency as floor ÷ measured with that name
//! and the CLI's wording, the context from a vLLM trace's markers (else said assumed), and
//! a y axis that a near-zero floor cannot stretch.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod common;

use std::path::{Path, PathBuf};

use common::*;
use egui_kittest::kittest::Queryable;
use gapscope_analyzer::roofline::report::{
    BatchSource, ContextChoice, RooflineReport, TpChoice, TraceAtBatch, roofline_at,
};
use gapscope_analyzer::roofline::{ModelSpec, WeightFormat, hw};
use gapscope_gui::settings::Settings;
use gapscope_gui::views::View;
use gapscope_gui::views::roofline::DEFAULT_CTX;
use gapscope_gui::views::roofline_chart::y_range;
use gapscope_gui::views::roofline_text::floor_headline;

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// The explorer's roofline of `trace` against `model`, and the report it draws.
fn roofline(
    trace: PathBuf,
    model: &str,
    gpu: &str,
) -> (
    egui_kittest::Harness<'static, gapscope_gui::App>,
    RooflineReport,
) {
    let model = repo(model);
    let h = harness_with(Settings {
        traces: vec![trace],
        view: View::Roofline,
        model: Some(model.clone()),
        hw: Some(gpu.to_owned()),
        ..Settings::default()
    });
    let l = h.state().docs[0].loaded().unwrap();
    let r = &l.x.report;
    let m = ModelSpec::load(&model).unwrap();
    let hw = hw::lookup(gpu).unwrap();
    let (batch, batch_source) = BatchSource::resolve(r, None);
    let placed = [TraceAtBatch {
        report: r,
        batch,
        batch_source,
        notes: Vec::new(),
    }];
    let rep = roofline_at(
        &m,
        &hw,
        WeightFormat::Bf16,
        &[1, 2, 4, 8, 16, 32, 64, 128, 256],
        ContextChoice::new(None, DEFAULT_CTX),
        TpChoice::default(),
        &placed,
    );
    (h, rep)
}

#[test]
fn the_headline_is_x_times_the_floor_with_the_efficiency_named() {
    let (h, r) = roofline(
        reference("engine-llama3-8b-npl1.gst"),
        "models/llama-3-8b.json",
        "h100-sxm",
    );
    let m = &r.measured[0];
    // floor ÷ measured: the efficiency is under 100% for a step slower than its floor.
    assert!(m.pct_of_floor_median < 100.0);
    let headline = floor_headline(m.tpot_median_ms, m.floor_ms, m.pct_of_floor_median);
    assert!(shows(&h, &headline), "not shown: {headline}");
    assert!(h.query_all_by_label_contains("% of floor").next().is_none());
    // The engine trace carries no context: the default, said to be assumed.
    assert!(shows(&h, "context 4096 tokens (assumed; pass --ctx)"));
}

#[test]
fn a_vllm_traces_context_comes_from_its_markers() {
    let (h, r) = roofline(
        repo("traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz"),
        "models/llama-3-8b.json",
        "mi300x",
    );
    assert_eq!(r.ctx, 1721);
    assert!(shows(&h, "context 1721 tokens (from the trace's markers)"));
    assert!(!shows(&h, "assumed"));
}

#[test]
fn a_near_zero_floor_is_listed_not_plotted() {
    let (_, mut r) = roofline(
        reference("engine-llama3-8b-npl1.gst"),
        "models/llama-3-8b.json",
        "h100-sxm",
    );
    let y = y_range(&r).unwrap();
    assert!(y.d1 - y.d0 <= 5.0, "{y:?}");
    // A floor dash nine decades under the points (the old axis stretched down to it) is
    // listed under the chart and leaves the axis as it was.
    let k = r.measured[0]
        .buckets
        .iter()
        .position(|b| !y.below.iter().any(|(x, _)| *x == b.bucket))
        .unwrap();
    let b = &mut r.measured[0].buckets[k];
    b.floor_ms = b.ms_per_step * 1e-9;
    let bucket = b.bucket;
    let y2 = y_range(&r).unwrap();
    assert!(y2.d0 >= y.d0 && y2.d1 == y.d1, "{y:?} -> {y2:?}");
    assert_eq!(y2.below.len(), y.below.len() + 1);
    assert!(y2.below.iter().any(|(x, _)| *x == bucket));
}

/// A two-rank trace (its world size says 2) against the model it ran: the floors are one
/// rank's, and the view says the degree and where it comes from; `--tp 1` overrules it.
#[test]
fn a_two_rank_traces_tensor_parallel_degree_comes_from_its_world_size() {
    let open = |tp: Option<u64>| {
        harness_with(Settings {
            traces: vec![reference("tp2/host-rank0.json.gz")],
            view: View::Roofline,
            model: Some(repo("cli/tests/data/tp2-decode-config.json")),
            hw: Some("h200".to_owned()),
            tp,
            ..Settings::default()
        })
    };
    let h = open(None);
    assert!(
        shows(
            &h,
            "tensor parallel 2 (from the trace's world size; per rank: 1/2 of the weights, 4 of 8 KV heads)"
        ),
        "the degree is not shown"
    );
    let one = open(Some(1));
    assert!(shows(&one, "1 GPU (given)"));
    assert!(!shows(&one, "tensor parallel 2"));
}
