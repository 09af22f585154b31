//! GPU tests: run on the GPU machine from a test binary built here
//! (`cargo test --release -p gapscope-engine --test gpu --no-run`, then
//! `BIN --ignored --test-threads 1` from the repository root). CI builds them; they are ignored
//! there because it has no GPU.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use gapscope_engine::bench::{self, BenchSettings};
use gapscope_engine::cuda::{Capacity, CudaBackend, Device, Timing};
use gapscope_engine::dispatch::{HybridLevers, Levers};
use gapscope_engine::lever_matrix::{hybrid_settings, lever_matrix};
use gapscope_engine::{ModelConfig, ModelWeights, WeightFormat, selftest};
use gapscope_traces::Phase;
use std::path::PathBuf;

fn model(name: &str) -> PathBuf {
    // From the repository root on the GPU machine; from the crate when run by cargo.
    let local = PathBuf::from("models").join(name);
    if local.exists() {
        local
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../models")
            .join(name)
    }
}

#[test]
#[ignore = "needs a CUDA device"]
fn every_kernel_matches_the_cpu_reference() {
    let dev = Device::open(0).unwrap();
    let checks = selftest::op_checks(&dev, 0x5eed).unwrap();
    let failed: Vec<_> = checks.iter().filter(|c| !c.pass).collect();
    assert!(failed.is_empty(), "{failed:#?}");
    assert!(checks.len() > 80);
}

#[test]
#[ignore = "needs a CUDA device"]
fn whole_model_logits_match_the_cpu_reference() {
    let checks = selftest::model_checks(0x5eed).unwrap();
    let failed: Vec<_> = checks.iter().filter(|c| !c.pass).collect();
    assert!(failed.is_empty(), "{failed:#?}");
}

/// Greedy md5 under every lever setting: CUDA graphs, paged vs contiguous KV, programmatic
/// dependent launch, fused decode kernels, and the dispatch threshold (MMVQ vs MMQ for
/// quantized weights at any threshold, including the prefill; for bf16 the thresholds 4/8/16,
/// which move npl 8 and 12 between the GEMV and the small GEMM).
#[test]
#[ignore = "needs a CUDA device"]
fn levers_keep_greedy_output_identical() {
    // (threshold, PDL, fusion) per variant; graphs and the KV layout are crossed with each.
    let variant = |thr: usize, pdl: bool, fusion: bool| {
        Levers::default()
            .with_mmvq_max_batch(thr)
            .with_pdl(pdl)
            .with_fusion(fusion)
    };
    let q8 = [
        variant(0, true, true),
        variant(8, false, false),
        variant(8, true, true),
        variant(8, true, false),
        variant(64, true, true),
    ];
    let bf16 = [
        variant(4, true, true),
        variant(8, false, false),
        variant(8, true, true),
        variant(16, true, true),
    ];
    md5_identical_over_levers("llama-3.2-1b.json", WeightFormat::Q8_0, &[1, 12], &q8);
    md5_identical_over_levers("llama-3.2-1b.json", WeightFormat::Bf16, &[1, 8, 12], &bf16);
    md5_identical_over_levers("qwen3-0.6b.json", WeightFormat::Bf16, &[1, 8, 12], &bf16);
}

/// The hybrid levers (state update, state read, out_proj layout: all eight settings) and the
/// dispatch threshold, each crossed with graphs and the KV layout, keep the greedy md5 of a
/// Qwen3.5-shaped model (DeltaNet key head dim 128 as in the real ones), Q8_0 and bf16; bf16
/// stays within the 16 rows where the GEMV and the small GEMM give the same bits.
#[test]
#[ignore = "needs a CUDA device"]
fn hybrid_levers_keep_greedy_output_identical() {
    let cfg = ModelConfig::from_json(&serde_json::json!({
        "model_type": "qwen3_5_text", "hidden_size": 1024, "intermediate_size": 3072,
        "num_hidden_layers": 8, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 256, "vocab_size": 32000, "rms_norm_eps": 1e-6, "full_attention_interval": 4,
        "linear_num_key_heads": 4, "linear_num_value_heads": 8, "linear_key_head_dim": 128,
        "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4, "partial_rotary_factor": 0.25
    }))
    .unwrap();
    // The eight hybrid settings, then the dispatch threshold moved under the all-slow and the
    // all-fast setting (Q8_0: MMVQ against MMQ at any batch; bf16: 4/8/16, where the GEMV and
    // the small GEMM give the same bits).
    let with_thresholds = |thresholds: &[usize]| -> Vec<Levers> {
        let mut v: Vec<Levers> = hybrid_settings()
            .into_iter()
            .map(|h| Levers::default().with_hybrid(h))
            .collect();
        for &t in thresholds {
            for h in [HybridLevers::SLOW, HybridLevers::default()] {
                v.push(Levers::default().with_hybrid(h).with_mmvq_max_batch(t));
            }
        }
        v
    };
    md5_identical_over_configs(
        &cfg,
        "hybrid",
        WeightFormat::Q8_0,
        &[1, 12],
        &with_thresholds(&[0, 64]),
    );
    md5_identical_over_configs(
        &cfg,
        "hybrid",
        WeightFormat::Bf16,
        &[1, 8, 12],
        &with_thresholds(&[4, 16]),
    );
}

