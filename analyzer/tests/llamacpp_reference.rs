//! The bundled llama.cpp recordings (`traces/reference/llamacpp-*.gst`, recorded with
//! `gapscope-record` around `llama-batched-bench` on an H200; recipe in
//! `scripts/llamacpp/README.md`): llama.cpp writes no step markers, so the steps come from the
//! automatic detection, and they must agree with llama-batched-bench's own count and TG time.

mod common;

use common::open;
use gapscope_analyzer::Bucket;
use gapscope_analyzer::analysis::Report;
use gapscope_tests::repo;

fn share(r: &Report, bucket: Bucket) -> f64 {
    r.buckets
        .iter()
        .find(|b| b.bucket == bucket)
        .map_or(0.0, |b| b.share_of_busy_pct)
}

/// One recording: 8 decode steps and the prefill, plausible, the decode window per step
/// within 2% of llama-batched-bench's `t_tg / tg` for the same recorded run, and the bucket
/// shares of busy time (percent) within 0.5 points. (The shares sum to 100: kernels that
/// llama.cpp launches early under programmatic dependent launch count from the end of the
/// kernel before them.)
fn pinned(file: &str, bench_tg_ms: f64, shares: &[(Bucket, f64)]) -> Report {
    let r = open(repo(&format!("traces/reference/{file}"))).report;
    let s = &r.steps;
    assert_eq!(s.decode_steps, 8, "{file}: {}", s.source);
    assert_eq!(s.prefill_steps, 1, "{file}: {}", s.source);
    assert!(s.source.is_periodic(), "{file}: {}", s.source);
    assert!(r.plausibility.plausible, "{file}: {:?}", r.plausibility);
    // The decode window: n-1 start-to-start periods plus the last step's span.
    let t = s.tpot_ms.expect("TPOT");
    let span = s.decode_span_ms.expect("decode span");
    let n = t.n as f64;
    let window = (t.mean * n + span.median) / (n + 1.0);
    assert!(
        (window / bench_tg_ms - 1.0).abs() <= 0.02,
        "{file}: {window:.3} ms/step against llama-batched-bench's {bench_tg_ms} ms"
    );
    for &(b, pct) in shares {
        let got = share(&r, b);
        assert!(
            (got - pct).abs() <= 0.5,
            "{file}: {b} {got:.2}% of busy, pinned {pct}%"
        );
    }
    r
}

#[test]
fn llama3_8b_q8_0_npl1_is_mmvq_bound() {
    pinned(
        "llamacpp-llama3-8b-q8_0-npl1.gst",
        6.7161,
        &[
            (Bucket::Gemv, 80.2),
            (Bucket::Quantize, 5.5),
            (Bucket::Attention, 3.9),
            (Bucket::Norm, 6.3),
        ],
    );
}

#[test]
fn llama3_8b_q8_0_npl32_runs_mmq() {
    pinned(
        "llamacpp-llama3-8b-q8_0-npl32.gst",
        14.0476,
        &[
            (Bucket::GemmQuant, 80.6),
            (Bucket::Attention, 4.8),
            (Bucket::Copy, 4.1),
            (Bucket::Gemv, 0.0),
        ],
    );
}

#[test]
fn qwen35_hybrid_npl1_shows_every_delta_net_bucket() {
    let r = pinned(
        "llamacpp-qwen3.5-9b-q4_0-npl1.gst",
        6.8458,
        &[
            (Bucket::Gemv, 67.0),
            (Bucket::LinearAttnSsm, 1.6),
            (Bucket::Conv, 0.8),
            (Bucket::EmbedGather, 3.0),
            (Bucket::Copy, 3.9),
            (Bucket::Attention, 1.8),
            (Bucket::Norm, 10.1),
        ],
    );
    let other = share(&r, Bucket::Other);
    assert!(other <= 2.0, "other {other}");
}
