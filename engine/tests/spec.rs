#![allow(clippy::unwrap_used, reason = "tests")]
//! Self-speculative decoding on the CPU reference: argmax acceptance reproduces plain greedy
//! decode for several draft depths and k; synthetic acceptance reaches the set rates per
//! position; the step records of a run write the trace contract the analyzer reads
//! (`prefill`, `spec_draft`, `spec_verify` markers); hybrid models are refused.

use gapscope_engine::bench::md5_hex;
use gapscope_engine::records::{LaunchMeta, StepRecord, TimedLaunch, TraceOut};
use gapscope_engine::spec::cpu::{CpuSpec, greedy};
use gapscope_engine::spec::run::acceptance_by_position;
use gapscope_engine::spec::trace::{ForwardKind, set_verify_tokens};
use gapscope_engine::spec::{Acceptance, SpecSettings, accept, decode};
use gapscope_engine::{ModelConfig, ModelWeights, WeightFormat};
use gapscope_traces::{Manifest, Phase, ReadOptions, SourceFormat, read_trace};

fn tiny(layers: usize) -> ModelConfig {
    ModelConfig::from_json(&serde_json::json!({
        "model_type": "llama", "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "vocab_size": 211, "rms_norm_eps": 1e-6, "tie_word_embeddings": false
    }))
    .unwrap()
}

fn prompt(cfg: &ModelConfig) -> Vec<i32> {
    gapscope_engine::rng::tokens(3, 7, 9, cfg.vocab)
}

#[test]
fn argmax_acceptance_gives_plain_greedy_tokens() {
    let cfg = tiny(4);
    let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 11);
    let p = prompt(&cfg);
    let ntg = 40;
    let want = md5_hex(&greedy(&cfg, &w, &p, ntg).unwrap());
    let mut accepted_any = false;
    for draft_layers in [1, 2, 3] {
        for k in [1, 2, 3, 5] {
            let s = SpecSettings {
                draft_layers,
                k,
                accept: Acceptance::Argmax,
            };
            s.check(&cfg).unwrap();
            let mut fw = CpuSpec::new(&cfg, &w);
            let run = decode(&mut fw, &s, &p, ntg, 0).unwrap();
            assert!(run.tokens.len() > ntg);
            assert_eq!(
                md5_hex(run.first(ntg)),
                want,
                "draft_layers {draft_layers}, k {k}"
            );
            let produced: usize = run.steps.iter().map(|s| s.produced).sum();
            assert_eq!(produced + 1, run.tokens.len());
            accepted_any |= run.steps.iter().any(|s| s.accepted > 0);
        }
    }
    assert!(
        accepted_any,
        "no draft was ever accepted: the test checks too little"
    );
}

#[test]
fn synthetic_acceptance_reaches_the_set_rates() {
    let per_position = vec![0.9, 0.7, 0.5, 0.3];
    let a = Acceptance::Synthetic {
        per_position: per_position.clone(),
        seed: 42,
    };
    // The rule alone, over many steps: conditional rates within 0.02.
    let k = per_position.len();
    let steps: Vec<_> = (0..20_000u64)
        .map(|i| {
            let n = accept::accepted(&a, i, &[1, 2, 3, 4], &[0; 5]);
            gapscope_engine::spec::SpecStep {
                step: i as i64,
                drafted: k,
                accepted: n,
                produced: n + 1,
            }
        })
        .collect();
    let (rate, cond) = acceptance_by_position(&steps, k);
    for (j, p) in per_position.iter().enumerate() {
        let c = cond[j].unwrap();
        assert!((c - p).abs() < 0.02, "position {}: {c} vs {p}", j + 1);
    }
    let mut expected = 1.0;
    for (j, p) in per_position.iter().enumerate() {
        expected *= p;
        assert!(
            (rate[j] - expected).abs() < 0.02,
            "rate {}: {}",
            j + 1,
            rate[j]
        );
    }

    // Through the model: the same rates (looser: fewer steps), and repeatable with the seed.
    let cfg = tiny(2);
    let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 5);
    let s = SpecSettings {
        draft_layers: 1,
        k,
        accept: a,
    };
    let p = prompt(&cfg);
    let run = decode(&mut CpuSpec::new(&cfg, &w), &s, &p, 600, 0).unwrap();
    let again = decode(&mut CpuSpec::new(&cfg, &w), &s, &p, 600, 0).unwrap();
    assert_eq!(run, again);
    assert!(run.steps.len() > 150);
    let (_, cond) = acceptance_by_position(&run.steps, k);
    for (j, p) in per_position.iter().enumerate() {
        let c = cond[j].unwrap();
        assert!(
            (c - p).abs() < 0.15,
            "model run, position {}: {c} vs {p}",
            j + 1
        );
    }
}

