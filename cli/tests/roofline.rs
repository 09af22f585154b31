//! `gapscope roofline` end to end: the hand-computed Llama-3-8B floor, JSON, and an SVG that
//! parses, renders to PNG and carries the floor lines and the measured point.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

fn gapscope(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gapscope"))
        .args(args)
        .output()
        .expect("runs")
}

#[test]
fn llama3_8b_bf16_h100_floor_json() {
    let model = repo("models/llama-3-8b.json");
    let o = gapscope(&[
        "roofline",
        "--model",
        model.to_str().unwrap(),
        "--hw",
        "h100-sxm",
        "--weights",
        "bf16",
        "--batch",
        "1,8,512",
        "--ctx",
        "0",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["ceilings"], "datasheet");
    // Hand computation: 15,009,857,536 bytes at 3.35e12 B/s.
    let floor = v["floors"][0]["weight_floor_s"].as_f64().unwrap();
    let hand = 15_009_857_536.0 / 3.35e12;
    assert!((floor - hand).abs() / hand < 0.005, "{floor} vs {hand}");
    let mstar = v["crossover_batch"].as_f64().unwrap();
    assert!((mstar - 989.4e12 * 2.0 / (2.0 * 3.35e12)).abs() < 1e-6);
    // Batch 512 is above M* = 295: compute-bound.
    let f = &v["floors"][2];
    assert!(f["compute_floor_s"].as_f64().unwrap() > f["weight_floor_s"].as_f64().unwrap());
}

#[test]
fn svg_parses_renders_and_carries_lines_and_points() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("roofline.svg");
    let model = repo("models/llama-3-8b.json");
    let trace = repo("traces/reference/hf-llama3-8b-npl1.json.gz");
    let o = gapscope(&[
        "roofline",
        "--model",
        model.to_str().unwrap(),
        "--hw",
        "h200",
        "--ctx",
        "160",
        "--trace",
        trace.to_str().unwrap(),
        "--svg",
        svg.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.contains("% of floor"), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    for label in [
        "memory roof",
        "compute roof",
        "floor (max tok/s)",
        "measured decode steps",
    ] {
        assert!(text.contains(label), "legend {label}");
    }
    assert!(text.matches("<polyline").count() >= 3, "three roof lines");
    assert!(
        text.matches("<circle").count() >= 2,
        "measured point and its legend marker"
    );
    let tree =
        resvg::usvg::Tree::from_str(&text, &resvg::usvg::Options::default()).expect("SVG parses");
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height()).unwrap();
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    let inked = pixmap
        .pixels()
        .iter()
        .filter(|p| p.red() < 200 || p.green() < 200 || p.blue() < 200)
        .count();
    assert!(
        inked > 2000,
        "the chart draws something ({inked} dark pixels)"
    );
    let png = dir.path().join("roofline.png");
    pixmap.save_png(&png).unwrap();
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));
}

