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
