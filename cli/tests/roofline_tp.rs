//! `gapscope roofline --tp`: the floors of one rank of a tensor-parallel run, the degree
//! taken from the trace's world size when `--tp` is not given, and said where it comes from.
//! The model is the one `scripts/capture/tp-decode.py` ran for the bundled two-rank traces
//! (`traces/reference/tp2/`: hidden 4096, 16 layers, 32 heads, 8 KV heads, MLP 14336, vocab
//! 32000), in `cli/tests/data/tp2-decode-config.json`.

use gapscope_tests::{json, repo, run, s, stderr};

fn config() -> std::path::PathBuf {
    repo("cli/tests/data/tp2-decode-config.json")
}

fn roofline_json(extra: &[&str]) -> serde_json::Value {
    let model = config();
    let mut args = vec!["roofline", "--model", s(&model), "--hw", "h200", "--json"];
    args.extend(extra);
    json(&args)
}

#[test]
fn a_two_rank_trace_is_placed_against_one_ranks_floor() {
    let trace = repo("traces/reference/tp2/host-rank0.json.gz");
    let t = s(&trace);
    let from_trace = roofline_json(&["--batch", "1", "--ctx", "64", "--trace", t]);
    assert_eq!(from_trace["tp"], 2);
    assert_eq!(from_trace["tp_source"], "trace_world_size");
    assert_eq!(from_trace["kv_heads_per_rank"], 4);
    assert_eq!(from_trace["model"]["kv_heads"], 8);
    let m = &from_trace["measured"][0];
    assert_eq!(
        (m["tp"].as_u64(), m["tp_source"].as_str()),
        (Some(2), Some("trace_world_size"))
    );
    // --tp 1 overrules the trace: the whole model on one GPU.
    let one = roofline_json(&["--batch", "1", "--ctx", "64", "--tp", "1", "--trace", t]);
    assert_eq!(
        (one["tp"].as_u64(), one["tp_source"].as_str()),
        (Some(1), Some("given"))
    );
    let bytes = |v: &serde_json::Value| v["floors"][0]["weight_bytes"].as_f64().expect("bytes");
    let kv = |v: &serde_json::Value| v["floors"][0]["kv_bytes"].as_f64().expect("kv");
    // Replicated on both ranks: the embedding row and 33 norms, bf16.
    let replicated = 4096.0 * 2.0 + 33.0 * 4096.0 * 2.0;
    assert_eq!(
        bytes(&from_trace) - replicated,
        (bytes(&one) - replicated) / 2.0
    );
    assert_eq!(kv(&from_trace), kv(&one) / 2.0);
    let floor = |v: &serde_json::Value| v["measured"][0]["floor_ms"].as_f64().expect("floor");
    assert!(floor(&from_trace) < 0.51 * floor(&one));
    // The text says the degree and where it came from.
    let model = config();
    let o = run(&[
        "roofline",
        "--model",
        s(&model),
        "--hw",
        "h200",
        "--batch",
        "1",
        "--trace",
        t,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).expect("utf-8");
    assert!(
        text.contains("parallel  tensor parallel 2 (from the trace's world size): per rank 1/2 of the linear weights and the LM head, 4 KV heads of 8, 1/2 of the FLOPs"),
        "{text}"
    );
    assert!(
        text.contains(", tensor parallel 2 (from the trace's world size), "),
        "{text}"
    );
}

#[test]
fn fewer_kv_heads_than_ranks_are_replicated_and_the_degree_is_checked() {
    let model = repo("models/llama-3-8b.json");
    let m = s(&model);
    let at = |tp: &str| {
        json(&[
            "roofline", "--model", m, "--hw", "h200", "--json", "--batch", "1", "--tp", tp,
        ])
    };
    let (one, sixteen) = (at("1"), at("16"));
    assert_eq!(sixteen["kv_heads_per_rank"], 1);
    let kv = |v: &serde_json::Value| v["floors"][0]["kv_bytes"].as_f64().expect("kv");
    // 8 KV heads over 16 ranks: one each, an eighth of the cache (not a sixteenth).
    assert_eq!(kv(&sixteen), kv(&one) / 8.0);
    // Without --tp and without a trace: one GPU, assumed, and the text says nothing of it.
    let plain = json(&[
        "roofline", "--model", m, "--hw", "h200", "--json", "--batch", "1",
    ]);
    assert_eq!(
        (plain["tp"].as_u64(), plain["tp_source"].as_str()),
        (Some(1), Some("assumed"))
    );
    let o = run(&["roofline", "--model", m, "--hw", "h200", "--batch", "1"]);
    assert!(
        !String::from_utf8(o.stdout)
            .expect("utf-8")
            .contains("tensor parallel")
    );
    for bad in ["0", "65", "two"] {
        let o = run(&["roofline", "--model", m, "--hw", "h200", "--tp", bad]);
        assert_eq!(o.status.code(), Some(2), "--tp {bad}");
        assert!(stderr(&o).contains("--tp"), "{}", stderr(&o));
    }
}

/// The SVG's title names the degree when the floors are one rank's, and says nothing of it
/// for one GPU.
#[test]
fn the_charts_title_names_the_degree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (model, trace) = (config(), repo("traces/reference/tp2/host-rank0.json.gz"));
    let title = |extra: &[&str]| {
        let svg = dir.path().join("r.svg");
        let mut args = vec!["roofline", "--model", s(&model), "--hw", "h200"];
        args.extend(extra);
        args.extend(["--svg", s(&svg)]);
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        std::fs::read_to_string(&svg).expect("svg")
    };
    let two = title(&["--trace", s(&trace)]);
    assert!(
        two.contains("(ctx 4096, TP 2 (one rank&apos;s floors), ")
            || two.contains("TP 2 (one rank's floors)"),
        "{two}"
    );
    assert!(!title(&[]).contains("TP "));
}
