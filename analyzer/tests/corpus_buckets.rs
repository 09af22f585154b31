//! The committed corpus of real public traces (traces/corpus/, see SOURCES.md there): what
//! the importers read and how the built-in rules file the kernel time.
//!
//! Per trace: the kernel and memop counts equal the independent counts of SOURCES.md (a plain
//! Python count of the original files, without gapscope); `other` is at most 5% of the kernel
//! time on every LLM inference trace; and the whole-trace share of `other` and of the largest
//! buckets match the figures measured when the rules were written, within a tolerance. Shares
//! are taken over every kernel of the trace (the activity table, as `export --chrome` files
//! them), so they do not depend on which steps the report finds.

mod common;

use std::collections::BTreeMap;

use common::open;
use gapscope_analyzer::Bucket::{self, *};
use gapscope_analyzer::session::AnalyzedRun;
use gapscope_analyzer::tables::ActivityKind;
use gapscope_tests::{corpus, repo};

/// Percentage points a measured share may move (timestamp rounding, importer changes).
const TOLERANCE_PCT: f64 = 0.5;

/// The most `other` may hold on an LLM inference trace (issue 19's acceptance).
const MAX_OTHER_PCT_INFERENCE: f64 = 5.0;

struct Expected {
    file: &'static str,
    /// Independent counts (SOURCES.md): kernels, and memcpy + memset.
    kernels: usize,
    memops: usize,
    llm_inference: bool,
    /// Whole-trace % of kernel time in `other`, as measured.
    other_pct: f64,
    /// The largest buckets' % of kernel time, as measured.
    top: &'static [(Bucket, f64)],
}

const CORPUS: &[Expected] = &[
    Expected {
        file: "vllm_b200_gptoss_tp8_prefill.json.gz",
        kernels: 768,
        memops: 161,
        llm_inference: true,
        other_pct: 0.0,
        // moe holds the FusedMoE module's own kernels too (the output FillFunctor): a scope
        // rule files them by the nn.Module they run in (with_stack trace); 54.41% by kernel
        // names alone.
        top: &[
            (Moe, 57.79),
            (Comm, 19.71),
            (GemmDense, 7.22),
            (Quantize, 2.44),
        ],
    },
    Expected {
        file: "vllm_mi300x_gptoss_decode_fullgraph.json.gz",
        kernels: 425,
        memops: 9,
        llm_inference: true,
        other_pct: 0.0,
        top: &[(Moe, 72.97), (GemmDense, 11.53), (Attention, 6.79)],
    },
    Expected {
        file: "vllm_mi300x_gptoss_prefilldecode_piecewise.json.gz",
        kernels: 413,
        memops: 10,
        llm_inference: true,
        other_pct: 0.0,
        top: &[(Moe, 81.42), (GemmDense, 11.31), (Attention, 3.30)],
    },
    Expected {
        file: "sglang_mi300x_qwen3_8b_decode.json.gz",
        kernels: 555,
        memops: 3,
        llm_inference: true,
        other_pct: 0.18,
        top: &[
            (GemmDense, 59.21),
            (Attention, 21.79),
            (Norm, 7.00),
            (Copy, 5.64),
        ],
    },
    Expected {
        file: "sglang_mi300x_qwen3_8b_prefilldecode.json.gz",
        kernels: 527,
        memops: 7,
        llm_inference: true,
        other_pct: 0.01,
        top: &[(GemmDense, 85.29), (Norm, 5.33), (Attention, 4.07)],
    },
    Expected {
        file: "hf_h100_qwen15_05b_chat.json.gz",
        kernels: 1465,
        memops: 242,
        llm_inference: true,
        other_pct: 0.01,
        // with_modules trace: the Qwen2RMSNorm modules' elementwise and reduce kernels are
        // norm by a scope rule (by kernel names alone: act_elementwise 32.44%, copy 22.29%).
        top: &[
            (GemmDense, 28.15),
            (ActElementwise, 25.99),
            (Norm, 18.23),
            (Copy, 17.14),
        ],
    },
    Expected {
        file: "hf_mi300x_qwen15_05b_chat.json.gz",
        kernels: 1516,
        memops: 1,
        llm_inference: true,
        other_pct: 0.01,
        // As on H100: the RMSNorm modules' kernels are norm (act_elementwise 24.58% by names).
        top: &[
            (GemmDense, 39.15),
            (ActElementwise, 19.51),
            (Norm, 15.04),
            (Attention, 13.23),
        ],
    },
    Expected {
        file: "hta_a100_train_nccl.json.gz",
        kernels: 2700,
        memops: 1074,
        llm_inference: false,
        other_pct: 1.44,
        top: &[
            (Comm, 28.84),
            (Norm, 19.36),
            (Conv, 13.14),
            (Copy, 9.32),
            (Optimizer, 1.28),
        ],
    },
    Expected {
        file: "hta_mi250_rocm62_train.json.gz",
        kernels: 14,
        memops: 2,
        llm_inference: false,
        other_pct: 12.27,
        top: &[
            (ActElementwise, 36.65),
            (GemmDense, 27.27),
            (Optimizer, 7.65),
        ],
    },
    Expected {
        file: "kineto_v100_resnet50_oldschema.json.gz",
        kernels: 8772,
        memops: 324,
        llm_inference: false,
        other_pct: 0.90,
        top: &[(Conv, 59.22), (Norm, 16.30), (ActElementwise, 15.96)],
    },
    Expected {
        file: "nsys_rtx5060ti_gemm_nokernels.sqlite",
        kernels: 0,
        memops: 0,
        llm_inference: false,
        other_pct: 0.0,
        top: &[],
    },
];

