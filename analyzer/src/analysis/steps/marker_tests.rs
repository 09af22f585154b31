//! Marker-based step detection on synthetic traces: engine markers, tiers, the user's
//! override, training iterations, GPU-vs-host ranges, kernel evidence and the layer checks.

use gapscope_traces::{
    KernelRow, LaunchApi, LaunchRow, Manifest, MarkerRow, MarkerSource, Phase, Trace,
};
use regex::Regex;

use super::*;
use crate::rules::RuleSet;

/// The names of the markers that delimit the steps (none when no markers do).
fn marker_names(s: &Steps) -> &[String] {
    match &s.source {
        StepSource::Markers { names, .. } => names,
        _ => &[],
    }
}

/// The kinds of evidence that gave the steps their phases, in [`Evidence`] order.
fn evidence(s: &Steps) -> Vec<Evidence> {
    match &s.phase_source {
        PhaseSource::Evidence { counts, .. } => counts.iter().map(|c| c.evidence).collect(),
        _ => Vec::new(),
    }
}

/// A trace built on one clock: each launch call takes 2 ns on the host, its kernel runs
/// 10 ns later on the GPU.
struct Builder {
    t: Trace,
    now: i64,
    corr: u64,
}

impl Builder {
    fn new() -> Self {
        Self {
            t: Trace::new(Manifest::new("test")),
            now: 1_000,
            corr: 0,
        }
    }

    /// Launches one kernel of `dur` ns; returns its GPU window.
    fn kernel(&mut self, name: &str, dur: i64) -> (i64, i64) {
        self.corr += 1;
        let c = self.corr;
        self.launch_call("cudaLaunchKernel", c);
        self.run(name, c, dur)
    }

    fn launch_call(&mut self, name: &str, corr: u64) {
        let name = self.t.strings.intern(name);
        self.t.launches.push(LaunchRow {
            correlation: corr,
            name,
            api: LaunchApi::Runtime as u8,
            host_start_ns: self.now,
            host_end_ns: self.now + 2,
            ..LaunchRow::default()
        });
    }

    fn run(&mut self, name: &str, corr: u64, dur: i64) -> (i64, i64) {
        let name = self.t.strings.intern(name);
        let start = self.now + 10;
        self.t.kernels.push(KernelRow {
            name,
            correlation: corr,
            gpu_start_ns: start,
            gpu_end_ns: start + dur,
            ..KernelRow::default()
        });
        self.now = start + dur + 5;
        (start, start + dur)
    }

    /// One graph launch that replays `names` (all kernels share its correlation).
    fn graph(&mut self, names: &[(&str, i64)]) -> (i64, i64) {
        self.corr += 1;
        let c = self.corr;
        self.launch_call("hipGraphLaunch", c);
        let mut w = (i64::MAX, i64::MIN);
        for &(n, d) in names {
            let (s, e) = self.run(n, c, d);
            w = (w.0.min(s), w.1.max(e));
        }
        w
    }

    /// A host range (Kineto user_annotation) around what `f` launches; returns the GPU
    /// window of the kernels launched inside it.
    fn host(&mut self, name: &str, f: impl FnOnce(&mut Self)) -> (i64, i64) {
        let start = self.now;
        let first = self.t.kernels.len();
        f(self);
        let end = self.now;
        let name = self.t.strings.intern(name);
        self.t.markers.push(MarkerRow {
            name,
            source: MarkerSource::KinetoUserAnnotation as u8,
            host_start_ns: start,
            host_end_ns: end,
            ..MarkerRow::default()
        });
        self.now += 50;
        let k = &self.t.kernels;
        let s = k.gpu_start_ns[first..].iter().copied().min().unwrap_or(0);
        let e = k.gpu_end_ns[first..].iter().copied().max().unwrap_or(0);
        (s, e)
    }

    /// A GPU-side range (Kineto gpu_user_annotation).
    fn gpu(&mut self, name: &str, (start, end): (i64, i64)) {
        let name = self.t.strings.intern(name);
        self.t.markers.push(MarkerRow {
            name,
            source: MarkerSource::KinetoGpuAnnotation as u8,
            gpu_start_ns: start,
            gpu_end_ns: end,
            ..MarkerRow::default()
        });
    }

    /// A decoder layer: matmuls and one attention kernel named `attn`.
    fn layer(&mut self, attn: &str) {
        self.kernel("rms_norm_f32", 20);
        self.kernel("gemv_bf16_b1", 100);
        self.kernel(attn, 50);
        self.kernel("gemv_bf16_b1", 100);
    }
}

