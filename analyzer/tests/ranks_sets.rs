//! Several traces opened as one run: directories and recordings expanded, ranks read from
//! the traces, files left out, a public rank pair, refusals.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

mod common;

use std::path::{Path, PathBuf};

use gapscope_analyzer::analysis::ranks::{RanksNote, RanksVerdict, Refusal, analyze_ranks};
use gapscope_analyzer::import::NoProgress;
use gapscope_analyzer::session::ranks::{RankMode, expand, open_set};
use gapscope_analyzer::session::{AnalyzedRun, Knobs, RankSource, Run, open_bytes};

fn tp2(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces/reference/tp2")
        .join(name)
}
#[test]
fn directories_and_recordings_expand_to_their_traces() {
    let d = tempfile::tempdir().unwrap();
    let gst = |n: &str| {
        let p = d.path().join(n);
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("manifest.json"), "{}").unwrap();
        p
    };
    let run = gst("run.gst");
    gst("run.pid12.gst");
    gst("run.pid7.gst");
    gst("other.pid3.gst");
    let names = |v: Vec<gapscope_analyzer::session::ranks::TracePath>| {
        v.into_iter()
            .map(|t| {
                (
                    t.path.file_name().unwrap().to_string_lossy().into_owned(),
                    t.found,
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(expand(std::slice::from_ref(&run)).unwrap()),
        [
            ("run.gst".to_owned(), true),
            ("run.pid7.gst".to_owned(), true),
            ("run.pid12.gst".to_owned(), true)
        ]
    );
    let traces = d.path().join("traces");
    std::fs::create_dir(&traces).unwrap();
    for f in ["b.json.gz", "a.json", "notes.txt"] {
        std::fs::write(traces.join(f), "x").unwrap();
    }
    assert_eq!(
        names(expand(std::slice::from_ref(&traces)).unwrap()),
        [("a.json".to_owned(), true), ("b.json.gz".to_owned(), true)]
    );
    let empty = d.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let e = expand(&[empty]).unwrap_err().to_string();
    assert!(e.contains("no trace in it"), "{e}");
}

#[test]
fn a_recording_brings_its_processes_with_their_ranks() {
    // gapscope-record on one H200: `rec-host.gst` (the launcher, no GPU work) and one trace
    // per process with RANK in its manifest. Gloo reduces on the host: no collective kernel,
    // so no verdict, and the reason is given.
    let set = open_set(
        &[tp2("gloo-record/rec-host.gst")],
        RankMode::Auto,
        2,
        &common::settings(&Knobs::default()),
        &NoProgress,
    )
    .unwrap();
    assert!(set.as_ranks);
    assert_eq!(set.left_out.len(), 1);
    assert!(set.left_out[0].0.ends_with("rec-host.gst"));
    let ranks: Vec<(u32, RankSource)> = set
        .runs
        .iter()
        .map(|r| (r.run.rank, r.run.rank_source))
        .collect();
    assert_eq!(
        ranks,
        [(0, RankSource::Environment), (1, RankSource::Environment)]
    );
    assert_eq!(set.runs[1].trace.manifest.world_size, Some(2));
    let refs: Vec<&AnalyzedRun> = set.runs.iter().collect();
    let a = analyze_ranks(&refs);
    assert_eq!(
        a.report.verdict,
        RanksVerdict::Refused {
            reason: Refusal::NoMatchedCollectives
        }
    );
    // The 8 measured steps and 2 warm-ups, from the script's NVTX ranges, on both ranks.
    assert_eq!(a.report.aligned_steps, 10);
}

#[test]
fn public_hta_rank_pair_is_recognised_and_refused_with_its_reason() {
    // Two ranks of a 128-rank training run (HolisticTraceAnalysis' test data): their NCCL
    // kernels are point-to-point transfers whose peers are mostly other ranks, so the kernels
    // paired in order do not end together.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/corpus/hta_ranks");
    let set = open_set(
        &[dir],
        RankMode::Auto,
        2,
        &common::settings(&Knobs::default()),
        &NoProgress,
    )
    .unwrap();
    assert!(set.as_ranks);
    let refs: Vec<&AnalyzedRun> = set.runs.iter().collect();
    // The independent count (SOURCES.md): 10 NCCL kernels on each rank, all in the steps.
    for r in &refs {
        assert_eq!(
            gapscope_analyzer::analysis::ranks::collectives::collectives(r).len(),
            10
        );
    }
    let a = analyze_ranks(&refs);
    assert_eq!(a.report.world_size, Some(128));
    assert!(a.report.notes.contains(&RanksNote::WorldSize {
        said: 128,
        given: 2
    }));
    assert_eq!(a.report.matched_collectives, 10);
    assert_eq!(
        a.report.verdict,
        RanksVerdict::Refused {
            reason: Refusal::CompletionsDisagree
        }
    );
    assert!(a.report.per_rank.iter().all(|p| p.wait_ms.is_nan()));
}

#[test]
fn nothing_to_analyse_is_refused_not_a_panic() {
    let a = analyze_ranks(&[]);
    assert_eq!(
        a.report.verdict,
        RanksVerdict::Refused {
            reason: Refusal::OneRank
        }
    );
    // A directory whose only trace is a launcher without GPU work.
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("runs");
    std::fs::create_dir(&dir).unwrap();
    let copy = |from: &Path, to: &Path| {
        std::fs::create_dir(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    };
    copy(&tp2("gloo-record/rec-host.gst"), &dir.join("rec-host.gst"));
    let e = open_set(
        &[dir],
        RankMode::Ranks,
        2,
        &common::settings(&Knobs::default()),
        &NoProgress,
    )
    .err()
    .expect("an error");
    assert!(e.to_string().contains("no trace with GPU work"), "{e}");
}

#[test]
fn hostile_collectives_do_not_panic() {
    // Kernels that end before they start, zero-length steps, a rank with no steps.
    let evil = |rank: u32| -> Vec<u8> {
        let ar = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL";
        format!(
            r#"{{"distributedInfo":{{"rank":{rank},"world_size":2}},"traceEvents":[
            {{"ph":"X","cat":"gpu_user_annotation","name":"decode_step_0","pid":0,"tid":7,"ts":0,"dur":0,"args":{{"device":{rank}}}}},
            {{"ph":"X","cat":"kernel","name":"{ar}","pid":0,"tid":7,"ts":5,"dur":-3,"args":{{"device":{rank},"stream":7,"correlation":1}}}},
            {{"ph":"X","cat":"kernel","name":"{ar}","pid":0,"tid":7,"ts":1e18,"dur":1e18,"args":{{"device":{rank},"stream":7,"correlation":2}}}}
            ]}}"#
        )
        .into_bytes()
    };
    let runs: Vec<AnalyzedRun> = (0..2)
        .filter_map(|r| {
            let run = Run {
                rank: r,
                rank_source: RankSource::Distributed,
                ..Run::new(format!("evil{r}.json"))
            };
            open_bytes(
                run,
                &evil(r),
                &common::settings(&Knobs::default()),
                &NoProgress,
            )
            .ok()
        })
        .collect();
    let refs: Vec<&AnalyzedRun> = runs.iter().collect();
    let a = analyze_ranks(&refs);
    assert!(matches!(
        a.report.verdict,
        RanksVerdict::Refused { .. } | RanksVerdict::Even { .. } | RanksVerdict::Straggler(_)
    ));
}

