//! Level of detail for one GPU lane, with no egui types (tested and benchmarked headless).
//!
//! Zoomed out, many activities fall into one pixel. The timeline folds a run of activities
//! narrower than a few pixels into one bar (Tracy's folded zones) and needs, for any index
//! range of the lane, the time per bucket (for the bar's dominant bucket) and the longest
//! activity (Perfetto's mipmap keeps the max-duration slice as the representative). Both
//! come from per-block summaries: cumulative time per bucket at every 64th activity, and
//! the longest activity per block of 64 and per block of 4096. A range query reads two
//! partial blocks and the block summaries in between, so a frame's cost depends on the
//! pixels drawn, not on the activities in the lane.

use gapscope_analyzer::Bucket;
use gapscope_analyzer::explore::GpuLane;

pub const NB: usize = Bucket::ALL.len();
const B1: usize = 64;
const B2: usize = 4096;

/// What a folded run of activities holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunSummary {
    pub count: usize,
    /// The bucket with the most time in the run.
    pub dominant: u8,
    /// Summed activity time, ns.
    pub time_ns: i64,
    /// Index (in the lane) of the longest activity of the run.
    pub longest: usize,
}

pub struct LaneLod {
    /// Cumulative time per bucket before activity `k * 64`.
    cum: Vec<[i64; NB]>,
    longest: Longest,
}

fn dur(l: &GpuLane, i: usize) -> i64 {
    (l.spans.end_ns[i] - l.spans.start_ns[i]).max(0)
}

/// The longest item of any index range of a row (GPU lane, host-scope row, marker row):
/// (duration, index) of the longest item of each 64-block and each 4096-block, so a query
/// reads two partial blocks and the block maxima in between.
#[derive(Debug, Default)]
pub struct Longest {
    max1: Vec<(i64, u32)>,
    max2: Vec<(i64, u32)>,
}

impl Longest {
    pub fn build(start: &[i64], end: &[i64]) -> Self {
        let n = start.len().min(end.len());
        let max1: Vec<(i64, u32)> = (0..n.div_ceil(B1))
            .map(|block| {
                (block * B1..((block + 1) * B1).min(n))
                    .map(|i| ((end[i] - start[i]).max(0), i as u32))
                    .fold((-1, 0), |a, b| if b.0 > a.0 { b } else { a })
            })
            .collect();
        let max2 = max1
            .chunks(B2 / B1)
            .map(|c| *c.iter().max_by_key(|x| x.0).expect("chunks are not empty"))
            .collect();
        Self { max1, max2 }
    }

    /// Index of the longest item of `i..j` (`i` when the range is empty).
    pub fn of(&self, start: &[i64], end: &[i64], i: usize, j: usize) -> usize {
        let mut best = (-1i64, i);
        let mut see = |d: i64, k: usize| {
            if d > best.0 {
                best = (d, k);
            }
        };
        let mut k = i;
        while k < j {
            if k.is_multiple_of(B2) && k + B2 <= j {
                let (d, at) = self.max2[k / B2];
                see(d, at as usize);
                k += B2;
            } else if k.is_multiple_of(B1) && k + B1 <= j {
                let (d, at) = self.max1[k / B1];
                see(d, at as usize);
                k += B1;
            } else {
                see((end[k] - start[k]).max(0), k);
                k += 1;
            }
        }
        best.1
    }

    pub fn heap_bytes(&self) -> usize {
        (self.max1.len() + self.max2.len()) * 16
    }
}

