//! The hybrid levers on real engine traces (`traces/reference/engine-qwen3.5-4l-q8_0-npl8-levers/`:
//! `gapscope-engine bench --hybrid-sweep` on an H200, a Qwen3.5-9B-wide model cut to 4 layers
//! (3 gated DeltaNet, 1 full attention), Q8_0, npl 8, launch timing on one decode step in 4):
//! the what-if predicted from the all-slow trace against the traces measured with each lever
//! switched, the gate of the slow setting against the fast one, and the step figures of a
//! trace that keeps only sampled steps.

use gapscope_tests::{json, one_line_error, repo, run, s, stdout};
use serde_json::Value;

const DIR: &str = "traces/reference/engine-qwen3.5-4l-q8_0-npl8-levers";

fn trace(setting: &str) -> String {
    s(&repo(&format!("{DIR}/{setting}-npl8.gst"))).to_owned()
}

fn what_if() -> Value {
    let slow = trace("slow");
    let measured: Vec<String> = ["state_update", "state_read", "out_proj", "all"]
        .iter()
        .map(|l| format!("{l}={}", trace(l)))
        .collect();
    let mut args = vec!["diff", "-q", "--json", &slow, "--what-if", "hybrid"];
    for m in &measured {
        args.extend(["--measured", m.as_str()]);
    }
    json(&args)
}

/// Each lever's predicted step within 3% of the one measured with it (the measured spread is
/// 0.2-0.4% CV; the predictions came within 0.6%), and each prediction made of the parts the
/// lever changes: 3 state copies, 3 state gathers, 24 per-row out_proj launches that become 3.
#[test]
fn predictions_match_the_measured_levers() {
    let w = what_if();
    assert_eq!(w["batch_size"], 8);
    let levers = w["levers"].as_array().unwrap();
    let lever = |name: &str| levers.iter().find(|l| l["lever"] == name).unwrap().clone();
    assert_eq!(lever("state_update=inplace")["launches_removed"], 3.0);
    assert_eq!(lever("state_read=fused_ids")["launches_removed"], 3.0);
    let out = lever("out_proj=2d");
    assert_eq!(out["launches_removed"], 21.0);
    assert!(out["added_ms"].as_f64().unwrap() > 0.0, "{out}");
    for l in levers {
        assert!(l["removed_ms"].as_f64().unwrap() > 0.0, "{l}");
    }
    let measured = w["measured"].as_array().unwrap();
    assert_eq!(measured.len(), 4);
    for m in measured {
        let e = m["error_pct"].as_f64().unwrap();
        assert!(
            e.abs() <= 3.0,
            "{}: predicted {} measured {} ({e:+.2}%)",
            m["lever"],
            m["predicted_step_ms"],
            m["measured_step_ms"]
        );
    }
    // The combined prediction is the slow step less every lever's saving.
    let all = lever("all")["predicted_step_ms"].as_f64().unwrap();
    assert!(all < out["predicted_step_ms"].as_f64().unwrap());
}

#[test]
fn the_text_table_names_every_lever_and_its_basis() {
    let slow = trace("slow");
    let o = run(&["diff", "-q", &slow, "--what-if", "hybrid"]);
    assert!(o.status.success(), "{o:?}");
    let t = stdout(&o);
    for l in [
        "state_update=inplace",
        "state_read=fused_ids",
        "out_proj=2d",
        "all",
    ] {
        assert!(t.contains(l), "{t}");
    }
    assert!(
        t.contains("o_proj"),
        "the out_proj basis names its twin: {t}"
    );
}

/// The slow setting against the fast one: the gate fails on the levers' buckets (the state
/// copies, the state gathers, and the per-row out_proj GEMVs) and on the structural copies and
/// gathers that appear in every step.
#[test]
fn the_gate_flags_the_levers_buckets_and_the_new_copies() {
    let (slow, all) = (trace("slow"), trace("all"));
    let o = run(&[
        "gate",
        "-q",
        "--json",
        "--current",
        &slow,
        "--baseline",
        &all,
    ]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let g: Value = serde_json::from_slice(&o.stdout).unwrap();
    let verdict = |b: &str| {
        g["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["bucket"] == b)
            .map(|x| x["verdict"].as_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    for b in ["copy", "embed_gather", "gemv"] {
        assert_eq!(verdict(b), "regression", "{b}: {g}");
    }
    let structural = g["structural"].to_string();
    assert!(
        structural.contains("copies") && structural.contains("gathers"),
        "{structural}"
    );
    // The fast setting against itself passes.
    let o = run(&["gate", "-q", "--current", &all, "--baseline", &all]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

/// The engine keeps launch timing for one decode step in 4: the kept steps are not
/// neighbours, so there is no TPOT (start-to-start would span 4 steps) and no idle between
/// steps; the step spans and the busy share of them stand.
#[test]
fn a_sampled_trace_reports_spans_not_periods() {
    let r = json(&["report", "-q", "--json", &trace("slow")]);
    let st = &r["reports"][0]["steps"];
    assert!(st["tpot_ms"].is_null(), "{st}");
    assert_eq!(st["decode_span_ms"]["n"], 12);
    assert_eq!(st["host_gap_ms_per_step"], 0.0);
    assert!(st["decode_busy_pct"].as_f64().unwrap() > 70.0, "{st}");
}

#[test]
fn what_if_errors_name_the_problem() {
    let slow = trace("slow");
    let e = one_line_error(&run(&["diff", "-q", &slow, "--what-if", "moe"]));
    assert!(e.contains("unknown lever set"), "{e}");
    let bad = format!("fused={}", trace("all"));
    let e = one_line_error(&run(&[
        "diff",
        "-q",
        &slow,
        "--what-if",
        "hybrid",
        "--measured",
        &bad,
    ]));
    assert!(
        e.contains("no such lever") && e.contains("state_update"),
        "{e}"
    );
    // A trace without the engine's op columns cannot be predicted from.
    let llama = s(&repo("traces/reference/llamacpp-qwen3.5-9b-q4_0-npl1.gst")).to_owned();
    let e = one_line_error(&run(&["diff", "-q", &llama, "--what-if", "hybrid"]));
    assert!(e.contains("engine"), "{e}");
    let e = one_line_error(&run(&["diff", "-q", &slow]));
    assert!(e.contains("--what-if"), "{e}");
}
