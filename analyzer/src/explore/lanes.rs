//! The timeline's lanes as sorted columns: one GPU lane per (device, stream) holding its
//! kernels and memops, one host lane per thread with a row per nesting depth, and one
//! marker lane per device for ranges on the GPU timeline. Each row is start-sorted with a
//! running maximum of ends, so the visible range is two binary searches.

use std::collections::HashMap;
use std::ops::Range;

use gapscope_traces::Trace;

use super::activity::ActRef;
use super::step_view::StepView;
use crate::analysis::host::Forest;

/// Host rows deeper than this are folded into the last row's count (`HostLane::hidden`).
pub const MAX_HOST_DEPTH: usize = 32;

/// The time columns of a start-sorted row of items (a GPU lane, a host row): what the
/// timeline needs to find and draw the items in a window.
#[derive(Debug, Default, Clone)]
pub struct Spans {
    pub start_ns: Vec<i64>,
    pub end_ns: Vec<i64>,
    /// Running maximum of `end_ns` (for the first item that reaches past an instant); set by
    /// [`Spans::finish`].
    pub end_max_ns: Vec<i64>,
}

impl Spans {
    /// Spans with room for `n` items.
    pub fn with_capacity(n: usize) -> Self {
        Self {
            start_ns: Vec::with_capacity(n),
            end_ns: Vec::with_capacity(n),
            end_max_ns: Vec::new(),
        }
    }
    /// Spans of `(start, end)` columns, finished.
    pub fn new(start_ns: Vec<i64>, end_ns: Vec<i64>) -> Self {
        let mut s = Self {
            start_ns,
            end_ns,
            end_max_ns: Vec::new(),
        };
        s.finish();
        s
    }
    pub fn len(&self) -> usize {
        self.start_ns.len()
    }
    pub fn is_empty(&self) -> bool {
        self.start_ns.is_empty()
    }
    /// The items that may overlap `[t0, t1)`; see [`overlapping`].
    pub fn overlapping(&self, t0: i64, t1: i64) -> Range<usize> {
        overlapping(&self.start_ns, &self.end_max_ns, t0, t1)
    }
    fn push(&mut self, s: i64, e: i64) {
        self.start_ns.push(s);
        self.end_ns.push(e);
    }
    /// Computes `end_max_ns` once every item is pushed.
    pub fn finish(&mut self) {
        self.end_max_ns = running_max(&self.end_ns);
    }
}

/// The kernels and memops of one (device, stream), start-sorted.
#[derive(Debug, Default)]
pub struct GpuLane {
    pub device: u32,
    pub stream: u32,
    pub spans: Spans,
    pub bucket: Vec<u8>,
    pub act: Vec<ActRef>,
}

/// Start-sorted ranges that do not overlap (one nesting depth of a thread, or one packed
/// row of markers); `id` is a forest node or a marker index.
#[derive(Debug, Default)]
pub struct HostRow {
    pub spans: Spans,
    pub id: Vec<u32>,
}

/// One host thread's scopes, a row per depth.
#[derive(Debug, Default)]
pub struct HostLane {
    pub tid: u64,
    pub rows: Vec<HostRow>,
    /// Scopes deeper than [`MAX_HOST_DEPTH`], not drawn.
    pub hidden: usize,
}

/// Ranges on one device's GPU timeline (engine step markers, GPU annotations), packed into
/// rows that do not overlap.
#[derive(Debug, Default)]
pub struct MarkerLane {
    pub device: u32,
    pub rows: Vec<HostRow>,
}

#[derive(Debug, Default)]
pub struct LaneSet {
    /// Sorted by (device, stream).
    pub gpu: Vec<GpuLane>,
    /// Sorted by thread id.
    pub host: Vec<HostLane>,
    pub markers: Vec<MarkerLane>,
}

/// The index range of a start-sorted row whose items may overlap `[t0, t1)`: from the
/// first item that ends after `t0` to the last that starts before `t1`.
pub fn overlapping(start_ns: &[i64], end_max_ns: &[i64], t0: i64, t1: i64) -> Range<usize> {
    let lo = end_max_ns.partition_point(|&e| e <= t0);
    let hi = start_ns.partition_point(|&s| s < t1);
    lo..hi.max(lo)
}

fn running_max(end: &[i64]) -> Vec<i64> {
    let mut m = i64::MIN;
    end.iter()
        .map(|&e| {
            m = m.max(e);
            m
        })
        .collect()
}

impl GpuLane {
    pub fn len(&self) -> usize {
        self.spans.len()
    }
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    pub fn overlapping(&self, t0: i64, t1: i64) -> Range<usize> {
        self.spans.overlapping(t0, t1)
    }
    /// "device 0 · stream 7".
    pub fn label(&self) -> String {
        format!("GPU {} · stream {}", self.device, self.stream)
    }
}

