//! Synthetic traces whose answers are computed by hand: overlapping streams, a CUDA graph
//! replay under a host annotation, a step with a host gap, auto-detected steps with a
//! prefill, and a round trip through the native format.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use gapscope_analyzer::analysis::steps::{MarkerRanges, StepSource};
use gapscope_analyzer::analysis::{AnalysisSettings, Report, analyze};
use gapscope_analyzer::diff::{DiffSide, NameTimes};
use gapscope_analyzer::import::{Imported, InputFormat};
use gapscope_analyzer::roofline::report::FloorSource;
use gapscope_analyzer::session::{self, Run, SessionSettings};
use gapscope_analyzer::{Bucket, RuleSet};
use gapscope_traces::*;

fn imported(t: Trace) -> Imported {
    Imported {
        trace: t,
        format: InputFormat::Native,
        warnings: Vec::new(),
        defects: Vec::new(),
    }
}

fn report(t: Trace, settings: &AnalysisSettings) -> Report {
    analyze(&imported(t), &RuleSet::builtin(), settings)
}

/// A synthetic trace analysed as a session opens a run: the report and every name's time.
fn analysed(t: Trace, settings: &AnalysisSettings) -> (Report, NameTimes) {
    let s = SessionSettings {
        analysis: settings.clone(),
        ..SessionSettings::default()
    };
    let (a, names) = session::analyze(&Run::new("synthetic"), &imported(t), &s);
    (a.report, names)
}

fn side<'a>(r: &'a (Report, NameTimes)) -> DiffSide<'a> {
    DiffSide {
        report: &r.0,
        names: &r.1,
    }
}

fn kernel(t: &mut Trace, name: &str, stream: u32, corr: u64, s: i64, e: i64) {
    let name = t.strings.intern(name);
    t.kernels.push(KernelRow {
        name,
        stream,
        correlation: corr,
        gpu_start_ns: s,
        gpu_end_ns: e,
        ..Default::default()
    });
}

/// A decode-step marker `name` from `source` over `[start, end)` on the GPU.
fn decode_marker(
    t: &mut Trace,
    name: &str,
    source: MarkerSource,
    start: i64,
    end: i64,
) -> MarkerRow {
    MarkerRow {
        name: t.strings.intern(name),
        source: source as u8,
        phase: Phase::Decode as u8,
        gpu_start_ns: start,
        gpu_end_ns: end,
        ..Default::default()
    }
}

fn bucket(r: &Report, b: Bucket) -> &gapscope_analyzer::analysis::BucketRow {
    r.buckets
        .iter()
        .find(|x| x.bucket == b)
        .expect("bucket present")
}

#[test]
fn overlapping_streams_busy_is_the_interval_union() {
    // Stream 1: [0,100); stream 2: [50,150); a DtoD copy [200,250).
    // Span 250; kernel union 150 (60%); with the copy 200 (80%). Sum of durations is 250,
    // which a naive sum would report as 100%.
    let mut t = Trace::new(Manifest::new("synthetic"));
    kernel(&mut t, "nvjet_sm90_a", 1, 1, 0, 100);
    kernel(&mut t, "flash_fwd_splitkv_kernel", 2, 2, 50, 150);
    let copy = t.strings.intern("Memcpy DtoD (Device -> Device)");
    t.memops.push(MemopRow {
        name: copy,
        kind: MemopKind::DtoD as u8,
        bytes: 1 << 20,
        gpu_start_ns: 200,
        gpu_end_ns: 250,
        ..Default::default()
    });
    let r = report(t, &AnalysisSettings::default());
    let d = &r.devices[0];
    assert_eq!(d.span_ns, 250);
    assert_eq!(d.kernel_busy_ns, 150);
    assert_eq!(d.busy_ns, 200);
    assert!((d.kernel_busy_pct - 60.0).abs() < 1e-9);
    assert!((d.busy_pct - 80.0).abs() < 1e-9);
    // No markers and no period: whole-trace buckets.
    assert_eq!(r.steps.decode_steps, 0);
    assert_eq!(bucket(&r, Bucket::GemmDense).total_ms, 100e-6);
    assert_eq!(bucket(&r, Bucket::Attention).total_ms, 100e-6);
    assert_eq!(bucket(&r, Bucket::Copy).total_ms, 50e-6);
    assert_eq!(bucket(&r, Bucket::Copy).calls, 1);
}

