//! The steps lane draws every step (issue 36): steps that start where the last one ended,
//! however short, are each drawn and hoverable at fit and at one-step zoom; step numbers
//! are the CLI's.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod common;

use common::*;
use egui::Rect;
use gapscope_gui::settings::Settings;
use gapscope_gui::views::View;
use gapscope_gui::views::timeline::Hit;
use gapscope_tests::traces::write_decode_steps;

/// The steps lane's bars of the first document, as the last frame drew them.
fn step_bars(h: &egui_kittest::Harness<'static, gapscope_gui::App>) -> Vec<(Rect, Hit)> {
    h.state().docs[0]
        .timeline
        .geometry
        .clone()
        .expect("drawn")
        .steps
}

/// Hovers the middle of step `k`'s bar and checks the timeline names it.
fn hover_step(h: &mut egui_kittest::Harness<'static, gapscope_gui::App>, k: usize) {
    let bars = step_bars(h);
    let (r, _) = bars
        .iter()
        .find(|(_, hit)| *hit == Hit::Step(k))
        .unwrap_or_else(|| panic!("step {k} is not drawn: {bars:?}"));
    h.hover_at(r.center());
    h.run_steps(2);
    assert_eq!(
        h.state().docs[0].timeline.hovered,
        Some(Hit::Step(k)),
        "hover on step {k}"
    );
}

#[test]
fn abutting_short_steps_are_each_drawn_and_hoverable() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("abutting.gst");
    // A vLLM-like decode: long forwards and short ones alternating, each step starting where
    // the last one ended. At fit the short ones are well under a pixel.
    let long: &[(&str, i64)] = &[("gemv_bf16_b1", 1000 * US)];
    let short: &[(&str, i64)] = &[("gemv_bf16_b1", 5 * US)];
    let steps: Vec<&[(&str, i64)]> = (0..20)
        .map(|k| if k % 2 == 0 { long } else { short })
        .collect();
    write_decode_steps(&p, &steps, 0, 0);
    let mut h = harness(std::slice::from_ref(&p), View::Timeline);
    let n = h.state().docs[0].loaded().unwrap().x.steps.len();
    assert_eq!(n, 20);
    let bars = step_bars(&h);
    for k in 0..n {
        assert!(
            bars.iter().any(|(_, hit)| *hit == Hit::Step(k)),
            "step {k} missing at fit: {bars:?}"
        );
    }
    for k in [1, 2, 4, 7] {
        hover_step(&mut h, k);
    }
    // One-step zoom on a short step: it fills the lane and is hoverable.
    let (a, b) = {
        let s = &h.state().docs[0].loaded().unwrap().x.steps[5];
        (s.start_ns, s.end_ns)
    };
    h.state_mut().docs[0].timeline.zoom_to_ns(a, b, 0.02);
    h.run_steps(2);
    hover_step(&mut h, 5);
    let bars = step_bars(&h);
    let (r, _) = bars.iter().find(|(_, x)| *x == Hit::Step(5)).unwrap();
    let lanes = h.state().docs[0].timeline.geometry.clone().unwrap().lanes;
    assert!(r.width() > lanes.width() * 0.9, "{r:?} in {lanes:?}");
}

#[test]
fn every_step_of_the_nvtx_recording_is_drawn_at_fit_and_at_step_4() {
    let trace = reference("cupti-qwen3next-small-npl1.gst");
    let mut h = harness(std::slice::from_ref(&trace), View::Timeline);
    let n = h.state().docs[0].loaded().unwrap().x.steps.len();
    assert!(n >= 10, "{n} steps");
    let bars = step_bars(&h);
    for k in 0..n {
        assert!(
            bars.iter().any(|(_, hit)| *hit == Hit::Step(k)),
            "step {k} missing at fit"
        );
    }
    for k in [2, 4, 6, 8] {
        hover_step(&mut h, k);
    }
    // `--step 4` is the report's step 4 (the CLI's "decode step 4"), zoomed to and drawn.
    let mut h = harness_with(Settings {
        traces: vec![trace],
        step: Some(4),
        ..Settings::default()
    });
    let l = h.state().docs[0].loaded().unwrap();
    let k = l.step_names.report_step(4).unwrap();
    assert_eq!(l.step_names.label(k), "step 4 · decode");
    let s = &l.x.steps[k];
    let (a, b) = (s.start_ns, s.end_ns);
    let (t0, t1) = visible(&h);
    assert!(
        t0 < a && b < t1 && (t1 - t0) < 2 * (b - a),
        "{t0}..{t1} vs {a}..{b}"
    );
    hover_step(&mut h, k);
}

/// The explorer names each step by the number the steps table (and so `export --tables`,
/// `--parquet` and the HTML page) gives it: `report_step`, null (-1) outside the report.
/// The engine trace's prefill is the run's step 0 and the report's steps start after it.
#[test]
fn the_explorers_step_numbers_are_the_tables_report_step() {
    let h = harness(&[reference("engine-llama3-8b-npl1.gst")], View::Steps);
    let l = h.state().docs[0].loaded().unwrap();
    let numbers = &l.x.tables.steps.report_step;
    assert_eq!(numbers[..2], [-1, 0]);
    for (k, &n) in numbers.iter().enumerate() {
        if n >= 0 {
            assert_eq!(l.step_names.ruler_label(k), format!("step {n}"), "step {k}");
            assert_eq!(l.step_names.report_step(n as usize), Some(k));
        } else {
            assert!(
                !l.step_names.ruler_label(k).starts_with("step "),
                "step {k}"
            );
        }
    }
}