impl LaneLod {
    pub fn build(l: &GpuLane) -> Self {
        let n = l.len();
        let mut cum = Vec::with_capacity(n / B1 + 1);
        let mut acc = [0i64; NB];
        for block in 0..n.div_ceil(B1) {
            cum.push(acc);
            for i in block * B1..((block + 1) * B1).min(n) {
                acc[(l.bucket[i] as usize).min(NB - 1)] += dur(l, i);
            }
        }
        cum.push(acc);
        Self {
            cum,
            longest: Longest::build(&l.spans.start_ns, &l.spans.end_ns),
        }
    }

    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.cum.len() * std::mem::size_of::<[i64; NB]>() + self.longest.heap_bytes()
    }

    /// Time per bucket of activities `0..i`.
    fn prefix(&self, l: &GpuLane, i: usize) -> [i64; NB] {
        let block = i / B1;
        let mut acc = self.cum[block];
        for k in block * B1..i {
            acc[(l.bucket[k] as usize).min(NB - 1)] += dur(l, k);
        }
        acc
    }

    /// Time per bucket of activities `i..j`.
    pub fn bucket_ns(&self, l: &GpuLane, i: usize, j: usize) -> [i64; NB] {
        let (a, b) = (self.prefix(l, i), self.prefix(l, j.max(i)));
        let mut out = [0; NB];
        for k in 0..NB {
            out[k] = b[k] - a[k];
        }
        out
    }

    /// The longest activity of `i..j` (`i` when the range is empty).
    pub fn longest(&self, l: &GpuLane, i: usize, j: usize) -> usize {
        self.longest.of(&l.spans.start_ns, &l.spans.end_ns, i, j)
    }

    /// The bucket with the most time in `i..j` (the first item's bucket on a tie with it,
    /// or when nothing in the range has time).
    pub fn dominant(&self, l: &GpuLane, i: usize, j: usize) -> u8 {
        dominant_of(
            &self.bucket_ns(l, i, j),
            l.bucket.get(i).copied().unwrap_or(0),
        )
    }

    pub fn summary(&self, l: &GpuLane, i: usize, j: usize) -> RunSummary {
        let ns = self.bucket_ns(l, i, j);
        RunSummary {
            count: j.saturating_sub(i),
            dominant: dominant_of(&ns, l.bucket.get(i).copied().unwrap_or(0)),
            time_ns: ns.iter().sum(),
            longest: self.longest(l, i, j),
        }
    }
}

/// The bucket with the most time; `first` wins ties with it (and an all-zero range).
fn dominant_of(ns: &[i64; NB], first: u8) -> u8 {
    let first = (first as usize).min(NB - 1);
    let mut best = first;
    for (b, &t) in ns.iter().enumerate() {
        if t > ns[best] {
            best = b;
        }
    }
    best as u8
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_analyzer::explore::{ActRef, Spans};

    fn lane(n: usize) -> GpuLane {
        let start: Vec<i64> = (0..n as i64).map(|i| i * 10).collect();
        let end: Vec<i64> = (0..n as i64).map(|i| i * 10 + 1 + (i * 7919) % 9).collect();
        GpuLane {
            device: 0,
            stream: 1,
            spans: Spans::new(start, end),
            bucket: (0..n).map(|i| (i % 3) as u8).collect(),
            act: (0..n).map(ActRef::kernel).collect(),
        }
    }

    #[test]
    fn the_colour_and_the_label_of_a_run_agree_on_ties() {
        let mut l = lane(4);
        l.spans.end_ns = l.spans.start_ns.clone();
        l.bucket = vec![5, 5, 0, 16];
        let lod = LaneLod::build(&l);
        assert_eq!(lod.dominant(&l, 0, 4), 5);
        assert_eq!(lod.summary(&l, 0, 4).dominant, 5);
    }

    #[test]
    fn range_queries_match_a_plain_scan() {
        let l = lane(10_000);
        let lod = LaneLod::build(&l);
        for &(i, j) in &[
            (0, 0),
            (0, 1),
            (3, 70),
            (63, 65),
            (100, 9000),
            (0, 10_000),
            (4095, 8193),
        ] {
            let mut want = [0i64; NB];
            let mut best = (-1, i);
            for k in i..j {
                want[l.bucket[k] as usize] += dur(&l, k);
                if dur(&l, k) > best.0 {
                    best = (dur(&l, k), k);
                }
            }
            assert_eq!(lod.bucket_ns(&l, i, j), want, "{i}..{j}");
            if j > i {
                assert_eq!(dur(&l, lod.longest(&l, i, j)), best.0, "{i}..{j}");
            }
        }
    }
}
