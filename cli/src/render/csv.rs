//! CSV of the bucket table, one row per (trace, bucket); speculative runs add each decode
//! bucket's draft, verify and rejected ms per step.

use gapscope_analyzer::Bucket;
use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::spec::SpecBucket;

/// A CSV field: trace text with control characters escaped, quoted when it needs it.
fn field(s: &str) -> String {
    let s = super::text(s);
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s
    }
}

fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x:.6}")).unwrap_or_default()
}

/// A speculative run's decode-step figure of `bucket` (empty for plain runs and prefill rows).
fn spec(r: &Report, phase: &str, bucket: Bucket, f: impl Fn(&SpecBucket) -> Option<f64>) -> String {
    if phase != "decode" {
        return String::new();
    }
    let row = r
        .speculative
        .as_ref()
        .and_then(|s| s.by_bucket.iter().find(|b| b.bucket == bucket));
    num(row.and_then(f))
}

pub fn reports(reports: &[Report]) -> String {
    let mut out = String::from(
        "trace,phase,bucket,ms_per_step_median,ms_per_step_p10,ms_per_step_p90,calls_per_step,total_ms,calls,share_of_busy_pct,share_of_step_pct,top_kernel,spec_draft_ms_per_step,spec_verify_ms_per_step,spec_rejected_ms_per_step\n",
    );
    for r in reports {
        for (phase, rows) in [("decode", &r.buckets), ("prefill", &r.prefill_buckets)] {
            for b in rows {
                let s = b.ms_per_step;
                let cells = [
                    field(&r.source.path),
                    phase.to_owned(),
                    b.bucket.to_string(),
                    num(s.map(|s| s.median)),
                    num(s.map(|s| s.p10)),
                    num(s.map(|s| s.p90)),
                    num(b.calls_per_step),
                    format!("{:.6}", b.total_ms),
                    b.calls.to_string(),
                    format!("{:.4}", b.share_of_busy_pct),
                    num(b.share_of_step_pct),
                    field(b.top.first().map(|t| t.name.as_str()).unwrap_or("")),
                    spec(r, phase, b.bucket, |s| Some(s.draft_ms_per_step)),
                    spec(r, phase, b.bucket, |s| Some(s.verify_ms_per_step)),
                    spec(r, phase, b.bucket, |s| s.rejected_ms_per_step),
                ];
                out.push_str(&cells.join(","));
                out.push('\n');
            }
        }
    }
    out
}