#[test]
fn graph_replay_under_host_annotations_and_host_gap() {
    // Two host-side "decode_step" annotations. Step 0 launches a CUDA graph once (correlation
    // 10) whose three kernels share that correlation; step 1 launches two plain kernels.
    //   step 0 kernels: [1000,1100) [1100,1200) [1300,1400)  -> busy 300, launch gap 100
    //   step 1 kernels: [2000,2050) [2100,2200)               -> busy 150, launch gap 50
    //   host gap between steps: 2000 - 1400 = 600
    let mut t = Trace::new(Manifest::new("synthetic"));
    let step = t.strings.intern("decode_step");
    for (s, e) in [(0, 900), (950, 1950)] {
        t.markers.push(MarkerRow {
            name: step,
            source: MarkerSource::KinetoUserAnnotation as u8,
            host_start_ns: s,
            host_end_ns: e,
            ..Default::default()
        });
    }
    let graph = t.strings.intern("cudaGraphLaunch");
    let launch = t.strings.intern("cudaLaunchKernel");
    for (corr, name, at) in [(10, graph, 100), (11, launch, 1000), (12, launch, 1010)] {
        t.launches.push(LaunchRow {
            correlation: corr,
            name,
            api: LaunchApi::Runtime as u8,
            host_start_ns: at,
            host_end_ns: at + 5,
            ..Default::default()
        });
    }
    kernel(&mut t, "mul_mat_vec_q", 7, 10, 1000, 1100);
    kernel(&mut t, "rms_norm_f32", 7, 10, 1100, 1200);
    kernel(&mut t, "mul_mat_vec_q", 7, 10, 1300, 1400);
    kernel(&mut t, "mul_mat_vec_q", 7, 11, 2000, 2050);
    kernel(&mut t, "k_get_rows_float", 7, 12, 2100, 2200);
    let r = report(t.clone(), &AnalysisSettings::default());
    assert_eq!(r.steps.decode_steps, 2, "{}", r.steps.source);
    assert!(
        matches!(
            r.steps.source,
            StepSource::Markers {
                ranges: MarkerRanges::UserAnnotation,
                ..
            }
        ),
        "{}",
        r.steps.source
    );
    assert_eq!(r.source.graph_launches, 1);
    assert_eq!(r.source.graph_kernels, 3);
    // Launch gaps: (100 + 50) / 2 steps; host gap 600 / 2 steps.
    assert!((r.steps.launch_gap_ms_per_step.unwrap() - 75e-6).abs() < 1e-12);
    assert!((r.steps.host_gap_ms_per_step.unwrap() - 300e-6).abs() < 1e-12);
    let w = r.steps.worst_stall.as_ref().unwrap();
    assert!((w.ms - 600e-6).abs() < 1e-12 && w.between_steps && w.step == 1);
    // TPOT: one start-to-start period, 2000 - 1000.
    let tpot = r.steps.tpot_ms.unwrap();
    assert_eq!(tpot.n, 1);
    assert!((tpot.median - 1000e-6).abs() < 1e-12);
    // gemv: 200 ns in step 0, 50 ns in step 1.
    let g = bucket(&r, Bucket::Gemv);
    assert!((g.total_ms - 250e-6).abs() < 1e-12);
    assert_eq!(g.calls_per_step, Some(1.5));
    let s = g.ms_per_step.unwrap();
    assert!((s.median - 125e-6).abs() < 1e-12);
    assert!((bucket(&r, Bucket::Norm).total_ms - 100e-6).abs() < 1e-12);
    assert!((bucket(&r, Bucket::EmbedGather).total_ms - 100e-6).abs() < 1e-12);
    // Busy over the decode window [1000, 2200): 300 + 150 = 450 of 1200.
    assert!((r.steps.decode_busy_pct.unwrap() - 37.5).abs() < 1e-9);

    // Move step 1 next to step 0 (host gap 50) so the 100 ns launch gap inside step 0 is
    // now the worst stall.
    let mut t2 = t;
    for i in 3..5 {
        t2.kernels.gpu_start_ns[i] -= 550;
        t2.kernels.gpu_end_ns[i] -= 550;
    }
    let r2 = report(t2, &AnalysisSettings::default());
    let w = r2.steps.worst_stall.as_ref().unwrap();
    assert!(
        !w.between_steps && w.step == 0 && (w.ms - 100e-6).abs() < 1e-12,
        "{w:?}"
    );
    assert_eq!(w.gpu_start_ns, 1200);
}

