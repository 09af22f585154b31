//! Graph-replayed kernels put back on their ops and modules through the engine's
//! graph-capture trace (issue 37), on traces made on an H200 by
//! scripts/capture/graph-capture.py: a 4-layer Llama decode step captured into a CUDA graph
//! under torch.profiler, 10 replays of it, and the truth from an eager run of the same step
//! whose forward hooks annotated every module call (traces/reference/graph-capture/).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use gapscope_analyzer::analysis::host::{GroupBy, GroupReport, MissingScopes};
use gapscope_analyzer::import::NoProgress;
use gapscope_analyzer::session::{Knobs, Run, SessionSettings, open_run};

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/reference/graph-capture")
}

fn settings(by: GroupBy, capture: Option<&str>) -> SessionSettings {
    let s = SessionSettings::resolve(&Knobs {
        group_by: Some(by),
        ..Knobs::default()
    })
    .expect("valid knobs");
    let path = capture.map(|c| dir().join(c));
    s.with_graph_capture(path.as_deref())
        .expect("a capture trace that holds a capture")
}

fn groups(by: GroupBy, capture: Option<&str>) -> GroupReport {
    let r = open_run(
        Run::new(dir().join("replay.json.gz")),
        &settings(by, capture),
        &NoProgress,
    )
    .expect("replay trace opens");
    assert_eq!(r.report.steps.decode_steps, 10, "one step per replay");
    let g = r.report.groups.expect("grouped");
    assert_eq!(g.steps, 10);
    g
}

/// The truth: the eager step's kernels per innermost module class, decoder layer and op.
fn truth() -> serde_json::Value {
    let text = std::fs::read_to_string(dir().join("truth.json")).expect("truth.json");
    serde_json::from_str(&text).expect("truth is JSON")
}

fn truth_counts(key: impl Fn(&serde_json::Value) -> Option<String>) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for k in truth()["kernels"].as_array().expect("kernels") {
        if let Some(key) = key(k) {
            *out.entry(key).or_insert(0.0) += 1.0;
        }
    }
    out
}

fn rows(g: &GroupReport) -> BTreeMap<String, f64> {
    g.rows
        .iter()
        .filter(|r| r.calls_per_step > 0.0)
        .map(|r| (r.key.clone(), r.calls_per_step))
        .collect()
}

/// Without the capture trace, `--by module` has no module for the replayed kernels and
/// says that nearly all the GPU time was replayed from a graph.
#[test]
fn without_the_capture_the_replayed_share_is_said() {
    let g = groups(GroupBy::Module, None);
    assert_eq!(g.missing, Some(MissingScopes::NoModules));
    assert!(g.graph_capture.is_none());
    assert!(
        g.rows.iter().all(|r| r.gpu_ms_per_step == 0.0),
        "{:?}",
        g.rows
    );
    let total = g.unattributed_gpu_ms_per_step;
    assert!(
        g.graph_gpu_ms_per_step > 0.9 * total && g.graph_gpu_ms_per_step <= total,
        "{} of {total} ms/step replayed",
        g.graph_gpu_ms_per_step
    );
}

/// With it, each replay's 223 kernels land in the modules, layers and ops that launched
/// them in the eager run of the same step.
#[test]
fn with_the_capture_replayed_kernels_land_in_their_modules() {
    let g = groups(GroupBy::Module, Some("capture_bs8.json.gz"));
    let want = truth_counts(|k| {
        Some(format!(
            "nn.Module: {}",
            k["module_class"].as_str().expect("class")
        ))
    });
    assert_eq!(rows(&g), want);
    assert_eq!(g.missing, None);
    let used = g.graph_capture.as_ref().expect("capture used");
    assert_eq!(
        (
            used.graph_launches,
            used.launches_mapped,
            used.activities_mapped
        ),
        (10, 10, 2230)
    );
    assert_eq!(used.mapped_per_step, 223.0);
    assert!(used.refused.is_empty(), "{:?}", used.refused);
    assert_eq!(used.graphs.len(), 1);
    assert_eq!(used.graphs[0].size, Some(8));
    assert_eq!(used.graphs[0].marker.as_deref(), Some("capture_8_FULL"));
    assert!(
        (used.mapped_gpu_ms_per_step - g.graph_gpu_ms_per_step).abs() < 1e-9,
        "every replayed kernel is mapped"
    );
    // What stays without a module: the eager argmax, add and copy after each replay.
    assert!(
        g.unattributed_gpu_ms_per_step < 0.1 * g.graph_gpu_ms_per_step,
        "{} ms/step unattributed",
        g.unattributed_gpu_ms_per_step
    );
    let line = used.to_string();
    assert!(line.contains("223 replayed kernels"), "{line}");
    assert!(line.contains("10 of 10 graph launches"), "{line}");

    let layers = groups(GroupBy::Layer, Some("capture_bs8.json.gz"));
    let want = truth_counts(|k| {
        let p = k["module_path"].as_str().expect("path");
        p.strip_prefix("model.layers.")
            .map(|rest| format!("layer {}", rest.split('.').next().unwrap_or("")))
    });
    assert_eq!(rows(&layers), want);

    let ops = groups(GroupBy::Op, Some("capture_bs8.json.gz"));
    let mut want = truth_counts(|k| k["op"].as_str().map(str::to_owned));
    // The replay trace's own eager ops after each replay: argmax, the copy into the input
    // ids and the position's add.
    for op in ["aten::argmax", "aten::copy_", "aten::add_"] {
        *want.entry(op.to_owned()).or_insert(0.0) += 1.0;
    }
    assert_eq!(rows(&ops), want);
}

/// A capture of another model or another batch size is refused with the reason.
#[test]
fn a_mismatching_capture_is_refused() {
    let refuse = |capture: &str| match open_run(
        Run::new(dir().join("replay.json.gz")),
        &settings(GroupBy::Module, Some(capture)),
        &NoProgress,
    ) {
        Ok(_) => panic!("{capture} was accepted"),
        Err(e) => e.to_string(),
    };
    let other_model = refuse("capture_l2.json.gz");
    assert!(
        other_model.contains("refused")
            && other_model.contains("runs 223 kernels and memops, no captured graph as many")
            && other_model.contains("(capture_8_FULL: 125 launches)"),
        "{other_model}"
    );
    assert!(!other_model.contains('\n'));
    // Same model at batch size 4: the same 223 launches, but the step declares 8 tokens.
    let other_size = refuse("capture_bs4.json.gz");
    assert!(
        other_size.contains("refused")
            && other_size.contains("declares 8 tokens, the graph was captured for 4"),
        "{other_size}"
    );
    // A trace with no capture in it is no capture trace.
    let s = SessionSettings::resolve(&Knobs::default()).expect("defaults");
    let e = match s.with_graph_capture(Some(&dir().join("replay.json.gz"))) {
        Ok(_) => panic!("a replay trace was taken for a capture"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("no graph capture in it"), "{e}");
    // A capture given for a trace that replays no graph: the eager run.
    let e = match open_run(
        Run::new(dir().join("eager.json.gz")),
        &settings(GroupBy::Module, Some("capture_bs8.json.gz")),
        &NoProgress,
    ) {
        Ok(_) => panic!("a trace without graph replays was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("replays no CUDA graph"), "{e}");
}
