//! Interval unions: overlap-correct busy time. Intervals are `(start, end)` in ns; an
//! interval with `end <= start` contributes nothing.

/// Merges intervals (sorted by start) into disjoint busy intervals, calling `emit` for each.
pub fn merge_sorted(iter: impl Iterator<Item = (i64, i64)>, mut emit: impl FnMut(i64, i64)) {
    let mut cur: Option<(i64, i64)> = None;
    for (s, e) in iter {
        if e <= s {
            continue;
        }
        match &mut cur {
            Some((_, ce)) if s <= *ce => {
                if e > *ce {
                    *ce = e;
                }
            }
            _ => {
                if let Some((cs, ce)) = cur {
                    emit(cs, ce);
                }
                cur = Some((s, e));
            }
        }
    }
    if let Some((cs, ce)) = cur {
        emit(cs, ce);
    }
}

/// Total length of the union of intervals sorted by start.
pub fn union_len_sorted(iter: impl Iterator<Item = (i64, i64)>) -> i64 {
    let mut total = 0i64;
    merge_sorted(iter, |s, e| total += e - s);
    total
}

/// What [`extent_sorted`] finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// The first start (`i64::MAX` without intervals).
    pub lo: i64,
    /// The last end, or start where an end comes before its start (`i64::MIN` without
    /// intervals).
    pub hi: i64,
    /// The union's length, as [`union_len_sorted`].
    pub union: i64,
}

/// The extent and the union length of intervals sorted by start, in one pass.
pub fn extent_sorted(iter: impl Iterator<Item = (i64, i64)>) -> Extent {
    let mut lo = i64::MAX;
    let mut hi = i64::MIN;
    let union = union_len_sorted(iter.inspect(|&(s, e)| {
        lo = lo.min(s);
        hi = hi.max(e.max(s));
    }));
    Extent { lo, hi, union }
}

/// Merges two start-sorted interval streams into one start-sorted stream.
pub fn merge_two<A, B>(a: A, b: B) -> impl Iterator<Item = (i64, i64)>
where
    A: Iterator<Item = (i64, i64)>,
    B: Iterator<Item = (i64, i64)>,
{
    let mut a = a.peekable();
    let mut b = b.peekable();
    std::iter::from_fn(move || match (a.peek(), b.peek()) {
        (Some(x), Some(y)) => {
            if x.0 <= y.0 {
                a.next()
            } else {
                b.next()
            }
        }
        (Some(_), None) => a.next(),
        (None, Some(_)) => b.next(),
        (None, None) => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn union_handles_overlap_nesting_and_negative() {
        // [0,10) and [5,15) overlap -> 15; [20,30) contains [22,25); [40,35) is negative.
        let v = [(0, 10), (5, 15), (20, 30), (22, 25), (40, 35)];
        assert_eq!(union_len_sorted(v.into_iter()), 25);
        let mut parts = Vec::new();
        merge_sorted(v.into_iter(), |s, e| parts.push((s, e)));
        assert_eq!(parts, vec![(0, 15), (20, 30)]);
        assert_eq!(
            extent_sorted(v.into_iter()),
            Extent {
                lo: 0,
                hi: 40,
                union: 25
            }
        );
        let m: Vec<_> = merge_two([(0, 1), (4, 5)].into_iter(), [(2, 3)].into_iter()).collect();
        assert_eq!(m, vec![(0, 1), (2, 3), (4, 5)]);
    }
}
