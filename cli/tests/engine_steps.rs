//! Steps and phases per engine on real public traces (`traces/corpus/`, see its CORPUS.md)
//! and the bundled reference traces.
//!
//! Expected figures come from an independent Python count over the raw JSON (no gapscope):
//! a host range's GPU window is the first start to the last end of the kernels whose launch
//! call (`cuda_runtime`/`cuda_driver` event with the same correlation id) starts inside the
//! range; a `gpu_user_annotation` range's window is its own `ts`/`dur`. Step durations must
//! match within 1%.

use gapscope_tests::{repo, run};
use serde_json::Value;

/// A corpus trace; a missing file fails the test (it never passes without its input).
fn corpus(name: &str) -> String {
    let p = repo(&format!("traces/corpus/{name}"));
    assert!(
        p.is_file(),
        "missing corpus trace {}: the corpus commit provides traces/corpus/ (sources and \
         licences in its CORPUS.md)",
        p.display()
    );
    p.to_str().expect("UTF-8 path").to_owned()
}

/// `report --json` of one trace: the report object.
fn report(path: &str, extra: &[&str]) -> Value {
    let mut args = vec!["report", "--json", "-q"];
    args.extend_from_slice(extra);
    args.push(path);
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    v["reports"][0].clone()
}

fn text(path: &str) -> String {
    let o = run(&["report", "-q", path]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).expect("UTF-8")
}

fn num(v: &Value, what: &str) -> f64 {
    v.as_f64()
        .unwrap_or_else(|| panic!("{what} is not a number: {v}"))
}

/// `got` within 1% of `want`.
fn within_1pct(got: f64, want: f64, what: &str) {
    assert!(
        (got - want).abs() <= 0.01 * want.abs(),
        "{what}: got {got}, want {want} (1%)"
    );
}

fn counts(s: &Value) -> (u64, u64, u64, u64) {
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("steps.{k} in {s}"));
    (
        n("decode_steps"),
        n("prefill_steps"),
        n("mixed_steps"),
        n("iterations"),
    )
}