#[test]
fn public_eight_rank_run_matches_every_collective_across_ranks() {
    // facebookresearch/param's DLRM step, all eight ranks (traces/corpus/SOURCES.md).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/corpus/param_dlrm_8ranks");
    let set = open_set(
        &[dir],
        RankMode::Auto,
        2,
        &common::settings(&Knobs::default()),
        &NoProgress,
    )
    .unwrap();
    assert!(set.as_ranks);
    assert_eq!(set.runs.len(), 8);
    let refs: Vec<&AnalyzedRun> = set.runs.iter().collect();
    // The independent count: 8 NCCL kernels on every rank, all inside the step.
    for r in &refs {
        assert_eq!(
            gapscope_analyzer::analysis::ranks::collectives::collectives(r).len(),
            8
        );
    }
    let a = analyze_ranks(&refs);
    let r = &a.report;
    assert_eq!((r.world_size, r.aligned_steps), (Some(8), 1));
    assert_eq!(
        r.matched_collectives, 8,
        "every collective matched on all eight ranks"
    );
    assert!(
        r.notes
            .iter()
            .all(|n| !matches!(n, RanksNote::Unmatched { .. }))
    );
    // Kineto writes microseconds: the completions agree to that resolution.
    assert!(
        r.clocks.iter().all(|c| c.shared && c.residual_ns <= 1_000),
        "{:?}",
        r.clocks
    );
    let RanksVerdict::Straggler(s) = &r.verdict else {
        panic!("{:?}", r.verdict)
    };
    assert_eq!(s.rank, 7);
}
