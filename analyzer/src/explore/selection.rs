//! What a box selection on the timeline holds: GPU time per bucket inside the box.

use super::lanes::GpuLane;
use crate::bucket::Bucket;

const NB: usize = Bucket::ALL.len();

/// GPU time per bucket inside `[t0, t1)` on the selected lanes. An activity that crosses
/// the box's edge counts only its part inside the box.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxSums {
    pub t0_ns: i64,
    pub t1_ns: i64,
    pub bucket_ns: [i64; NB],
    /// Activities that overlap the box, per bucket.
    pub calls: [u64; NB],
    pub total_ns: i64,
    pub activities: u64,
}

impl BoxSums {
    pub fn of(lanes: &[&GpuLane], t0_ns: i64, t1_ns: i64) -> Self {
        let (t0, t1) = (t0_ns.min(t1_ns), t0_ns.max(t1_ns));
        let mut s = Self {
            t0_ns: t0,
            t1_ns: t1,
            bucket_ns: [0; NB],
            calls: [0; NB],
            total_ns: 0,
            activities: 0,
        };
        for l in lanes {
            for i in l.overlapping(t0, t1) {
                let (start, end) = (l.spans.start_ns[i], l.spans.end_ns[i]);
                let (a, b) = (start.max(t0), end.min(t1));
                if b < a || (b == a && end > start) {
                    continue;
                }
                let bk = (l.bucket[i] as usize).min(NB - 1);
                s.bucket_ns[bk] += b - a;
                s.calls[bk] += 1;
                s.total_ns += b - a;
                s.activities += 1;
            }
        }
        s
    }

    /// (bucket, ns, calls) of the buckets present, most time first.
    pub fn rows(&self) -> Vec<(Bucket, i64, u64)> {
        let mut v: Vec<(Bucket, i64, u64)> = Bucket::ALL
            .iter()
            .enumerate()
            .filter(|&(i, _)| self.calls[i] > 0)
            .map(|(i, &b)| (b, self.bucket_ns[i], self.calls[i]))
            .collect();
        v.sort_by_key(|r| std::cmp::Reverse(r.1));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::{ActRef, Spans};

    #[test]
    fn clips_at_the_box_edges() {
        let l = GpuLane {
            device: 0,
            stream: 7,
            spans: Spans::new(vec![0, 100, 300], vec![50, 250, 400]),
            bucket: vec![0, 5, 0],
            act: vec![ActRef::kernel(0), ActRef::kernel(1), ActRef::kernel(2)],
        };
        let s = BoxSums::of(&[&l], 200, 350);
        assert_eq!(s.total_ns, 100);
        assert_eq!(s.bucket_ns[5], 50);
        assert_eq!(s.bucket_ns[0], 50);
        assert_eq!(s.activities, 2);
        assert_eq!(s.rows()[0].0, Bucket::ALL[0]);
    }
}
