//! Several ranks of one run: real TP=2 decode captures with a planted straggler (the truth
//! from the capture script's own clocks and CUDA events, not from gapscope), and synthetic
//! ranks whose waits are known by construction.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod common;

use std::path::{Path, PathBuf};

use gapscope_analyzer::Bucket;
use gapscope_analyzer::analysis::ranks::{
    LateBy, RanksAnalysis, RanksNote, RanksVerdict, Refusal, analyze_ranks,
};
use gapscope_analyzer::import::NoProgress;
use gapscope_analyzer::session::ranks::{RankMode, open_set};
use gapscope_analyzer::session::{AnalyzedRun, Knobs, RankSource, Run, open_bytes};
use serde_json::Value;

fn tp2(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces/reference/tp2")
        .join(name)
}

fn truth(mode: &str) -> Value {
    let p = tp2(&format!("truth-{mode}.json"));
    serde_json::from_str(&std::fs::read_to_string(&p).expect("truth file")).unwrap()
}

/// The planted stall of each step, ms, from the late rank's own records.
fn planted_ms(t: &Value, key: &str, scale: f64) -> Vec<f64> {
    let late = t["late_rank"].as_u64().unwrap() as usize;
    t["ranks"][late]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s[key].as_f64().unwrap() * scale)
        .collect()
}

fn open_pair(mode: &str) -> (Vec<AnalyzedRun>, RanksAnalysis) {
    let paths = [
        tp2(&format!("{mode}-rank0.json.gz")),
        tp2(&format!("{mode}-rank1.json.gz")),
    ];
    // Given in reverse: the ranks come from the traces, not the order.
    let set = open_set(
        &[paths[1].clone(), paths[0].clone()],
        RankMode::Auto,
        2,
        &common::settings(&Knobs::default()),
        &NoProgress,
    )
    .unwrap();
    assert!(set.as_ranks, "two traces naming ranks 0 and 1 are one run");
    let ranks: Vec<(u32, RankSource)> = set
        .runs
        .iter()
        .map(|r| (r.run.rank, r.run.rank_source))
        .collect();
    assert_eq!(
        ranks,
        [(0, RankSource::Distributed), (1, RankSource::Distributed)]
    );
    let refs: Vec<&AnalyzedRun> = set.runs.iter().collect();
    let a = analyze_ranks(&refs);
    (set.runs, a)
}

/// Per aligned step, the longest wait of `rank` at one collective, ms (from the table).
fn longest_waits(a: &RanksAnalysis, rank: u32) -> Vec<f64> {
    let c = &a.tables.collectives;
    let mut out = vec![0.0f64; a.report.aligned_steps as usize];
    for i in 0..c.len {
        if c.rank[i] == rank {
            let s = c.step[i] as usize;
            out[s] = out[s].max(c.wait_ns[i] as f64 / 1e6);
        }
    }
    out
}

/// The median over steps of |measured − truth| / truth.
fn median_rel_err(measured: &[f64], truth: &[f64]) -> f64 {
    assert_eq!(measured.len(), truth.len());
    let mut e: Vec<f64> = measured
        .iter()
        .zip(truth)
        .map(|(m, t)| (m - t).abs() / t)
        .collect();
    e.sort_by(f64::total_cmp);
    e[e.len() / 2]
}

fn common_checks(a: &RanksAnalysis, t: &Value) {
    let r = &a.report;
    assert_eq!(r.world_size, Some(2));
    assert_eq!(r.aligned_steps, 10);
    // `decode_step_N` on both ranks: paired by N.
    assert_eq!(
        r.pairing,
        gapscope_analyzer::analysis::ranks::StepPairing::Numbers
    );
    // 16 layers, an all-reduce after attention and after the MLP: an independent count.
    let per_step = t["collectives_per_step"].as_u64().unwrap() as u32;
    assert_eq!(r.matched_collectives, 10 * per_step);
    assert!(
        r.notes
            .iter()
            .all(|n| !matches!(n, RanksNote::Unmatched { .. }))
    );
    // One host, one clock: completions agree to well under a microsecond.
    assert!(
        r.clocks.iter().all(|c| c.shared && c.residual_ns < 1_000),
        "{:?}",
        r.clocks
    );
}