impl HostRow {
    pub fn len(&self) -> usize {
        self.spans.len()
    }
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
    pub fn overlapping(&self, t0: i64, t1: i64) -> Range<usize> {
        self.spans.overlapping(t0, t1)
    }
    fn push(&mut self, s: i64, e: i64, id: u32) {
        self.spans.push(s, e);
        self.id.push(id);
    }
    fn finish(&mut self) {
        self.spans.finish();
    }
}

impl LaneSet {
    /// The lanes of a trace, GPU lanes without buckets (see [`Self::fill_buckets`]) and no
    /// host lanes (see [`Self::add_host`]): both need the analysis, the rest does not.
    pub fn build(trace: &Trace) -> Self {
        Self {
            gpu: gpu_lanes(trace),
            host: Vec::new(),
            markers: marker_lanes(trace),
        }
    }

    /// Fills each GPU lane's bucket column from the analysis.
    pub fn fill_buckets(&mut self, kernel_bucket: &[u8], memop_bucket: &[u8]) {
        let other = crate::bucket::Bucket::Other as u8;
        for l in &mut self.gpu {
            l.bucket = l
                .act
                .iter()
                .map(|a| {
                    let v = if a.is_memop() {
                        memop_bucket
                    } else {
                        kernel_bucket
                    };
                    v.get(a.index()).copied().unwrap_or(other)
                })
                .collect();
        }
    }

    /// Adds a host lane per thread of the scope forest.
    pub fn add_host(&mut self, forest: &Forest) {
        self.host = host_lanes(forest);
    }

    /// First and last instant of the lanes and steps (0, 0 when all are empty).
    pub fn span_ns(&self, steps: &[StepView]) -> (i64, i64) {
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        let mut see = |s: Option<&i64>, e: Option<&i64>| {
            if let (Some(&s), Some(&e)) = (s, e) {
                lo = lo.min(s);
                hi = hi.max(e);
            }
        };
        for l in &self.gpu {
            see(l.spans.start_ns.first(), l.spans.end_max_ns.last());
        }
        let rows = self
            .host
            .iter()
            .flat_map(|l| &l.rows)
            .chain(self.markers.iter().flat_map(|l| &l.rows));
        for r in rows {
            see(r.spans.start_ns.first(), r.spans.end_max_ns.last());
        }
        for s in steps {
            see(Some(&s.start_ns), Some(&s.end_ns));
        }
        if lo > hi { (0, 0) } else { (lo, hi) }
    }
}

/// The GPU lanes without their bucket column (filled by [`LaneSet::fill_buckets`] once the
/// analysis has classified every activity), so they can be built beside the analysis.
fn gpu_lanes(trace: &Trace) -> Vec<GpuLane> {
    let k = &trace.kernels;
    let m = &trace.memops;
    // Lane of each activity: consecutive activities mostly share a stream, so the last
    // lookup is tried before the map.
    let mut index: HashMap<(u32, u32), u32> = HashMap::new();
    let mut keys: Vec<(u32, u32)> = Vec::new();
    let mut assign = |dev: &[u32], stream: &[u32], n: usize| -> Vec<u32> {
        let mut last: Option<((u32, u32), u32)> = None;
        (0..n)
            .map(|i| {
                let key = (dev[i], stream[i]);
                match last {
                    Some((k, id)) if k == key => id,
                    _ => {
                        let id = *index.entry(key).or_insert_with(|| {
                            keys.push(key);
                            keys.len() as u32 - 1
                        });
                        last = Some((key, id));
                        id
                    }
                }
            })
            .collect()
    };
    let k_lane = assign(&k.device, &k.stream, k.len);
    let m_lane = assign(&m.device, &m.stream, m.len);
    // Per lane, kernel and memop indices in table order; each list sorted by start (traces
    // list activities in start order, so this is usually a check), then merged.
    let mut kl: Vec<Vec<u32>> = vec![Vec::new(); keys.len()];
    for (i, &l) in k_lane.iter().enumerate() {
        kl[l as usize].push(i as u32);
    }
    let mut ml: Vec<Vec<u32>> = vec![Vec::new(); keys.len()];
    for (i, &l) in m_lane.iter().enumerate() {
        ml[l as usize].push(i as u32);
    }
    drop((k_lane, m_lane));
    let mut lanes: Vec<GpuLane> = keys
        .iter()
        .zip(kl.into_iter().zip(ml))
        .map(|(&(device, stream), (mut ks, mut ms))| {
            let ks_start = |i: &u32| k.gpu_start_ns[*i as usize];
            let ms_start = |i: &u32| m.gpu_start_ns[*i as usize];
            if !ks.is_sorted_by_key(ks_start) {
                ks.sort_by_key(ks_start);
            }
            if !ms.is_sorted_by_key(ms_start) {
                ms.sort_by_key(ms_start);
            }
            let n = ks.len() + ms.len();
            let mut lane = GpuLane {
                device,
                stream,
                spans: Spans::with_capacity(n),
                bucket: Vec::new(),
                act: Vec::with_capacity(n),
            };
            let (mut a, mut b) = (0, 0);
            while a < ks.len() || b < ms.len() {
                let take_kernel = b >= ms.len()
                    || (a < ks.len()
                        && k.gpu_start_ns[ks[a] as usize] <= m.gpu_start_ns[ms[b] as usize]);
                let (s, e, act) = if take_kernel {
                    let i = ks[a] as usize;
                    a += 1;
                    (k.gpu_start_ns[i], k.gpu_end_ns[i], ActRef::kernel(i))
                } else {
                    let i = ms[b] as usize;
                    b += 1;
                    (m.gpu_start_ns[i], m.gpu_end_ns[i], ActRef::memop(i))
                };
                lane.spans.push(s, e.max(s));
                lane.act.push(act);
            }
            lane.spans.finish();
            lane
        })
        .collect();
    lanes.sort_by_key(|l| (l.device, l.stream));
    lanes
}

