//! The committed corpus of real public traces (traces/corpus/, see SOURCES.md there): what
//! `gapscope` imports and how its built-in rules file the kernel time.
//!
//! Per trace: the kernel and memop counts equal the independent counts of SOURCES.md (a plain
//! Python count of the original files, without gapscope); `other` is at most 5% of the kernel
//! time on every LLM inference trace; and the whole-trace share of `other` and of the largest
//! buckets match the figures measured when the rules were written, within a tolerance. Shares
//! are taken over every kernel of the trace (from `export --chrome`), so they do not depend on
//! which steps the report finds.

use gapscope_tests::{json, repo};
use std::collections::BTreeMap;

/// Percentage points a measured share may move (timestamp rounding, importer changes).
const TOLERANCE_PCT: f64 = 0.5;

/// The most `other` may hold on an LLM inference trace (issue 19's acceptance).
const MAX_OTHER_PCT_INFERENCE: f64 = 5.0;

struct Expected {
    file: &'static str,
    /// Independent counts (SOURCES.md): kernels, and memcpy + memset.
    kernels: u64,
    memops: u64,
    llm_inference: bool,
    /// Whole-trace % of kernel time in `other`, as measured.
    other_pct: f64,
    /// The largest buckets' % of kernel time, as measured.
    top: &'static [(&'static str, f64)],
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
            ("moe", 57.79),
            ("comm", 19.71),
            ("gemm_dense", 7.22),
            ("quantize", 2.44),
        ],
    },
    Expected {
        file: "vllm_mi300x_gptoss_decode_fullgraph.json.gz",
        kernels: 425,
        memops: 9,
        llm_inference: true,
        other_pct: 0.0,
        top: &[("moe", 72.97), ("gemm_dense", 11.53), ("attention", 6.79)],
    },
    Expected {
        file: "vllm_mi300x_gptoss_prefilldecode_piecewise.json.gz",
        kernels: 413,
        memops: 10,
        llm_inference: true,
        other_pct: 0.0,
        top: &[("moe", 81.42), ("gemm_dense", 11.31), ("attention", 3.30)],
    },
    Expected {
        file: "sglang_mi300x_qwen3_8b_decode.json.gz",
        kernels: 555,
        memops: 3,
        llm_inference: true,
        other_pct: 0.18,
        top: &[
            ("gemm_dense", 59.21),
            ("attention", 21.79),
            ("norm", 7.00),
            ("copy", 5.64),
        ],
    },
    Expected {
        file: "sglang_mi300x_qwen3_8b_prefilldecode.json.gz",
        kernels: 527,
        memops: 7,
        llm_inference: true,
        other_pct: 0.01,
        top: &[("gemm_dense", 85.29), ("norm", 5.33), ("attention", 4.07)],
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
            ("gemm_dense", 28.15),
            ("act_elementwise", 25.99),
            ("norm", 18.23),
            ("copy", 17.14),
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
            ("gemm_dense", 39.15),
            ("act_elementwise", 19.51),
            ("norm", 15.04),
            ("attention", 13.23),
        ],
    },
    Expected {
        file: "hta_a100_train_nccl.json.gz",
        kernels: 2700,
        memops: 1074,
        llm_inference: false,
        other_pct: 1.44,
        top: &[
            ("comm", 28.84),
            ("norm", 19.36),
            ("conv", 13.14),
            ("copy", 9.32),
            ("optimizer", 1.28),
        ],
    },
    Expected {
        file: "hta_mi250_rocm62_train.json.gz",
        kernels: 14,
        memops: 2,
        llm_inference: false,
        other_pct: 12.27,
        top: &[
            ("act_elementwise", 36.65),
            ("gemm_dense", 27.27),
            ("optimizer", 7.65),
        ],
    },
    Expected {
        file: "kineto_v100_resnet50_oldschema.json.gz",
        kernels: 8772,
        memops: 324,
        llm_inference: false,
        other_pct: 0.90,
        top: &[("conv", 59.22), ("norm", 16.30), ("act_elementwise", 15.96)],
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

/// Kernel time per bucket over the whole trace, in µs, from the Chrome export.
fn bucket_us(path: &str) -> BTreeMap<String, f64> {
    let v = json(&["export", "-q", "--chrome", "-", path]);
    let events = v
        .get("traceEvents")
        .unwrap_or(&v)
        .as_array()
        .expect("an event array")
        .clone();
    let mut by = BTreeMap::new();
    for e in &events {
        if e["ph"] == "X" && e["cat"] == "kernel" {
            let b = e["args"]["bucket"].as_str().expect("a bucket").to_owned();
            *by.entry(b).or_insert(0.0) += e["dur"].as_f64().expect("a duration");
        }
    }
    by
}

fn share(by: &BTreeMap<String, f64>, bucket: &str) -> f64 {
    let total: f64 = by.values().sum();
    if total > 0.0 {
        100.0 * by.get(bucket).copied().unwrap_or(0.0) / total
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
        let p = repo(&format!("traces/corpus/{}", e.file));
        let v = json(&["report", "-q", "--json", p.to_str().unwrap()]);
        let s = &v["reports"][0]["source"];
        assert_eq!(s["kernels"], e.kernels, "{} kernels", e.file);
        assert_eq!(s["memops"], e.memops, "{} memops", e.file);
    }
}

#[test]
fn other_is_at_most_five_percent_on_llm_inference_and_shares_hold() {
    for e in CORPUS {
        let p = repo(&format!("traces/corpus/{}", e.file));
        let by = bucket_us(p.to_str().unwrap());
        let other = share(&by, "other");
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
