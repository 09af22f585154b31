//! Odd-value checks shared by all importers: values are kept, counted and reported. They run
//! after [`super::clamp`], so times are bounded and no end precedes its start.

use std::collections::HashMap;

use gapscope_traces::Trace;

/// Warnings about same-stream kernel overlaps.
pub fn odd_values(t: &Trace) -> Vec<String> {
    let mut out = Vec::new();
    let k = &t.kernels;
    if k.gpu_start_ns.len() != k.len || k.gpu_end_ns.len() != k.len {
        return out;
    }
    // Kernels on one stream must serialise; an overlap means clock or capture trouble.
    let have_streams = k.stream.len() == k.len && k.device.len() == k.len;
    if have_streams {
        let mut last_end: HashMap<(u32, u32), i64> = HashMap::new();
        let mut order: Vec<u32> = (0..k.len as u32).collect();
        let key = |i: u32| k.gpu_start_ns[i as usize];
        if !order.windows(2).all(|w| key(w[0]) <= key(w[1])) {
            order.sort_unstable_by_key(|&i| (key(i), i));
        }
        let mut overlaps = 0usize;
        let mut worst = 0i64;
        // Consecutive kernels are usually on the same stream: keep that stream's running end
        // outside the map and only touch the map when the stream changes.
        let mut cur_key: Option<(u32, u32)> = None;
        let mut cur_end = i64::MIN;
        for i in order {
            let i = i as usize;
            let key = (k.device[i], k.stream[i]);
            if cur_key != Some(key) {
                if let Some(old) = cur_key {
                    last_end.insert(old, cur_end);
                }
                cur_key = Some(key);
                cur_end = last_end.get(&key).copied().unwrap_or(i64::MIN);
            }
            if k.gpu_start_ns[i] < cur_end {
                overlaps += 1;
                worst = worst.max(cur_end - k.gpu_start_ns[i]);
            }
            cur_end = cur_end.max(k.gpu_end_ns[i]);
        }
        if overlaps > 0 {
            out.push(format!(
                "{overlaps} kernels start before an earlier kernel on the same stream ends (up to {worst} ns; programmatic dependent launch or clock skew; kept, busy time uses the interval union)"
            ));
        }
    }
    out
}