#[test]
fn tp2_planted_host_stall_names_the_rank_the_wait_and_the_scope() {
    let t = truth("host");
    let (_, a) = open_pair("host");
    common_checks(&a, &t);
    let RanksVerdict::Straggler(s) = &a.report.verdict else {
        panic!("{:?}", a.report.verdict)
    };
    assert_eq!(s.rank, 1);
    assert!(s.late_share > 0.8, "{}", s.late_share);
    let LateBy::Host {
        scope,
        scope_only_here,
        ..
    } = &s.late_by
    else {
        panic!("{:?}", s.late_by)
    };
    assert_eq!(scope.as_deref(), Some("planted_host_stall"));
    assert!(scope_only_here);
    // Rank 0's wait at the stalled collective, step by step, against the sleep rank 1
    // measured around itself.
    let planted = planted_ms(&t, "planted_host_ns", 1e-6);
    let err = median_rel_err(&longest_waits(&a, 0), &planted);
    eprintln!(
        "median per-step error of the longest wait: {:.2}%",
        100.0 * err
    );
    assert!(err < 0.10, "median error {err}");
    // The late rank waits for nobody.
    assert!(a.report.per_rank[1].wait_ms < 0.05 * a.report.per_rank[0].wait_ms);
}

#[test]
fn tp2_planted_gpu_stall_names_the_rank_the_wait_and_the_kernel() {
    let t = truth("kernel");
    let (_, a) = open_pair("kernel");
    common_checks(&a, &t);
    let RanksVerdict::Straggler(s) = &a.report.verdict else {
        panic!("{:?}", a.report.verdict)
    };
    assert_eq!(s.rank, 1);
    let LateBy::Gpu {
        kernel,
        kernel_only_here,
        kernel_ms_per_step,
        ..
    } = &s.late_by
    else {
        panic!("{:?}", s.late_by)
    };
    assert!(kernel.contains("spin_kernel"), "{kernel}");
    assert!(kernel_only_here);
    let planted = planted_ms(&t, "planted_gpu_ms", 1.0);
    let mut p = planted.clone();
    p.sort_by(f64::total_cmp);
    assert!((kernel_ms_per_step - p[p.len() / 2]).abs() < 0.1 * p[p.len() / 2]);
    let err = median_rel_err(&longest_waits(&a, 0), &planted);
    eprintln!(
        "median per-step error of the longest wait: {:.2}%",
        100.0 * err
    );
    assert!(err < 0.10, "median error {err}");
}

