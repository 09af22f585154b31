//! gapscope-engine's speculative trace contract, on a trace built by hand: `spec_draft`
//! markers then a `spec_verify` marker (whose tokens column holds the tokens the step
//! produced) make one step; the prefill stays its own.
#![allow(clippy::unwrap_used, reason = "tests")]

use gapscope_analyzer::RuleSet;
use gapscope_analyzer::analysis::spec::{SpecEvidence, TokensSource};
use gapscope_analyzer::analysis::{AnalysisSettings, analyze};
use gapscope_analyzer::import::{Imported, InputFormat};
use gapscope_traces::*;

fn marker(t: &mut Trace, name: &str, phase: Phase, step: i64, tokens: u32, s: i64, e: i64) {
    let name = t.strings.intern(name);
    t.markers.push(MarkerRow {
        name,
        source: MarkerSource::Engine as u8,
        phase: phase as u8,
        gpu_start_ns: s,
        gpu_end_ns: e,
        step,
        batch_size: 1,
        tokens,
        ..Default::default()
    });
}

fn kernel(t: &mut Trace, corr: u64, s: i64, e: i64) {
    let name = t.strings.intern("nvjet_sm90_gemv");
    t.kernels.push(KernelRow {
        name,
        stream: 1,
        correlation: corr,
        gpu_start_ns: s,
        gpu_end_ns: e,
        ..Default::default()
    });
}

/// A prefill, then 5 speculative steps of k=3: three 100 ns drafts (each in a 120 ns
/// marker) and a 400 ns verify, 1000 ns apart; the verify of step i produced 1 + (i % 4)
/// tokens.
fn trace() -> Trace {
    let mut t = Trace::new(Manifest::new("synthetic"));
    let mut corr = 0;
    marker(&mut t, "prefill", Phase::Prefill, 0, 64, 0, 2000);
    corr += 1;
    kernel(&mut t, corr, 0, 1900);
    for i in 0..5_i64 {
        let base = 3000 + 1000 * i;
        for d in 0..3 {
            let s = base + 120 * d;
            marker(&mut t, "spec_draft", Phase::Decode, i, 1, s, s + 120);
            corr += 1;
            kernel(&mut t, corr, s, s + 100);
        }
        let s = base + 400;
        marker(
            &mut t,
            "spec_verify",
            Phase::Decode,
            i,
            1 + (i % 4) as u32,
            s,
            s + 450,
        );
        corr += 1;
        kernel(&mut t, corr, s, s + 400);
    }
    t
}

#[test]
fn engine_markers_make_one_step_per_verify_with_its_drafts() {
    let imported = Imported {
        trace: trace(),
        format: InputFormat::Native,
        warnings: Vec::new(),
        defects: Vec::new(),
    };
    let r = analyze(&imported, &RuleSet::builtin(), &AnalysisSettings::default());
    assert_eq!(r.steps.decode_steps, 5);
    assert_eq!(r.steps.prefill_steps, 1);
    let s = r.speculative.as_ref().unwrap();
    assert_eq!(s.evidence_kind, SpecEvidence::EngineMarkers);
    assert_eq!(s.tokens_source, TokensSource::EngineMarkers);
    assert_eq!((s.target_forwards, s.draft_forwards), (5, 15));
    assert_eq!(s.max_candidates, 3);
    // Steps 0..3 have a next step (the last has no period): tokens 1, 2, 3, 4.
    assert_eq!(s.steps_with_tokens, 4);
    assert!((s.tokens_per_step.unwrap() - 2.5).abs() < 1e-12);
    // Accepted 0, 1, 2, 3 of 3 candidates: position 1 in 3 of 4, 2 in 2, 3 in 1.
    let rates: Vec<f64> = s.per_position.iter().map(|p| p.rate).collect();
    assert_eq!(rates, vec![0.75, 0.5, 0.25]);
    assert!((s.acceptance_rate.unwrap() - 6.0 / 12.0).abs() < 1e-12);
    // Each step runs 1000 ns: 1 µs over 2.5 tokens.
    assert!((s.step_ms.unwrap() - 0.001).abs() < 1e-12);
    assert!((s.tpot_per_token_ms.unwrap() - 0.0004).abs() < 1e-12);
    assert!((s.draft_ms_per_step - 0.0003).abs() < 1e-12);
    assert!((s.verify_ms_per_step - 0.0004).abs() < 1e-12);
    // The steps hold their drafts: TPOT is the full 1 µs period.
    assert!((r.steps.tpot_ms.as_ref().unwrap().median - 0.001).abs() < 1e-12);
}