/// One decode step of a tiny model: embed, 2 layers of (norm, gemv, attention), argmax.
fn decode_step(t: &mut Trace, at: i64) -> i64 {
    let mut now = at;
    let mut k = |t: &mut Trace, name: &str, d: i64| {
        kernel(t, name, 7, 0, now, now + d);
        now += d + 5;
    };
    k(t, "get_rows_bf16", 10);
    for _ in 0..2 {
        k(t, "rms_norm_bf16", 10);
        k(t, "gemv_bf16", 40);
        k(t, "attn_decode_paged_bf16", 30);
    }
    k(t, "argmax_f32", 10);
    now
}

#[test]
fn auto_detected_steps_with_a_prefill() {
    // A prefill (embed + GEMMs, different kernels) then 10 identical decode steps with a
    // 1000 ns host gap before each. No markers: steps come from the period.
    let mut t = Trace::new(Manifest::new("synthetic"));
    kernel(&mut t, "mmq_q8_0", 7, 0, 0, 500);
    kernel(&mut t, "attn_prefill_bf16", 7, 0, 510, 900);
    let mut now = 2000;
    let mut starts = Vec::new();
    for _ in 0..10 {
        starts.push(now);
        now = decode_step(&mut t, now) + 1000;
    }
    let r = report(t, &AnalysisSettings::default());
    assert_eq!(r.steps.decode_steps, 10, "{}", r.steps.source);
    assert_eq!(r.steps.prefill_steps, 1);
    assert!(r.steps.source.is_periodic(), "{}", r.steps.source);
    let tpot = r.steps.tpot_ms.unwrap();
    assert!((tpot.median - (starts[1] - starts[0]) as f64 / 1e6).abs() < 1e-12);
    assert_eq!(tpot.cv, 0.0);
    assert_eq!(bucket(&r, Bucket::Gemv).calls_per_step, Some(2.0));
    assert_eq!(bucket(&r, Bucket::Attention).calls_per_step, Some(2.0));
    assert_eq!(
        r.prefill_buckets
            .iter()
            .find(|b| b.bucket == Bucket::GemmQuant)
            .unwrap()
            .calls,
        1
    );
    // The worst stall is the host gap (1000 ns + the 5 ns tail), not a 5 ns launch gap.
    let w = r.steps.worst_stall.as_ref().unwrap();
    assert!(w.between_steps && (w.ms - 1005e-6).abs() < 1e-12, "{w:?}");
    // Per step: 10+2*(10+40+30)+10 = 180 ns busy; in-step gaps 7 kernels*5ns... 8 kernels
    // -> 7 gaps of 5 ns = 35 ns launch gap per step; host gap 1000+5 between steps.
    assert!((r.steps.launch_gap_ms_per_step.unwrap() - 35e-6).abs() < 1e-12);
}

