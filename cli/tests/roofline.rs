#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
//! `gapscope roofline` end to end: the hand-computed Llama-3-8B floor, JSON, and an SVG that
//! parses, renders to PNG and carries the floor lines and the measured point.

use gapscope_tests::{json, mkfifo, one_line_error, repo, run, run_within, s, stderr};
use std::path::Path;
use std::time::Duration;

/// `gapscope roofline` and `line`, split at white space, with each `{}` in it replaced by the
/// next of `paths` (kept whole): each test spells out only its own options.
fn roofline_args<'a>(line: &'a str, paths: &[&'a Path]) -> Vec<&'a str> {
    let mut paths = paths.iter();
    let mut args = vec!["roofline"];
    args.extend(line.split_whitespace().map(|a| match a {
        "{}" => s(paths.next().expect("a path for each {}")),
        a => a,
    }));
    assert!(paths.next().is_none(), "a {{}} for each path in {line}");
    args
}

/// Runs `args`, which must exit 2; its stderr.
fn refused(args: &[&str]) -> String {
    let o = run(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}");
    stderr(&o)
}

/// Runs `args`, which must succeed; its stdout.
fn printed(args: &[&str]) -> String {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn llama3_8b_bf16_h100_floor_json() {
    let model = repo("models/llama-3-8b.json");
    let v = json(&roofline_args(
        "--model {} --hw h100-sxm --weights bf16 --batch 1,8,512 --ctx 0 --json",
        &[&model],
    ));
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
    let out = printed(&roofline_args(
        "--model {} --hw h200 --ctx 160 --trace {} --svg {}",
        &[&model, &trace, &svg],
    ));
    assert!(out.contains("× the floor (efficiency "), "{out}");
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(!text.contains("% of floor"), "{text}");
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
    let e = refused(&roofline_args("--model {} --hw h100-sxm", &[&bad]));
    assert!(
        e.contains("config.json") && e.trim_end().lines().count() == 1,
        "{e}"
    );
    let model = repo("models/llama-3-8b.json");
    let e = refused(&roofline_args("--model {} --hw tpu", &[&model]));
    assert!(e.contains("unknown GPU"), "{e}");
}

#[test]
fn measured_profile_from_calibrate() {
    // cli/tests/data/calibrate-h200.json was written by gapscope-calibrate on an H200.
    let model = repo("models/llama-3-8b.json");
    let profile = repo("cli/tests/data/calibrate-h200.json");
    let v = json(&roofline_args(
        "--model {} --hw-profile {} --batch 1 --ctx 0 --json",
        &[&model, &profile],
    ));
    assert_eq!(v["ceilings"], "measured");
    let bw = v["hardware"]["hbm_bytes_per_s"].as_f64().unwrap();
    let floor = v["floors"][0]["weight_floor_s"].as_f64().unwrap();
    assert!((floor - 15_009_857_536.0 / bw).abs() < 1e-12);
    let e = refused(&roofline_args(
        "--model {} --hw-profile {}",
        &[&model, &model],
    ));
    assert!(e.contains("hardware profile"), "{e}");
}

#[test]
fn trace_buckets_against_declared_and_model_derived_floors() {
    // The HF eager trace declares no bytes or FLOPs: its GEMM and attention floors come from
    // the model spec. The engine trace declares them per kernel and keeps them.
    let model = repo("models/llama-3-8b.json");
    let hf = repo("traces/reference/hf-llama3-8b-npl1.json.gz");
    let engine = repo("traces/reference/engine-llama3-8b-npl1.gst");
    let args = roofline_args(
        "--model {} --hw h200 --weights bf16 --batch 1 --trace {}",
        &[&model, &hf],
    );
    let out = printed(&args);
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

    let mut json_args = args.clone();
    json_args.extend(["--trace", s(&engine), "--json"]);
    let v = json(&json_args);
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

#[test]
fn measured_steps_read_as_times_the_floor_and_efficiency() {
    // "80.0% of floor" was floor ÷ measured, read as measured ÷ floor: each figure now says
    // which way it goes, `× the floor` (measured ÷ floor) and `efficiency` (floor ÷ measured).
    let model = repo("models/llama-3-8b.json");
    let hf = repo("traces/reference/hf-llama3-8b-npl1.json.gz");
    let line = "--model {} --hw h200 --weights bf16 --batch 1 --ctx 160 --trace {}";
    let mut args = roofline_args(line, &[&model, &hf]);
    let out = printed(&args);
    assert!(!out.contains("% of floor"), "{out}");
    args.push("--json");
    let v = json(&args);
    let m = &v["measured"][0];
    let f = |x: &serde_json::Value, k: &str| x[k].as_f64().unwrap();
    let (med, p10) = (f(m, "tpot_median_ms"), f(m, "tpot_p10_ms"));
    let floor = f(m, "floor_ms");
    // The JSON keeps its field: the efficiency, floor ÷ measured × 100.
    assert!((f(m, "pct_of_floor_median") - 100.0 * floor / med).abs() < 1e-9);
    assert!(med / floor > 1.0, "slower than its floor: × above 1");
    let headline = format!(
        "    TPOT median {med:.3} ms = {:.2}× the floor (efficiency {:.1}%); p10 {p10:.3} ms = \
         {:.2}× the floor (efficiency {:.1}%)",
        med / floor,
        100.0 * floor / med,
        p10 / floor,
        100.0 * floor / p10
    );
    assert!(out.lines().any(|l| l == headline), "{headline}\n{out}");
    let cells = |first: &str| -> Vec<&str> {
        let l = out.lines().find(|l| l.trim_start().starts_with(first));
        l.unwrap()
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect()
    };
    // bucket, ms/step, GB/step, floor ms, × floor, efficiency, % of BW, floor source.
    assert_eq!(cells("bucket")[4..6], ["× floor", "efficiency"]);
    let gemm = &m["buckets"][0];
    assert_eq!(gemm["bucket"], "gemm_dense");
    let (ms, floor_ms) = (f(gemm, "ms_per_step"), f(gemm, "floor_ms"));
    let row = cells("gemm_dense");
    assert_eq!(row[4], format!("{:.2}", ms / floor_ms), "{row:?}");
    assert_eq!(row[5], format!("{:.1}%", 100.0 * floor_ms / ms), "{row:?}");
}

/// Every number in the JSON document is finite (serde_json writes inf and NaN as null).
fn assert_no_nulls(v: &serde_json::Value, at: &str) {
    match v {
        serde_json::Value::Null => panic!("null at {at}"),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                assert_no_nulls(x, &format!("{at}[{i}]"));
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                // Optional fields that are legitimately absent.
                if x.is_null() && ["note", "moe_experts", "moe_top_k"].contains(&k.as_str()) {
                    continue;
                }
                assert_no_nulls(x, &format!("{at}.{k}"));
            }
        }
        _ => {}
    }
}

#[test]
fn absurd_model_sizes_and_options_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("config.json");
    let base = serde_json::json!({
        "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256
    });
    let cases: [(&str, serde_json::Value, &str); 9] = [
        (
            "num_hidden_layers",
            serde_json::json!(1_000_000_000_000_000_000u64),
            "num_hidden_layers",
        ),
        ("hidden_size", serde_json::json!(1u64 << 40), "hidden_size"),
        ("vocab_size", serde_json::json!(u64::MAX), "vocab_size"),
        (
            "intermediate_size",
            serde_json::json!(1u64 << 50),
            "intermediate_size",
        ),
        (
            "num_attention_heads",
            serde_json::json!(1u64 << 30),
            "num_attention_heads",
        ),
        (
            "num_key_value_heads",
            serde_json::json!(5),
            "does not divide",
        ),
        (
            "num_key_value_heads",
            serde_json::json!(0),
            "num_key_value_heads",
        ),
        ("head_dim", serde_json::json!(1u64 << 33), "head_dim"),
        (
            "num_local_experts",
            serde_json::json!(1u64 << 40),
            "num_local_experts",
        ),
    ];
    for (key, value, want) in cases {
        let mut c = base.clone();
        c[key] = value;
        std::fs::write(&cfg, c.to_string()).unwrap();
        let o = run(&roofline_args("--model {} --hw h100-sxm", &[&cfg]));
        let e = one_line_error(&o);
        assert!(e.contains("config.json") && e.contains(want), "{key}: {e}");
    }
    // A layer list of 10^18 entries cannot be built; negative or fractional sizes are errors.
    let mut c = base.clone();
    c["hidden_size"] = serde_json::json!(-4096);
    std::fs::write(&cfg, c.to_string()).unwrap();
    let e = one_line_error(&run(&roofline_args("--model {} --hw h100-sxm", &[&cfg])));
    assert!(e.contains("hidden_size"), "{e}");

    let model = repo("models/llama-3-8b.json");
    for (opt, value) in [
        ("--batch", "1000000000000000000"),
        ("--batch", "0"),
        ("--ctx", "18446744073709551615"),
        ("--trace-batch", "0"),
    ] {
        let line = format!("--model {{}} --hw h100-sxm {opt} {value}");
        let e = one_line_error(&run(&roofline_args(&line, &[&model])));
        assert!(e.contains(opt), "{opt} {value}: {e}");
    }

    // The largest sizes accepted still give finite figures everywhere.
    let big = serde_json::json!({
        "hidden_size": 131072, "num_hidden_layers": 1024, "num_attention_heads": 128,
        "num_key_value_heads": 128, "head_dim": 1024, "intermediate_size": 1048576,
        "vocab_size": 16777216
    });
    std::fs::write(&cfg, big.to_string()).unwrap();
    let v = json(&roofline_args(
        "--model {} --hw h100-sxm --batch 1,1048576 --ctx 16777216 --json",
        &[&cfg],
    ));
    assert_no_nulls(&v, "$");
    for f in v["floors"].as_array().unwrap() {
        let t = f["max_tok_per_s"].as_f64().unwrap();
        assert!(t.is_finite() && t > 0.0, "{f}");
    }
}

