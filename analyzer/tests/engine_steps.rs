//! Steps and phases per engine on real public traces (`traces/corpus/`, see its SOURCES.md)
//! and the bundled reference traces.
//!
//! Expected figures come from an independent Python count over the raw JSON (no gapscope):
//! a host range's GPU window is the first start to the last end of the kernels whose launch
//! call (`cuda_runtime`/`cuda_driver` event with the same correlation id) starts inside the
//! range; a `gpu_user_annotation` range's window is its own `ts`/`dur`. Step durations must
//! match within 1%.

mod common;

use common::{no_markers, open, open_with, step_regex};
use gapscope_analyzer::analysis::stats::Summary;
use gapscope_analyzer::analysis::steps::{
    Evidence, EvidenceCount, MarkerRanges, PhaseSource, StepKind, StepSource,
};
use gapscope_analyzer::analysis::{PlausibilityCheck, Report, StepReport};
use gapscope_analyzer::session::Knobs;
use gapscope_tests::{corpus, repo};

/// The report of a corpus trace.
fn report(name: &str, knobs: &Knobs) -> Report {
    open_with(corpus(name), knobs).report
}

fn steps(name: &str) -> StepReport {
    report(name, &Knobs::default()).steps
}

fn summary(s: Option<Summary>, what: &str) -> Summary {
    s.unwrap_or_else(|| panic!("no {what}"))
}

/// `got` within 1% of `want`.
fn within_1pct(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 0.01 * want.abs(),
        "{what}: got {got}, want {want} (1%)"
    );
}

/// Decode, prefill and mixed steps, and training iterations.
fn counts(s: &StepReport) -> (usize, usize, usize, usize) {
    (s.decode_steps, s.prefill_steps, s.mixed_steps, s.iterations)
}

/// The marker names that delimit the steps.
fn marker_names(s: &StepReport) -> &[String] {
    match &s.source {
        StepSource::Markers { names, .. } => names,
        other => panic!("steps not from markers: {other}"),
    }
}

#[test]
fn vllm_rocm_decode_trace_is_one_step_not_twelve_layers() {
    // Before: 12 "decode steps" of 0.88 ms from the periodic detector (layers).
    let name = "vllm_mi300x_gptoss_decode_fullgraph.json.gz";
    let r = report(name, &Knobs::default());
    let s = &r.steps;
    assert_eq!(counts(s), (1, 0, 0, 0), "{s:?}");
    assert_eq!(s.kind, StepKind::InferenceSteps);
    assert_eq!(s.engine.as_deref(), Some("vLLM V1"));
    assert_eq!(s.batch_size, Some(32));
    // `generation_32(sq32sk55086…)`: 55,086 KV tokens over 32 decode requests.
    assert_eq!(s.context_tokens, Some(1721));
    within_1pct(
        summary(s.decode_span_ms, "decode span").median,
        10.699981,
        "vLLM decode step",
    );
    assert!(s.tpot_ms.is_none());
    assert!(r.plausibility.plausible, "{:?}", r.plausibility);

    // Forcing the periodic detector: the layers are flagged, not reported silently.
    let r = report(name, &no_markers());
    assert!(!r.plausibility.plausible);
    let checks: Vec<PlausibilityCheck> = r.plausibility.problems.iter().map(|x| x.check).collect();
    assert!(
        checks.contains(&PlausibilityCheck::LayersAsSteps),
        "{checks:?}"
    );
}

#[test]
fn vllm_mixed_step_is_mixed_and_stays_out_of_tpot() {
    let name = "vllm_mi300x_gptoss_prefilldecode_piecewise.json.gz";
    let s = steps(name);
    assert_eq!(counts(&s), (0, 0, 1, 0), "{s:?}");
    assert!(s.tpot_ms.is_none() && s.decode_span_ms.is_none());
    within_1pct(
        summary(s.mixed_ms, "mixed").median,
        156.353058,
        "vLLM mixed step",
    );
    let PhaseSource::Evidence {
        counts: by, says, ..
    } = &s.phase_source
    else {
        panic!("{:?}", s.phase_source);
    };
    assert_eq!(by[0].evidence, Evidence::Marker, "{s:?}");
    assert_eq!(*says, Some("context/generation request counts"), "{s:?}");

    // The user's pattern wins, and the marker's counts still label the step.
    let s = report(name, &step_regex("^execute_")).steps;
    assert_eq!(counts(&s), (0, 0, 1, 0), "{s:?}");
}

#[test]
fn vllm_b200_prefill_trace_is_one_prefill_step() {
    // Before: 17 decode + 2 prefill steps from the periodic detector.
    let s = steps("vllm_b200_gptoss_tp8_prefill.json.gz");
    assert_eq!(counts(&s), (0, 1, 0, 0), "{s:?}");
    assert!(
        matches!(
            s.source,
            StepSource::Markers {
                ranges: MarkerRanges::GpuUserAnnotation,
                ..
            }
        ),
        "{}",
        s.source
    );
    // The gpu_user_annotation range: dur 84044.109 us.
    within_1pct(
        summary(s.prefill_ms, "prefill").median,
        84.044109,
        "vLLM prefill step",
    );
    assert!(s.tpot_ms.is_none());
}