#[test]
fn native_roundtrip_reports_the_same() {
    let mut t = Trace::new(Manifest::new("synthetic"));
    let mut now = 0;
    for _ in 0..5 {
        now = decode_step(&mut t, now) + 100;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("x.gst");
    write_trace(&p, &t).unwrap();
    let back = read_trace(&p, &ReadOptions::default()).unwrap();
    let a = serde_json::to_value(report(t, &AnalysisSettings::default()).buckets).unwrap();
    let b = serde_json::to_value(report(back, &AnalysisSettings::default()).buckets).unwrap();
    assert_eq!(a, b);
}

#[test]
fn diff_attributes_the_gap_by_bucket_and_flags_a_new_copy() {
    // B: 10 identical engine decode steps. A: the same plus one D2D state copy of 30 ns per
    // step and an extra 40 ns GEMV; with their two 5 ns launch gaps A's step is 80 ns longer.
    let build = |extra: bool| {
        let mut t = Trace::new(Manifest::new("synthetic"));
        let copy = t.strings.intern("Memcpy DtoD (Device -> Device)");
        let mut now = 0;
        for _ in 0..10 {
            let start = now;
            now = decode_step(&mut t, now);
            if extra {
                kernel(&mut t, "gemv_bf16", 7, 0, now, now + 40);
                now += 45;
                t.memops.push(MemopRow {
                    name: copy,
                    kind: MemopKind::DtoD as u8,
                    bytes: 1 << 20,
                    gpu_start_ns: now,
                    gpu_end_ns: now + 30,
                    stream: 7,
                    ..Default::default()
                });
                now += 35;
            }
            let m = decode_marker(&mut t, "decode", MarkerSource::Engine, start, now);
            t.markers.push(m);
            now += 1000;
        }
        t
    };
    let settings = AnalysisSettings::default();
    let a = analysed(build(true), &settings);
    let b = analysed(build(false), &settings);
    let d = gapscope_analyzer::diff::diff(side(&a), side(&b), 10);
    assert!((d.gap_ms - 80e-6).abs() < 1e-12, "gap {}", d.gap_ms);
    let share = |bk: Bucket| {
        d.buckets
            .iter()
            .find(|x| x.bucket == bk)
            .unwrap()
            .share_of_gap_pct
            .unwrap()
    };
    assert!((share(Bucket::Gemv) - 50.0).abs() < 1e-9);
    assert!((share(Bucket::Copy) - 37.5).abs() < 1e-9);
    let total: f64 = d
        .buckets
        .iter()
        .map(|x| x.share_of_gap_pct.unwrap())
        .sum::<f64>()
        + d.residual_share_pct.unwrap();
    assert!((total - 100.0).abs() < 1e-9);
    // 10 ns of the gap is idle (the 5 ns launch gaps before and after the new work).
    assert!((d.residual_ms - 10e-6).abs() < 1e-12);
    assert_eq!(d.structural.extra_copies_per_step, 1.0);
    assert!(
        d.structural
            .only_in_a
            .iter()
            .any(|(n, c)| n.contains("DtoD") && *c == 1.0)
    );
    assert_eq!(d.what_if[0].bucket, Some(Bucket::Gemv));
}

/// Four engine decode steps (batch 1) whose gemv launches declare `gemv_bytes` each
/// (-1: no declared cost).
fn engine_trace(gemv_bytes: i64) -> Trace {
    let mut t = Trace::new(Manifest::new("engine"));
    let mut now = 0;
    for _ in 0..4 {
        let step = t.strings.intern("decode");
        let start = now;
        now = decode_step(&mut t, now);
        t.markers.push(MarkerRow {
            name: step,
            source: MarkerSource::Engine as u8,
            phase: Phase::Decode as u8,
            gpu_start_ns: start,
            gpu_end_ns: now,
            batch_size: 1,
            ..Default::default()
        });
        now += 100;
    }
    let gemv = t.strings.lookup("gemv_bf16").unwrap();
    for i in 0..t.kernels.len() {
        if t.kernels.name[i] == gemv {
            t.kernels.bytes[i] = gemv_bytes;
            if gemv_bytes >= 0 {
                t.kernels.flops[i] = 1_000;
            }
        }
    }
    t
}

/// The roofline of a tiny bf16 model (`config`, an HF config) on an H100 SXM at batch 1 and
/// context `ctx`, with `r` placed on it.
fn tiny_roofline(
    config: serde_json::Value,
    ctx: u64,
    r: Report,
) -> gapscope_analyzer::roofline::report::RooflineReport {
    let model = gapscope_analyzer::roofline::ModelSpec::from_hf_config(&config).unwrap();
    let hw = gapscope_analyzer::roofline::hw::lookup("h100-sxm").unwrap();
    gapscope_analyzer::roofline::report::roofline(
        &model,
        &hw,
        gapscope_analyzer::roofline::WeightFormat::Bf16,
        &[1],
        ctx,
        &[(r, 1)],
    )
}

#[test]
fn engine_bytes_give_per_bucket_floors() {
    // decode_step() gives 2 gemv launches of 40 ns per step; declare 100,000 bytes each.
    let r = report(engine_trace(100_000), &AnalysisSettings::default());
    let c = bucket(&r, Bucket::Gemv).cost.unwrap();
    assert_eq!(c.bytes_per_step, 200_000.0);
    assert!((c.costed_ms_per_step - 80e-6).abs() < 1e-15);
    assert!(
        bucket(&r, Bucket::Attention).cost.is_none(),
        "no declared cost"
    );
    let rr = tiny_roofline(
        serde_json::json!({
            "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "intermediate_size": 128, "vocab_size": 100
        }),
        0,
        r,
    );
    let b = &rr.measured[0].buckets;
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].source, FloorSource::DeclaredByEngine);
    assert_eq!(b[0].buckets, [Bucket::Gemv]);
    // An engine trace keeps its declared costs: the undeclared buckets get no floor, not one
    // derived from the model spec.
    let none: Vec<Bucket> = rr.measured[0]
        .buckets_without_floor
        .iter()
        .map(|x| x.bucket)
        .collect();
    assert_eq!(
        none,
        [
            Bucket::Attention,
            Bucket::EmbedGather,
            Bucket::Norm,
            Bucket::Sampling
        ]
    );
    assert!(
        rr.measured[0].buckets_without_floor[0]
            .reason
            .contains("declare no")
    );
    // 200,000 B / 3.35e12 B/s = 5.970e-5 ms against 8e-5 ms measured: 74.63%.
    assert!((b[0].floor_ms - 200_000.0 / 3.35e12 * 1e3).abs() < 1e-15);
    assert!((b[0].pct_of_floor - 74.626_865_671_641_8).abs() < 1e-6);
    assert!((b[0].pct_of_bandwidth - b[0].pct_of_floor).abs() < 1e-9);
}