fn detect_with(t: &Trace, s: &StepSettings) -> Steps {
    let p = Prepared::new(t, &RuleSet::builtin());
    detect(&p, s)
}

fn detect_default(t: &Trace) -> Steps {
    detect_with(t, &StepSettings::default())
}

/// One letter a step: `P`refill, `D`ecode, `M`ixed, `T`rain, `?` for the rest.
pub(super) fn phases(s: &Steps) -> String {
    s.steps
        .iter()
        .map(|s| match s.phase {
            Phase::Prefill => 'P',
            Phase::Decode => 'D',
            Phase::Mixed => 'M',
            Phase::Train => 'T',
            _ => '?',
        })
        .collect()
}

const DECODE_32: &str =
    "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)";

#[test]
fn one_vllm_step_over_a_graph_of_twelve_layers_is_one_step() {
    let mut b = Builder::new();
    let layers: Vec<(&str, i64)> = std::iter::repeat_n(
        [
            ("rms_norm_f32", 20),
            ("gemv_bf16_b1", 100),
            ("kernel_unified_attention_2d", 50),
            ("gemv_bf16_b1", 100),
        ],
        12,
    )
    .flatten()
    .collect();
    let w = b.host(DECODE_32, |b| {
        b.graph(&layers);
    });
    let s = detect_default(&b.t);
    assert_eq!(phases(&s), "D", "{}", s.source);
    assert_eq!((s.steps[0].gpu_start_ns, s.steps[0].gpu_end_ns), w);
    assert_eq!(s.batch, vec![32]);
    assert_eq!(s.engine.as_deref(), Some("vLLM V1"));
    assert!(s.doubts.is_empty(), "{:?}", s.doubts);

    // Without markers the periodic detector takes the layers for steps, and says so.
    let s = detect_with(
        &b.t,
        &StepSettings {
            ignore_markers: true,
            ..StepSettings::default()
        },
    );
    assert!(s.steps.len() >= 10, "{}", s.source);
    assert_eq!(s.doubts.len(), 2, "{:?}", s.doubts);
    assert!(s.doubts[0].contains("one graph launch (hipGraphLaunch)"));
    assert!(s.doubts[1].contains("inside one vLLM V1 step marker"));
}

#[test]
fn vllm_counts_label_prefill_mixed_and_decode_steps() {
    let mut b = Builder::new();
    for name in [
        "execute_context_2(300)_generation_0(0)",
        "execute_context_1(120)_generation_7(7)",
        "execute_context_0(0)_generation_8(8)",
        "execute_context_0(0)_generation_8(8)",
        "execute_context_0(0)_generation_8(8)",
    ] {
        b.host(name, |b| b.layer("kernel_unified_attention_2d"));
    }
    let s = detect_default(&b.t);
    assert_eq!(phases(&s), "PMDDD", "{}", s.source);
    assert_eq!(s.batch, vec![2, 8, 8, 8, 8]);
    assert_eq!(
        s.phase_source,
        PhaseSource::Evidence {
            counts: vec![EvidenceCount {
                evidence: Evidence::Marker,
                steps: 5
            }],
            example: None,
            says: Some("context/generation request counts"),
        }
    );
}

#[test]
fn sglang_step_inside_vllm_style_marker_wins_and_capture_is_no_step() {
    let mut b = Builder::new();
    b.host("capture_32_DECODE", |b| b.layer("attn_decode_bf16"));
    let mut inner = Vec::new();
    for _ in 0..2 {
        b.host(DECODE_32, |b| {
            b.kernel("copy_f32", 10);
            inner.push(b.host("step[DECODE bs=32]", |b| b.layer("attn_decode_bf16")));
        });
    }
    let s = detect_default(&b.t);
    assert_eq!(phases(&s), "DD", "{}", s.source);
    assert_eq!(marker_names(&s), ["step[DECODE bs=32]"], "{}", s.source);
    let got: Vec<(i64, i64)> = s
        .steps
        .iter()
        .map(|s| (s.gpu_start_ns, s.gpu_end_ns))
        .collect();
    assert_eq!(got, inner);
    assert_eq!(s.engine.as_deref(), Some("SGLang"));
}

#[test]
fn user_regex_wins_and_still_reads_the_metadata() {
    let mut b = Builder::new();
    let mut outer = Vec::new();
    for _ in 0..2 {
        outer.push(b.host(DECODE_32, |b| {
            b.kernel("copy_f32", 10);
            b.host("step[DECODE bs=32]", |b| b.layer("attn_decode_bf16"));
        }));
    }
    let s = detect_with(
        &b.t,
        &StepSettings {
            regex: Regex::new("^execute_").unwrap(),
            ignore_markers: false,
        },
    );
    let got: Vec<(i64, i64)> = s
        .steps
        .iter()
        .map(|s| (s.gpu_start_ns, s.gpu_end_ns))
        .collect();
    assert_eq!(got, outer, "{}", s.source);
    assert_eq!(phases(&s), "DD");
    assert_eq!(s.batch, vec![32, 32]);
}

