//! Speculative decoding read from real captures (HF transformers on an H200,
//! `scripts/capture/hf-spec-trace.py`), against the truth the capture's forward hooks
//! recorded (not gapscope): target and draft forwards, tokens per step, acceptance.
#![allow(clippy::unwrap_used, reason = "tests")]

mod common;

use gapscope_analyzer::analysis::spec::{SpecEvidence, TokensSource};
use gapscope_analyzer::analysis::steps::StepSource;
use gapscope_traces::Phase;
use serde_json::Value;

fn trace(name: &str) -> std::path::PathBuf {
    gapscope_tests::repo(&format!("traces/reference/hf-spec/hf-spec-{name}.json.gz"))
}

fn truth(name: &str) -> Value {
    let p = gapscope_tests::repo(&format!(
        "traces/reference/hf-spec/hf-spec-{name}.truth.json"
    ));
    serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap()
}

fn int(v: &Value, key: &str) -> i64 {
    v[key].as_i64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// Forwards, steps, tokens and acceptance equal the hooks' truth. The last step's tokens
/// are unknown to a trace (no later forward shows what it kept), so the expected
/// acceptance leaves it out too.
fn check(name: &str, evidence: SpecEvidence) {
    let run = common::open(trace(name));
    let t = truth(name);
    let spec = run.steps.spec.as_ref().expect("speculative steps");
    assert_eq!(spec.evidence, Some(evidence), "{name}");
    assert_eq!(spec.tokens_source, TokensSource::AttentionShapes, "{name}");
    assert_eq!(
        spec.target_forwards as i64,
        int(&t, "target_forwards"),
        "{name}"
    );
    assert_eq!(
        spec.draft_forwards as i64,
        int(&t, "draft_forwards"),
        "{name}"
    );
    let steps = t["steps"].as_array().unwrap();
    assert_eq!(spec.cycles.len(), steps.len(), "{name}");
    let last = steps.len() - 1;
    for (i, (c, s)) in spec.cycles.iter().zip(steps).enumerate() {
        let prefill = s["prefill"].as_bool().unwrap();
        assert_eq!(c.phase == Phase::Prefill, prefill, "{name} step {i}");
        assert_eq!(
            i64::from(c.draft_forwards),
            int(s, "draft_forwards"),
            "{name} step {i}"
        );
        assert_eq!(c.rows, Some(int(s, "new")), "{name} step {i}");
        if prefill || i == last {
            assert_eq!(c.tokens, None, "{name} step {i}");
        } else {
            assert_eq!(c.tokens, Some(int(s, "tokens")), "{name} step {i}");
            assert_eq!(
                c.candidates(),
                Some(int(s, "candidates")),
                "{name} step {i}"
            );
        }
    }
    let known: Vec<&Value> = steps[..last]
        .iter()
        .filter(|s| !s["prefill"].as_bool().unwrap())
        .collect();
    let r = run
        .report
        .speculative
        .as_ref()
        .expect("a speculative section");
    assert_eq!(r.steps_with_tokens, known.len(), "{name}");
    assert_eq!(r.decode_steps as i64, int(&t, "decode_steps"), "{name}");
    let tokens: i64 = known.iter().map(|s| int(s, "tokens")).sum();
    let mean = tokens as f64 / known.len() as f64;
    assert!((r.tokens_per_step.unwrap() - mean).abs() < 1e-9, "{name}");
    let k = known.iter().map(|s| int(s, "candidates")).max().unwrap();
    assert_eq!(r.max_candidates as i64, k, "{name}");
    for p in &r.per_position {
        let j = p.position as i64;
        let have: Vec<&&Value> = known.iter().filter(|s| int(s, "candidates") >= j).collect();
        let acc = have.iter().filter(|s| int(s, "accepted") >= j).count();
        let want = acc as f64 / have.len() as f64;
        assert!(
            (p.rate - want).abs() <= 0.02,
            "{name} position {j}: {} vs {want}",
            p.rate
        );
        assert_eq!(
            (p.steps, p.accepted),
            (have.len(), acc),
            "{name} position {j}"
        );
    }
    // TPOT per token is the step period spread over the tokens.
    let tpot = r.tpot_per_token_ms.unwrap();
    assert!((tpot * mean - r.step_ms.unwrap()).abs() < 1e-6, "{name}");
    // The activity table gives the draft's work its role: at least the draft forwards'
    // kernels, and little else (HF's bookkeeping between the drafts).
    let acts = run.activities();
    let draft_role = gapscope_analyzer::tables::Role::Draft as u8;
    let draft_ns: i64 = (0..acts.len())
        .filter(|&i| acts.role[i] == draft_role && acts.kind[i] == 0)
        .map(|i| acts.gpu_end_ns[i] - acts.gpu_start_ns[i])
        .sum();
    let forwards_ns: i64 = spec.cycles.iter().map(|c| c.draft_ns).sum();
    if spec.draft_forwards > 0 {
        assert!(
            draft_ns >= forwards_ns && (draft_ns as f64) < 1.25 * forwards_ns as f64,
            "{name}: {draft_ns} vs {forwards_ns}"
        );
    } else {
        assert_eq!(draft_ns, 0, "{name}");
    }
    // By bucket, the step windows hold at least the forwards' kernel time, and little else.
    let by = |f: fn(&gapscope_analyzer::analysis::spec::SpecBucket) -> f64| {
        r.by_bucket.iter().map(f).sum::<f64>()
    };
    let (d, v) = (by(|b| b.draft_ms_per_step), by(|b| b.verify_ms_per_step));
    for (name_of, got, forwards) in [
        ("draft", d, r.draft_ms_per_step),
        ("verify", v, r.verify_ms_per_step),
    ] {
        assert!(
            got >= forwards - 1e-9 && got <= 1.25 * forwards + 1e-9,
            "{name} {name_of} by bucket {got} vs forwards {forwards}"
        );
    }
    // The steps table carries the tokens.
    let table_tokens: u64 = run.tables.steps.tokens.iter().map(|&x| u64::from(x)).sum();
    let want: i64 = steps[..last]
        .iter()
        .filter(|s| !s["prefill"].as_bool().unwrap())
        .map(|s| int(s, "tokens"))
        .sum();
    assert_eq!(table_tokens as i64, want, "{name}");
}

#[test]
fn assisted_generation_with_a_draft_model_k4() {
    check("assisted-k4", SpecEvidence::ModelInstances);
}

#[test]
fn prompt_lookup_without_a_draft_model() {
    check("lookup-k4", SpecEvidence::VerifyRows);
}

/// Without `record_shapes` the forwards and roles are still found; acceptance is unknown
/// and the report says so instead of guessing. The capture with `record_shapes` off (its
/// figures in docs/BENCHMARKS.md) is not committed for size; here the same run's trace
/// loses its `Input Dims` in memory.
#[test]
fn without_shapes_acceptance_is_unknown() {
    use std::io::Read;
    let name = "assisted-k4";
    let mut json = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(trace(name)).unwrap())
        .read_to_string(&mut json)
        .unwrap();
    let mut doc: Value = serde_json::from_str(&json).unwrap();
    for e in doc["traceEvents"].as_array_mut().unwrap() {
        if let Some(args) = e.get_mut("args").and_then(Value::as_object_mut) {
            args.remove("Input Dims");
        }
    }
    let bytes = serde_json::to_vec(&doc).unwrap();
    let run = gapscope_analyzer::session::open_bytes(
        gapscope_analyzer::session::Run::new("no-shapes.json"),
        &bytes,
        &common::settings(&gapscope_analyzer::session::Knobs::default()),
        &gapscope_analyzer::import::NoProgress,
    )
    .unwrap();
    let t = truth(name);
    let spec = run.steps.spec.as_ref().unwrap();
    assert_eq!(spec.evidence, Some(SpecEvidence::ModelInstances));
    assert_eq!(spec.tokens_source, TokensSource::Unknown);
    assert_eq!(spec.target_forwards as i64, int(&t, "target_forwards"));
    assert_eq!(spec.draft_forwards as i64, int(&t, "draft_forwards"));
    assert!(spec.cycles.iter().all(|c| c.tokens.is_none()));
    let r = run.report.speculative.as_ref().unwrap();
    assert_eq!(r.tokens_per_step, None);
    assert_eq!(r.acceptance_rate, None);
    assert!(r.per_position.is_empty());
}

