//! Verdicts a CI job can trust: the gate, the diff and the report on broken, incomparable and
//! implausible inputs made from the bundled real traces (the audit's reproductions). The
//! command line's side of them (exit codes, refusals on one line, the text) is checked in
//! `cli/tests/e2e.rs`.

mod common;

use std::path::{Path, PathBuf};

use common::{no_markers, open, open_with};
use gapscope_analyzer::Bucket;
use gapscope_analyzer::analysis::steps::StepSource;
use gapscope_analyzer::analysis::{PlausibilityCheck, Report};
use gapscope_analyzer::diff::{
    DEFAULT_LIST, DiffReport, LeverKind, Refusal, SideName, diff, refusal,
};
use gapscope_analyzer::gate::{
    GateOptions, GateReport, GateSide, Incomparability, Policy, StepCut, StepMetric,
    StructuralCheck, Verdict, gate_with,
};
use gapscope_analyzer::join::{DEFAULT_MIN_MATCH, JoinSettings, join_engine_metadata};
use gapscope_analyzer::session::Knobs;
use gapscope_tests::repo;
use gapscope_tests::traces::{kernels_kept, save, short_markers, stretched};
use gapscope_traces::Trace;

const HF_1B: &str = "traces/reference/hf-llama3.2-1b-npl8.json.gz";
const HF_QWEN: &str = "traces/reference/hf-qwen3-0.6b-npl1.json.gz";
const CPU_ONLY: &str = "traces/reference/hf-llama3.2-1b-cpuonly.json.gz";
const ENGINE_8B: &str = "traces/reference/engine-llama3-8b-npl1.gst";
const HF_8B: &str = "traces/reference/hf-llama3-8b-npl1.json.gz";

/// The 1B HF trace as a native trace in `dir`, loaded.
fn hf_1b(dir: &Path) -> (PathBuf, Trace) {
    let out = dir.join("1b.gst");
    let t = common::convert(&repo(HF_1B), &out);
    (out, t)
}

/// The gate of `cur` against `base`, both opened with `knobs`, as `gate --baseline BASE
/// --current CUR` judges them (with `--allow-incomparable` when `allow`).
fn gate_of(base: &Path, cur: &Path, knobs: &Knobs, allow: bool) -> GateReport {
    let (b, c) = (open_with(base, knobs).report, open_with(cur, knobs).report);
    gate_with(
        &b,
        &c,
        &Policy::default(),
        GateOptions {
            allow_incomparable: allow,
        },
    )
}

fn gate(base: &Path, cur: &Path) -> GateReport {
    gate_of(base, cur, &Knobs::default(), false)
}

/// What `gate --allow-incomparable` compared despite.
fn overridden(base: &Path, cur: &Path) -> Vec<Incomparability> {
    let g = gate_of(base, cur, &Knobs::default(), true);
    assert_ne!(g.verdict, Verdict::Incomparable, "{}", g.headline());
    g.overridden
}

/// The structural check named `check`.
fn structural<'a>(g: &'a GateReport, check: &str) -> &'a StructuralCheck {
    g.structural
        .iter()
        .find(|c| c.check == check)
        .unwrap_or_else(|| panic!("no {check}: {:?}", g.structural))
}