/// Kernel time per bucket over the whole trace, ns: every kernel of the activity table.
fn bucket_ns(run: &AnalyzedRun) -> BTreeMap<Bucket, i64> {
    let acts = run.activities();
    let mut by = BTreeMap::new();
    for i in 0..acts.len {
        if ActivityKind::from_code(acts.kind[i]) == ActivityKind::Kernel {
            let b = Bucket::ALL[acts.bucket[i] as usize];
            *by.entry(b).or_insert(0) += (acts.gpu_end_ns[i] - acts.gpu_start_ns[i]).max(0);
        }
    }
    by
}

fn share(by: &BTreeMap<Bucket, i64>, bucket: Bucket) -> f64 {
    let total: i64 = by.values().sum();
    if total > 0 {
        100.0 * by.get(&bucket).copied().unwrap_or(0) as f64 / total as f64
    } else {
        0.0
    }
}

#[test]
fn every_committed_trace_is_covered_and_nothing_else_is_there() {
    let mut on_disk: Vec<String> = std::fs::read_dir(repo("traces/corpus"))
        .expect("traces/corpus exists")
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json.gz") || n.ends_with(".sqlite"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = CORPUS.iter().map(|e| e.file.to_owned()).collect();
    listed.sort();
    assert_eq!(on_disk, listed);
    let sources = std::fs::read_to_string(repo("traces/corpus/SOURCES.md")).unwrap();
    for e in CORPUS {
        assert!(sources.contains(e.file), "{} not in SOURCES.md", e.file);
    }
}

#[test]
fn kernel_and_memop_counts_equal_the_independent_counts() {
    for e in CORPUS {
        let s = open(corpus(e.file)).report.source;
        assert_eq!(s.kernels, e.kernels, "{} kernels", e.file);
        assert_eq!(s.memops, e.memops, "{} memops", e.file);
    }
}

#[test]
fn other_is_at_most_five_percent_on_llm_inference_and_shares_hold() {
    for e in CORPUS {
        let by = bucket_ns(&open(corpus(e.file)));
        let other = share(&by, Other);
        if e.llm_inference {
            assert!(
                other <= MAX_OTHER_PCT_INFERENCE,
                "{}: other {other:.2}% of kernel time",
                e.file
            );
        }
        assert!(
            (other - e.other_pct).abs() <= TOLERANCE_PCT,
            "{}: other {other:.2}%, measured {:.2}%",
            e.file,
            e.other_pct
        );
        for &(bucket, want) in e.top {
            let got = share(&by, bucket);
            assert!(
                (got - want).abs() <= TOLERANCE_PCT,
                "{}: {bucket} {got:.2}%, measured {want:.2}%",
                e.file
            );
        }
    }
}
