//! State tests of the explorer through egui_kittest: the real `App`, real traces on disk
//! (hand-made ones with known answers, and a bundled reference trace), real input events.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::{Path, PathBuf};

use egui::{Key, Pos2, Vec2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use gapscope_analyzer::Bucket;
use gapscope_gui::App;
use gapscope_gui::doc::DocState;
use gapscope_gui::settings::Settings;
use gapscope_gui::views::View;

mod common;
use common::*;
use gapscope_tests::traces::write_decode_steps;

#[test]
fn zoom_changes_the_visible_range() {
    let mut h = harness(&[reference("engine-llama3-8b-npl1.gst")], View::Timeline);
    let (a0, a1) = visible(&h);
    // W zooms in (held for a few frames), around the middle when the pointer is away.
    h.key_down(Key::W);
    h.run_steps(10);
    h.key_up(Key::W);
    h.run_steps(1);
    let (b0, b1) = visible(&h);
    assert!(
        b1 - b0 < (a1 - a0) / 2,
        "W must zoom in: {a0}..{a1} -> {b0}..{b1}"
    );
    assert!(b0 > a0 && b1 < a1, "zoom in stays inside the old range");
    // Ctrl+wheel over the lanes zooms out around the pointer.
    let lanes = h.state().docs[0]
        .timeline
        .geometry
        .clone()
        .expect("drawn")
        .lanes;
    h.hover_at(lanes.center());
    h.event(egui::Event::Zoom(0.25));
    h.run_steps(2);
    let (c0, c1) = visible(&h);
    assert!(
        c1 - c0 > (b1 - b0) * 3,
        "zoom out: {b0}..{b1} -> {c0}..{c1}"
    );
    // F fits the whole trace again.
    h.key_press(Key::F);
    h.run_steps(2);
    assert_eq!(visible(&h), (a0, a1));
}

#[test]
fn a_box_selection_sums_time_by_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("box.gst");
    // One step: gemv [0, 100) us, attention [110, 160), norm [170, 200), relative to start.
    let w = write_decode_steps(
        &p,
        &[&[
            ("gemv_bf16_b1", 100 * US),
            ("attn_decode_bf16", 50 * US),
            ("rms_norm_f32", 30 * US),
        ]],
        10 * US,
        0,
    );
    let mut h = harness(std::slice::from_ref(&p), View::Timeline);
    let g = h.state().docs[0].timeline.geometry.clone().expect("drawn");
    let (_, row) = g.gpu_rows[0];
    let tl = &h.state().docs[0].timeline;
    let axis = tl.axis.clone().unwrap();
    let (u0, u1) = (tl.u0, tl.u1);
    let x_of = |t: i64| row.left() + ((axis.to_u(t) - u0) / (u1 - u0)) as f32 * row.width();
    let (from, to) = (w[0].0 + 50 * US, w[0].0 + 185 * US);
    h.drag_at(Pos2::new(x_of(from), row.center().y));
    h.step();
    h.hover_at(Pos2::new((x_of(from) + x_of(to)) / 2.0, row.center().y));
    h.step();
    h.drop_at(Pos2::new(x_of(to), row.center().y));
    h.run_steps(2);
    let sel = h.state().docs[0]
        .timeline
        .selection
        .clone()
        .expect("a box selection");
    let s = &sel.sums;
    // The box edges are wherever the pointer landed (sub-pixel); the sums follow exactly.
    let start = w[0].0;
    assert!(
        (s.t0_ns - from).abs() < US && (s.t1_ns - to).abs() < US,
        "{s:?}"
    );
    let ns = |b: Bucket| s.bucket_ns[b as usize];
    assert_eq!(ns(Bucket::Gemv), start + 100 * US - s.t0_ns);
    assert_eq!(ns(Bucket::Attention), 50 * US);
    assert_eq!(ns(Bucket::Norm), s.t1_ns - (start + 170 * US));
    assert_eq!(
        s.total_ns,
        ns(Bucket::Gemv) + ns(Bucket::Attention) + ns(Bucket::Norm)
    );
    assert_eq!(s.activities, 3);
    // The side panel shows it.
    assert!(shows(&h, "box selection"), "shown: {}", "box selection");
    assert!(shows(&h, "3 activities"), "shown: {}", "3 activities");
}

