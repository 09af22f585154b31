//! How traces' names reach a report (issue 37): host scopes without Python's object
//! addresses, long Python frames cut on the left, GPUs named by vendor with SMs or CUs.

mod common;

use std::collections::HashSet;
use std::path::PathBuf;

use gapscope_analyzer::text::scope_name;

fn repo(p: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// No host scope keeps Python's `at 0x…`: `Tensor.to`, called hundreds of times in the
/// trace, reads as the method, and one method on different objects would be one scope.
#[test]
fn host_scopes_drop_object_addresses() {
    let run = common::open(repo(
        "traces/reference/hf-llama3.2-1b-npl8-stack-math.json.gz",
    ));
    let t = &run.trace;
    let names: HashSet<&str> = (0..t.scopes.len)
        .map(|i| t.strings.get(t.scopes.name[i]))
        .collect();
    assert!(!names.is_empty());
    let with_address: Vec<_> = names
        .iter()
        .filter(|n| n.contains(" at 0x"))
        .take(3)
        .collect();
    assert!(with_address.is_empty(), "{with_address:?}");
    let dims: Vec<_> = names
        .iter()
        .filter(|n| n.starts_with("<built-in method to of Tensor object"))
        .collect();
    assert_eq!(dims, vec![&"<built-in method to of Tensor object>"]);
    let calls = (0..t.scopes.len)
        .filter(|&i| t.strings.get(t.scopes.name[i]) == "<built-in method to of Tensor object>")
        .count();
    assert!(calls > 100, "{calls} calls of Tensor.to");
}

/// A Python frame's long path keeps its last folder, the file, the line and the function;
/// short relative paths and other names are as they were.
#[test]
fn python_frames_are_cut_on_the_left() {
    assert_eq!(
        scope_name(
            "/sgl-workspace/triton-custom/python/triton/backends/amd/compiler.py(167): is_within_2gb"
        ),
        "…/amd/compiler.py(167): is_within_2gb"
    );
    assert_eq!(
        scope_name("/home/u/vllm/v1/worker/gpu_model_runner.py(1352): _prepare_inputs"),
        "…/worker/gpu_model_runner.py(1352): _prepare_inputs"
    );
    assert_eq!(
        scope_name("torch/cuda/graphs.py(139): replay"),
        "torch/cuda/graphs.py(139): replay"
    );
    assert_eq!(scope_name("aten::mm"), "aten::mm");
    assert_eq!(scope_name("nn.Module: Linear_3"), "nn.Module: Linear_3");
    // The report of the SGLang trace shows the cut name, in its host scope lines' source.
    let run = common::open(repo("traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz"));
    let top = &run
        .report
        .host_idle
        .as_ref()
        .expect("host scopes")
        .top_scopes[0];
    assert_eq!(
        scope_name(&top.name),
        "…/amd/compiler.py(167): is_within_2gb"
    );
}

/// AMD GPUs (64-wide wavefronts) count CUs, NVIDIA's SMs; an unnamed GPU says so and gives
/// its compute version instead of an empty name.
#[test]
fn gpus_are_named_with_their_vendor_units() {
    let gpus = |p: &str| common::open(repo(p)).report.source.gpus;
    assert_eq!(
        gpus("traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz")[0],
        "0: unnamed AMD GPU, compute capability 9.4 (304 CUs)"
    );
    assert_eq!(
        gpus("traces/corpus/sglang_mi300x_qwen3_8b_decode.json.gz")[0],
        "0: AMD Instinct MI300X (304 CUs)"
    );
    assert_eq!(
        gpus("traces/corpus/hta_mi250_rocm62_train.json.gz")[0],
        "0: AMD Radeon Graphics (104 CUs)"
    );
    assert_eq!(
        gpus("traces/reference/hf-qwen3-0.6b-npl1.json.gz")[0],
        "0: NVIDIA H200 (132 SMs)"
    );
}

/// `--by module` says what it cannot attribute and why: GPU time replayed from CUDA graphs
/// (vLLM's full-graph decode, llama.cpp), and traces with no module scopes at all.
#[test]
fn grouping_says_what_cannot_be_attributed() {
    use gapscope_analyzer::analysis::host::{GroupBy, MissingScopes};
    let groups = |p: &str| {
        common::open_with(repo(p), &common::group_by(GroupBy::Module))
            .report
            .groups
            .expect("grouped")
    };
    let vllm = groups("traces/corpus/vllm_mi300x_gptoss_decode_fullgraph.json.gz");
    assert!(vllm.missing.is_none());
    assert!(
        vllm.graph_gpu_ms_per_step > 0.99 * vllm.unattributed_gpu_ms_per_step,
        "{} of {} ms/step",
        vllm.graph_gpu_ms_per_step,
        vllm.unattributed_gpu_ms_per_step
    );
    let llamacpp = groups("traces/reference/llamacpp-llama3-8b-q8_0-npl1.gst");
    assert!(llamacpp.graph_gpu_ms_per_step > 0.0);
    assert_eq!(llamacpp.missing, Some(MissingScopes::NoScopes));
    // HF eager without with_stack: ops, no modules.
    let hf = groups("traces/reference/hf-qwen3-0.6b-npl1.json.gz");
    assert_eq!(hf.missing, Some(MissingScopes::NoModules));
    assert_eq!(hf.graph_gpu_ms_per_step, 0.0);
    // NVTX ranges per module call (gapscope-record) are modules.
    let nvtx = groups("traces/reference/cupti-qwen3next-small-npl1.gst");
    assert_eq!(nvtx.missing, None);
}