#[test]
fn what_if_at_the_floor_uses_declared_bytes() {
    // Same engine trace twice; A declares 100,000 bytes per gemv launch. On an H100 SXM the
    // gemv floor is 200,000 B / 3.35e12 B/s per step; A's step shrinks by the gap to it.
    let a = analysed(engine_trace(100_000), &AnalysisSettings::default());
    let b = analysed(engine_trace(-1), &AnalysisSettings::default());
    let c = gapscope_analyzer::diff::FloorCeilings {
        bytes_per_s: 3.35e12,
        flops_per_s: 989.4e12,
    };
    let d = gapscope_analyzer::diff::diff_with_floor(side(&a), side(&b), 5, Some(c));
    let w = d
        .what_if
        .iter()
        .find(|w| w.bucket == Some(Bucket::Gemv))
        .unwrap();
    let floor_ms = 200_000.0 / 3.35e12 * 1e3;
    let want = d.a.step_ms - (80e-6 - floor_ms);
    assert!((w.at_floor_ms.unwrap() - want).abs() < 1e-12);
    assert!(
        d.what_if
            .iter()
            .find(|w| w.bucket == Some(Bucket::Attention))
            .unwrap()
            .at_floor_ms
            .is_none()
    );
}

/// Four decode steps of a Kineto-like trace (kernel names as PyTorch/cuBLAS/cuDNN write
/// them, no declared bytes or FLOPs, steps under a `gpu_user_annotation`) of a tiny model:
/// per step a 10 ns embedding gather; 2 layers of a 10 ns norm, a 40 ns nvjet GEMM and a 30 ns
/// attention; a 20 ns cuBLAS GEMV LM head; a 10 ns argmax.
fn kineto_like_trace() -> Trace {
    let mut t = Trace::new(Manifest::new("kineto-json"));
    let mut now = 0;
    for _ in 0..4 {
        let start = now;
        let mut k = |t: &mut Trace, name: &str, d: i64| {
            kernel(t, name, 7, 0, now, now + d);
            now += d + 5;
        };
        k(
            &mut t,
            "void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, 2, 2, -2>(int)",
            10,
        );
        for _ in 0..2 {
            k(
                &mut t,
                "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 4> >(int)",
                10,
            );
            k(&mut t, "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT", 40);
            k(
                &mut t,
                "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_3_64x64x128_4x1_cga1x1x1_kernel0_0",
                30,
            );
        }
        k(
            &mut t,
            "void gemv2T_kernel_val<int, int, __nv_bfloat16, __nv_bfloat16, float, 128, 16, 4, 4, false, false>(int)",
            20,
        );
        k(
            &mut t,
            "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::BFloat16, at::native::ArgMaxOps<c10::BFloat16>, unsigned int, long, 4> >(int)",
            10,
        );
        let m = decode_marker(
            &mut t,
            "decode_step",
            MarkerSource::KinetoGpuAnnotation,
            start,
            now,
        );
        t.markers.push(m);
        now += 100;
    }
    t
}