#[test]
fn tp2_each_rank_alone_is_not_a_run() {
    // One trace: no ranks section; the same trace twice names rank 0 twice: one by one.
    let p = tp2("host-rank0.json.gz");
    let set = open_set(
        &[p.clone(), p],
        RankMode::Auto,
        2,
        &common::settings(&Knobs::default()),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(set.runs.len(), 1, "a path named twice is opened once");
    assert!(!set.as_ranks);
}

// ---- synthetic ranks ----

/// A Kineto trace of one rank: three steps, each a compute kernel, (rank 1 only) an 80 µs
/// `spin` kernel, an all-reduce, a compute kernel and a second all-reduce. Times in µs,
/// moved by `shift_us` (another host's clock).
fn synthetic(rank: u32, shift_us: f64) -> Vec<u8> {
    synthetic_spin(rank, shift_us, 80.0)
}

/// As [`synthetic`], rank 1's spin lasting `spin_us` (0: none).
fn synthetic_spin(rank: u32, shift_us: f64, spin_us: f64) -> Vec<u8> {
    let mut ev = Vec::new();
    let mut corr = 1;
    let mut k = |name: &str, a: f64, b: f64, ev: &mut Vec<String>| {
        ev.push(format!(
            r#"{{"ph":"X","cat":"kernel","name":"{name}","pid":0,"tid":7,"ts":{},"dur":{},"args":{{"device":{rank},"stream":7,"correlation":{corr}}}}}"#,
            a + shift_us,
            b - a
        ));
        corr += 1;
    };
    for i in 0..3 {
        let base = 1000.0 * i as f64;
        ev.push(format!(
            r#"{{"ph":"X","cat":"gpu_user_annotation","name":"decode_step_{i}","pid":0,"tid":7,"ts":{},"dur":300,"args":{{"device":{rank}}}}}"#,
            base + shift_us
        ));
        k("gemvx_kernel", base, base + 50.0, &mut ev);
        let (a1, a2) = if rank == 1 && spin_us > 0.0 {
            k("spin", base + 50.0, base + 50.0 + spin_us, &mut ev);
            (60.0 + spin_us, 215.0)
        } else {
            (60.0, 210.0)
        };
        let ar = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
        k(ar, base + a1, base + 160.0, &mut ev);
        k("gemvx_kernel", base + 170.0, base + 200.0, &mut ev);
        k(ar, base + a2, base + 250.0, &mut ev);
    }
    format!(
        r#"{{"distributedInfo":{{"backend":"nccl","rank":{rank},"world_size":2}},"traceEvents":[{}]}}"#,
        ev.join(",")
    )
    .into_bytes()
}

fn open_synthetic(shift_us: f64) -> RanksAnalysis {
    open_synthetic_spin(shift_us, 80.0)
}

fn open_synthetic_spin(shift_us: f64, spin_us: f64) -> RanksAnalysis {
    let runs: Vec<AnalyzedRun> = (0..2)
        .map(|r| {
            let run = Run {
                rank: r,
                rank_source: RankSource::Distributed,
                ..Run::new(format!("rank{r}.json"))
            };
            let bytes = synthetic_spin(r, if r == 1 { shift_us } else { 0.0 }, spin_us);
            open_bytes(
                run,
                &bytes,
                &common::settings(&Knobs::default()),
                &NoProgress,
            )
            .unwrap()
        })
        .collect();
    let refs: Vec<&AnalyzedRun> = runs.iter().collect();
    analyze_ranks(&refs)
}

#[test]
fn synthetic_waits_and_transfers_are_exact() {
    let a = open_synthetic(0.0);
    let r = &a.report;
    assert_eq!((r.aligned_steps, r.matched_collectives), (3, 6));
    let p0 = &r.per_rank[0];
    let p1 = &r.per_rank[1];
    // Rank 0 waits 80 µs at the first all-reduce and 5 µs at the second.
    assert!((p0.wait_ms - 0.085).abs() < 1e-9, "{}", p0.wait_ms);
    assert!((p0.longest_wait_ms - 0.080).abs() < 1e-9);
    assert!((p0.transfer_ms - 0.055).abs() < 1e-9, "{}", p0.transfer_ms);
    assert_eq!(p1.wait_ms, 0.0);
    assert!((p1.transfer_ms - 0.055).abs() < 1e-9);
    assert_eq!(p1.late_share, 1.0);
    // Compute: the step's busy time outside communication.
    assert!((p0.compute_ms - 0.080).abs() < 1e-9, "{}", p0.compute_ms);
    assert!((p1.compute_ms - 0.160).abs() < 1e-9, "{}", p1.compute_ms);
    let RanksVerdict::Straggler(s) = &r.verdict else {
        panic!("{:?}", r.verdict)
    };
    assert_eq!(s.rank, 1);
    let LateBy::Gpu {
        kernel,
        bucket,
        kernel_ms_per_step,
        kernel_only_here,
        ..
    } = &s.late_by
    else {
        panic!("{:?}", s.late_by)
    };
    assert_eq!((kernel.as_str(), *bucket), ("spin", Bucket::Other));
    assert!((kernel_ms_per_step - 0.080).abs() < 1e-9);
    assert!(kernel_only_here);
    // The tables carry the same figures, one row per collective and rank.
    assert_eq!(a.tables.collectives.len, 12);
    assert_eq!(a.tables.steps.len, 6);
    let waits: i64 = a.tables.collectives.wait_ns.iter().sum();
    assert_eq!(waits, 3 * 85_000);
}

#[test]
fn synthetic_ranks_on_other_clocks_are_aligned_on_completions() {
    let a = open_synthetic(1_000_000.0);
    let r = &a.report;
    let moved: Vec<&RanksNote> = r
        .notes
        .iter()
        .filter(|n| matches!(n, RanksNote::ClockMoved { .. }))
        .collect();
    assert_eq!(
        moved,
        [&RanksNote::ClockMoved {
            rank: 1,
            offset_ns: 1_000_000_000,
            residual_ns: 0
        }]
    );
    assert!((r.per_rank[0].wait_ms - 0.085).abs() < 1e-9);
}

#[test]
fn one_rank_is_refused() {
    let run = open_bytes(
        Run::new("rank0.json"),
        &synthetic(0, 0.0),
        &common::settings(&Knobs::default()),
        &NoProgress,
    )
    .unwrap();
    let a = analyze_ranks(&[&run]);
    assert_eq!(
        a.report.verdict,
        RanksVerdict::Refused {
            reason: Refusal::OneRank
        }
    );
}

#[test]
fn diff_tells_a_rank_own_regression_from_the_others_waiting() {
    use gapscope_analyzer::diff::ranks::{Component, diff_ranks};
    let slow = open_synthetic_spin(0.0, 80.0);
    let fast = open_synthetic_spin(0.0, 0.0);
    let d = diff_ranks(&slow.report, &fast.report);
    let own = d.own.unwrap();
    assert_eq!((own.rank, own.component), (1, Component::Compute));
    assert!((own.delta_ms - 0.080).abs() < 1e-9, "{}", own.delta_ms);
    let waiting = d.waiting.unwrap();
    assert_eq!(waiting.rank, 0);
    // Without the spin both ranks run alike; with it rank 0 waits 80 µs at the first
    // all-reduce and 5 µs at the second.
    assert!(
        (waiting.delta_ms - 0.085).abs() < 1e-9,
        "{}",
        waiting.delta_ms
    );
    assert_eq!((d.late_a, d.world_a, d.world_b), (Some(1), 2, 2));
}

#[test]
fn one_trace_of_two_gpus_is_two_ranks() {
    // Both ranks' events in one file without `distributedInfo` (as one nsys export of a
    // whole torchrun holds them): split by GPU, each GPU a rank.
    let events = |r: u32| -> Vec<Value> {
        let v: Value = serde_json::from_slice(&synthetic(r, 0.0)).unwrap();
        v["traceEvents"].as_array().unwrap().clone()
    };
    let mut all = events(0);
    all.extend(events(1));
    let doc = serde_json::json!({ "traceEvents": all });
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("both.json");
    std::fs::write(&p, serde_json::to_vec(&doc).unwrap()).unwrap();
    let set = open_set(
        std::slice::from_ref(&p),
        RankMode::Auto,
        2,
        &common::settings(&Knobs::default()),
        &NoProgress,
    )
    .unwrap();
    assert!(set.as_ranks);
    let ranks: Vec<(u32, RankSource)> = set
        .runs
        .iter()
        .map(|r| (r.run.rank, r.run.rank_source))
        .collect();
    assert_eq!(ranks, [(0, RankSource::Device), (1, RankSource::Device)]);
    assert!(set.runs[1].report.source.path.ends_with("(GPU 1)"));
    let refs: Vec<&AnalyzedRun> = set.runs.iter().collect();
    let a = analyze_ranks(&refs);
    assert!((a.report.per_rank[0].wait_ms - 0.085).abs() < 1e-9);
    let RanksVerdict::Straggler(s) = &a.report.verdict else {
        panic!("{:?}", a.report.verdict)
    };
    assert_eq!(s.rank, 1);
    // --separate keeps the file whole.
    let set = open_set(
        &[p],
        RankMode::Separate,
        2,
        &common::settings(&Knobs::default()),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(set.runs.len(), 1);
}

#[test]
fn ranks_whose_traces_begin_at_different_steps_pair_by_number() {
    // Rank 1's trace misses the first step (its profiler started later): its steps pair with
    // rank 0's by their numbers, not by position.
    let late_start = |r: u32| -> Vec<u8> {
        let v: Value = serde_json::from_slice(&synthetic(r, 0.0)).unwrap();
        let ev: Vec<Value> = v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| r == 0 || e["ts"].as_f64().unwrap() >= 1000.0)
            .cloned()
            .collect();
        let mut doc = v.clone();
        doc["traceEvents"] = Value::Array(ev);
        serde_json::to_vec(&doc).unwrap()
    };
    let runs: Vec<AnalyzedRun> = (0..2)
        .map(|r| {
            let run = Run {
                rank: r,
                rank_source: RankSource::Distributed,
                ..Run::new(format!("rank{r}.json"))
            };
            open_bytes(
                run,
                &late_start(r),
                &common::settings(&Knobs::default()),
                &NoProgress,
            )
            .unwrap()
        })
        .collect();
    let refs: Vec<&AnalyzedRun> = runs.iter().collect();
    let a = analyze_ranks(&refs);
    assert_eq!(
        a.report.pairing,
        gapscope_analyzer::analysis::ranks::StepPairing::Numbers
    );
    assert_eq!(a.report.aligned_steps, 2);
    assert!(
        a.report
            .notes
            .iter()
            .any(|n| matches!(n, RanksNote::StepCountsDiffer { .. }))
    );
    assert_eq!(a.report.matched_collectives, 4);
    assert!((a.report.per_rank[0].wait_ms - 0.085).abs() < 1e-9);
}

#[test]
fn digested_ranks_reopened_for_the_cause_read_the_same() {
    // The lean path (`report`): each rank digested and its trace dropped, the late rank's and
    // the most-waiting rank's traces opened again for the cause. Same figures and verdict as
    // with every trace held.
    use gapscope_analyzer::analysis::ranks::{RunRef, analyze_digests};
    use gapscope_analyzer::session::ranks::{open_digests, reopen};
    for mode in ["host", "kernel"] {
        let (_, held) = open_pair(mode);
        let paths = [
            tp2(&format!("{mode}-rank0.json.gz")),
            tp2(&format!("{mode}-rank1.json.gz")),
        ];
        let settings = common::settings(&Knobs::default());
        let set = open_digests(&paths, RankMode::Auto, 2, &settings, &NoProgress).unwrap();
        assert!(set.as_ranks);
        assert_eq!(set.reports.len(), 2);
        let runs: Vec<Run> = set.digests.iter().map(|d| d.run.clone()).collect();
        let opened = std::cell::Cell::new(0);
        let fetch = |rank: u32| {
            opened.set(opened.get() + 1);
            let run = runs.iter().find(|r| r.rank == rank)?;
            reopen(run, &settings)
                .ok()
                .map(|r| RunRef::Owned(Box::new(r)))
        };
        let lean = analyze_digests(set.digests, &fetch, Some(1));
        assert_eq!(opened.get(), 2, "the late rank and one other");
        assert_eq!(lean.report.verdict, held.report.verdict, "{mode}");
        for (a, b) in lean.report.per_rank.iter().zip(&held.report.per_rank) {
            assert_eq!(
                (a.rank, a.wait_ms, a.longest_wait_ms, a.transfer_ms),
                (b.rank, b.wait_ms, b.longest_wait_ms, b.transfer_ms)
            );
        }
        assert_eq!(
            lean.tables.collectives.wait_ns,
            held.tables.collectives.wait_ns
        );
    }
}