fn host_lanes(forest: &Forest) -> Vec<HostLane> {
    let mut lanes: Vec<HostLane> = Vec::new();
    for (tid, range) in forest.threads() {
        let mut lane = HostLane {
            tid,
            ..HostLane::default()
        };
        for id in range {
            let n = &forest.nodes[id];
            let d = n.depth as usize;
            if d >= MAX_HOST_DEPTH {
                lane.hidden += 1;
                continue;
            }
            if lane.rows.len() <= d {
                lane.rows.resize_with(d + 1, HostRow::default);
            }
            lane.rows[d].push(n.start, n.end.max(n.start), id as u32);
        }
        lane.rows.iter_mut().for_each(HostRow::finish);
        lanes.push(lane);
    }
    lanes
}

fn marker_lanes(trace: &Trace) -> Vec<MarkerLane> {
    let m = &trace.markers;
    let mut items: Vec<(u32, i64, i64, u32)> = (0..m.len)
        .filter(|&i| m.gpu_start_ns[i] != i64::MIN && m.gpu_end_ns[i] != i64::MIN)
        .map(|i| {
            (
                m.device[i],
                m.gpu_start_ns[i],
                m.gpu_end_ns[i].max(m.gpu_start_ns[i]),
                i as u32,
            )
        })
        .collect();
    // Longest first among equal starts, so enclosing ranges take the upper rows.
    items.sort_by_key(|x| (x.0, x.1, std::cmp::Reverse(x.2)));
    let mut lanes: Vec<MarkerLane> = Vec::new();
    for (device, s, e, id) in items {
        if lanes.last().is_none_or(|l| l.device != device) {
            lanes.push(MarkerLane {
                device,
                rows: Vec::new(),
            });
        }
        let lane = lanes.last_mut().expect("pushed above");
        // First row whose last range has ended (greedy interval packing).
        match lane
            .rows
            .iter_mut()
            .find(|r| r.spans.end_ns.last().is_none_or(|&last| last <= s))
        {
            Some(r) => r.push(s, e, id),
            None => {
                let mut r = HostRow::default();
                r.push(s, e, id);
                lane.rows.push(r);
            }
        }
    }
    for l in &mut lanes {
        l.rows.iter_mut().for_each(HostRow::finish);
    }
    lanes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_activity_on_device_and_stream_u32_max_gets_its_own_lane() {
        use gapscope_traces::{KernelRow, MemopRow};
        let mut t = Trace::default();
        let n = t.strings.intern("k");
        let k = |device, stream, s| KernelRow {
            device,
            stream,
            name: n,
            gpu_start_ns: s,
            gpu_end_ns: s + 5,
            ..KernelRow::default()
        };
        t.kernels.push(k(u32::MAX, u32::MAX, 0));
        t.kernels.push(k(0, 7, 10));
        t.memops.push(MemopRow {
            device: 0,
            stream: 7,
            gpu_start_ns: 3,
            gpu_end_ns: 4,
            ..MemopRow::default()
        });
        let l = LaneSet::build(&t);
        let keys: Vec<(u32, u32)> = l.gpu.iter().map(|g| (g.device, g.stream)).collect();
        assert_eq!(keys, [(0, 7), (u32::MAX, u32::MAX)]);
        assert_eq!(l.gpu[0].act, [ActRef::memop(0), ActRef::kernel(1)]);
        assert_eq!(l.gpu[1].act, [ActRef::kernel(0)]);
    }

    #[test]
    fn overlapping_finds_items_reaching_into_the_window() {
        // [0,10) [5,50) [20,30) [60,70)
        let start = [0, 5, 20, 60];
        let end_max = running_max(&[10, 50, 30, 70]);
        assert_eq!(overlapping(&start, &end_max, 40, 65), 1..4);
        assert_eq!(overlapping(&start, &end_max, 10, 20), 1..2);
        assert_eq!(overlapping(&start, &end_max, 71, 80), 4..4);
        assert_eq!(overlapping(&start, &end_max, -5, 0), 0..0);
    }
}