#[test]
fn traces_without_declared_costs_get_floors_derived_from_the_model() {
    let r = report(kineto_like_trace(), &AnalysisSettings::default());
    assert_eq!(r.steps.decode_steps, 4);
    assert!(
        r.buckets.iter().all(|b| b.cost.is_none()),
        "nothing declared"
    );
    // hidden 64, 2 layers, 4 heads of 16, 2 KV heads, MLP 128, vocab 100, bf16.
    let rr = tiny_roofline(
        serde_json::json!({
            "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 100
        }),
        100,
        r,
    );
    let m = &rr.measured[0];
    let b = &m.buckets;
    assert_eq!(b.len(), 3, "{b:#?}");
    assert!(
        b.iter()
            .all(|x| x.source == FloorSource::DerivedFromModelSpec)
    );
    // Matmul group: the GEMMs and the GEMV together, 2 * 40 + 20 = 100 ns per step. Weights:
    // per layer q 64*64 + k,v 2*64*32 + o 64*64 + MLP 3*64*128 = 36,864; 2 layers plus the
    // LM head 100*64 = 80,128 weights = 160,256 B. Floor 160,256 B / 3.35e12 B/s =
    // 4.7838e-5 ms (compute, 160,256 FLOPs / 989.4e12, is lower): 47.8376% of floor.
    assert_eq!(b[0].buckets, [Bucket::Gemv, Bucket::GemmDense]);
    assert_eq!(
        b[0].bucket,
        Bucket::GemmDense,
        "the member with the most time"
    );
    assert_eq!(b[0].bytes_per_step, 160_256.0);
    assert_eq!(b[0].flops_per_step, 160_256.0);
    assert!((b[0].ms_per_step - 100e-6).abs() < 1e-15);
    assert!((b[0].floor_ms - 160_256.0 / 3.35e12 * 1e3).abs() < 1e-15);
    assert!((b[0].pct_of_floor - 160_256.0 / 3350.0).abs() < 1e-9);
    // Attention: 2 * 30 = 60 ns per step. KV at context 100: 100 tokens * 2 layers * (K, V)
    // * 2 heads * 16 * 2 B = 25,600 B; floor 7.6418e-6 ms: 12.7363% of floor.
    assert_eq!(b[1].buckets, [Bucket::Attention]);
    assert_eq!(b[1].bytes_per_step, 25_600.0);
    assert_eq!(b[1].flops_per_step, 4.0 * 100.0 * 4.0 * 16.0 * 2.0);
    assert!((b[1].pct_of_floor - 25_600.0 / 3.35e12 / 60e-9 * 100.0).abs() < 1e-9);
    assert!((b[1].pct_of_floor - 12.7363).abs() < 1e-4);
    // The gather reads one 64-wide bf16 row, 128 B, in 10 ns.
    assert_eq!(b[2].buckets, [Bucket::EmbedGather]);
    assert_eq!(b[2].bytes_per_step, 128.0);
    assert!((b[2].pct_of_floor - 128.0 / 3.35e12 / 10e-9 * 100.0).abs() < 1e-9);
    // Norm and argmax have no model-derived minimum and say so.
    let none: Vec<(Bucket, f64)> = m
        .buckets_without_floor
        .iter()
        .map(|x| (x.bucket, x.ms_per_step))
        .collect();
    assert_eq!(none.len(), 2, "{none:?}");
    assert_eq!(none[0].0, Bucket::Norm);
    assert!((none[0].1 - 20e-6).abs() < 1e-15);
    assert_eq!(none[1].0, Bucket::Sampling);
    assert!(
        m.buckets_without_floor
            .iter()
            .all(|x| x.reason.starts_with("no model-derived minimum"))
    );
    // The JSON names the source.
    let v = serde_json::to_value(m).unwrap();
    assert_eq!(v["buckets"][0]["source"], "derived_from_model_spec");
    assert_eq!(v["buckets"][0]["buckets"][1], "gemm_dense");
}