#[test]
fn the_filter_narrows_the_kernel_table() {
    let mut h = harness(&[reference("engine-llama3-8b-npl1.gst")], View::Kernels);
    assert!(
        shows(&h, "10 of 10 kernel and memop names"),
        "shown: {}",
        "10 of 10 kernel and memop names"
    );
    let field = h.get_by_role(egui::accesskit::Role::TextInput);
    field.click();
    h.step();
    h.get_by_role(egui::accesskit::Role::TextInput)
        .type_text("^get_rows");
    h.run_steps(3);
    assert!(
        shows(&h, "2 of 10 kernel and memop names"),
        "shown: {}",
        "2 of 10 kernel and memop names"
    );
    assert_eq!(h.state().kernels[0].filter, "^get_rows");
    // A bad regex says why, and shows nothing.
    h.get_by_role(egui::accesskit::Role::TextInput)
        .type_text("(");
    h.run_steps(3);
    assert!(shows(&h, "0 of 10"), "shown: {}", "0 of 10");
    assert!(h.state().kernels[0].regex_error.is_some());
}

#[test]
fn clicking_a_step_bar_zooms_the_timeline_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("steps.gst");
    let step: &[(&str, i64)] = &[("gemv_bf16_b1", 100 * US), ("attn_decode_bf16", 50 * US)];
    let w = write_decode_steps(&p, &[step, step, step, step, step], 10 * US, 40 * US);
    let mut h = harness(std::slice::from_ref(&p), View::Steps);
    let plot = h.state().steps_plot.expect("bars drawn");
    let k = 3;
    let x = plot.left() + (k as f32 + 0.5) * plot.width() / 5.0;
    assert!(shows(&h, "5 steps"));
    h.click_at(Pos2::new(x, plot.bottom() - 10.0));
    h.run_steps(3);
    assert_eq!(h.state().view, View::Timeline);
    let (t0, t1) = visible(&h);
    let (s0, s1) = w[k];
    let pad = (s1 - s0) / 50;
    assert!(
        (t0 - (s0 - pad)).abs() <= 2 && (t1 - (s1 + pad)).abs() <= 2,
        "{t0}..{t1} vs step {s0}..{s1}"
    );
}

trait ClickAt {
    fn click_at(&self, p: Pos2);
}

impl ClickAt for Harness<'static, App> {
    fn click_at(&self, p: Pos2) {
        self.hover_at(p);
        self.event(egui::Event::PointerButton {
            pos: p,
            button: egui::PointerButton::Primary,
            pressed: true,
            modifiers: egui::Modifiers::NONE,
        });
        self.event(egui::Event::PointerButton {
            pos: p,
            button: egui::PointerButton::Primary,
            pressed: false,
            modifiers: egui::Modifiers::NONE,
        });
    }
}

#[test]
fn a_corrupt_file_shows_its_error_and_nothing_crashes() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.json.gz");
    std::fs::write(&bad, b"\x1f\x8b\x08\x00garbage that is not deflate").unwrap();
    let good = reference("engine-llama3-8b-npl1.gst");
    let mut h = harness(&[bad.clone(), good], View::Timeline);
    let DocState::Failed(e) = &h.state().docs[0].state else {
        panic!("the corrupt file must fail")
    };
    assert!(!e.is_empty() && !e.contains('\n'), "one line: {e:?}");
    assert!(e.contains("broken.json.gz"), "names the file: {e}");
    let e = e.clone();
    assert!(
        h.state().docs[1].loaded().is_some(),
        "the good trace still loads"
    );
    // The failed document's error is shown when it is the active one.
    h.state_mut().active = 0;
    h.run_steps(2);
    assert!(
        shows(&h, &e[..e.len().min(40)]),
        "shown: {}",
        &e[..e.len().min(40)]
    );
    // A missing file too.
    h.state_mut().open(dir.path().join("nope.gst"));
    settle(&mut h);
    assert!(matches!(h.state().docs[2].state, DocState::Failed(_)));
}