/// vLLM V1 markers that schedule 5 tokens for 1 request: the proposer's work after each
/// marker joins the next step, and the engine's counters (`--spec-metrics`) give the
/// acceptance the markers do not.
#[test]
fn vllm_markers_take_the_proposer_and_metrics_give_acceptance() {
    use gapscope_analyzer::analysis::spec::metrics;
    let mut t = Trace::new(Manifest::new("synthetic"));
    let mut corr = 0;
    let push = |t: &mut Trace, name: &str, s: i64, e: i64| {
        let name = t.strings.intern(name);
        t.markers.push(MarkerRow {
            name,
            source: MarkerSource::KinetoGpuAnnotation as u8,
            gpu_start_ns: s,
            gpu_end_ns: e,
            ..Default::default()
        });
    };
    push(&mut t, "execute_context_1(100)_generation_0(0)", 0, 1000);
    corr += 1;
    kernel(&mut t, corr, 0, 900);
    for i in 0..4_i64 {
        let base = 1000 + 1000 * i;
        // The proposer after the previous marker: 300 ns, then the verify marker.
        corr += 1;
        kernel(&mut t, corr, base + 50, base + 350);
        push(
            &mut t,
            "execute_context_0(0)_generation_1(5)",
            base + 400,
            base + 1000,
        );
        corr += 1;
        kernel(&mut t, corr, base + 400, base + 950);
    }
    let text = "INFO SpecDecoding metrics: Mean acceptance length: 3.00, Accepted throughput: 1.00 tokens/s, \
        Drafted throughput: 2.00 tokens/s, Accepted: 8 tokens, Drafted: 16 tokens, \
        Per-position acceptance rate: 0.750, 0.750, 0.250, 0.250, Avg Draft acceptance rate: 50.0%\n";
    let settings = AnalysisSettings {
        spec_metrics: Some(metrics::parse(text).unwrap()),
        ..AnalysisSettings::default()
    };
    let imported = Imported {
        trace: t,
        format: InputFormat::Native,
        warnings: Vec::new(),
        defects: Vec::new(),
    };
    let r = analyze(&imported, &RuleSet::builtin(), &settings);
    assert_eq!(r.steps.decode_steps, 4);
    let s = r.speculative.as_ref().unwrap();
    assert_eq!(s.evidence_kind, SpecEvidence::MarkerTokens);
    assert_eq!(s.tokens_source, TokensSource::Metrics);
    assert_eq!(s.tokens_per_step, Some(3.0));
    assert_eq!(s.acceptance_rate, Some(0.5));
    assert_eq!(s.max_candidates, 4);
    // Steps run from the previous marker's end: 1000 ns each; 1 µs over 3 tokens.
    assert!((s.step_ms.unwrap() - 0.001).abs() < 1e-12);
    assert!((s.tpot_per_token_ms.unwrap() - 0.001 / 3.0).abs() < 1e-12);
    assert!((s.draft_ms_per_step - 0.0003).abs() < 1e-12);
    // Without the counters, acceptance is unknown.
    let plain = analyze(&imported, &RuleSet::builtin(), &AnalysisSettings::default());
    let s = plain.speculative.as_ref().unwrap();
    assert_eq!(s.tokens_source, TokensSource::NotInMarkers);
    assert_eq!(s.tokens_per_step, None);
}