#[test]
fn gate_fails_runs_without_gpu_work_steps_or_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    // B1: the current run has no GPU work.
    let g = gate(&repo(HF_QWEN), &repo(CPU_ONLY));
    assert_eq!(g.verdict, Verdict::Regression, "{}", g.headline());
    let lost = structural(&g, "GPU work and steps");
    assert!(lost.failed, "{lost:?}");
    assert!(
        lost.detail.starts_with("the current trace has no GPU work"),
        "{lost:?}"
    );
    assert!(
        g.headline()
            .starts_with("regression: GPU work and steps: the current trace has no GPU work"),
        "{}",
        g.headline()
    );
    // A baseline without GPU work cannot be compared.
    let g = gate(&repo(CPU_ONLY), &repo(CPU_ONLY));
    assert_eq!(g.verdict, Verdict::Incomparable);
    assert_eq!(g.incomparable, [Incomparability::NoBaselineGpuWork]);
    assert!(
        g.headline()
            .starts_with("cannot compare: the baseline has no GPU work"),
        "{}",
        g.headline()
    );
    // Steps lost: five kernels and no markers leave nothing to find steps in.
    let mut few = kernels_kept(&t, |i, _| i < 5);
    few.markers = Default::default();
    let few = save(dir.path(), "few.gst", &few);
    let g = gate(&b1, &few);
    assert_eq!(g.verdict, Verdict::Regression, "{}", g.headline());
    let lost = structural(&g, "GPU work and steps");
    assert!(
        lost.failed
            && lost
                .detail
                .starts_with("the current trace has no decode steps"),
        "{lost:?}"
    );
    // Far fewer kernels per step than the baseline: keep one kernel in three.
    let thin = save(dir.path(), "thin.gst", &kernels_kept(&t, |i, _| i % 3 == 0));
    let g = gate(&b1, &thin);
    assert_eq!(g.verdict, Verdict::Regression, "{}", g.headline());
    let kernels = structural(&g, "kernels per step");
    assert!(kernels.failed, "{kernels:?}");
    assert!(kernels.detail.contains("fewer than 50%"), "{kernels:?}");
    // B14: a bucket gone from the current trace is named so, not "no steps on one side".
    let no_argmax = save(
        dir.path(),
        "no-sampling.gst",
        &kernels_kept(&t, |_, n| !n.contains("ArgMax") && !n.contains("argmax")),
    );
    let g = gate(&b1, &no_argmax);
    let sampling = g
        .buckets
        .iter()
        .find(|b| b.bucket == Bucket::Sampling)
        .expect("a sampling verdict");
    assert!(
        sampling
            .judgement
            .reason
            .starts_with("absent from the current trace"),
        "{sampling:?}"
    );
}

#[test]
fn gate_catches_step_time_regressions_with_the_same_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    for (factor, name) in [(1.5, "x1.5.gst"), (1.1, "x1.1.gst")] {
        let cur = save(dir.path(), name, &stretched(&t, factor));
        let g = gate(&b1, &cur);
        assert_eq!(g.verdict, Verdict::Regression, "{factor}: {}", g.headline());
        let tpot = g
            .steps
            .iter()
            .find(|s| s.metric == StepMetric::Tpot)
            .unwrap_or_else(|| panic!("{factor}: no TPOT verdict"));
        assert_eq!(tpot.judgement.verdict, Verdict::Regression, "{factor}");
        assert!(
            g.headline().contains("regression: TPOT median +"),
            "{}",
            g.headline()
        );
    }
    // The same trace against itself still passes, step metrics included.
    let g = gate(&b1, &b1);
    assert_eq!(g.verdict, Verdict::Pass, "{}", g.headline());
    assert!(
        g.steps.iter().any(|s| s.metric == StepMetric::LaunchGaps),
        "{:?}",
        g.steps
    );
}

