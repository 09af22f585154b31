//! The ranks view through egui_kittest: the real `App` opening the real TP=2 captures
//! (rank 1 stalls 20 ms on its host before each step, so rank 0 waits for it at one
//! all-reduce per step), real pointer events.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::{Path, PathBuf};

use egui::Pos2;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use gapscope_gui::App;
use gapscope_gui::settings::Settings;
use gapscope_gui::views::View;
use gapscope_gui::views::ranks::{RankHit, RanksDoc};

mod common;
use common::harness_with;

fn tp2(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces/reference/tp2")
        .join(name)
}

fn harness(traces: &[PathBuf]) -> Harness<'static, App> {
    harness_with(Settings {
        traces: traces.to_vec(),
        ..Settings::default()
    })
}

fn shows(h: &Harness<'static, App>, text: &str) -> bool {
    h.query_all_by_label_contains(text).next().is_some()
}

fn ranks<'a>(h: &'a Harness<'static, App>) -> &'a RanksDoc {
    h.state().ranks.as_ref().expect("opened as ranks")
}

#[test]
fn two_ranks_open_in_the_ranks_view_with_the_late_rank_marked_and_waits_on_hover() {
    let mut h = harness(&[tp2("host-rank1.json.gz"), tp2("host-rank0.json.gz")]);
    assert_eq!(h.state().view, View::Ranks, "the ranks view is chosen");
    // Each rank is a document of its own too, in rank order.
    assert_eq!(h.state().docs.len(), 2);
    assert!(h.state().docs.iter().all(|d| d.loaded().is_some()));
    assert!(h.state().docs[0].title().contains("rank0"));
    // The verdict, the late lane and the table's row.
    assert!(shows(&h, "rank 1 sets the step"));
    assert!(shows(&h, "1 (sets the step)"));
    let lanes = &ranks(&h).state.lanes;
    assert_eq!(lanes.len(), 2);
    assert_eq!(lanes[1].rank, 1);
    assert_eq!(lanes[1].label, "rank 1 — sets the step");
    assert_eq!(lanes[0].label, "rank 0");
    // Zoomed out, no links.
    assert_eq!(ranks(&h).state.links_drawn, 0);

    // Rank 0's longest wait: zoom to its step and hover its waiting part.
    let (item, start, wait, step) = {
        let rl = &ranks(&h).data.lanes;
        let c = &rl.lanes[0].collectives;
        let i = (0..c.row.len()).max_by_key(|&i| c.wait_ns[i]).unwrap();
        let s = &rl.lanes[0].steps.spans;
        let k = s
            .start_ns
            .partition_point(|&t| t <= c.row.spans.start_ns[i])
            - 1;
        (
            i,
            c.row.spans.start_ns[i],
            c.wait_ns[i],
            (s.start_ns[k], s.end_ns[k]),
        )
    };
    assert!(wait > 19_000_000, "rank 0 waits about 20 ms: {wait}");
    h.state_mut()
        .ranks
        .as_mut()
        .unwrap()
        .state
        .tl
        .zoom_to_ns(step.0, step.1, 0.02);
    h.run_steps(2);
    assert!(ranks(&h).state.links_drawn > 0, "one step: links drawn");
    let x = ranks(&h).state.x_of(start + wait / 2).unwrap();
    let y = ranks(&h).state.lanes[0].collectives.center().y;
    h.hover_at(Pos2::new(x, y));
    // Tooltips show after egui's hover delay.
    h.run_steps(60);
    assert_eq!(
        ranks(&h).state.hovered,
        Some(RankHit::Collective {
            lane: 0,
            items: item..item + 1
        })
    );
    let text = format!("wait {:.1} µs", wait as f64 / 1e3);
    assert!(shows(&h, &text), "the hover shows {text}");
    assert!(shows(&h, "arrived before rank 1"));
    assert!(shows(&h, "all_reduce"));
}

#[test]
fn a_directory_of_ranks_opens_as_one_run() {
    let dir = tempfile::tempdir().unwrap();
    for n in ["host-rank0.json.gz", "host-rank1.json.gz"] {
        std::fs::copy(tp2(n), dir.path().join(n)).unwrap();
    }
    let h = harness(&[dir.path().to_path_buf()]);
    assert_eq!(h.state().view, View::Ranks);
    assert_eq!(h.state().docs.len(), 2);
    assert_eq!(ranks(&h).data.lanes.late_lane(), Some(1));
}

#[test]
fn with_view_given_the_ranks_stay_documents_and_step_zooms_the_first_timeline() {
    let s = Settings {
        traces: vec![tp2("host-rank0.json.gz"), tp2("host-rank1.json.gz")],
        view: View::Timeline,
        view_given: true,
        step: Some(2),
        ..Settings::default()
    };
    let h = harness_with(s);
    assert_eq!(h.state().view, View::Timeline);
    assert!(
        h.state().ranks.is_some(),
        "the ranks view is there to choose"
    );
    let d = &h.state().docs[0];
    let step = &d.loaded().unwrap().x.steps[2];
    let (a, b) = d.timeline.visible_ns().unwrap();
    let pad = (step.end_ns - step.start_ns) / 20;
    assert!(
        (a - step.start_ns).abs() <= pad && (b - step.end_ns).abs() <= pad,
        "zoomed to step 2: {a}..{b} against {}..{}",
        step.start_ns,
        step.end_ns
    );
}
