//! Host scopes on real traces: what the host was doing while the GPU sat idle, kernels filed
//! by the module they ran in, and grouping by scope (`report --by`). The traces are the GPU
//! captures of issue 19 (recorded by scripts/capture/run-gpu-issue19.sh) and the bundled HF
//! decode trace.

mod common;

use common::{group_by, open, open_with};
use gapscope_analyzer::Bucket;
use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::host::{
    ChargeKind, GroupBy, GroupSource, HostIdleReport, IdleCause,
};
use gapscope_tests::repo;
use gapscope_traces::ScopeKind;

const BUNDLED: &str = "traces/reference/hf-llama3.2-1b-npl8.json.gz";
const CUDNN: &str = "traces/reference/hf-llama3.2-1b-npl8-stack-cudnn.json.gz";
const MATH: &str = "traces/reference/hf-llama3.2-1b-npl8-stack-math.json.gz";
const QWEN_KINETO: &str = "traces/reference/hf-qwen3next-small-npl1.json.gz";
const QWEN_RECORDED: &str = "traces/reference/cupti-qwen3next-small-npl1.gst";

fn report(trace: &str) -> Report {
    open(repo(trace)).report
}

fn host_idle(r: &Report) -> &HostIdleReport {
    r.host_idle
        .as_ref()
        .unwrap_or_else(|| panic!("{}: no host idle section", r.source.path))
}

#[test]
fn the_bundled_hf_trace_names_cudnn_sdpa_host_work_as_the_cause() {
    let r = report(BUNDLED);
    let h = host_idle(&r);
    let inside = &h.inside_steps;
    let idle = inside.idle_ms_per_step;
    // The idle split adds up to the report's idle inside the steps.
    let gaps = r.steps.launch_gap_ms_per_step.expect("launch gaps");
    assert!((idle - gaps).abs() < 1e-6, "{idle} vs {gaps}");
    let sum = inside.launch_ms_per_step
        + inside.host_compute_ms_per_step
        + inside.sync_ms_per_step
        + inside.gpu_wait_ms_per_step
        + inside.unexplained_ms_per_step;
    assert!((sum - idle).abs() < 1e-6, "{sum} vs {idle}");
    assert!(inside.host_compute_ms_per_step > 0.8 * idle, "{inside:?}");
    assert_eq!(h.lever.cause, Some(IdleCause::HostCompute));
    assert_eq!(h.linked_pct, 100.0);
    let top = &h.top_scopes[0];
    assert_eq!(top.name, "aten::_cudnn_attention_forward");
    assert_eq!(top.kind, ChargeKind::Scope(ScopeKind::Op));
    assert!((30.0..45.0).contains(&top.ms_per_step), "{top:?}");
    assert_eq!(top.stack[1], "aten::_scaled_dot_product_cudnn_attention");
    // The lever names the scope the host spent the idle in.
    let scope = h.lever.scope.as_ref().expect("the lever's scope");
    assert_eq!(scope.name, "aten::_cudnn_attention_forward", "{scope:?}");
    assert_eq!(scope.kind, ChargeKind::Scope(ScopeKind::Op), "{scope:?}");
}

#[test]
fn the_math_sdpa_capture_shows_the_gap_gone() {
    let cudnn = report(CUDNN);
    let math = report(MATH);
    let idle = |r: &Report| host_idle(r).inside_steps.idle_ms_per_step;
    let top = &host_idle(&cudnn).top_scopes[0];
    assert_eq!(top.name, "aten::_cudnn_attention_forward");
    assert!(top.ms_per_step > 50.0, "{top:?}");
    assert!(
        idle(&math) < 0.5 * idle(&cudnn),
        "{} vs {}",
        idle(&math),
        idle(&cudnn)
    );
    for s in &host_idle(&math).top_scopes {
        assert!(!s.name.contains("cudnn"), "{}", s.name);
        assert!(s.ms_per_step < 10.0, "{s:?}");
    }
}

/// Per-bucket calls and median ms per step.
fn buckets(r: &Report) -> Vec<(Bucket, f64, f64)> {
    r.buckets
        .iter()
        .map(|b| {
            (
                b.bucket,
                b.calls_per_step.expect("calls per step"),
                b.ms_per_step.expect("ms per step").median,
            )
        })
        .collect()
}