#[cfg(unix)]
#[test]
fn model_and_profile_must_be_regular_files() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("config.json");
    mkfifo(&fifo);
    let model = repo("models/llama-3-8b.json");
    let zero = Path::new("/dev/zero");
    for args in [
        roofline_args("--model {} --hw h200", &[&fifo]),
        roofline_args("--model {} --hw h200", &[zero]),
        roofline_args("--model {} --hw-profile {}", &[&model, zero]),
        roofline_args("--model {} --hw-profile {}", &[&model, &fifo]),
    ] {
        let o = run_within(&args, Duration::from_secs(20));
        let e = one_line_error(&o);
        assert!(e.contains("must be a regular file"), "{args:?}: {e}");
    }
}

#[test]
fn fp8_on_a_profile_without_fp8_says_which_ceiling_it_uses() {
    // The H200 profile measured bf16 and int8, not fp8 (fp8_tflops 0).
    let model = repo("models/llama-3-8b.json");
    let profile = repo("cli/tests/data/calibrate-h200.json");
    let args = roofline_args(
        "--model {} --hw-profile {} --weights fp8 --batch 1,512 --ctx 0",
        &[&model, &profile],
    );
    let out = printed(&args);
    assert!(!out.contains("fp8 0 "), "{out}");
    assert!(out.contains("fp8 not measured"), "{out}");
    assert!(out.contains("(measured ceilings)"), "{out}");
    assert!(out.contains("the profile did not measure fp8"), "{out}");
    assert!(out.contains("datasheet fp8 peak (1979 TFLOP/s)"), "{out}");
    for debug in ["Fp8", "Bf16", "Measured", "Datasheet"] {
        assert!(!out.contains(debug), "{debug} in {out}");
    }
    let mut j = args.clone();
    j.push("--json");
    let v = json(&j);
    assert_eq!(v["weights"], "fp8");
    let c = &v["compute_peak"];
    assert_eq!(c["wanted"], "fp8");
    assert_eq!(c["path"], "fp8");
    assert_eq!(c["source"], "datasheet");
    assert_eq!(c["tflops"].as_f64().unwrap(), 1978.9);
    // The compute floor and M* use that peak, not the measured bf16 one.
    let bw = v["hardware"]["hbm_bytes_per_s"].as_f64().unwrap();
    let mstar = v["crossover_batch"].as_f64().unwrap();
    assert!(
        (mstar - 1978.9e12 * 1.0 / (2.0 * bw)).abs() < 1e-9,
        "{mstar}"
    );
    let f = &v["floors"][1];
    let flops = f["flops"].as_f64().unwrap();
    assert!((f["compute_floor_s"].as_f64().unwrap() - flops / 1978.9e12).abs() < 1e-15);

    // Every weight format prints in its CLI spelling.
    for (fmt, shown) in [
        ("q4_k", "q4_k"),
        ("q8_0", "q8_0"),
        ("nvfp4", "nvfp4"),
        ("bf16", "bf16"),
    ] {
        let line = format!("--model {{}} --hw h200 --weights {fmt} --batch 1");
        let out = printed(&roofline_args(&line, &[&model]));
        assert!(out.contains(&format!("weights   {shown};")), "{out}");
        assert!(out.contains("(datasheet ceilings)"), "{out}");
    }
}