#[test]
fn bad_model_and_gpu_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("config.json");
    std::fs::write(&bad, "{\"hidden_size\": 64}").unwrap();
    let o = gapscope(&[
        "roofline",
        "--model",
        bad.to_str().unwrap(),
        "--hw",
        "h100-sxm",
    ]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("config.json") && e.trim_end().lines().count() == 1,
        "{e}"
    );
    let model = repo("models/llama-3-8b.json");
    let o = gapscope(&[
        "roofline",
        "--model",
        model.to_str().unwrap(),
        "--hw",
        "tpu",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown GPU"));
}

#[test]
fn measured_profile_from_calibrate() {
    // docs/evidence/calibrate-h200.json was written by gapscope-calibrate on an H200.
    let model = repo("models/llama-3-8b.json");
    let profile = repo("docs/evidence/calibrate-h200.json");
    let o = gapscope(&[
        "roofline",
        "--model",
        model.to_str().unwrap(),
        "--hw-profile",
        profile.to_str().unwrap(),
        "--batch",
        "1",
        "--ctx",
        "0",
        "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ceilings"], "measured");
    let bw = v["hardware"]["hbm_bytes_per_s"].as_f64().unwrap();
    let floor = v["floors"][0]["weight_floor_s"].as_f64().unwrap();
    assert!((floor - 15_009_857_536.0 / bw).abs() < 1e-12);
    let o = gapscope(&[
        "roofline",
        "--model",
        model.to_str().unwrap(),
        "--hw-profile",
        model.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("hardware profile"));
}

#[test]
fn trace_buckets_against_declared_and_model_derived_floors() {
    // The HF eager trace declares no bytes or FLOPs: its GEMM and attention floors come from
    // the model spec. The engine trace declares them per kernel and keeps them.
    let model = repo("models/llama-3-8b.json");
    let hf = repo("traces/reference/hf-llama3-8b-npl1.json.gz");
    let engine = repo("traces/reference/engine-llama3-8b-npl1.gst");
    let args = [
        "roofline",
        "--model",
        model.to_str().unwrap(),
        "--hw",
        "h200",
        "--weights",
        "bf16",
        "--batch",
        "1",
        "--trace",
        hf.to_str().unwrap(),
    ];
    let o = gapscope(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    let row = |bucket: &str| {
        out.lines()
            .find(|l| l.trim_start().starts_with(bucket))
            .unwrap_or_else(|| panic!("no {bucket} row in\n{out}"))
    };
    for b in ["gemm_dense", "attention"] {
        let l = row(b);
        assert!(
            l.contains('%') && l.contains("derived from model spec"),
            "{l}"
        );
    }
    assert!(
        row("norm").contains("none: no model-derived minimum"),
        "{out}"
    );

    let mut json_args = args.to_vec();
    json_args.extend(["--trace", engine.to_str().unwrap(), "--json"]);
    let o = gapscope(&json_args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let ctx = v["ctx"].as_f64().unwrap();
    assert_eq!(ctx, 4096.0, "the default context");
    let bw = v["hardware"]["hbm_bytes_per_s"].as_f64().unwrap();
    assert_eq!(bw, 4.8e12);
    let hf_steps = &v["measured"][0];
    assert_eq!(hf_steps["decode_steps"], 32);
    let find = |m: &serde_json::Value, b: &str| -> serde_json::Value {
        m["buckets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["buckets"].as_array().unwrap().iter().any(|y| y == b))
            .unwrap_or_else(|| panic!("no floor covers {b}: {m:#}"))
            .clone()
    };
    let gemm = find(hf_steps, "gemm_dense");
    assert_eq!(gemm["source"], "derived_from_model_spec");
    // Linear layers 13,958,643,712 B + LM head 1,050,673,152 B of bf16 weights.
    assert_eq!(gemm["bytes_per_step"].as_f64().unwrap(), 15_009_316_864.0);
    let attn = find(hf_steps, "attention");
    assert_eq!(attn["source"], "derived_from_model_spec");
    // The KV cache at --ctx: 32 layers * (K, V) * 8 heads * 128 * 2 B per token.
    assert_eq!(attn["bytes_per_step"].as_f64().unwrap(), ctx * 131_072.0);
    for b in [&gemm, &attn] {
        let ms = b["ms_per_step"].as_f64().unwrap();
        let floor = b["floor_ms"].as_f64().unwrap();
        let pct = b["pct_of_floor"].as_f64().unwrap();
        assert!((floor - b["bytes_per_step"].as_f64().unwrap() / bw * 1e3).abs() < 1e-9);
        assert!((pct - 100.0 * floor / ms).abs() < 1e-9, "{b:#}");
        assert!(pct > 0.0 && pct <= 100.0, "{b:#}");
    }
    let none: Vec<&str> = hf_steps["buckets_without_floor"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["bucket"].as_str().unwrap())
        .collect();
    for b in ["norm", "rope", "act_elementwise"] {
        assert!(none.contains(&b), "{none:?}");
    }

    let eng = &v["measured"][1];
    assert_eq!(eng["decode_steps"], 32);
    for b in ["gemv", "attention"] {
        let f = find(eng, b);
        assert_eq!(f["source"], "declared_by_engine", "{f:#}");
        assert!(f["bytes_per_step"].as_f64().unwrap() > 0.0);
        assert!(f["pct_of_floor"].as_f64().unwrap() > 0.0);
    }
}