#[test]
fn gated_deltanet_work_is_linear_attn_ssm_from_torch_profiler_and_from_a_recording() {
    let k = buckets(&report(QWEN_KINETO));
    let rec = buckets(&report(QWEN_RECORDED));
    let get = |v: &[(Bucket, f64, f64)], b: Bucket| {
        v.iter()
            .find(|x| x.0 == b)
            .copied()
            .unwrap_or_else(|| panic!("no {b}"))
    };
    for v in [&k, &rec] {
        let ssm = get(v, Bucket::LinearAttnSsm);
        // Every kernel the DeltaNet blocks launch outside their Linear children: the
        // recurrence, the causal conv1d, gating and state updates, whatever their names.
        assert_eq!(ssm.1, 288.0, "{ssm:?}");
        assert!(ssm.2 > 0.5, "{ssm:?}");
        assert_eq!(get(v, Bucket::Other).1, 0.0);
    }
    // The two sources file every kernel alike: same calls per step in every bucket.
    assert_eq!(k.len(), rec.len());
    for (a, b) in k.iter().zip(&rec) {
        assert_eq!((a.0, a.1), (b.0, b.1), "{a:?} vs {b:?}");
    }
}

#[test]
fn report_by_module_and_layer_splits_gpu_and_host_time() {
    let r = open_with(repo(QWEN_KINETO), &group_by(GroupBy::Module)).report;
    let g = r.groups.as_ref().expect("groups");
    assert_eq!(g.by, GroupBy::Module);
    assert_eq!(g.source, GroupSource::HostScopes);
    let row = |k: &str| {
        g.rows
            .iter()
            .find(|x| x.key == k)
            .unwrap_or_else(|| panic!("no {k} in {:?}", g.rows))
    };
    let dn = row("nn.Module: Qwen3NextGatedDeltaNet");
    assert!(dn.gpu_ms_per_step > 0.5, "{dn:?}");
    assert!(dn.host_ms_per_step.expect("host time") > 0.0, "{dn:?}");
    let share: f64 = g.rows.iter().map(|x| x.gpu_share_pct).sum();
    assert!((share - 100.0).abs() < 1.0, "{share}");

    let r = open_with(repo(QWEN_KINETO), &group_by(GroupBy::Layer)).report;
    let keys: Vec<&str> = r
        .groups
        .as_ref()
        .expect("groups")
        .rows
        .iter()
        .map(|x| x.key.as_str())
        .collect();
    assert!(keys.iter().all(|k| k.starts_with("layer ")), "{keys:?}");
    assert!(keys.len() >= 4, "{keys:?}");

    // A recording with NVTX module ranges groups the same way.
    let r = open_with(repo(QWEN_RECORDED), &group_by(GroupBy::Module)).report;
    assert!(
        r.groups
            .expect("groups")
            .rows
            .iter()
            .any(|x| x.key == "nn.Module: Qwen3NextGatedDeltaNet")
    );
}

#[test]
fn host_scope_counts_equal_the_independent_counts() {
    // cpu_op (old Kineto: Operator) and python_function complete events, counted by
    // traces/corpus/count.py's method (json.load, cat and ph == "X").
    for (trace, scopes) in [
        ("traces/corpus/hf_h100_qwen15_05b_chat.json.gz", 8448),
        (
            "traces/corpus/kineto_v100_resnet50_oldschema.json.gz",
            23646,
        ),
        ("traces/corpus/vllm_b200_gptoss_tp8_prefill.json.gz", 20039),
        (QWEN_KINETO, 123_241),
    ] {
        assert_eq!(report(trace).source.scopes, scopes, "{trace}");
    }
}

#[test]
fn scopes_survive_the_native_format() {
    let dir = tempfile::tempdir().unwrap();
    let gst = dir.path().join("q.gst");
    common::convert(&repo(QWEN_KINETO), &gst);
    let a = report(QWEN_KINETO);
    let b = open(&gst).report;
    assert_eq!(a.source.scopes, b.source.scopes);
    // The whole section, every figure and name.
    assert_eq!(
        serde_json::to_value(&a.host_idle).unwrap(),
        serde_json::to_value(&b.host_idle).unwrap()
    );
    assert_eq!(buckets(&a), buckets(&b));
}
