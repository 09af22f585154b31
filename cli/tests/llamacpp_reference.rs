//! The bundled llama.cpp recordings (`traces/reference/llamacpp-*.gst`, recorded with
//! `gapscope-record` around `llama-batched-bench` on an H200; recipe in
//! `scripts/llamacpp/README.md`): llama.cpp writes no step markers, so the steps come from the
//! automatic detection, and they must agree with llama-batched-bench's own count and TG time.

use std::path::Path;

use gapscope_tests::{gapscope, repo};
use serde_json::Value;

fn report(trace: &Path) -> Value {
    let o = gapscope()
        .args(["report", "-q", "--json"])
        .arg(trace)
        .output()
        .expect("runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    v["reports"][0].clone()
}

fn share(r: &Value, bucket: &str) -> f64 {
    r["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["bucket"] == bucket)
        .and_then(|b| b["share_of_busy_pct"].as_f64())
        .unwrap_or(0.0)
}

/// One recording: 8 decode steps and the prefill, plausible, the decode window per step
/// within 2% of llama-batched-bench's `t_tg / tg` for the same recorded run, and the bucket
/// shares of busy time (percent) within 0.5 points. (The shares sum to 100: kernels that
/// llama.cpp launches early under programmatic dependent launch count from the end of the
/// kernel before them.)
fn pinned(file: &str, bench_tg_ms: f64, shares: &[(&str, f64)]) -> Value {
    let r = report(&repo(&format!("traces/reference/{file}")));
    let s = &r["steps"];
    assert_eq!(s["decode_steps"], 8, "{file}: {}", s["source"]);
    assert_eq!(s["prefill_steps"], 1, "{file}: {}", s["source"]);
    assert_eq!(s["source_kind"]["kind"], "periodic", "{file}");
    assert_eq!(
        r["plausibility"]["plausible"], true,
        "{file}: {}",
        r["plausibility"]
    );
    // The decode window: n-1 start-to-start periods plus the last step's span.
    let (t, span) = (&s["tpot_ms"], &s["decode_span_ms"]);
    let n = t["n"].as_f64().unwrap();
    let window = (t["mean"].as_f64().unwrap() * n + span["median"].as_f64().unwrap()) / (n + 1.0);
    assert!(
        (window / bench_tg_ms - 1.0).abs() <= 0.02,
        "{file}: {window:.3} ms/step against llama-batched-bench's {bench_tg_ms} ms"
    );
    for &(b, pct) in shares {
        let got = share(&r, b);
        assert!(
            (got - pct).abs() <= 0.5,
            "{file}: {b} {got:.2}% of busy, pinned {pct}%"
        );
    }
    r
}

#[test]
fn llama3_8b_q8_0_npl1_is_mmvq_bound() {
    pinned(
        "llamacpp-llama3-8b-q8_0-npl1.gst",
        6.7161,
        &[
            ("gemv", 80.2),
            ("quantize", 5.5),
            ("attention", 3.9),
            ("norm", 6.3),
        ],
    );
}

#[test]
fn llama3_8b_q8_0_npl32_runs_mmq() {
    pinned(
        "llamacpp-llama3-8b-q8_0-npl32.gst",
        14.0476,
        &[
            ("gemm_quant", 80.6),
            ("attention", 4.8),
            ("copy", 4.1),
            ("gemv", 0.0),
        ],
    );
}

#[test]
fn qwen35_hybrid_npl1_shows_every_delta_net_bucket() {
    let r = pinned(
        "llamacpp-qwen3.5-9b-q4_0-npl1.gst",
        6.8458,
        &[
            ("gemv", 67.0),
            ("linear_attn_ssm", 1.6),
            ("conv", 0.8),
            ("embed_gather", 3.0),
            ("copy", 3.9),
            ("attention", 1.8),
            ("norm", 10.1),
        ],
    );
    assert!(share(&r, "other") <= 2.0, "other {}", share(&r, "other"));
}
