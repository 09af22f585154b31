//! Gate acceptance, measured like a benchmark and printed (figures in docs/BENCHMARKS.md):
//! A/A splits of a real trace pass, a +5% regression injected into one bucket is caught,
//! a +10% step-time regression with unchanged kernels is caught, and a new D2D copy per
//! step is always flagged.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::Path;

use gapscope_analyzer::analysis::stats::mean;
use gapscope_analyzer::analysis::{AnalysisSettings, Report, analyze};
use gapscope_analyzer::gate::{Policy, StepMetric, Verdict, gate};
use gapscope_analyzer::import::{ImportOptions, NoProgress, import_trace};
use gapscope_analyzer::{Bucket, RuleSet};

fn real_report(trace: &str) -> Report {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces/reference")
        .join(trace);
    let imported = import_trace(&p, &ImportOptions::default(), &NoProgress).unwrap();
    let settings = AnalysisSettings {
        top_per_bucket: usize::MAX,
        ..Default::default()
    };
    analyze(&imported, &RuleSet::builtin(), &settings)
}

/// The report restricted to the given steps: bucket samples, and the step series (the
/// period after each step, its launch gaps, the host gap before it).
fn subset(r: &Report, steps: &[usize]) -> Report {
    let mut out = r.clone();
    for b in &mut out.buckets {
        if !b.per_step_ms.is_empty() {
            b.per_step_ms = steps.iter().map(|&i| b.per_step_ms[i]).collect();
        }
    }
    let s = &r.steps.series;
    let pick = |v: &[f64], shift: usize| -> Vec<f64> {
        steps
            .iter()
            .filter_map(|&i| i.checked_sub(shift).and_then(|j| v.get(j)).copied())
            .collect()
    };
    out.steps.series.tpot_ms = pick(&s.tpot_ms, 0);
    out.steps.series.launch_gap_ms = pick(&s.launch_gap_ms, 0);
    out.steps.series.host_gap_ms = pick(&s.host_gap_ms, 1);
    out
}

fn shuffled(n: usize, seed: &mut u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        v.swap(i, (*seed % (i as u64 + 1)) as usize);
    }
    v
}

#[test]
fn gate_acceptance_on_random_splits_of_a_real_hf_trace() {
    acceptance("hf-llama3.2-1b-npl8.json.gz", Bucket::GemmDense);
}

#[test]
fn gate_acceptance_on_random_splits_of_a_real_engine_trace() {
    acceptance("engine-llama3-8b-npl1.gst", Bucket::Gemv);
}

fn acceptance(trace: &str, target: Bucket) {
    let r = real_report(trace);
    let n = r.steps.decode_steps;
    assert_eq!(n, 32);
    let p = Policy::default();
    let mut seed = 0x1234_5678_9abc_def1u64;
    let (mut aa_pass, mut caught, mut copy_flagged, mut slower_caught) = (0, 0, 0, 0);
    for _ in 0..100 {
        let order = shuffled(n, &mut seed);
        let (h1, h2) = order.split_at(n / 2);
        let base = subset(&r, h1);
        let cur = subset(&r, h2);
        if gate(&base, &cur, &p).verdict == Verdict::Pass {
            aa_pass += 1;
        }
        let mut slow = cur.clone();
        for b in &mut slow.buckets {
            if b.bucket == target {
                b.per_step_ms.iter_mut().for_each(|v| *v *= 1.05);
            }
        }
        let g = gate(&base, &slow, &p);
        if g.buckets
            .iter()
            .any(|b| b.bucket == target && b.judgement.verdict == Verdict::Regression)
        {
            caught += 1;
        }
        // +10% step time, same kernels: the extra time is GPU idle inside each step.
        let mut slower = cur.clone();
        let extra = 0.10 * mean(&cur.steps.series.tpot_ms);
        slower
            .steps
            .series
            .tpot_ms
            .iter_mut()
            .for_each(|v| *v += extra);
        slower
            .steps
            .series
            .launch_gap_ms
            .iter_mut()
            .for_each(|v| *v += extra);
        let g = gate(&base, &slower, &p);
        if g.verdict == Verdict::Regression
            && g.steps
                .iter()
                .any(|s| s.metric == StepMetric::Tpot && s.judgement.verdict == Verdict::Regression)
            && g.buckets
                .iter()
                .all(|b| b.judgement.verdict != Verdict::Regression)
        {
            slower_caught += 1;
        }
        let mut copy = cur.clone();
        for b in &mut copy.buckets {
            if b.bucket == Bucket::Copy {
                b.calls_per_step = b.calls_per_step.map(|c| c + 1.0);
            }
        }
        let g = gate(&base, &copy, &p);
        if g.verdict == Verdict::Regression
            && g.structural
                .iter()
                .any(|c| c.check == "new copies per step" && c.failed)
        {
            copy_flagged += 1;
        }
    }
    eprintln!(
        "gate acceptance ({trace}, 100 random 16/16 splits): A/A pass {aa_pass}/100, +5% {target} caught {caught}/100, +10% step time caught {slower_caught}/100, new copy flagged {copy_flagged}/100"
    );
    assert!(aa_pass >= 99, "A/A passes {aa_pass}/100");
    assert!(caught >= 95, "+5% caught {caught}/100");
    assert!(
        slower_caught >= 95,
        "+10% step time caught {slower_caught}/100"
    );
    assert_eq!(copy_flagged, 100);
}
