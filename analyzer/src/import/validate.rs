//! Odd-value checks shared by all importers: values are counted and reported. They run
//! after [`super::clamp`], so times are bounded and no end precedes its start.

use std::collections::HashMap;

use gapscope_traces::Trace;

/// Same-stream kernel overlaps: a kernel that starts before the kernel before it on its
/// stream ends was launched early (programmatic dependent launch) and waits for it; its start
/// moves to that end, so that its time is its work and not the wait. (Under PDL, llama.cpp's
/// and gapscope-engine's kernels start up to 30 us early: summed raw durations put 19 ms of
/// kernel time in an 11.6 ms step, and 4 ms of it in the norms.) Returns the warning.
pub fn odd_values(t: &mut Trace) -> Vec<String> {
    let mut out = Vec::new();
    let k = &mut t.kernels;
    if k.gpu_start_ns.len() != k.len || k.gpu_end_ns.len() != k.len {
        return out;
    }
    // Kernels on one stream must serialise; an overlap means clock or capture trouble.
    let have_streams = k.stream.len() == k.len && k.device.len() == k.len;
    if have_streams {
        let mut last_end: HashMap<(u32, u32), i64> = HashMap::new();
        // File order when it is start order already (no index vector then).
        let order: Option<Vec<u32>> = (!k.gpu_start_ns.is_sorted()).then(|| {
            let mut order: Vec<u32> = (0..k.len as u32).collect();
            order.sort_unstable_by_key(|&i| (k.gpu_start_ns[i as usize], i));
            order
        });
        let mut overlaps = 0usize;
        let mut worst = 0i64;
        // Consecutive kernels are usually on the same stream: keep that stream's running end
        // outside the map and only touch the map when the stream changes.
        let mut cur_key: Option<(u32, u32)> = None;
        let mut cur_end = i64::MIN;
        let indices: Box<dyn Iterator<Item = usize>> = match &order {
            Some(o) => Box::new(o.iter().map(|&i| i as usize)),
            None => Box::new(0..k.len),
        };
        for i in indices {
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
                k.gpu_start_ns[i] = cur_end.min(k.gpu_end_ns[i]);
            }
            cur_end = cur_end.max(k.gpu_end_ns[i]);
        }
        if overlaps > 0 {
            out.push(format!(
                "{overlaps} kernels start before an earlier kernel on the same stream ends (up to {worst} ns; programmatic dependent launch: each waits for that kernel, so its time counts from that kernel's end)"
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use gapscope_traces::{KernelRow, Manifest, Trace};

    use super::*;

    #[test]
    fn an_early_launched_kernel_counts_from_the_end_of_the_one_before_it_on_its_stream() {
        let mut t = Trace::new(Manifest::new("test"));
        // Stream 1: the second kernel starts 30 ns before the first ends (PDL). Stream 2
        // overlaps stream 1 and stays as it is.
        for (stream, s, e) in [(1, 0, 100), (1, 70, 150), (2, 50, 120), (1, 150, 200)] {
            t.kernels.push(KernelRow {
                stream,
                gpu_start_ns: s,
                gpu_end_ns: e,
                ..KernelRow::default()
            });
        }
        let w = odd_values(&mut t);
        assert_eq!(t.kernels.gpu_start_ns, vec![0, 100, 50, 150]);
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("1 kernels start before"), "{w:?}");
    }
}
