//! Training traces are training whatever marker names their framework writes (issue 37: a
//! DeepSeek-V3 training rank without optimizer markers was "1 decode step, phases: assumed
//! decode").
//!
//! The public training traces of the corpus (`traces/corpus/SOURCES.md`) are read as they
//! are, then again with their optimizer and `## backward ##` markers taken out, which is how
//! a Megatron or DeepSpeed loop with its own optimizer looks: the autograd engine's nodes on
//! the host and the optimizer's kernels on the GPU still say training.

mod common;

use std::io::Read;
use std::path::{Path, PathBuf};

use common::open;
use gapscope_analyzer::analysis::steps::StepKind;
use gapscope_tests::{corpus, gzip};

const TRAINING: &[&str] = &[
    "hta_a100_train_nccl.json.gz",
    "hta_mi250_rocm62_train.json.gz",
    "kineto_v100_resnet50_oldschema.json.gz",
    "hta_ranks/sampled_rank-0.json.gz",
    "hta_ranks/sampled_rank-1.json.gz",
    "param_dlrm_8ranks/worker0_step_12.1694128201545.pt.trace.json.gz",
];

/// A copy of `path` without the events whose name an optimizer or a backward label gives.
fn without_optimizer_markers(path: &Path, dir: &Path) -> (PathBuf, usize) {
    let mut raw = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).expect("test input"))
        .read_to_end(&mut raw)
        .expect("test input");
    let mut doc: serde_json::Value = serde_json::from_slice(&raw).expect("test input");
    let events = doc["traceEvents"].as_array_mut().expect("test input");
    let before = events.len();
    events.retain(|e| {
        let name = e["name"].as_str().unwrap_or("");
        !(name.starts_with("Optimizer.") || name.eq_ignore_ascii_case("## backward ##"))
    });
    let dropped = before - events.len();
    let out = dir.join(path.file_name().expect("test input"));
    let bytes = serde_json::to_vec(&doc).expect("test input");
    std::fs::write(&out, gzip(&bytes, flate2::Compression::fast())).expect("test input");
    (out, dropped)
}

fn says_training(path: &Path) -> Result<String, String> {
    let s = open(path).report.steps;
    match (s.kind, s.training.clone()) {
        (StepKind::TrainingIterations, Some(why)) if s.decode_steps == 0 => Ok(why),
        _ => Err(format!(
            "{}: {:?}, {} decode steps, training {:?}",
            path.display(),
            s.kind,
            s.decode_steps,
            s.training
        )),
    }
}

#[test]
fn every_corpus_training_trace_says_training() {
    for name in TRAINING {
        says_training(&corpus(name)).expect("test input");
    }
}

#[test]
fn training_is_found_without_optimizer_markers() {
    let dir = tempfile::tempdir().expect("test input");
    let mut dropped_any = 0;
    let mut reasons = Vec::new();
    for name in TRAINING {
        let (path, dropped) = without_optimizer_markers(&corpus(name), dir.path());
        dropped_any += dropped;
        reasons.push((name, says_training(&path).expect("test input")));
    }
    // The markers were there to take out (else this would test nothing).
    assert!(dropped_any >= 20, "{dropped_any} markers dropped");
    // Before: these two read as one decode step ("assumed decode"). Their evidence now is the
    // autograd engine's backward nodes on the host.
    for (name, why) in &reasons {
        if name.starts_with("hta_mi250") || name.starts_with("param_dlrm") {
            assert!(why.starts_with("autograd backward ops"), "{name}: {why}");
        }
    }
}

#[test]
fn inference_traces_with_a_python_stack_are_not_training() {
    // HF generate runs under no_grad: its stack holds no autograd node.
    for t in [
        "traces/reference/hf-llama3.2-1b-npl8-stack-cudnn.json.gz",
        "traces/reference/hf-qwen3-0.6b-npl1.json.gz",
    ] {
        let s = open(gapscope_tests::repo(t)).report.steps;
        assert_eq!(s.kind, StepKind::InferenceSteps, "{t}: {:?}", s.training);
        assert!(s.training.is_none(), "{t}: {:?}", s.training);
    }
}
