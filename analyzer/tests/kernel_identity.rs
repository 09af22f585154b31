//! One kernel identity across sources: a torch.profiler (Kineto) trace and gapscope-record
//! traces of the same script (Qwen3-Next-shaped HF decode, captured in one GPU session by
//! scripts/capture/run-gpu-issue19.sh) name every kernel and memop alike after import, and
//! file them in the same buckets within the run-to-run spread ([`SPREAD_MS`]).

mod common;

use std::path::Path;

use common::open;
use gapscope_analyzer::Bucket;
use gapscope_analyzer::diff::{DEFAULT_LIST, DiffReport, diff};
use gapscope_tests::repo;

const KINETO: &str = "traces/reference/hf-qwen3next-small-npl1.json.gz";
/// Recorded with NVTX module ranges (CUPTI from CUDA init): the same module scopes as
/// torch.profiler's with_modules, so the same scope rules file its kernels.
const RECORDED: &str = "traces/reference/cupti-qwen3next-small-npl1.gst";
/// Recorded with CUPTI attached late and no NVTX: no host scopes.
const RECORDED_LATE: &str = "traces/reference/cupti-qwen3next-small-npl1-late.gst";

/// Run-to-run range of each bucket's ms/step over 3 torch.profiler and 3 gapscope-record
/// runs of the script (the larger of the two tools' ranges), measured in that session.
const SPREAD_MS: &[(Bucket, f64)] = &[
    (Bucket::Gemv, 0.00018),
    (Bucket::GemmDense, 0.00129),
    (Bucket::Attention, 0.00008),
    (Bucket::EmbedGather, 0.00013),
    (Bucket::Copy, 0.00042),
    (Bucket::Norm, 0.00233),
    (Bucket::Rope, 0.00010),
    (Bucket::ActElementwise, 0.00059),
    (Bucket::Moe, 0.00398),
    (Bucket::LinearAttnSsm, 0.00256),
    (Bucket::Sampling, 0.00011),
];

/// Two CUPTI clients time a short kernel differently by a fixed amount (the same evidence
/// file: gemv +0.12 µs a call under CUPTI from CUDA init): allowed per kernel call.
const PER_CALL_MS: f64 = 0.0005;

/// The diff of A against B, listing as many names as `gapscope diff` does.
fn diff_of(a: &Path, b: &Path) -> DiffReport {
    let (a, b) = (open(a), open(b));
    diff(a.diff_side(), b.diff_side(), DEFAULT_LIST)
}

#[test]
fn every_kernel_and_memop_pairs_between_torch_profiler_and_a_recording() {
    for p in [KINETO, RECORDED, RECORDED_LATE] {
        assert!(repo(p).exists(), "{p} is missing");
    }
    for rec in [RECORDED, RECORDED_LATE] {
        let s = diff_of(&repo(KINETO), &repo(rec)).structural;
        assert_eq!(s.only_in_a_total, 0, "{rec}: only in A: {:?}", s.only_in_a);
        assert_eq!(s.only_in_b_total, 0, "{rec}: only in B: {:?}", s.only_in_b);
        assert_eq!(s.a_kernels_per_step, s.b_kernels_per_step);
        assert_eq!(s.a_kernels_per_step, 1076.0);
    }

    let d = diff_of(&repo(KINETO), &repo(RECORDED));
    assert!(d.buckets.len() >= 8, "{:?}", d.buckets);
    let mut busy = 0.0;
    for b in &d.buckets {
        let name = b.bucket;
        let (a, r) = (b.a_ms_per_step, b.b_ms_per_step);
        assert_eq!(b.a_calls_per_step, b.b_calls_per_step, "{name}");
        let spread = SPREAD_MS
            .iter()
            .find(|s| s.0 == name)
            .unwrap_or_else(|| panic!("no spread measured for {name}"))
            .1;
        let tolerance = spread.max(PER_CALL_MS * b.a_calls_per_step);
        assert!(
            (a - r).abs() <= tolerance,
            "{name}: {a} vs {r} ms/step (tolerance {tolerance})"
        );
        busy += a;
    }
    assert!(busy > 2.0, "{busy} ms/step of GPU work");
}

#[test]
fn import_keeps_the_raw_names_next_to_the_canonical_ones() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.gst");
    // The manifest as read back from disk.
    let raw = common::convert(&repo(KINETO), &out).manifest.raw_names;
    assert_eq!(raw["Memcpy DtoD"], "Memcpy DtoD (Device -> Device)");
    assert_eq!(raw["Memset"], "Memset (Device)");
    let cutlass = raw
        .iter()
        .find(|(_, v)| v.starts_with("_ZN7cutlass13device_kernel"))
        .expect("the mangled CUTLASS kernel keeps its raw name");
    assert!(
        cutlass.0.starts_with("void cutlass::device_kernel<"),
        "{}",
        cutlass.0
    );
    // Kineto's demangled names are already canonical: only the 1 mangled kernel and the 2
    // memop names differ.
    assert_eq!(raw.len(), 3, "{:?}", raw.keys().collect::<Vec<_>>());

    // The converted trace still pairs with the recording.
    let s = diff_of(&out, &repo(RECORDED)).structural;
    assert_eq!(s.only_in_a_total, 0);
    assert_eq!(s.only_in_b_total, 0);
}