#[test]
fn sglang_decode_and_extend_steps_are_decode_and_prefill() {
    let s = steps("sglang_mi300x_qwen3_8b_decode.json.gz");
    assert_eq!(counts(&s), (1, 0, 0, 0), "{s:?}");
    assert_eq!(s.engine.as_deref(), Some("SGLang"));
    assert_eq!(s.batch_size, Some(32));
    // The step[DECODE bs=32] range, not the execute_ range around it.
    assert_eq!(marker_names(&s), ["step[DECODE bs=32]"], "{}", s.source);
    within_1pct(
        summary(s.decode_span_ms, "decode span").median,
        10.366887,
        "SGLang decode step",
    );

    // Before: the EXTEND step was labelled decode.
    let s = steps("sglang_mi300x_qwen3_8b_prefilldecode.json.gz");
    assert_eq!(counts(&s), (0, 1, 0, 0), "{s:?}");
    within_1pct(
        summary(s.prefill_ms, "prefill").median,
        493.529207,
        "SGLang extend step",
    );
}

#[test]
fn hf_profiler_step_over_a_prompt_forward_is_a_prefill() {
    // One ProfilerStep over a forward of 16 prompts of 559 tokens (aten::linear input dims
    // [16, 559, 1024]); the embedding gather of more than 16 rows says prompt.
    for (name, want) in [
        ("hf_h100_qwen15_05b_chat.json.gz", 34.892421),
        ("hf_mi300x_qwen15_05b_chat.json.gz", 33.131336),
    ] {
        let s = steps(name);
        assert_eq!(counts(&s), (0, 1, 0, 0), "{name}: {s:?}");
        assert_eq!(s.engine.as_deref(), Some("PyTorch profiler"), "{name}");
        within_1pct(summary(s.prefill_ms, "prefill").median, want, name);
    }
}

#[test]
fn training_traces_report_iterations_not_decode_steps() {
    // Before: forward and optimizer sub-phases as "decode steps" (TPOT CV 72%) or the
    // optimizer step alone, with backward left out.
    for (name, n, median, min, max) in [
        (
            "hta_a100_train_nccl.json.gz",
            3,
            215.769424,
            213.53275,
            218.764039,
        ),
        // hta_v100_train_profilersteps.json.gz (3 MB, not committed; traces/corpus/SOURCES.md
        // says where it is) gives 5 iterations, median 340.8 ms (331.741-360.283).
        // ROCm: the gpu_user_annotation copy of ProfilerStep#1 ends after 1.03 ms, before
        // most of its kernels; the host range's projection is used. ProfilerStep#2 has no
        // kernels.
        (
            "hta_mi250_rocm62_train.json.gz",
            1,
            8.594445,
            8.594445,
            8.594445,
        ),
    ] {
        let r = report(name, &Knobs::default());
        let s = &r.steps;
        assert_eq!(s.kind, StepKind::TrainingIterations, "{name}: {s:?}");
        assert_eq!(counts(s), (0, 0, 0, n), "{name}: {s:?}");
        assert!(s.tpot_ms.is_none() && s.decode_span_ms.is_none(), "{name}");
        let names = marker_names(s);
        assert!(
            !names.is_empty() && names.iter().all(|n| n.starts_with("ProfilerStep#")),
            "{name}: {}",
            s.source
        );
        let it = summary(s.iteration_ms, "iteration_ms");
        within_1pct(it.median, median, name);
        within_1pct(it.min, min, name);
        within_1pct(it.max, max, name);
        assert!(r.plausibility.plausible, "{name}: {:?}", r.plausibility);
    }
}

#[test]
fn marker_less_training_trace_gets_iterations_from_the_periodic_detector() {
    // Old Kineto schema: ProfilerStep#N sits under cat "Operator", which is not imported; the
    // backward kernels (cuDNN dgrad/wgrad) make it a training trace. The anchor kernel
    // cunn_ClassNLLCriterion_updateGradInput starts 6 times: 5 whole periods, independently
    // 175.605, 179.598, 174.690, 182.138, 166.016 ms (the ProfilerStep#5-#9 ranges last
    // 176.078, 173.992, 176.918, 181.259, 176.468 ms).
    let s = steps("kineto_v100_resnet50_oldschema.json.gz");
    assert_eq!(s.kind, StepKind::TrainingIterations, "{s:?}");
    assert_eq!(counts(&s), (0, 0, 0, 5), "{s:?}");
    assert!(s.source.is_periodic(), "{}", s.source);
    assert!(
        s.training
            .as_deref()
            .is_some_and(|t| t.contains("backward kernels")),
        "{:?}",
        s.training
    );
    let it = summary(s.iteration_ms, "iteration_ms");
    within_1pct(it.median, 175.605, "median iteration");
    within_1pct(it.max, 182.138, "longest iteration");
    within_1pct(it.min, 166.016, "shortest iteration");
}