#[test]
fn training_trace_gives_iterations_not_forward_and_optimizer_phases() {
    let mut b = Builder::new();
    let mut iters = Vec::new();
    for i in 0..3 {
        iters.push(b.host(&format!("ProfilerStep#{i}"), |b| {
            let f = b.host("DistributedDataParallel.forward", |b| {
                b.kernel("cutlass_gemm_fprop", 100);
            });
            b.gpu("DistributedDataParallel.forward", f);
            b.host("## backward ##", |b| {
                b.kernel("void cudnn::detail::dgrad_engine<float>", 150);
                b.kernel("void cudnn::cnn::wgrad_alg0_engine<float>", 150);
            });
            let o = b.host("Optimizer.step#SGD.step", |b| {
                b.kernel("multi_tensor_apply_kernel", 30);
            });
            b.gpu("Optimizer.step#SGD.step", o);
        }));
    }
    let s = detect_default(&b.t);
    assert_eq!(s.kind, StepKind::TrainingIterations);
    assert_eq!(phases(&s), "TTT", "{}", s.source);
    let got: Vec<(i64, i64)> = s
        .steps
        .iter()
        .map(|s| (s.gpu_start_ns, s.gpu_end_ns))
        .collect();
    assert_eq!(got, iters);
    assert!(s.training.as_deref().unwrap().contains("markers"));
}

#[test]
fn backward_kernels_alone_make_a_training_trace() {
    let mut b = Builder::new();
    for _ in 0..6 {
        b.kernel("loss_forward_kernel", 10);
        b.kernel("cutlass_gemm_fprop", 100);
        b.kernel("void cudnn::detail::dgrad_engine<float>", 150);
        b.kernel("void cudnn::cnn::wgrad_alg0_engine<float>", 150);
        b.kernel("multi_tensor_apply_kernel", 30);
        b.now += 500;
    }
    let s = detect_default(&b.t);
    assert_eq!(s.kind, StepKind::TrainingIterations);
    assert!(s.source.is_periodic(), "{}", s.source);
    // Whole periods only: six anchors give five iterations.
    assert_eq!(phases(&s), "TTTTT");
    assert!(s.training.as_deref().unwrap().contains("backward kernels"));
}

#[test]
fn gpu_annotation_cut_short_gives_way_to_the_projection() {
    let mut b = Builder::new();
    let w = b.host("ProfilerStep#1", |b| {
        for _ in 0..4 {
            b.layer("attn_decode_bf16");
        }
    });
    // ROCm Kineto: the GPU copy ends after the first few kernels.
    b.gpu("ProfilerStep#1", (w.0, w.0 + 200));
    let s = detect_default(&b.t);
    assert_eq!(s.steps.len(), 1);
    assert_eq!((s.steps[0].gpu_start_ns, s.steps[0].gpu_end_ns), w);
    assert!(
        matches!(
            s.source,
            StepSource::Markers {
                ranges: MarkerRanges::UserAnnotation,
                projected: Some(Projection::GpuRangesShort),
                ..
            }
        ),
        "{}",
        s.source
    );

    // A GPU copy that covers the work is used as it is.
    let mut b = Builder::new();
    let w = b.host("ProfilerStep#1", |b| b.layer("attn_decode_bf16"));
    b.gpu("ProfilerStep#1", (w.0 - 3, w.1 + 3));
    let s = detect_default(&b.t);
    assert_eq!(
        (s.steps[0].gpu_start_ns, s.steps[0].gpu_end_ns),
        (w.0 - 3, w.1 + 3)
    );
    assert!(
        matches!(
            s.source,
            StepSource::Markers {
                ranges: MarkerRanges::GpuUserAnnotation,
                projected: None,
                ..
            }
        ),
        "{}",
        s.source
    );
}

#[test]
fn phase_named_annotations_beat_profiler_steps_and_generate_wrappers() {
    let mut b = Builder::new();
    b.host("generate", |b| {
        b.host("ProfilerStep#1", |b| {
            b.host("prefill", |b| b.layer("attn_decode_bf16"));
            for _ in 0..3 {
                b.host("decode_step", |b| b.layer("attn_decode_bf16"));
            }
        });
    });
    let s = detect_default(&b.t);
    assert_eq!(phases(&s), "PDDD", "{}", s.source);
    assert_eq!(s.kind, StepKind::InferenceSteps);
}