/// The records a run's forwards make, as the CUDA recorder fills them: the marker columns
/// the forward was issued with, the rows as the batch, one timed launch each (times are test
/// inputs).
fn records(log: &[gapscope_engine::spec::trace::ForwardMarker]) -> Vec<StepRecord> {
    log.iter()
        .enumerate()
        .map(|(i, m)| {
            let t = 1_000 * i as i64;
            StepRecord {
                marker: m.marker,
                phase: m.phase,
                step: m.step,
                // The CUDA backend records the rows it ran as the batch (a verify's k+1).
                batch: m.tokens,
                tokens: m.tokens,
                gpu_start_ns: t,
                gpu_end_ns: t + 900,
                launches: vec![TimedLaunch {
                    meta: LaunchMeta {
                        name: "gemv_bf16",
                        op: "down_proj",
                        layer: 1,
                        bucket: "gemv",
                        grid: [8, 1, 1],
                        block: 128,
                        bytes: 4096,
                        flops: 8192,
                        memop: None,
                        registers: 32,
                        static_smem: 0,
                    },
                    gpu_start_ns: t + 100,
                    gpu_end_ns: t + 800,
                }],
                graph_id: 0,
                launch_timed: true,
            }
        })
        .collect()
}

#[test]
fn a_run_writes_the_speculative_trace_contract() {
    let cfg = tiny(3);
    let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 9);
    let k = 3;
    let s = SpecSettings {
        draft_layers: 1,
        k,
        accept: Acceptance::Synthetic {
            per_position: vec![0.8, 0.6, 0.4],
            seed: 1,
        },
    };
    let mut fw = CpuSpec::new(&cfg, &w);
    let run = decode(&mut fw, &s, &prompt(&cfg), 30, 0).unwrap();
    let mut recs = records(&fw.log);
    set_verify_tokens(&mut recs, &run.steps).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.gst");
    let mut out = TraceOut::create(&path, Manifest::new(SourceFormat::Engine)).unwrap();
    for r in &recs {
        out.add_step(r).unwrap();
    }
    out.finish().unwrap();
    let t = read_trace(&path, &ReadOptions::default()).unwrap();
    assert_eq!(t.markers.len(), 1 + run.steps.len() * (k + 1));
    assert_eq!(t.kernels.len(), t.markers.len());
    let m0 = t.markers.row(0);
    assert_eq!(t.strings.get(m0.name), "prefill");
    assert_eq!(m0.phase, Phase::Prefill as u8);
    assert_eq!((m0.step, m0.tokens), (0, 9));
    for (i, st) in run.steps.iter().enumerate() {
        let base = 1 + i * (k + 1);
        for d in 0..k {
            let m = t.markers.row(base + d);
            assert_eq!(t.strings.get(m.name), "spec_draft");
            assert_eq!(m.phase, Phase::Decode as u8);
            assert_eq!((m.batch_size, m.tokens, m.step), (1, 1, st.step));
        }
        let v = t.markers.row(base + k);
        assert_eq!(t.strings.get(v.name), "spec_verify");
        assert_eq!(v.phase, Phase::Decode as u8);
        assert_eq!(v.batch_size, 1);
        assert_eq!(v.step, i as i64 + 1);
        assert_eq!(v.tokens as usize, st.accepted + 1);
        // The marker's range covers its forward's kernel.
        let kr = t.kernels.row(base + k);
        assert!(kr.gpu_start_ns >= v.gpu_start_ns && kr.gpu_end_ns <= v.gpu_end_ns);
        assert_eq!(
            (t.strings.get(kr.op), kr.layer, t.strings.get(kr.bucket)),
            ("down_proj", 1, "gemv")
        );
    }
    assert!(run.steps.iter().any(|s| s.accepted > 0));
    assert!(run.steps.iter().any(|s| s.accepted < k));
    // Every forward the loop ran is one of the three kinds, in order.
    assert_eq!(fw.log[0].kind, ForwardKind::Prefill);
}

#[test]
fn hybrid_models_and_bad_settings_are_refused() {
    let hybrid = ModelConfig::from_json(&serde_json::json!({
        "model_type": "qwen3_5_text", "hidden_size": 64, "intermediate_size": 96,
        "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "vocab_size": 97, "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
        "full_attention_interval": 3, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
        "partial_rotary_factor": 0.25
    }))
    .unwrap();
    let s = SpecSettings {
        draft_layers: 1,
        k: 2,
        accept: Acceptance::Argmax,
    };
    let e = s.check(&hybrid).unwrap_err().to_string();
    assert!(
        e.contains("cannot be rolled back") && !e.contains('\n'),
        "{e}"
    );

    let cfg = tiny(4);
    let bad = |draft_layers, k, accept: &str| {
        SpecSettings {
            draft_layers,
            k,
            accept: Acceptance::parse(accept, 0).unwrap(),
        }
        .check(&cfg)
        .unwrap_err()
        .to_string()
    };
    assert!(bad(0, 2, "argmax").contains("draft layers 0"));
    assert!(bad(4, 2, "argmax").contains("use 1 to 3"));
    assert!(bad(1, 0, "argmax").contains("k must be"));
    assert!(bad(1, 3, "0.5,0.5").contains("needs 3 acceptance probabilities"));
    assert!(bad(1, 2, "0.5,1.5").contains("outside [0, 1]"));
    assert!(Acceptance::parse("0.5,x", 0).is_err());
    assert_eq!(
        Acceptance::parse("0.8, 0.6", 7).unwrap(),
        Acceptance::Synthetic {
            per_position: vec![0.8, 0.6],
            seed: 7
        }
    );
}