#[test]
fn gate_refuses_incomparable_traces_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let mut other = t.clone();
    other.manifest.gpus[0].name = "NVIDIA H100 80GB HBM3".into();
    let other = save(dir.path(), "h100.gst", &other);
    let gpu = Incomparability::GpuDiffers {
        baseline: "NVIDIA H200".into(),
        current: "NVIDIA H100 80GB HBM3".into(),
    };
    let g = gate(&b1, &other);
    assert_eq!(g.verdict, Verdict::Incomparable);
    assert_eq!(g.incomparable, std::slice::from_ref(&gpu));
    assert_eq!(
        gpu.to_string(),
        "GPU differs (baseline NVIDIA H200, current NVIDIA H100 80GB HBM3)"
    );
    let g = gate_of(&b1, &other, &Knobs::default(), true);
    assert_eq!(g.verdict, Verdict::Pass, "{}", g.headline());
    assert_eq!(g.overridden, [gpu]);
    // Batch sizes differ where the markers say.
    let mut b2 = t.clone();
    b2.markers.batch_size.iter_mut().for_each(|b| *b = 2);
    let mut b8 = t.clone();
    b8.markers.batch_size.iter_mut().for_each(|b| *b = 8);
    let (b2, b8) = (
        save(dir.path(), "b2.gst", &b2),
        save(dir.path(), "b8.gst", &b8),
    );
    assert_eq!(gate(&b8, &b2).verdict, Verdict::Incomparable);
    assert_eq!(
        overridden(&b8, &b2),
        [Incomparability::BatchDiffers {
            baseline: 8,
            current: 2
        }]
    );
    // Steps cut by markers against steps found automatically.
    let g = gate_of(&b1, &b1, &no_markers(), false);
    assert_eq!(g.verdict, Verdict::Pass, "{}", g.headline());
    let mut unmarked = t.clone();
    unmarked.markers = Default::default();
    let unmarked = save(dir.path(), "unmarked.gst", &unmarked);
    assert_eq!(gate(&b1, &unmarked).verdict, Verdict::Incomparable);
    let cut = overridden(&b1, &unmarked);
    let [Incomparability::StepsCutDifferently { baseline, current }] = &cut[..] else {
        panic!("{cut:?}");
    };
    assert!(
        matches!(
            baseline,
            StepCut::By {
                source: StepSource::Markers { .. }
            }
        ),
        "{baseline:?}"
    );
    assert_eq!(*current, StepCut::Automatic);
}

#[test]
fn implausible_steps_are_flagged_by_report_and_refused_by_gate_and_diff() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let bad = save(dir.path(), "short-markers.gst", &short_markers(&t));
    let r = open(&bad).report;
    let p = &r.plausibility;
    assert!(!p.plausible, "{p:?}");
    assert!(
        p.problems
            .iter()
            .any(|x| x.check == PlausibilityCheck::Coverage),
        "{p:?}"
    );
    // The real traces are plausible.
    for t in [HF_1B, HF_QWEN, HF_8B, ENGINE_8B] {
        let p = open(repo(t)).report.plausibility;
        assert!(p.plausible, "{t}: {p:?}");
    }
    let g = gate(&b1, &bad);
    assert_eq!(g.verdict, Verdict::Incomparable);
    assert!(
        g.headline()
            .contains("the current's steps look implausible"),
        "{}",
        g.headline()
    );
    let why = overridden(&b1, &bad);
    let [Incomparability::Implausible { side, problems }] = &why[..] else {
        panic!("{why:?}");
    };
    assert_eq!(*side, GateSide::Current);
    assert_eq!(problems[0].check, PlausibilityCheck::Coverage, "{why:?}");
    // The diff refuses it too, unless told.
    let b = open(&b1).report;
    let refused = refusal(&r, &b, false);
    assert!(
        matches!(
            &refused[..],
            [Refusal::Implausible {
                side: SideName::A,
                ..
            }]
        ),
        "{refused:?}"
    );
    assert!(
        refused[0].to_string().contains("steps look implausible"),
        "{}",
        refused[0]
    );
    assert_eq!(refusal(&r, &b, true), []);
}

/// The diff of A against B as `gapscope diff A B` makes it, listing `list` names.
fn diff_of(a: &Path, b: &Path, list: usize) -> DiffReport {
    let (a, b) = (open(a), open(b));
    diff(a.diff_side(), b.diff_side(), list)
}