#[test]
fn the_diff_view_shows_hand_computed_deltas() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.gst"), dir.path().join("b.gst"));
    // A: gemv 100 us + attention 50 us per step; B: gemv 60 us + the same attention. Both
    // have 10 us idle inside and 40 us between steps, so the whole gap is gemv's 40 us.
    let sa: &[(&str, i64)] = &[("gemv_bf16_b1", 100 * US), ("attn_decode_bf16", 50 * US)];
    let sb: &[(&str, i64)] = &[("gemv_bf16_b1", 60 * US), ("attn_decode_bf16", 50 * US)];
    write_decode_steps(&a, &[sa, sa, sa, sa, sa, sa], 10 * US, 40 * US);
    write_decode_steps(&b, &[sb, sb, sb, sb, sb, sb], 10 * US, 40 * US);
    let mut h = harness(&[a, b], View::Diff);
    h.run_steps(2);
    let app = h.state_mut();
    let (docs, diff) = (&app.docs, &mut app.diff);
    let r = diff
        .report(docs[0].loaded().unwrap(), docs[1].loaded().unwrap())
        .as_ref()
        .expect("diffable")
        .clone();
    let close = |x: f64, want: f64| (x - want).abs() < 1e-9;
    assert!(
        close(r.a.step_ms, 0.200) && close(r.b.step_ms, 0.160),
        "{} {}",
        r.a.step_ms,
        r.b.step_ms
    );
    assert!(close(r.gap_ms, 0.040), "{}", r.gap_ms);
    let delta = |bk: Bucket| {
        r.buckets
            .iter()
            .find(|d| d.bucket == bk)
            .map_or(0.0, |d| d.delta_ms)
    };
    assert!(close(delta(Bucket::Gemv), 0.040));
    assert!(close(delta(Bucket::Attention), 0.0));
    assert!(r.residual_ms.abs() < 1e-9, "{}", r.residual_ms);
    // The view's tables show them.
    assert!(
        shows(&h, "step time A 0.200 ms -> B 0.160 ms"),
        "shown: {}",
        "step time A 0.200 ms -> B 0.160 ms"
    );
    assert!(h.query_all_by_label("gemv").next().is_some());
    // The what-if: gemv taking B's time makes A 0.040 ms faster, a gain shown positive as
    // `gapscope diff` shows it (the explorer once negated it).
    let w = r.gaining();
    assert!(
        w.iter()
            .any(|w| w.lever == "gemv" && close(w.gain_as_b_ms, 0.040))
    );
    assert!(h.query_all_by_label("0.040 ms").next().is_some());
    assert!(h.query_all_by_label("-0.040").next().is_none());
}

#[test]
fn a_narrow_window_and_a_long_zoom_out_do_not_panic() {
    let s = Settings {
        traces: vec![reference("engine-llama3-8b-npl1.gst")],
        ..Settings::default()
    };
    let mut h = Harness::builder()
        .with_size(Vec2::new(120.0, 200.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), App::new(&s));
    settle(&mut h);
    // Zooming out stops at four times the trace.
    let (a0, a1) = visible(&h);
    for _ in 0..50 {
        h.state_mut().docs[0].timeline.zoom(0.1, 0.5);
    }
    h.run_steps(2);
    let (b0, b1) = visible(&h);
    assert!(b1 - b0 <= 4 * (a1 - a0) + 4, "{a0}..{a1} -> {b0}..{b1}");
}

#[test]
fn selecting_a_kernel_highlights_its_instances() {
    let mut h = harness(&[reference("engine-llama3-8b-npl1.gst")], View::Kernels);
    h.get_by_label("attn_decode_bf16").click();
    h.run_steps(2);
    let doc = &h.state().docs[0];
    let l = doc.loaded().unwrap();
    let id = l.x.trace.strings.lookup("attn_decode_bf16").unwrap();
    assert_eq!(doc.timeline.highlight, Some(id));
    // Clicking it again clears the highlight.
    h.get_by_label("attn_decode_bf16").click();
    h.run_steps(2);
    assert_eq!(h.state().docs[0].timeline.highlight, None);
}

#[test]
fn closing_a_tab_left_of_the_active_one_keeps_the_active_trace() {
    let dir = tempfile::tempdir().unwrap();
    let step: &[(&str, i64)] = &[("gemv_bf16_b1", 100 * US)];
    let paths: Vec<PathBuf> = (0..3)
        .map(|i| dir.path().join(format!("t{i}.gst")))
        .collect();
    for p in &paths {
        write_decode_steps(p, &[step, step], 10 * US, 10 * US);
    }
    let mut h = harness(&paths, View::Timeline);
    h.state_mut().active = 1;
    h.run_steps(1);
    // The first tab's close button.
    h.query_all_by_label("×")
        .next()
        .expect("close buttons")
        .click();
    h.run_steps(2);
    let app = h.state();
    assert_eq!(app.docs.len(), 2);
    assert_eq!(app.docs[app.active].path, paths[1]);
    assert_eq!(app.kernels.len(), 2);
}

/// Every view of a loaded run names every widget for assistive tools: kittest checks it
/// when `settle` lets the run finish. Two traces for the diff, a model for the roofline and
/// a recording with GPU telemetry, so no view falls back to its empty page.
#[test]
fn every_loaded_view_names_its_widgets() {
    for view in View::ALL {
        let h = harness_with(Settings {
            traces: vec![
                reference("cupti-qwen3next-small-npl1.gst"),
                reference("engine-llama3-8b-npl1.gst"),
            ],
            view,
            model: Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/llama-3-8b.json")),
            ..Settings::default()
        });
        assert!(
            h.state().docs.iter().all(|d| d.loaded().is_some()),
            "{view:?}"
        );
    }
}