#[test]
fn kernel_names_label_steps_whose_markers_say_nothing() {
    let mut b = Builder::new();
    b.host("ProfilerStep#1", |b| {
        b.layer("void flashinfer::BatchPrefillWithPagedKVCacheKernel<128>")
    });
    b.host("ProfilerStep#2", |b| {
        b.layer("void flashinfer::BatchPrefillWithPagedKVCacheKernel<128>");
        b.layer("void flash_fwd_splitkv_kernel<128>");
    });
    b.host("ProfilerStep#3", |b| {
        b.layer("void flash_fwd_splitkv_kernel<128>")
    });
    let s = detect_default(&b.t);
    assert_eq!(phases(&s), "PMD", "{}", s.source);
    assert_eq!(evidence(&s)[0], Evidence::KernelNames, "{}", s.phase_source);
}

#[test]
fn without_names_several_steps_are_compared_and_a_lone_step_is_assumed_decode() {
    let mut b = Builder::new();
    b.host("ProfilerStep#1", |b| {
        for _ in 0..4 {
            b.layer("attn_fwd");
        }
    });
    for i in 2..6 {
        b.host(&format!("ProfilerStep#{i}"), |b| b.layer("attn_fwd"));
    }
    let s = detect_default(&b.t);
    assert_eq!(phases(&s), "PDDDD", "{}", s.source);
    assert!(
        evidence(&s).contains(&Evidence::RelativeWork),
        "{}",
        s.phase_source
    );

    let mut b = Builder::new();
    b.host("ProfilerStep#1", |b| b.layer("attn_fwd"));
    let s = detect_default(&b.t);
    assert_eq!(phases(&s), "D");
    assert_eq!(evidence(&s), [Evidence::Assumed], "{}", s.phase_source);

    // The embedding gather of more than 16 rows: a prompt.
    let mut b = Builder::new();
    b.host("ProfilerStep#1", |b| {
        b.kernel(
            "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16>",
            5,
        );
        b.layer("attn_fwd");
    });
    let s = detect_default(&b.t);
    assert_eq!(phases(&s), "P");
}

#[test]
fn engine_markers_keep_their_columns() {
    let mut t = Trace::new(Manifest::new("test"));
    let names = ["prefill", "decode", "decode"];
    let phases_in = [Phase::Prefill, Phase::Mixed, Phase::Decode];
    for (i, (n, ph)) in names.iter().zip(phases_in).enumerate() {
        let name = t.strings.intern(n);
        let k = t.strings.intern("gemv_bf16_b1");
        let s = 1_000 + 1_000 * i as i64;
        t.kernels.push(KernelRow {
            name: k,
            gpu_start_ns: s,
            gpu_end_ns: s + 500,
            ..KernelRow::default()
        });
        t.markers.push(MarkerRow {
            name,
            source: MarkerSource::Engine as u8,
            phase: ph as u8,
            gpu_start_ns: s,
            gpu_end_ns: s + 600,
            batch_size: 4,
            tokens: 4,
            ..MarkerRow::default()
        });
    }
    let s = detect_default(&t);
    assert_eq!(phases(&s), "PMD", "{}", s.source);
    assert_eq!(s.engine.as_deref(), Some("gapscope-engine"));
    assert_eq!(s.batch, vec![4, 4, 4]);
}

#[test]
fn hostile_marker_ranges_do_not_panic() {
    let mut b = Builder::new();
    for _ in 0..3 {
        b.host("execute_context_0(0)_generation_8(8)", |b| {
            for _ in 0..4 {
                b.layer("attn_fwd");
            }
        });
    }
    let name = b.t.strings.intern(DECODE_32);
    for (hs, he, gs, ge) in [
        (i64::MIN + 1, i64::MAX, i64::MIN + 1, i64::MAX),
        (5_000, 10, i64::MAX - 1, i64::MIN + 1),
        (i64::MAX, i64::MAX, 0, 0),
    ] {
        b.t.markers.push(MarkerRow {
            name,
            source: MarkerSource::KinetoUserAnnotation as u8,
            host_start_ns: hs,
            host_end_ns: he,
            gpu_start_ns: gs,
            gpu_end_ns: ge,
            ..MarkerRow::default()
        });
    }
    for ignore_markers in [false, true] {
        let s = detect_with(
            &b.t,
            &StepSettings {
                ignore_markers,
                ..StepSettings::default()
            },
        );
        assert!(s.steps.iter().all(|st| st.gpu_end_ns >= st.gpu_start_ns));
    }
}