/// Plain greedy `generate()` without markers: one step per forward of the model (the
/// periodic detector took every other forward for a step here), no speculative section.
#[test]
fn plain_generate_is_one_step_per_forward() {
    let name = "plain";
    let run = common::open(trace(name));
    let t = truth(name);
    assert!(matches!(
        run.steps.source,
        StepSource::Forwards { evidence: None, .. }
    ));
    assert!(run.report.speculative.is_none());
    assert_eq!(
        run.report.steps.decode_steps as i64,
        int(&t, "decode_steps")
    );
    assert_eq!(run.report.steps.prefill_steps, 1);
    // Greedy acceptance keeps the output: the speculative captures' tokens equal these.
    assert_eq!(t["output_md5"], truth("assisted-k4")["output_md5"]);
}

/// The gate refuses a speculative run against a plain baseline (their steps produce
/// different numbers of tokens) and says which side speculates.
#[test]
fn gate_refuses_speculative_against_plain() {
    use gapscope_analyzer::gate::{GateSide, Incomparability, Policy, Verdict, gate};
    let plain = common::open(trace("plain"));
    let spec = common::open(trace("assisted-k4"));
    let g = gate(&plain.report, &spec.report, &Policy::default());
    assert_eq!(g.verdict, Verdict::Incomparable, "{}", g.headline());
    assert!(
        g.incomparable
            .contains(&Incomparability::SpeculationDiffers {
                speculative: GateSide::Current
            })
    );
    let same = gate(&spec.report, &spec.report, &Policy::default());
    assert!(
        !same
            .incomparable
            .iter()
            .any(|c| matches!(c, Incomparability::SpeculationDiffers { .. }))
    );
}

