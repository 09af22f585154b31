//! `report --no-markers`: automatic step detection on the bundled reference traces agrees with
//! their markers (the engine's prefill is a prefill, not the first decode step).

use std::path::Path;

use gapscope_tests::{repo, run};
use serde_json::Value;

const ENGINE_8B: &str = "traces/reference/engine-llama3-8b-npl1.gst";

/// The `steps` object of the first report of `report --json [extra] trace`.
fn steps(trace: &Path, extra: Option<&str>) -> Value {
    let mut args = vec!["report", "-q", "--json"];
    args.extend(extra);
    args.push(trace.to_str().unwrap());
    let o = run(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    v["reports"][0]["steps"].clone()
}

fn tpot(s: &Value, stat: &str) -> f64 {
    s["tpot_ms"][stat]
        .as_f64()
        .unwrap_or_else(|| panic!("tpot_ms.{stat} in {s}"))
}

/// Automatic steps match the marker-based ones: counts, and TPOT median/p99/max within 2%.
fn agrees_with_markers(trace: &Path, decode: u64, prefill: u64) {
    let marked = steps(trace, None);
    let auto = steps(trace, Some("--no-markers"));
    let what = trace.display();
    assert_eq!(
        marked["source_kind"]["kind"], "markers",
        "{what}: {}",
        marked["source"]
    );
    assert_eq!(
        auto["source_kind"]["kind"], "periodic",
        "{what}: {}",
        auto["source"]
    );
    for s in [&marked, &auto] {
        assert_eq!(s["decode_steps"], decode, "{what}: {s}");
        assert_eq!(s["prefill_steps"], prefill, "{what}: {s}");
    }
    for stat in ["median", "p99", "max"] {
        let (m, a) = (tpot(&marked, stat), tpot(&auto, stat));
        assert!(
            (a - m).abs() <= 0.02 * m,
            "{what}: TPOT {stat} {a} ms without markers, {m} ms with"
        );
    }
}

#[test]
fn engine_prefill_is_a_prefill_without_markers() {
    let trace = repo(ENGINE_8B);
    agrees_with_markers(&trace, 32, 1);
    let auto = steps(&trace, Some("--no-markers"));
    assert_eq!(auto["prefill_steps"], 1);
    assert_eq!(auto["source_kind"]["prefills"], 1, "{}", auto["source"]);
    // The prefill is the first step and about as long as the marked one (8.196 ms).
    let prefill = auto["prefill_ms"]["max"].as_f64().expect("prefill_ms");
    assert!((prefill - 8.196).abs() < 0.1, "prefill {prefill} ms");

    let o = run(&["report", "-q", "--no-markers", trace.to_str().unwrap()]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("32 decode, 1 prefill"), "{text}");
    assert!(text.contains("buckets per prefill step"), "{text}");
}

#[test]
fn chrome_export_of_the_engine_trace_finds_the_prefill_without_markers() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("engine.chrome.json");
    let o = run(&[
        "export",
        "-q",
        repo(ENGINE_8B).to_str().unwrap(),
        "--chrome",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let auto = steps(&out, Some("--no-markers"));
    assert_eq!(auto["decode_steps"], 32, "{auto}");
    assert_eq!(auto["prefill_steps"], 1, "{auto}");
    let max = tpot(&auto, "max");
    assert!((max - 5.696).abs() <= 0.02 * 5.696, "TPOT max {max}");
}

#[test]
fn hf_traces_keep_their_decode_steps_and_no_prefill_without_markers() {
    for (t, n) in [
        ("traces/reference/hf-llama3-8b-npl1.json.gz", 32),
        ("traces/reference/hf-llama3.2-1b-npl8.json.gz", 32),
        ("traces/reference/hf-qwen3-0.6b-npl1.json.gz", 16),
    ] {
        agrees_with_markers(&repo(t), n, 0);
    }
}