/// Runs `npl` under `lever_matrix(variants)` (graphs x KV layout x each variant) and asserts
/// one md5 per npl.
fn md5_identical_over_levers(
    config: &str,
    format: WeightFormat,
    npl: &[usize],
    variants: &[Levers],
) {
    let cfg = ModelConfig::from_path(&model(config)).unwrap();
    md5_identical_over_configs(&cfg, config, format, npl, variants);
}

fn md5_identical_over_configs(
    cfg: &ModelConfig,
    config: &str,
    format: WeightFormat,
    npl: &[usize],
    variants: &[Levers],
) {
    let cfg = cfg.clone();
    let w = ModelWeights::random(&cfg, format, 3);
    let maxn = npl.iter().copied().max().unwrap_or(1);
    let settings = BenchSettings {
        npl: npl.to_vec(),
        npp: 24,
        ntg: 24,
        reps: 1,
        warmup: 0,
        seed: 3,
        prompt: None,
    };
    let cap = Capacity {
        max_seqs: maxn,
        max_ctx: 49,
        max_rows: maxn * 24,
    };
    let mut md5s = std::collections::BTreeMap::new();
    for lv in lever_matrix(variants) {
        let mut be =
            CudaBackend::new(Device::open(0).unwrap(), &cfg, &w, lv, cap, Timing::Off).unwrap();
        for r in bench::run(&mut be, &settings, None, |_| Ok(()), |_| {}).unwrap() {
            md5s.entry(r.npl).or_insert_with(Vec::new).push((lv, r.md5));
        }
    }
    for (n, v) in md5s {
        let first = &v[0].1;
        for (lever, m) in &v {
            assert_eq!(
                m, first,
                "{config} {format:?} npl {n}: lever {lever:?} changed the greedy md5"
            );
        }
    }
}

/// The event-latency calibration, with and without graphs: a plausible median, set on the
/// recorder, and per-launch times that come out shorter than the raw ones but never negative.
#[test]
#[ignore = "needs a CUDA device"]
fn event_latency_is_calibrated_and_subtracted() {
    let cfg = ModelConfig::from_path(&model("llama-3.2-1b.json")).unwrap();
    let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 5);
    let settings = BenchSettings {
        npl: vec![1],
        npp: 8,
        ntg: 8,
        reps: 1,
        warmup: 0,
        seed: 5,
        prompt: None,
    };
    let cap = Capacity {
        max_seqs: 1,
        max_ctx: 17,
        max_rows: 8,
    };
    // Under graphs, launch-timed steps run eagerly, as without graphs.
    for graphs in [true, false] {
        let lv = Levers {
            graphs,
            ..Levers::default()
        };
        let mut be =
            CudaBackend::new(Device::open(0).unwrap(), &cfg, &w, lv, cap, Timing::Launch).unwrap();
        be.rec.sample_every = 1;
        let c = be.calibrate_event_latency(20).unwrap();
        assert_eq!(c.n, 20);
        assert!((1..=20_000).contains(&c.median_ns), "{c:?}");
        assert!(c.min_ns <= c.median_ns && c.median_ns <= c.max_ns, "{c:?}");
        assert!(c.probe_ns >= 20_000, "{c:?}");
        // The trimmed means are what the recorder subtracts (not the median).
        assert_eq!(
            (be.rec.event_latency_ns, be.rec.event_latency_first_ns),
            (c.mean_ns, c.first_mean_ns)
        );
        let mut total = [0i64; 2];
        for (i, (latency, first)) in [(c.mean_ns, c.first_mean_ns), (0, 0)]
            .into_iter()
            .enumerate()
        {
            be.rec.event_latency_ns = latency;
            be.rec.event_latency_first_ns = first;
            bench::run(
                &mut be,
                &settings,
                None,
                |recs| {
                    for r in recs.iter().filter(|r| r.launch_timed) {
                        // Launch-timed decode steps never replay a graph.
                        if r.phase == Phase::Decode {
                            assert_eq!(r.graph_id, 0, "step {}", r.step);
                        }
                        for l in &r.launches {
                            assert!(l.gpu_end_ns >= l.gpu_start_ns, "{}", l.meta.name);
                            total[i] += l.gpu_end_ns - l.gpu_start_ns;
                        }
                    }
                    Ok(())
                },
                |_| {},
            )
            .unwrap();
        }
        assert!(
            total[0] < total[1],
            "graphs={graphs}: corrected {} ns vs raw {} ns",
            total[0],
            total[1]
        );
    }
}