/// The what-if reproduces the trace it was measured on: at the measured k and acceptance it
/// predicts the measured step period and tokens per step within 1% (not exactly: HF drafts
/// fewer than k near the end of `max_new_tokens`, and those steps enter the means).
#[test]
fn what_if_at_the_measured_setting_is_the_measurement() {
    let name = "assisted-k4";
    let run = common::open(trace(name));
    let r = run.report.speculative.as_ref().unwrap();
    let w = r.what_if.as_ref().unwrap();
    let p = w.costs.predict(w.costs.k, &w.costs.conditional);
    let near = |a: f64, b: f64| (a / b - 1.0).abs() < 0.01;
    assert!(
        near(p.step_ms, r.step_ms.unwrap()),
        "{name}: {p:?} vs {r:?}"
    );
    assert!(
        near(p.tokens_per_step, r.tokens_per_step.unwrap()),
        "{name}: {p:?}"
    );
    assert_eq!(w.by_k.len(), 8);
    assert!(w.break_even.iter().all(|&(_, a)| (0.0..=1.0).contains(&a)));
}

/// `diff` of a speculative run against a plain one splits the tokens-per-second change into
/// tokens gained, the draft's cost and the verify's overhead; the factors multiply to it.
#[test]
fn diff_attributes_the_speedup() {
    use gapscope_analyzer::diff::{SideName, diff};
    let spec = common::open(trace("assisted-k4"));
    let plain = common::open(trace("plain"));
    let d = diff(spec.diff_side(), plain.diff_side(), 10);
    let s = d.speculative.as_ref().unwrap();
    assert_eq!(s.speculative, SideName::A);
    let product = s.tokens_factor * s.draft_factor * s.verify_factor;
    assert!((product - s.speedup).abs() < 1e-9, "{s:?}");
    assert!((s.spec_tokens_per_s / s.plain_tokens_per_s - s.speedup).abs() < 1e-9);
    // Reversed sides name B; two plain runs have no attribution.
    let r = diff(plain.diff_side(), spec.diff_side(), 10);
    assert_eq!(r.speculative.as_ref().unwrap().speculative, SideName::B);
    assert!(
        diff(plain.diff_side(), plain.diff_side(), 10)
            .speculative
            .is_none()
    );
}

/// Two speculative runs: the gate judges their time per token and rejected share beside
/// TPOT; a run against itself passes.
#[test]
fn gate_judges_time_per_token_and_rejection() {
    use gapscope_analyzer::gate::{Policy, StepMetric, Verdict, gate};
    let a = common::open(trace("assisted-k4"));
    let g = gate(&a.report, &a.report, &Policy::default());
    assert_eq!(g.verdict, Verdict::Pass, "{}", g.headline());
    let metrics: Vec<StepMetric> = g.steps.iter().map(|s| s.metric).collect();
    assert!(metrics.contains(&StepMetric::TimePerToken), "{metrics:?}");
    assert!(metrics.contains(&StepMetric::Rejection), "{metrics:?}");
}

/// The explorer's step bars split a speculative step's strip into draft and verify and
/// carry its tokens; a plain run's have no draft.
#[test]
fn explorer_steps_show_draft_and_verify() {
    use gapscope_analyzer::explore::step_view::views as step_views;
    let spec = common::open(trace("assisted-k4"));
    let v = step_views(&spec.tables);
    // Every step drafts, the prefill too (HF's draft runs before the target's first forward).
    let decode: Vec<_> = v.iter().filter(|s| s.draft_forwards > 0).collect();
    assert_eq!(decode.len(), 21);
    assert!(
        decode
            .iter()
            .all(|s| s.draft_share() > 0.0 && s.draft_share() < 1.0)
    );
    assert!(v.iter().any(|s| s.tokens > 1));
    let plain = common::open(trace("plain"));
    assert!(
        step_views(&plain.tables)
            .iter()
            .all(|s| s.draft_share() == 0.0)
    );
}