#[test]
fn diff_refuses_a_side_without_steps_and_levers_follow_the_grouping() {
    // B5: a side without decode steps.
    let (cpu, qwen) = (open(repo(CPU_ONLY)).report, open(repo(HF_QWEN)).report);
    let refused = refusal(&cpu, &qwen, false);
    assert!(
        matches!(
            &refused[..],
            [Refusal::NoDecodeSteps {
                side: SideName::A,
                ..
            }]
        ),
        "{refused:?}"
    );
    assert!(
        refused[0].to_string().contains("has no decode steps"),
        "{}",
        refused[0]
    );
    // B4: the engine files its linear layers under gemv, HF under gemm_dense. No what-if
    // may rank a single bucket of a group the two sides file differently.
    for (a, b) in [(ENGINE_8B, HF_8B), (HF_8B, ENGINE_8B)] {
        let d = diff_of(&repo(a), &repo(b), DEFAULT_LIST);
        let grouped: Vec<&[Bucket]> = d
            .groups
            .iter()
            .filter(|g| g.grouped)
            .map(|g| g.buckets.as_slice())
            .collect();
        assert!(
            grouped.iter().any(|g| g.contains(&Bucket::Gemv)),
            "linear layers not grouped: {:?}",
            d.groups
        );
        for w in &d.what_if {
            if w.kind == LeverKind::Bucket {
                let bk = w.bucket.expect("a bucket lever's bucket");
                assert!(
                    !grouped.iter().any(|g| g.contains(&bk)),
                    "lever {bk} splits a grouped bucket: {w:?}"
                );
            }
        }
        // Every lever's gain is what the groups and buckets support.
        let linear = d
            .groups
            .iter()
            .find(|g| g.group == "linear layers")
            .expect("the linear layers group");
        let lw = d
            .what_if
            .iter()
            .find(|w| w.lever == "linear layers")
            .expect("the linear layers lever");
        assert_eq!(lw.kind, LeverKind::Group);
        assert_eq!(lw.gain_as_b_ms, linear.delta_ms);
        assert!(linear.delta_ms.abs() < 1.0, "{linear:?}");
    }
    // HF against the engine: the lever is the idle time, not a kernel bucket.
    let d = diff_of(&repo(HF_8B), &repo(ENGINE_8B), DEFAULT_LIST);
    let first = d.gaining()[0];
    assert_eq!(first.kind, LeverKind::LaunchGaps, "{first:?}");
    // The groups' totals that the text prints.
    let linear = d
        .groups
        .iter()
        .find(|g| g.group == "linear layers")
        .expect("the linear layers group");
    assert_eq!(
        linear.buckets,
        [Bucket::Gemv, Bucket::GemmQuant, Bucket::GemmDense]
    );
}

#[test]
fn diff_of_a_trace_with_itself_has_no_shares_and_no_levers() {
    let a = repo(HF_QWEN);
    let d = diff_of(&a, &a, DEFAULT_LIST);
    assert!(!d.gap_is_meaningful);
    assert!(d.residual_share_pct.is_none());
    assert!(
        d.buckets.iter().all(|b| b.share_of_gap_pct.is_none()),
        "{:?}",
        d.buckets
    );
    assert!(d.gaining().is_empty(), "{:?}", d.gaining());
}

#[test]
fn diff_list_shows_every_name_it_was_asked_for() {
    // B12: a list of 20 holds all 7 names only in A.
    let (a, b) = (repo(ENGINE_8B), repo(HF_8B));
    let st = diff_of(&a, &b, 20).structural;
    assert_eq!(st.only_in_a_total, 7);
    assert_eq!(st.only_in_a.len(), 7, "{:?}", st.only_in_a);
    for n in ["argmax_f32", "get_rows_bf16", "gemv_bf16_b1"] {
        assert!(
            st.only_in_a.iter().any(|(k, _)| k.contains(n)),
            "{n} missing: {:?}",
            st.only_in_a
        );
    }
    // A list of 3 leaves 4 to count.
    let st = diff_of(&a, &b, 3).structural;
    assert_eq!((st.only_in_a.len(), st.only_in_a_total), (3, 7));
}