/// Hidden-state capture on CUDA (`logits --hidden`): after a prefill of two sequences and
/// graphed decode steps, each layer's residual stream at the logit rows matches the CPU
/// reference's within the bf16 tolerance of the whole-model logits check, row for row; and
/// capture changes no logit bit against the same backend with it off.
#[test]
#[ignore = "needs a CUDA device"]
fn hidden_capture_matches_the_cpu_reference() {
    use gapscope_engine::cpu::CpuBackend;
    use gapscope_engine::model::{Backend, Batch, forward};
    let cfg = ModelConfig::from_json(&serde_json::json!({
        "model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 3, "num_attention_heads": 8, "num_key_value_heads": 2,
        "head_dim": 64, "vocab_size": 1000, "rms_norm_eps": 1e-6, "tie_word_embeddings": false
    }))
    .unwrap();
    let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 0x5eed);
    let cap = Capacity {
        max_seqs: 2,
        max_ctx: 32,
        max_rows: 16,
    };
    let open = |capture: bool| {
        let mut be = CudaBackend::new(
            Device::open(0).unwrap(),
            &cfg,
            &w,
            Levers::default(),
            cap,
            Timing::Off,
        )
        .unwrap();
        be.set_capture_hidden(capture).unwrap();
        be
    };
    let (mut on, mut off) = (open(true), open(false));
    assert!(off.read_hidden().unwrap().is_none());
    let mut cpu = CpuBackend::new(&cfg, &w);
    cpu.set_capture_hidden(true);
    let prompts = vec![vec![3, 17, 42, 8, 90], vec![500, 1, 999, 7, 64]];
    let mut batches = vec![(Batch::prefill(&prompts), Phase::Prefill)];
    for i in 0..3 {
        batches.push((
            Batch::decode(vec![11 + i, 300 + i], vec![5 + i; 2]),
            Phase::Decode,
        ));
    }
    // Batch 1 at the next position of sequence 0 (the batch-1 decode paths).
    batches.push((Batch::decode(vec![21], vec![8]), Phase::Decode));
    let mut worst = 0f64;
    for (step, (b, phase)) in batches.iter().enumerate() {
        for be in [&mut on, &mut off] {
            be.set_tokens(&b.tokens).unwrap();
            be.step(b, *phase, step as i64).unwrap();
        }
        cpu.begin(b).unwrap();
        forward(&mut cpu, &cfg, b).unwrap();
        assert_eq!(
            on.read_logits().unwrap(),
            off.read_logits().unwrap(),
            "step {step}"
        );
        let got = on.read_hidden().unwrap().unwrap();
        let want = cpu.hidden().unwrap();
        assert_eq!(got.len(), cfg.layers);
        for (l, (g, c)) in got.iter().zip(want).enumerate() {
            assert_eq!(
                g.len(),
                b.logit_rows() * cfg.hidden,
                "step {step} layer {l}"
            );
            for (r, (gr, cr)) in g
                .chunks_exact(cfg.hidden)
                .zip(c.chunks_exact(cfg.hidden))
                .enumerate()
            {
                let scale = cr.iter().fold(0f64, |m, v| m.max(f64::from(v.abs())));
                let diff = gr
                    .iter()
                    .zip(cr)
                    .fold(0f64, |m, (a, b)| m.max(f64::from((a - b).abs())));
                let e = diff / scale.max(1e-30);
                worst = worst.max(e);
                assert!(e < 1e-2, "step {step} layer {l} row {r}: {e:.2e}");
            }
        }
    }
    println!("hidden capture: worst max-abs/max-ref error against the CPU {worst:.2e}");
}
