//! The launch lever fits the trace (issue 37): a step that already replays a CUDA graph is
//! not told to use one; the eager launches around the graph are named instead.

mod common;

use std::path::PathBuf;

use gapscope_analyzer::analysis::host::IdleCause;

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// SGLang's decode on an MI300X replays a graph for 98% of its kernels; half the idle is
/// launch time, spent on the eager kernels around the replay.
#[test]
fn a_graph_replaying_engine_is_told_about_its_eager_launches() {
    let run = common::open(repo("traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz"));
    let lever = &run.report.host_idle.as_ref().expect("host idle").lever;
    assert_eq!(lever.cause, Some(IdleCause::Launch));
    let g = lever.graph.expect("graph replay found");
    assert!(g.replayed_kernels_pct > 95.0, "{g:?}");
    let text = lever.to_string();
    assert!(text.contains("already replay a CUDA graph"), "{text}");
    assert!(!text.contains("a CUDA graph per step"), "{text}");
    let names: Vec<&str> = lever.launched_in.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"aten::copy_"), "{names:?}");
    // The replay's own launch is not one of the eager launches.
    assert!(!names.iter().any(|n| n.contains("graphs.py")), "{names:?}");
}

/// An eager training step (HTA's MI250 trace) keeps the graph advice, and names where the
/// launch time went.
#[test]
fn an_eager_step_keeps_the_graph_advice_with_its_launchers_named() {
    let run = common::open(repo("traces/corpus/hta_mi250_rocm62_train.json.gz"));
    let lever = &run.report.host_idle.as_ref().expect("host idle").lever;
    assert_eq!(lever.cause, Some(IdleCause::Launch));
    assert!(lever.graph.is_none());
    let text = lever.to_string();
    assert!(text.contains("a CUDA graph per step"), "{text}");
    assert!(text.contains("most of it in `aten::"), "{text}");
}

/// `diff` of two models on one engine (HF eager: Qwen3-0.6B against Llama-3.2-1B) says the
/// runs are different models, not that "each engine" files the work differently; against
/// another engine (gapscope-engine against HF) it keeps the engines' reason.
#[test]
fn diff_notes_name_different_models_on_one_engine() {
    use gapscope_analyzer::diff::diff;
    let qwen = common::open(repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz"));
    let llama = common::open(repo("traces/reference/hf-llama3.2-1b-npl8.json.gz"));
    let d = diff(qwen.diff_side(), llama.diff_side(), 10);
    let grouped: Vec<&str> = d
        .groups
        .iter()
        .filter(|g| g.grouped)
        .map(|g| g.why.as_str())
        .collect();
    assert!(!grouped.is_empty());
    for why in &grouped {
        assert!(
            why.contains("A and B run different models (kernels per step 1620 vs 680)"),
            "{why}"
        );
        assert!(!why.contains("each engine"), "{why}");
    }
    let engine = common::open(repo("traces/reference/engine-llama3-8b-npl1.gst"));
    let hf = common::open(repo("traces/reference/hf-llama3-8b-npl1.json.gz"));
    let d = diff(engine.diff_side(), hf.diff_side(), 10);
    assert!(
        d.groups
            .iter()
            .any(|g| g.grouped && !g.why.contains("different models")),
        "{:?}",
        d.groups.iter().map(|g| &g.why).collect::<Vec<_>>()
    );
}