#[test]
fn report_names_the_file_given_and_says_what_it_was_converted_from() {
    // B8.
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let copy = save(dir.path(), "other-name.gst", &t);
    for p in [&b1, &copy] {
        let s = open(p).report.source;
        assert_eq!(s.path, p.display().to_string());
        let from = s.converted_from.expect("converted from");
        assert!(from.ends_with("hf-llama3.2-1b-npl8.json.gz"), "{from}");
    }
    let d = diff_of(&b1, &copy, DEFAULT_LIST);
    assert_eq!(d.a.path, b1.display().to_string());
    assert_eq!(d.b.path, copy.display().to_string());
}

#[test]
fn report_figures_for_one_step_and_for_graph_kernels_without_launches() {
    // B26: one decode step has no TPOT.
    let r = open(repo("analyzer/tests/data/nsys/nsys-2025.3.sqlite")).report;
    assert_eq!(r.steps.decode_steps, 1, "{}", r.steps.source);
    assert!(r.steps.tpot_ms.is_none());
    // B24: graph kernels in a trace without launch records.
    let s = open(repo(ENGINE_8B)).report.source;
    assert_eq!((s.launches, s.markers), (0, 33));
    assert_eq!(s.graph_kernels, 8320);
    assert_eq!(s.graph_launches, 0);
}

#[test]
fn join_refuses_a_recording_of_another_run() {
    // B3: the engine trace against an HF recording of another run matched 1.5% of the
    // engine's launches and was written.
    let engine = common::import_all_columns(&repo(ENGINE_8B));
    let hf = common::import_all_columns(&repo(HF_8B));
    let rep = join_engine_metadata(&engine, &mut hf.clone(), JoinSettings::default());
    let why = rep.check(DEFAULT_MIN_MATCH).unwrap_err();
    assert!(
        why.contains("of 8613 engine launches (1.5%) matched a recorded kernel"),
        "{why}"
    );
    assert_eq!(rep.check(0.01), Ok(()));
    // A huge skip is bounded by the recording, not by its value.
    let t = std::time::Instant::now();
    let huge = JoinSettings {
        max_skip: usize::MAX,
        ..JoinSettings::default()
    };
    let rep = join_engine_metadata(&engine, &mut hf.clone(), huge);
    assert!(rep.check(DEFAULT_MIN_MATCH).is_err(), "{rep}");
    assert!(t.elapsed().as_secs() < 60, "{:?}", t.elapsed());
}

#[test]
fn distorted_recordings_are_warned_about_in_report_and_gate() {
    // The audit's case: 5.2 s of CUPTI "command buffer full" overhead in a 14 s recording
    // sat among the notes. Here a third of the 1.8 s span.
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let mut rec = t.clone();
    rec.manifest
        .capture_overhead_ns
        .insert("command buffer full".into(), 600_000_000);
    let rec = save(dir.path(), "distorted.gst", &rec);
    let r = open(&rec).report;
    let d = r.distortion.as_ref().expect("a distortion");
    assert!(d.share_pct > 30.0, "{d:?}");
    let warning = r
        .warnings
        .iter()
        .find(|w| w.starts_with("timings are distorted"))
        .unwrap_or_else(|| panic!("{:?}", r.warnings));
    assert!(
        warning.contains("command buffer full 600.0 ms"),
        "{warning}"
    );
    let g = gate(&b1, &rec);
    assert_eq!(g.verdict, Verdict::Pass, "{}", g.headline());
    assert!(
        g.warnings
            .iter()
            .any(|w| w.starts_with("current: timings are distorted")),
        "{:?}",
        g.warnings
    );
    // The undistorted trace carries no such warning.
    let r: Report = open(&b1).report;
    assert!(r.distortion.is_none());
    assert!(!r.warnings.iter().any(|w| w.contains("distorted")));
}