#[test]
fn vllm_rocm_decode_trace_is_one_step_not_twelve_layers() {
    // Before: 12 "decode steps" of 0.88 ms from the periodic detector (layers).
    let p = corpus("vllm_mi300x_gptoss_decode_fullgraph.json.gz");
    let r = report(&p, &[]);
    let s = &r["steps"];
    assert_eq!(counts(s), (1, 0, 0, 0), "{s}");
    assert_eq!(s["kind"], "inference_steps");
    assert_eq!(s["engine"], "vLLM V1");
    assert_eq!(s["batch_size"], 32);
    within_1pct(
        num(&s["decode_span_ms"]["median"], "decode span"),
        10.699981,
        "vLLM decode step",
    );
    assert!(s["tpot_ms"].is_null());
    assert_eq!(
        r["plausibility"]["plausible"], true,
        "{}",
        r["plausibility"]
    );

    // Forcing the periodic detector: the layers are flagged, not reported silently.
    let r = report(&p, &["--no-markers"]);
    assert_eq!(r["plausibility"]["plausible"], false);
    let checks: Vec<&str> = r["plausibility"]["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|x| x["check"].as_str())
        .collect();
    assert!(checks.contains(&"layers_as_steps"), "{checks:?}");
}

#[test]
fn vllm_mixed_step_is_mixed_and_stays_out_of_tpot() {
    let p = corpus("vllm_mi300x_gptoss_prefilldecode_piecewise.json.gz");
    let s = report(&p, &[])["steps"].clone();
    assert_eq!(counts(&s), (0, 0, 1, 0), "{s}");
    assert!(s["tpot_ms"].is_null() && s["decode_span_ms"].is_null());
    within_1pct(
        num(&s["mixed_ms"]["median"], "mixed"),
        156.353058,
        "vLLM mixed step",
    );
    let phases = &s["phase_source_kind"];
    assert_eq!(phases["counts"][0]["evidence"], "marker", "{s}");
    assert_eq!(phases["says"], "context/generation request counts", "{s}");
    let t = text(&p);
    assert!(t.contains("0 decode, 0 prefill, 1 mixed"), "{t}");
    assert!(t.contains("\nmixed "), "{t}");

    // The user's pattern wins, and the marker's counts still label the step.
    let s = report(&p, &["--step-regex", "^execute_"])["steps"].clone();
    assert_eq!(counts(&s), (0, 0, 1, 0), "{s}");
}

#[test]
fn vllm_b200_prefill_trace_is_one_prefill_step() {
    // Before: 17 decode + 2 prefill steps from the periodic detector.
    let p = corpus("vllm_b200_gptoss_tp8_prefill.json.gz");
    let s = report(&p, &[])["steps"].clone();
    assert_eq!(counts(&s), (0, 1, 0, 0), "{s}");
    assert_eq!(s["source_kind"]["ranges"], "gpu_user_annotation", "{s}");
    // The gpu_user_annotation range: dur 84044.109 us.
    within_1pct(
        num(&s["prefill_ms"]["median"], "prefill"),
        84.044109,
        "vLLM prefill step",
    );
    assert!(s["tpot_ms"].is_null());
}

#[test]
fn sglang_decode_and_extend_steps_are_decode_and_prefill() {
    let p = corpus("sglang_mi300x_qwen3_8b_decode.json.gz");
    let s = report(&p, &[])["steps"].clone();
    assert_eq!(counts(&s), (1, 0, 0, 0), "{s}");
    assert_eq!(s["engine"], "SGLang");
    assert_eq!(s["batch_size"], 32);
    // The step[DECODE bs=32] range, not the execute_ range around it.
    assert_eq!(
        s["source_kind"]["names"],
        serde_json::json!(["step[DECODE bs=32]"]),
        "{s}"
    );
    within_1pct(
        num(&s["decode_span_ms"]["median"], "decode span"),
        10.366887,
        "SGLang decode step",
    );

    // Before: the EXTEND step was labelled decode.
    let p = corpus("sglang_mi300x_qwen3_8b_prefilldecode.json.gz");
    let s = report(&p, &[])["steps"].clone();
    assert_eq!(counts(&s), (0, 1, 0, 0), "{s}");
    within_1pct(
        num(&s["prefill_ms"]["median"], "prefill"),
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
        let s = report(&corpus(name), &[])["steps"].clone();
        assert_eq!(counts(&s), (0, 1, 0, 0), "{name}: {s}");
        assert_eq!(s["engine"], "PyTorch profiler", "{name}");
        within_1pct(num(&s["prefill_ms"]["median"], "prefill"), want, name);
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
        let r = report(&corpus(name), &[]);
        let s = &r["steps"];
        assert_eq!(s["kind"], "training_iterations", "{name}: {s}");
        assert_eq!(counts(s), (0, 0, 0, n), "{name}: {s}");
        assert!(
            s["tpot_ms"].is_null() && s["decode_span_ms"].is_null(),
            "{name}"
        );
        let names = s["source_kind"]["names"].as_array().unwrap();
        assert!(
            !names.is_empty()
                && names
                    .iter()
                    .all(|n| n.as_str().unwrap().starts_with("ProfilerStep#")),
            "{name}: {s}"
        );
        let it = &s["iteration_ms"];
        within_1pct(num(&it["median"], "median"), median, name);
        within_1pct(num(&it["min"], "min"), min, name);
        within_1pct(num(&it["max"], "max"), max, name);
        assert_eq!(
            r["plausibility"]["plausible"], true,
            "{name}: {}",
            r["plausibility"]
        );
    }
    let t = text(&corpus("hta_a100_train_nccl.json.gz"));
    assert!(t.contains("3 training iterations"), "{t}");
    assert!(t.contains("not TPOT"), "{t}");
    assert!(!t.contains("\nTPOT "), "{t}");
}

#[test]
fn marker_less_training_trace_gets_iterations_from_the_periodic_detector() {
    // Old Kineto schema: ProfilerStep#N sits under cat "Operator", which is not imported; the
    // backward kernels (cuDNN dgrad/wgrad) make it a training trace. The anchor kernel
    // cunn_ClassNLLCriterion_updateGradInput starts 6 times: 5 whole periods, independently
    // 175.605, 179.598, 174.690, 182.138, 166.016 ms (the ProfilerStep#5-#9 ranges last
    // 176.078, 173.992, 176.918, 181.259, 176.468 ms).
    let s = report(&corpus("kineto_v100_resnet50_oldschema.json.gz"), &[])["steps"].clone();
    assert_eq!(s["kind"], "training_iterations", "{s}");
    assert_eq!(counts(&s), (0, 0, 0, 5), "{s}");
    assert_eq!(s["source_kind"]["kind"], "periodic", "{s}");
    assert!(s["training"].as_str().unwrap().contains("backward kernels"));
    let it = &s["iteration_ms"];
    within_1pct(num(&it["median"], "median"), 175.605, "median iteration");
    within_1pct(num(&it["max"], "max"), 182.138, "longest iteration");
    within_1pct(num(&it["min"], "min"), 166.016, "shortest iteration");
}

#[test]
fn step_regex_override_wins_over_the_marker_table() {
    // The DDP forward ranges (gpu_user_annotation: 97.918, 97.607, 97.238 ms) when asked for.
    let p = corpus("hta_a100_train_nccl.json.gz");
    let s = report(&p, &["--step-regex", r"^DistributedDataParallel\.forward$"])["steps"].clone();
    assert_eq!(counts(&s), (0, 0, 0, 3), "{s}");
    let it = &s["iteration_ms"];
    within_1pct(num(&it["median"], "median"), 97.607262, "DDP forward");
    within_1pct(num(&it["max"], "max"), 97.918457, "DDP forward");
}

#[test]
fn reference_traces_keep_their_steps_and_say_how_phases_were_found() {
    let s = report(
        repo("traces/reference/engine-llama3-8b-npl1.gst")
            .to_str()
            .unwrap(),
        &[],
    )["steps"]
        .clone();
    assert_eq!(counts(&s), (32, 1, 0, 0), "{s}");
    assert_eq!(s["engine"], "gapscope-engine");
    assert_eq!(s["phase_source"], "marker metadata (engine step records)");

    let s = report(
        repo("traces/reference/hf-llama3.2-1b-npl8.json.gz")
            .to_str()
            .unwrap(),
        &[],
    )["steps"]
        .clone();
    assert_eq!(counts(&s), (32, 0, 0, 0), "{s}");
    assert_eq!(s["kind"], "inference_steps");
    assert_eq!(
        s["phase_source_kind"],
        serde_json::json!({
            "kind": "evidence",
            "counts": [{"evidence": "marker", "steps": 32}],
            "example": null,
            "says": "the phase word in the name"
        })
    );

    // The decode_step gpu_user_annotation ranges: 16, median 69.9439, min 67.5420, max
    // 72.3976 ms.
    let s = report(
        repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz")
            .to_str()
            .unwrap(),
        &[],
    )["steps"]
        .clone();
    assert_eq!(counts(&s), (16, 0, 0, 0), "{s}");
    let sp = &s["decode_span_ms"];
    within_1pct(num(&sp["median"], "median"), 69.9439, "decode_step median");
    within_1pct(num(&sp["min"], "min"), 67.5420, "decode_step min");
    within_1pct(num(&sp["max"], "max"), 72.3976, "decode_step max");
}

#[test]
fn nsys_export_without_kernels_has_no_steps() {
    let s = report(&corpus("nsys_rtx5060ti_gemm_nokernels.sqlite"), &[])["steps"].clone();
    assert_eq!(counts(&s), (0, 0, 0, 0), "{s}");
}
