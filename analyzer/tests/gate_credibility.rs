//! The gate's credibility (issue 37): a baseline too noisy to judge a change says so and
//! makes the gate inconclusive, and a baseline of too few stored runs is warned about.

mod common;

use std::path::PathBuf;

use gapscope_analyzer::gate::{
    GateOptions, Policy, RunsBaseline, StepMetric, Verdict, gate_runs, gate_with, judge,
};

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// A baseline whose steps spread ±50% cannot pass a +40% change "within" that spread.
#[test]
fn a_change_inside_a_wide_baseline_spread_is_not_a_pass() {
    let p = Policy::default();
    let x = [1.0, 2.0, 0.5, 1.5, 1.0, 3.0, 0.6, 1.2];
    let y: Vec<f64> = x.iter().map(|v| v * 1.4).collect();
    let j = judge(&x, &y, 1.0, &p);
    assert_eq!(j.verdict, Verdict::Inconclusive, "{}", j.reason);
    assert!(
        j.too_noisy && j.reason.contains("max_noise"),
        "{}",
        j.reason
    );
    // The same samples against themselves still pass: nothing moved.
    let same = judge(&x, &x, 1.0, &p);
    assert_eq!(same.verdict, Verdict::Pass, "{}", same.reason);
    assert!(!same.too_noisy);
    // A team that accepts the noise says so in its policy.
    let lax = Policy {
        max_noise: 10.0,
        ..Policy::default()
    };
    assert_eq!(judge(&x, &y, 1.0, &lax).verdict, Verdict::Pass);
}

/// On the bundled recordings of one hybrid model (CUPTI from the start against CUPTI
/// attached late), TPOT moves +20% against a baseline spread of ±21%: before, the gate
/// called that a pass "within ±21.5%".
#[test]
fn real_recordings_too_noisy_to_judge_tpot() {
    let a = common::open(repo("traces/reference/cupti-qwen3next-small-npl1.gst"));
    let b = common::open(repo("traces/reference/cupti-qwen3next-small-npl1-late.gst"));
    let r = gate_with(
        &a.report,
        &b.report,
        &Policy::default(),
        GateOptions {
            allow_incomparable: true,
        },
    );
    let tpot = r
        .steps
        .iter()
        .find(|s| s.metric == StepMetric::Tpot)
        .expect("TPOT judged");
    assert_eq!(
        tpot.judgement.verdict,
        Verdict::Inconclusive,
        "{}",
        tpot.judgement.reason
    );
    assert!(tpot.judgement.too_noisy);
    assert!(tpot.judgement.threshold > Policy::default().max_noise);
}

/// Stored runs: one or two accepted runs give intervals that say little, and the gate warns.
#[test]
fn too_few_stored_runs_are_warned_about() {
    let cur = common::open(repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz"));
    let tpot = cur.report.steps.tpot_ms.expect("TPOT").median;
    let base = |n: usize| RunsBaseline {
        runs: (1..=n as i64).collect(),
        gpus: vec!["NVIDIA H200".into(); n],
        tpot_ms: vec![tpot; n],
        ..RunsBaseline::default()
    };
    let warned = |n: usize| {
        gate_runs(
            &base(n),
            &cur.report,
            &Policy::default(),
            GateOptions::default(),
        )
        .warnings
        .iter()
        .any(|w| w.contains("fewer than 3 runs"))
    };
    assert!(warned(1));
    assert!(warned(2));
    assert!(!warned(3));
}

/// Different models are refused by their depth, whatever the marker text says: Llama-3.2-1B
/// (16 decoder layers) against the 8-layer Qwen3-Next-shaped model. gpt-oss-120b's public
/// vLLM trace counts its 36 layers.
#[test]
fn models_of_different_depth_are_not_compared() {
    use gapscope_analyzer::gate::Incomparability;
    let llama = common::open(repo(
        "traces/reference/hf-llama3.2-1b-npl8-stack-math.json.gz",
    ));
    let qwen = common::open(repo("traces/reference/hf-qwen3next-small-npl1.json.gz"));
    assert_eq!(llama.report.source.decoder_layers, Some(16));
    assert_eq!(qwen.report.source.decoder_layers, Some(8));
    let r = gate_with(
        &llama.report,
        &qwen.report,
        &Policy::default(),
        GateOptions::default(),
    );
    assert_eq!(r.verdict, Verdict::Incomparable);
    assert!(r.incomparable.contains(&Incomparability::ModelDiffers {
        baseline_layers: 16,
        current_layers: 8
    }));
    let same = gate_with(
        &llama.report,
        &llama.report,
        &Policy::default(),
        GateOptions::default(),
    );
    assert!(
        !same
            .incomparable
            .iter()
            .any(|c| matches!(c, Incomparability::ModelDiffers { .. }))
    );
    let gptoss = common::open(repo("traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz"));
    assert_eq!(gptoss.report.source.decoder_layers, Some(36));
}