#[test]
fn trace_batch_is_taken_from_markers_or_said_to_be_assumed() {
    let model = repo("models/llama-3.2-1b.json");
    let hf = repo("traces/reference/hf-llama3.2-1b-npl8.json.gz");
    let base = roofline_args("--model {} --hw h200 --ctx 160 --trace {}", &[&model, &hf]);
    // No markers with a batch, no --trace-batch: batch 1 assumed, and said, with the mismatch.
    let mut a = base.clone();
    a.extend(["--batch", "8"]);
    let out = printed(&a);
    assert!(out.contains("batch 1 assumed"), "{out}");
    assert!(out.contains("--trace-batch N"), "{out}");
    assert!(
        out.contains("--batch 8 does not include the trace's batch 1"),
        "{out}"
    );
    a.push("--json");
    let v = json(&a);
    let m = &v["measured"][0];
    assert_eq!(m["batch"], 1);
    assert_eq!(m["batch_source"], "assumed");
    assert!(m["notes"][0].as_str().unwrap().contains("batch 1 assumed"));
    let tps1 = m["tok_per_s"].as_f64().unwrap();

    // --trace-batch 8: placed at 8, 8x the tokens per second, no mismatch note.
    let mut a = base.clone();
    a.extend(["--batch", "8", "--trace-batch", "8", "--json"]);
    let v = json(&a);
    let m = &v["measured"][0];
    assert_eq!(m["batch"], 8);
    assert_eq!(m["batch_source"], "given");
    assert_eq!(m["notes"].as_array().unwrap().len(), 1, "{m:#}");
    assert!((m["tok_per_s"].as_f64().unwrap() - 8.0 * tps1).abs() < 1e-6);

    // Engine markers carry their batch; a different --trace-batch is said to be unused.
    let engine = repo("traces/reference/engine-llama3-8b-npl1.gst");
    let model8 = repo("models/llama-3-8b.json");
    let v = json(&roofline_args(
        "--model {} --hw h200 --batch 4 --trace-batch 2 --trace {} --json",
        &[&model8, &engine],
    ));
    let m = &v["measured"][0];
    assert_eq!(m["batch_source"], "trace_markers");
    assert_eq!(m["batch"], 1);
    let notes: Vec<&str> = m["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes[0].contains("--trace-batch 2 is not used"),
        "{notes:?}"
    );
    assert!(
        notes[1].contains("--batch 4 does not include the trace's batch 1"),
        "{notes:?}"
    );
}