#[test]
fn step_regex_override_wins_over_the_marker_table() {
    // The DDP forward ranges (gpu_user_annotation: 97.918, 97.607, 97.238 ms) when asked for.
    let knobs = step_regex(r"^DistributedDataParallel\.forward$");
    let s = report("hta_a100_train_nccl.json.gz", &knobs).steps;
    assert_eq!(counts(&s), (0, 0, 0, 3), "{s:?}");
    let it = summary(s.iteration_ms, "iteration_ms");
    within_1pct(it.median, 97.607262, "DDP forward");
    within_1pct(it.max, 97.918457, "DDP forward");
}

#[test]
fn reference_traces_keep_their_steps_and_say_how_phases_were_found() {
    let s = open(repo("traces/reference/engine-llama3-8b-npl1.gst"))
        .report
        .steps;
    assert_eq!(counts(&s), (32, 1, 0, 0), "{s:?}");
    assert_eq!(s.engine.as_deref(), Some("gapscope-engine"));
    // "marker metadata (engine step records)": the markers decided every step.
    let PhaseSource::Evidence {
        counts: by, says, ..
    } = &s.phase_source
    else {
        panic!("{:?}", s.phase_source);
    };
    assert_eq!(
        by.iter().map(|c| c.evidence).collect::<Vec<_>>(),
        [Evidence::Marker],
        "{:?}",
        s.phase_source
    );
    assert_eq!(*says, Some("engine step records"));

    let s = open(repo("traces/reference/hf-llama3.2-1b-npl8.json.gz"))
        .report
        .steps;
    assert_eq!(counts(&s), (32, 0, 0, 0), "{s:?}");
    assert_eq!(s.kind, StepKind::InferenceSteps);
    assert_eq!(
        s.phase_source,
        PhaseSource::Evidence {
            counts: vec![EvidenceCount {
                evidence: Evidence::Marker,
                steps: 32
            }],
            example: None,
            says: Some("the phase word in the name"),
        }
    );

    // The decode_step gpu_user_annotation ranges: 16, median 69.9439, min 67.5420, max
    // 72.3976 ms.
    let s = open(repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz"))
        .report
        .steps;
    assert_eq!(counts(&s), (16, 0, 0, 0), "{s:?}");
    let sp = summary(s.decode_span_ms, "decode span");
    within_1pct(sp.median, 69.9439, "decode_step median");
    within_1pct(sp.min, 67.5420, "decode_step min");
    within_1pct(sp.max, 72.3976, "decode_step max");
}

#[test]
fn nsys_export_without_kernels_has_no_steps() {
    let s = steps("nsys_rtx5060ti_gemm_nokernels.sqlite");
    assert_eq!(counts(&s), (0, 0, 0, 0), "{s:?}");
    assert_eq!(s.source, StepSource::NoKernels);
}

#[test]
fn the_roofline_takes_a_vllm_traces_context_from_its_markers() {
    use gapscope_analyzer::roofline::report::{
        BatchSource, ContextChoice, ContextSource, TpChoice, TraceAtBatch, roofline_at,
    };
    use gapscope_analyzer::roofline::{ModelSpec, WeightFormat, hw};
    // Before: every floor at the 4096-token default, whatever the trace ran at.
    let r = report(
        "vllm_mi300x_gptoss_decode_fullgraph.json.gz",
        &Knobs::default(),
    );
    let m = ModelSpec::load(&repo("models/llama-3-8b.json")).expect("test input");
    let h100 = hw::builtin().into_iter().next().expect("test input");
    let (batch, batch_source) = BatchSource::resolve(&r, None);
    let placed = [TraceAtBatch {
        report: &r,
        batch,
        batch_source,
        notes: Vec::new(),
    }];
    let at = |given| {
        roofline_at(
            &m,
            &h100,
            WeightFormat::Bf16,
            &[1, 32],
            ContextChoice::new(given, 4096),
            TpChoice::default(),
            &placed,
        )
    };
    let from_markers = at(None);
    assert_eq!(
        (from_markers.ctx, from_markers.ctx_source),
        (1721, ContextSource::TraceMarkers)
    );
    let given = at(Some(4096));
    assert_eq!((given.ctx, given.ctx_source), (4096, ContextSource::Given));
    // The KV floor follows the context.
    assert!(from_markers.floors[1].step_floor_s < given.floors[1].step_floor_s);
    // A trace whose markers say nothing keeps the default, labelled assumed.
    let hf = open(repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz")).report;
    let (ctx, src) = ContextSource::resolve(&hf, ContextChoice::new(None, 4096));
    assert_eq!((ctx, src), (4096, ContextSource::Assumed));
}
