//! The hybrid levers on real engine traces (`traces/reference/engine-qwen3.5-4l-q8_0-npl8-levers/`:
//! `gapscope-engine bench --hybrid-sweep` on an H200, a Qwen3.5-9B-wide model cut to 4 layers
//! (3 gated DeltaNet, 1 full attention), Q8_0, npl 8, launch timing on one decode step in 4):
//! the what-if predicted from the all-slow trace against the traces measured with each lever
//! switched, the gate of the slow setting against the fast one, and the step figures of a
//! trace that keeps only sampled steps.

mod common;

use std::path::PathBuf;

use common::{group_by, open, open_with};
use gapscope_analyzer::Bucket;
use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::host::GroupBy;
use gapscope_analyzer::diff::whatif::{LeverSet, WhatIfError, WhatIfOutput, what_if};
use gapscope_analyzer::gate::{Policy, Verdict, gate};
use gapscope_tests::repo;

const DIR: &str = "traces/reference/engine-qwen3.5-4l-q8_0-npl8-levers";

fn trace(setting: &str) -> PathBuf {
    repo(&format!("{DIR}/{setting}-npl8.gst"))
}

/// A trace analysed as `diff --what-if` analyses its traces: with the op grouping.
fn by_op(setting: &str) -> Report {
    open_with(trace(setting), &group_by(GroupBy::Op)).report
}

/// The hybrid what-if of the slow trace, compared with the trace measured with each lever.
fn predicted_and_measured() -> WhatIfOutput {
    let measured: Vec<(String, Report)> = ["state_update", "state_read", "out_proj", "all"]
        .iter()
        .map(|l| (l.to_string(), by_op(l)))
        .collect();
    what_if(LeverSet::Hybrid, &by_op("slow"), &measured).expect("a what-if")
}

/// Each lever's predicted step within 3% of the one measured with it (the measured spread is
/// 0.2-0.4% CV; the predictions came within 0.6%), and each prediction made of the parts the
/// lever changes: 3 state copies, 3 state gathers, 24 per-row out_proj launches that become 3.
#[test]
fn predictions_match_the_measured_levers() {
    let w = predicted_and_measured();
    let p = &w.prediction;
    assert_eq!(p.batch_size, Some(8));
    let lever = |name: &str| {
        p.levers
            .iter()
            .find(|l| l.lever.to_string() == name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", p.levers))
    };
    assert_eq!(lever("state_update=inplace").launches_removed, 3.0);
    assert_eq!(lever("state_read=fused_ids").launches_removed, 3.0);
    let out = lever("out_proj=2d");
    assert_eq!(out.launches_removed, 21.0);
    assert!(out.added_ms > 0.0, "{out:?}");
    for l in &p.levers {
        assert!(l.removed_ms > 0.0, "{l:?}");
    }
    assert_eq!(w.measured.len(), 4);
    for m in &w.measured {
        let e = m.error_pct;
        assert!(
            e.abs() <= 3.0,
            "{}: predicted {} measured {} ({e:+.2}%)",
            m.lever,
            m.predicted_step_ms,
            m.measured_step_ms
        );
    }
    // The combined prediction is the slow step less every lever's saving.
    assert!(lever("all").predicted_step_ms < out.predicted_step_ms);
    // The out_proj basis names its twin.
    assert!(out.basis.contains("o_proj"), "{}", out.basis);
}

/// The slow setting against the fast one: the gate fails on the levers' buckets (the state
/// copies, the state gathers, and the per-row out_proj GEMVs) and on the structural copies and
/// gathers that appear in every step.
#[test]
fn the_gate_flags_the_levers_buckets_and_the_new_copies() {
    let (slow, all) = (open(trace("slow")).report, open(trace("all")).report);
    let g = gate(&all, &slow, &Policy::default());
    assert_eq!(g.verdict, Verdict::Regression, "{}", g.headline());
    let verdict = |b: Bucket| {
        g.buckets
            .iter()
            .find(|x| x.bucket == b)
            .map(|x| x.judgement.verdict)
    };
    for b in [Bucket::Copy, Bucket::EmbedGather, Bucket::Gemv] {
        assert_eq!(verdict(b), Some(Verdict::Regression), "{b}: {g:?}");
    }
    for check in ["new copies per step", "new gathers per step"] {
        let c = g
            .structural
            .iter()
            .find(|c| c.check == check)
            .unwrap_or_else(|| panic!("no {check}: {:?}", g.structural));
        assert!(c.failed, "{c:?}");
    }
    // The fast setting against itself passes.
    let g = gate(&all, &all, &Policy::default());
    assert_eq!(g.verdict, Verdict::Pass, "{}", g.headline());
}

/// The engine keeps launch timing for one decode step in 4: the kept steps are not
/// neighbours, so there is no TPOT (start-to-start would span 4 steps) and no idle between
/// steps; the step spans and the busy share of them stand.
#[test]
fn a_sampled_trace_reports_spans_not_periods() {
    let st = open(trace("slow")).report.steps;
    assert!(st.tpot_ms.is_none(), "{:?}", st.tpot_ms);
    assert_eq!(st.decode_span_ms.expect("decode spans").n, 12);
    assert_eq!(st.host_gap_ms_per_step, Some(0.0));
    let busy = st.decode_busy_pct.expect("busy share");
    assert!(busy > 70.0, "{busy}");
}

#[test]
fn what_if_errors_name_the_problem() {
    assert_eq!(LeverSet::parse("moe"), None);
    assert_eq!(LeverSet::parse("hybrid"), Some(LeverSet::Hybrid));
    let slow = by_op("slow");
    let measured = [("fused".to_owned(), by_op("all"))];
    match what_if(LeverSet::Hybrid, &slow, &measured) {
        Err(WhatIfError::UnknownLever { lever, known }) => {
            assert_eq!(lever, "fused");
            assert!(known.contains("state_update"), "{known}");
        }
        other => panic!("{other:?}"),
    }
    // A trace without the engine's op columns cannot be predicted from.
    let llama = open_with(
        repo("traces/reference/llamacpp-qwen3.5-9b-q4_0-npl1.gst"),
        &group_by(GroupBy::Op),
    )
    .report;
    match what_if(LeverSet::Hybrid, &llama, &[]) {
        Err(WhatIfError::Predict(why)) => assert!(why.contains("engine"), "{why}"),
        other => panic!("{other:?}"),
    }
}
