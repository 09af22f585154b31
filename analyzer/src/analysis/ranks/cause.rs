//! What a rank did before it arrived at a collective: its GPU's work (by kernel name) and,
//! while its GPU sat idle, the host scopes and NVTX ranges that were open.

use std::collections::HashMap;

use crate::Bucket;
use crate::session::AnalyzedRun;

/// A rank's use of a set of windows (times on its own clock).
#[derive(Debug, Clone, Default)]
pub struct WindowUse {
    pub span_ns: i64,
    /// GPU busy outside communication kernels (interval union).
    pub busy_ns: i64,
    /// Per kernel name (outside communication): time inside the windows, and its bucket.
    pub kernels: HashMap<String, (i64, Bucket)>,
    /// Per host scope or NVTX range name: time it was open while the GPU sat idle.
    pub scopes: HashMap<String, i64>,
}

/// A rank's non-communication kernels on one device, sorted by start.
pub struct Work {
    start: Vec<i64>,
    end: Vec<i64>,
    name: Vec<u32>,
    bucket: Vec<u8>,
}

impl Work {
    pub fn of(run: &AnalyzedRun, device: u32) -> Self {
        let k = &run.trace.kernels;
        let comm = Bucket::Comm as u8;
        let mut ix: Vec<usize> = (0..k.len)
            .filter(|&i| k.device[i] == device)
            .filter(|&i| run.tables.kernel_bucket.get(i).copied().unwrap_or(0) != comm)
            .collect();
        ix.sort_by_key(|&i| k.gpu_start_ns[i]);
        Self {
            start: ix.iter().map(|&i| k.gpu_start_ns[i]).collect(),
            end: ix
                .iter()
                .map(|&i| k.gpu_end_ns[i].max(k.gpu_start_ns[i]))
                .collect(),
            name: ix.iter().map(|&i| k.name[i]).collect(),
            bucket: ix
                .iter()
                .map(|&i| run.tables.kernel_bucket.get(i).copied().unwrap_or(0))
                .collect(),
        }
    }
}

impl Work {
    /// The first kernel's start.
    pub fn first_start(&self) -> Option<i64> {
        self.start.first().copied()
    }
}

/// How `run` used `windows` (sorted, disjoint, on its own clock): GPU work by kernel, and
/// host scopes open while the GPU was idle.
pub fn window_use(run: &AnalyzedRun, work: &Work, windows: &[(i64, i64)]) -> WindowUse {
    let strings = &run.trace.strings;
    let mut u = WindowUse::default();
    let mut idle: Vec<(i64, i64)> = Vec::new();
    let mut by_name: HashMap<u32, (i64, u8)> = HashMap::new();
    for &(a, b) in windows {
        if b <= a {
            continue;
        }
        u.span_ns += b - a;
        let mut i = work.start.partition_point(|&s| s < a);
        // Kernels that started before the window may still run into it.
        let mut back = 0;
        while i > 0 && back < 64 && work.end[i - 1] > a {
            i -= 1;
            back += 1;
        }
        let mut cur = a;
        while i < work.start.len() && work.start[i] < b {
            let (s, e) = (work.start[i].max(a), work.end[i].min(b));
            if e > s {
                let c = by_name.entry(work.name[i]).or_insert((0, work.bucket[i]));
                c.0 += e - s;
                if s > cur {
                    idle.push((cur, s));
                }
                if e > cur {
                    u.busy_ns += e - s.max(cur);
                    cur = e;
                }
            }
            i += 1;
        }
        if b > cur {
            idle.push((cur, b));
        }
    }
    for (id, (ns, b)) in by_name {
        let bucket = Bucket::ALL
            .get(b as usize)
            .copied()
            .unwrap_or(Bucket::Other);
        u.kernels.insert(strings.get(id).to_owned(), (ns, bucket));
    }
    idle.sort_unstable();
    // A name both a host scope and an NVTX range (Kineto keeps user annotations as both)
    // counts once: the larger of the two.
    let charge = |out: &mut HashMap<String, i64>, name: u32, s: i64, e: i64| {
        if e <= s || s == i64::MIN {
            return;
        }
        let mut j = idle.partition_point(|iv| iv.1 <= s);
        let mut ns = 0;
        while j < idle.len() && idle[j].0 < e {
            ns += idle[j].1.min(e) - idle[j].0.max(s);
            j += 1;
        }
        if ns > 0 {
            *out.entry(strings.get(name).to_owned()).or_default() += ns;
        }
    };
    let sc = &run.trace.scopes;
    for i in 0..sc.len {
        charge(
            &mut u.scopes,
            sc.name[i],
            sc.host_start_ns[i],
            sc.host_end_ns[i],
        );
    }
    let mut ranges = HashMap::new();
    let m = &run.trace.markers;
    for i in 0..m.len {
        charge(&mut ranges, m.name[i], m.host_start_ns[i], m.host_end_ns[i]);
    }
    for (k, v) in ranges {
        let e = u.scopes.entry(k).or_default();
        *e = (*e).max(v);
    }
    u
}
