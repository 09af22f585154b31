//! A start-sorted row with an index of its longest item per block, and its fold: what to
//! draw in a window at about one range per pixel.

use std::ops::Range;

use crate::explore::lanes::Spans;

/// Items narrower than this many pixels are folded into runs.
pub const MIN_PX: f64 = 3.0;
/// A link between one collective's ends across ranks is drawn when collectives are at
/// least this many pixels apart on average (denser, the lines are noise).
pub const LINK_MIN_PX: f64 = 12.0;
/// Items per block of the longest-item index.
const BLOCK: usize = 64;

/// A start-sorted row and an index of its longest item per block, so a fold finds the
/// first wide item and the longest item of a range without a scan of every item.
#[derive(Debug, Default, Clone)]
pub struct Row {
    pub spans: Spans,
    /// Per block of [`BLOCK`] items, the index of its longest item.
    block_longest: Vec<u32>,
}

impl Row {
    pub fn new(spans: Spans) -> Self {
        let n = spans.len();
        let dur = |i: usize| spans.end_ns[i] - spans.start_ns[i];
        let block_longest = (0..n.div_ceil(BLOCK))
            .map(|b| {
                let r = b * BLOCK..((b + 1) * BLOCK).min(n);
                r.max_by_key(|&i| (dur(i), std::cmp::Reverse(i)))
                    .unwrap_or(0) as u32
            })
            .collect();
        Self {
            spans,
            block_longest,
        }
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn dur(&self, i: usize) -> i64 {
        self.spans.end_ns[i] - self.spans.start_ns[i]
    }

    /// The longest item of `i..j` (`i` when the range is empty).
    pub fn longest(&self, i: usize, j: usize) -> usize {
        let mut best = i;
        let mut consider = |k: usize| {
            if k < j && self.dur(k) > self.dur(best) {
                best = k;
            }
        };
        let mut k = i;
        while k < j {
            if k.is_multiple_of(BLOCK) && k + BLOCK <= j {
                consider(self.block_longest[k / BLOCK] as usize);
                k += BLOCK;
            } else {
                consider(k);
                k += 1;
            }
        }
        best
    }

    /// The first item of `i..j` at least `min_ns` long.
    pub fn first_wide(&self, i: usize, j: usize, min_ns: i64) -> Option<usize> {
        let mut k = i;
        while k < j {
            if k.is_multiple_of(BLOCK) && k + BLOCK <= j {
                if self.dur(self.block_longest[k / BLOCK] as usize) < min_ns {
                    k += BLOCK;
                    continue;
                }
                return (k..k + BLOCK).find(|&x| self.dur(x) >= min_ns);
            }
            if self.dur(k) >= min_ns {
                return Some(k);
            }
            k += 1;
        }
        None
    }

    /// The items to draw in `[t0, t1)` over `width_px` pixels: each item at least
    /// [`MIN_PX`] wide alone, and runs of narrower neighbours (no gap over [`MIN_PX`]
    /// between them) folded into one range, so about one range per pixel at most.
    pub fn fold(&self, t0: i64, t1: i64, width_px: f64) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        if t1 <= t0 || width_px <= 0.0 {
            return out;
        }
        let ns_per_px = (t1 - t0) as f64 / width_px;
        let min_ns = ((MIN_PX * ns_per_px).ceil() as i64).max(1);
        let (start, end) = (&self.spans.start_ns, &self.spans.end_ns);
        let range = self.spans.overlapping(t0, t1);
        let hi = range.end;
        let mut i = range.start;
        while i < hi {
            if self.dur(i) >= min_ns {
                out.push(i..i + 1);
                i += 1;
                continue;
            }
            let mut run_end = end[i];
            let mut j = i + 1;
            while j < hi {
                let limit = run_end.max(start[j - 1]).saturating_add(min_ns);
                let k = j + start[j..hi].partition_point(|&s| s < limit);
                if k == j {
                    break;
                }
                if let Some(w) = self.first_wide(j, k, min_ns) {
                    j = w;
                    break;
                }
                run_end = run_end.max(end[k - 1]);
                j = k;
            }
            out.push(i..j);
            i = j;
        }
        out
    }
}