/// The drawn elements of an SVG written by plotters: texts with their anchor point, and the
/// points of every polyline, line and circle.
struct Svg {
    texts: Vec<(f64, f64, String)>,
    polylines: Vec<Vec<(f64, f64)>>,
    circles: Vec<(f64, f64, f64)>,
    lines: Vec<[f64; 4]>,
}

fn parse_svg(text: &str) -> Svg {
    let num = |s: &str| s.parse::<f64>().unwrap();
    let t = regex::Regex::new(r#"<text x="([-\d.]+)" y="([-\d.]+)"[^>]*>\s*([^<]*?)\s*</text>"#)
        .unwrap();
    let p = regex::Regex::new(r#"<polyline[^>]*points="([^"]*)""#).unwrap();
    let c = regex::Regex::new(r#"<circle cx="([-\d.]+)" cy="([-\d.]+)" r="([-\d.]+)""#).unwrap();
    let l = regex::Regex::new(
        r#"<line[^>]*x1="([-\d.]+)" y1="([-\d.]+)" x2="([-\d.]+)" y2="([-\d.]+)""#,
    )
    .unwrap();
    Svg {
        texts: t
            .captures_iter(text)
            .map(|m| (num(&m[1]), num(&m[2]), m[3].to_owned()))
            .collect(),
        polylines: p
            .captures_iter(text)
            .map(|m| {
                m[1].split_whitespace()
                    .map(|xy| {
                        let (x, y) = xy.split_once(',').unwrap();
                        (num(x), num(y))
                    })
                    .collect()
            })
            .collect(),
        circles: c
            .captures_iter(text)
            .map(|m| (num(&m[1]), num(&m[2]), num(&m[3])))
            .collect(),
        lines: l
            .captures_iter(text)
            .map(|m| [num(&m[1]), num(&m[2]), num(&m[3]), num(&m[4])])
            .collect(),
    }
}

#[test]
fn svg_title_band_ticks_legend_and_point_labels() {
    // Layout constants of analyzer/src/roofline/svg.rs.
    const TITLE_BAND: f64 = 44.0;
    const LEGEND_X: f64 = 700.0;
    let dir = tempfile::tempdir().unwrap();
    let model = repo("models/llama-3-8b.json");
    let hf = repo("traces/reference/hf-llama3-8b-npl1.json.gz");
    let engine = repo("traces/reference/engine-llama3-8b-npl1.gst");
    let with_traces = dir.path().join("traces.svg");
    let bare = dir.path().join("bare.svg");
    // --batch 1 alone: the roofs are still curves, and the compute roof (far above the
    // batch-1 floor) is inside the chart, not clamped to its top edge.
    let line = "--model {} --hw h200 --ctx 160 --batch 1 --svg {}";
    let traced = format!("{line} --trace {{}} --trace {{}}");
    for args in [
        roofline_args(&traced, &[&model, &with_traces, &hf, &engine]),
        roofline_args(line, &[&model, &bare]),
    ] {
        let o = run(&args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }

    for (path, has_traces) in [(&with_traces, true), (&bare, false)] {
        let doc = std::fs::read_to_string(path).unwrap();
        let s = parse_svg(&doc);
        // The title alone in the band at the top; nothing else reaches into it.
        let title: Vec<_> = s.texts.iter().filter(|t| t.1 < TITLE_BAND).collect();
        assert_eq!(title.len(), 1, "{title:?}");
        assert!(
            title[0].2.contains("llama bf16 on NVIDIA H200"),
            "{title:?}"
        );
        assert!(title[0].2.contains("datasheet ceilings"), "{title:?}");
        for t in s.texts.iter().filter(|t| t.1 >= TITLE_BAND) {
            assert!(t.1 - 8.0 >= TITLE_BAND, "text in the title band: {t:?}");
        }
        for p in s.polylines.iter().flatten() {
            assert!(p.1 >= TITLE_BAND, "line in the title band: {p:?}");
        }
        for c in &s.circles {
            assert!(c.1 - c.2 >= TITLE_BAND, "circle in the title band: {c:?}");
        }
        for l in &s.lines {
            assert!(l[1] >= TITLE_BAND && l[3] >= TITLE_BAND, "{l:?}");
        }
        // Roofs: curves (many points), left of the legend panel, and none flat along the
        // plot's top edge (the old compute roof was clamped there).
        let roofs: Vec<&Vec<(f64, f64)>> = s.polylines.iter().filter(|p| p.len() > 2).collect();
        assert_eq!(roofs.len(), 3, "memory, compute, floor");
        let top = s
            .lines
            .iter()
            .map(|l| l[1].min(l[3]))
            .fold(f64::MAX, f64::min);
        for r in &roofs {
            assert!(r.iter().all(|p| p.0 < LEGEND_X), "roof under the legend");
            assert!(
                r.iter().any(|p| p.1 > top + 5.0),
                "roof along the top edge {top}"
            );
        }
        // Tick labels: each once, never two texts at one spot.
        let mut at: Vec<(i64, i64)> = s
            .texts
            .iter()
            .map(|t| (t.0.round() as i64, t.1.round() as i64))
            .collect();
        at.sort();
        let n = at.len();
        at.dedup();
        assert_eq!(at.len(), n, "two texts at one position");
        let x_axis_y = s.texts.iter().find(|t| t.2 == "1").map(|t| t.1).unwrap();
        let x_ticks: Vec<&str> = s
            .texts
            .iter()
            .filter(|t| t.1 == x_axis_y)
            .map(|t| t.2.as_str())
            .collect();
        assert!(x_ticks.len() >= 3, "{x_ticks:?}");
        let mut uniq = x_ticks.clone();
        uniq.sort();
        uniq.dedup();
        assert_eq!(uniq.len(), x_ticks.len(), "{x_ticks:?}");
        assert!(x_ticks.iter().all(|t| !t.ends_with(".0")), "{x_ticks:?}");
        // The legend panel: the three roofs, and the measured steps only when there are some.
        let legend: Vec<&str> = s
            .texts
            .iter()
            .filter(|t| t.0 >= LEGEND_X)
            .map(|t| t.2.as_str())
            .collect();
        for entry in [
            "memory roof (weights + KV)",
            "compute roof (bf16 peak)",
            "floor (max tok/s)",
        ] {
            assert!(legend.contains(&entry), "{entry}: {legend:?}");
        }
        assert_eq!(
            legend.contains(&"measured decode steps"),
            has_traces,
            "{legend:?}"
        );
        if has_traces {
            // Each measured point carries its number, spelled out in the legend.
            let points: Vec<_> = s.circles.iter().filter(|c| c.0 < LEGEND_X).collect();
            assert_eq!(points.len(), 2, "{points:?}");
            for (i, c) in points.iter().enumerate() {
                let label = (i + 1).to_string();
                assert!(
                    s.texts.iter().any(|t| t.2 == label
                        && (t.0 - c.0).abs() < 40.0
                        && (t.1 - c.1).abs() < 30.0),
                    "no label {label} at {c:?}"
                );
            }
            assert!(
                legend
                    .iter()
                    .any(|t| t.contains("hf-llama3-8b-npl1.json.gz"))
            );
            assert!(
                legend
                    .iter()
                    .any(|t| t.contains("engine-llama3-8b-npl1.gst"))
            );
            assert!(
                legend
                    .iter()
                    .any(|t| t.contains("× the floor (efficiency ")),
                "{legend:?}"
            );
            assert!(!legend.iter().any(|t| t.contains("% of floor")));
        } else {
            assert!(s.circles.is_empty(), "{:?}", s.circles);
        }
    }
}
