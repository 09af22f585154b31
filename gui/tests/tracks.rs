//! Tracks, search and flows on real traces (issue 36): a with_stack trace opens with its
//! GPU lanes and steps above the fold, the host groups collapse in one click and the layout
//! survives a reload; search finds a kernel by regex and walks its instances; the flow
//! arrow links a kernel to its launch on a Kineto trace and on a gapscope-record trace.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod common;

use common::*;
use egui_kittest::kittest::Queryable;
use gapscope_gui::settings::Settings;
use gapscope_gui::tracks::TrackKey;
use gapscope_gui::views::View;
use gapscope_gui::views::timeline::Hit;
use gapscope_gui::views::timeline_bar;

const STACK: &str = "hf-llama3.2-1b-npl8-stack-cudnn.json.gz";

#[test]
fn a_with_stack_trace_shows_gpu_and_steps_first_and_keeps_its_layout() {
    let dir = tempfile::tempdir().unwrap();
    let open = || {
        harness_with(Settings {
            traces: vec![reference(STACK)],
            layout_dir: Some(dir.path().to_path_buf()),
            ..Settings::default()
        })
    };
    let mut h = open();
    let g = h.state().docs[0].timeline.geometry.clone().unwrap();
    let band = |g: &gapscope_gui::views::timeline::Geometry, f: &dyn Fn(TrackKey) -> bool| {
        g.tracks.iter().find(|(k, _, _)| f(*k)).map(|t| t.1)
    };
    // Steps and every GPU lane drawn in the top fifth, above the host's rows.
    let steps = band(&g, &|k| k == TrackKey::Steps).unwrap();
    assert!(steps.top() < g.lanes.top() + 2.0, "{steps:?}");
    let gpu: Vec<_> = g
        .tracks
        .iter()
        .filter(|(k, _, _)| matches!(k, TrackKey::Gpu(..)))
        .collect();
    assert!(!gpu.is_empty());
    for (_, r, _) in &gpu {
        assert!(r.bottom() < g.lanes.top() + g.lanes.height() / 5.0, "{r:?}");
    }
    let host_rows = |g: &gapscope_gui::views::timeline::Geometry| {
        g.tracks
            .iter()
            .filter(|(k, _, _)| matches!(k, TrackKey::Thread(..)))
            .count()
    };
    assert!(host_rows(&g) > 0);
    // One click collapses every process's threads.
    h.get_by_label("collapse host").click();
    h.run_steps(3);
    let g = h.state().docs[0].timeline.geometry.clone().unwrap();
    assert_eq!(host_rows(&g), 0, "{:?}", g.tracks);
    assert!(shows(&h, "expand host"));
    // Reopened: the layout kept for this kind of trace comes back.
    drop(h);
    let h = open();
    let g = h.state().docs[0].timeline.geometry.clone().unwrap();
    assert_eq!(
        host_rows(&g),
        0,
        "the layout did not survive: {:?}",
        g.tracks
    );
    let kind = &h.state().docs[0].loaded().unwrap().layout_kind;
    assert!(kind.ends_with("-stack"), "{kind}");
}

#[test]
fn search_finds_a_kernel_by_regex_and_walks_its_instances() {
    let mut h = harness(&[reference("engine-llama3-8b-npl1.gst")], View::Timeline);
    let field = h.get_by_role(egui::accesskit::Role::TextInput);
    field.click();
    h.step();
    h.get_by_role(egui::accesskit::Role::TextInput)
        .type_text("^attn_dec");
    h.run_steps(3);
    let (total, n_attn) = {
        let l = h.state().docs[0].loaded().unwrap();
        let t = &l.x.trace;
        let id = t.strings.lookup("attn_decode_bf16").unwrap();
        let n = (0..t.kernels.len)
            .filter(|&i| t.kernels.name[i] == id)
            .count();
        let f = h.state().docs[0].timeline.search.found.clone().unwrap();
        (f.total, n)
    };
    assert!(n_attn > 2);
    assert_eq!(total, n_attn);
    let label = format!("{} matches", gapscope_analyzer::text::count(n_attn as u64));
    assert!(shows(&h, &label), "{label}");
    // Next walks the instances in time order, each selected and in view.
    let mut starts = Vec::new();
    for _ in 0..3 {
        h.get_by_label("next").click();
        h.run_steps(2);
        let st = &h.state().docs[0].timeline;
        let Some(Hit::Activity(a)) = st.selected.clone() else {
            panic!("a kernel selected: {:?}", st.selected)
        };
        let l = h.state().docs[0].loaded().unwrap();
        let d = l.x.detail(a).unwrap();
        assert_eq!(d.name, "attn_decode_bf16");
        let (t0, t1) = st.visible_ns().unwrap();
        assert!(t0 <= d.start_ns && d.start_ns < t1);
        starts.push(d.start_ns);
    }
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
    h.get_by_label("prev").click();
    h.run_steps(2);
    let st = &h.state().docs[0].timeline;
    let Some(Hit::Activity(a)) = st.selected.clone() else {
        panic!()
    };
    let l = h.state().docs[0].loaded().unwrap();
    assert_eq!(l.x.detail(a).unwrap().start_ns, starts[1]);
}

/// Selects the first kernel whose launch is known and checks its arrow is drawn and its
/// hover names the launching call.
fn flow_of_first_kernel(trace: &str) {
    let mut h = harness(&[reference(trace)], View::Timeline);
    let (a, start, end) = {
        let l = h.state().docs[0].loaded().unwrap();
        let lane = &l.x.lanes.gpu[0];
        let i = (0..lane.len())
            .find(|&i| gapscope_gui::views::flows::launch_of(l, lane.act[i]).is_some())
            .unwrap_or_else(|| panic!("{trace}: no kernel with a launch"));
        (lane.act[i], lane.spans.start_ns[i], lane.spans.end_ns[i])
    };
    {
        let st = &mut h.state_mut().docs[0].timeline;
        st.zoom_to_ns(start - 200_000, end + 200_000, 0.0);
        st.selected = Some(Hit::Activity(a));
    }
    h.run_steps(3);
    let g = h.state().docs[0].timeline.geometry.clone().unwrap();
    assert_eq!(g.flows, 1, "{trace}: the arrow from its launch");
    let l = h.state().docs[0].loaded().unwrap();
    let text = gapscope_gui::views::hover::describe(l, &Hit::Activity(a));
    assert!(text.contains("launched by "), "{trace}: {text}");
    // Jump to the launch, and back.
    h.get_by_label("jump to its launch").click();
    h.run_steps(2);
    assert!(matches!(
        h.state().docs[0].timeline.selected,
        Some(Hit::Launch(_))
    ));
    h.get_by_label("back to the kernel").click();
    h.run_steps(2);
    assert_eq!(h.state().docs[0].timeline.selected, Some(Hit::Activity(a)));
    let _ = timeline_bar::go;
}

#[test]
fn a_kernel_links_to_its_launch_on_a_kineto_trace() {
    flow_of_first_kernel(STACK);
}

#[test]
fn a_kernel_links_to_its_launch_on_a_gapscope_record_trace() {
    flow_of_first_kernel("cupti-qwen3next-small-npl1.gst");
}
