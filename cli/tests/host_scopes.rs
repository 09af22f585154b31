//! Host scopes on real traces: what the host was doing while the GPU sat idle, kernels filed
//! by the module they ran in, and `report --by`. The traces are the GPU captures of issue 19
//! (recorded by scripts/capture/run-gpu-issue19.sh) and the bundled HF decode trace.

use gapscope_tests::{gapscope, repo, success};

fn report(args: &[&str], trace: &str) -> serde_json::Value {
    let p = repo(trace);
    assert!(p.exists(), "{trace} is missing");
    let out = success(
        gapscope()
            .args(["report", "-q", "--json"])
            .args(args)
            .arg(&p),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v["reports"][0].clone()
}

fn f(v: &serde_json::Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

const BUNDLED: &str = "traces/reference/hf-llama3.2-1b-npl8.json.gz";
const CUDNN: &str = "traces/reference/hf-llama3.2-1b-npl8-stack-cudnn.json.gz";
const MATH: &str = "traces/reference/hf-llama3.2-1b-npl8-stack-math.json.gz";
const QWEN_KINETO: &str = "traces/reference/hf-qwen3next-small-npl1.json.gz";
const QWEN_RECORDED: &str = "traces/reference/cupti-qwen3next-small-npl1.gst";

#[test]
fn the_bundled_hf_trace_names_cudnn_sdpa_host_work_as_the_cause() {
    let r = report(&[], BUNDLED);
    let h = &r["host_idle"];
    let inside = &h["inside_steps"];
    let idle = f(&inside["idle_ms_per_step"]);
    // The idle split adds up to the report's idle inside the steps.
    assert!((idle - f(&r["steps"]["launch_gap_ms_per_step"])).abs() < 1e-6);
    let parts = ["launch", "host_compute", "sync", "gpu_wait", "unexplained"];
    let sum: f64 = parts
        .iter()
        .map(|p| f(&inside[format!("{p}_ms_per_step")]))
        .sum();
    assert!((sum - idle).abs() < 1e-6, "{sum} vs {idle}");
    assert!(
        f(&inside["host_compute_ms_per_step"]) > 0.8 * idle,
        "{inside}"
    );
    assert_eq!(h["lever"]["cause"], "host_compute");
    assert_eq!(h["linked_pct"], 100.0);
    let top = &h["top_scopes"][0];
    assert_eq!(top["name"], "aten::_cudnn_attention_forward");
    assert_eq!(top["kind"], "op");
    let ms = f(&top["ms_per_step"]);
    assert!((30.0..45.0).contains(&ms), "{ms}");
    assert_eq!(top["stack"][1], "aten::_scaled_dot_product_cudnn_attention");
    // The lever names the scope the host spent the idle in.
    let scope = &h["lever"]["scope"];
    assert_eq!(scope["name"], "aten::_cudnn_attention_forward", "{scope}");
    assert_eq!(scope["kind"], "op", "{scope}");
}

#[test]
fn the_math_sdpa_capture_shows_the_gap_gone() {
    let cudnn = report(&[], CUDNN);
    let math = report(&[], MATH);
    let idle = |r: &serde_json::Value| f(&r["host_idle"]["inside_steps"]["idle_ms_per_step"]);
    let top = &cudnn["host_idle"]["top_scopes"][0];
    assert_eq!(top["name"], "aten::_cudnn_attention_forward");
    assert!(f(&top["ms_per_step"]) > 50.0, "{top}");
    assert!(
        idle(&math) < 0.5 * idle(&cudnn),
        "{} vs {}",
        idle(&math),
        idle(&cudnn)
    );
    for s in math["host_idle"]["top_scopes"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        assert!(!name.contains("cudnn"), "{name}");
        assert!(f(&s["ms_per_step"]) < 10.0, "{s}");
    }
}

/// Per-bucket calls and ms per step.
fn buckets(r: &serde_json::Value) -> Vec<(String, f64, f64)> {
    r["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["bucket"].as_str().unwrap().to_owned(),
                f(&b["calls_per_step"]),
                f(&b["ms_per_step"]["median"]),
            )
        })
        .collect()
}

#[test]
fn gated_deltanet_work_is_linear_attn_ssm_from_torch_profiler_and_from_a_recording() {
    let k = buckets(&report(&[], QWEN_KINETO));
    let rec = buckets(&report(&[], QWEN_RECORDED));
    let get = |v: &[(String, f64, f64)], b: &str| {
        v.iter()
            .find(|x| x.0 == b)
            .cloned()
            .unwrap_or_else(|| panic!("no {b}"))
    };
    for v in [&k, &rec] {
        let ssm = get(v, "linear_attn_ssm");
        // Every kernel the DeltaNet blocks launch outside their Linear children: the
        // recurrence, the causal conv1d, gating and state updates, whatever their names.
        assert_eq!(ssm.1, 288.0, "{ssm:?}");
        assert!(ssm.2 > 0.5, "{ssm:?}");
        assert_eq!(get(v, "other").1, 0.0);
    }
    // The two sources file every kernel alike: same calls per step in every bucket.
    assert_eq!(k.len(), rec.len());
    for (a, b) in k.iter().zip(&rec) {
        assert_eq!((&a.0, a.1), (&b.0, b.1), "{a:?} vs {b:?}");
    }
}

#[test]
fn report_by_module_and_layer_splits_gpu_and_host_time() {
    let r = report(&["--by", "module"], QWEN_KINETO);
    let g = &r["groups"];
    assert_eq!(g["by"], "module");
    assert_eq!(g["source"], "host scopes");
    let rows = g["rows"].as_array().unwrap();
    let row = |k: &str| {
        rows.iter()
            .find(|x| x["key"] == k)
            .unwrap_or_else(|| panic!("no {k} in {rows:?}"))
    };
    let dn = row("nn.Module: Qwen3NextGatedDeltaNet");
    assert!(f(&dn["gpu_ms_per_step"]) > 0.5, "{dn}");
    assert!(f(&dn["host_ms_per_step"]) > 0.0, "{dn}");
    let share: f64 = rows.iter().map(|x| f(&x["gpu_share_pct"])).sum();
    assert!((share - 100.0).abs() < 1.0, "{share}");

    let r = report(&["--by", "layer"], QWEN_KINETO);
    let keys: Vec<&str> = r["groups"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["key"].as_str().unwrap())
        .collect();
    assert!(keys.iter().all(|k| k.starts_with("layer ")), "{keys:?}");
    assert!(keys.len() >= 4, "{keys:?}");

    // A recording with NVTX module ranges groups the same way.
    let r = report(&["--by", "module"], QWEN_RECORDED);
    assert!(
        r["groups"]["rows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["key"] == "nn.Module: Qwen3NextGatedDeltaNet")
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
        let r = report(&[], trace);
        assert_eq!(r["source"]["scopes"], scopes, "{trace}");
    }
}

#[test]
fn scopes_survive_the_native_format() {
    let dir = tempfile::tempdir().unwrap();
    let gst = dir.path().join("q.gst");
    success(
        gapscope()
            .args(["import", "-q"])
            .arg(repo(QWEN_KINETO))
            .arg("-o")
            .arg(&gst),
    );
    let a = report(&[], QWEN_KINETO);
    let b = report(&[], gst.to_str().unwrap());
    assert_eq!(a["source"]["scopes"], b["source"]["scopes"]);
    assert_eq!(a["host_idle"], b["host_idle"]);
    assert_eq!(buckets(&a), buckets(&b));
}
