//! Odd-value checks shared by all importers: values are kept, counted and reported.

use std::collections::HashMap;

use gapscope_traces::Trace;

/// Warnings about negative durations and same-stream kernel overlaps.
pub fn odd_values(t: &Trace) -> Vec<String> {
    let mut out = Vec::new();
    let k = &t.kernels;
    if k.gpu_start_ns.len() != k.len || k.gpu_end_ns.len() != k.len {
        return out;
    }
    let neg_k = (0..k.len)
        .filter(|&i| k.gpu_end_ns[i] < k.gpu_start_ns[i])
        .count();
    let m = &t.memops;
    let neg_m = (0..m.len)
        .filter(|&i| m.gpu_end_ns[i] < m.gpu_start_ns[i])
        .count();
    if neg_k + neg_m > 0 {
        out.push(format!(
            "{} kernels and {} memops have negative durations (kept; they add no busy time)",
            neg_k, neg_m
        ));
    }
    // Kernels on one stream must serialise; an overlap means clock or capture trouble.
    let have_streams = k.stream.len() == k.len && k.device.len() == k.len;
    if have_streams {
        let mut last_end: HashMap<(u32, u32), i64> = HashMap::new();
        let mut order: Vec<u32> = (0..k.len as u32).collect();
        order.sort_unstable_by_key(|&i| k.gpu_start_ns[i as usize]);
        let mut overlaps = 0usize;
        let mut worst = 0i64;
        for i in order {
            let i = i as usize;
            let key = (k.device[i], k.stream[i]);
            let e = last_end.entry(key).or_insert(i64::MIN);
            if k.gpu_start_ns[i] < *e {
                overlaps += 1;
                worst = worst.max(*e - k.gpu_start_ns[i]);
            }
            *e = (*e).max(k.gpu_end_ns[i]);
        }
        if overlaps > 0 {
            out.push(format!(
                "{overlaps} kernels start before an earlier kernel on the same stream ends (up to {worst} ns; programmatic dependent launch or clock skew; kept, busy time uses the interval union)"
            ));
        }
    }
    out
}
