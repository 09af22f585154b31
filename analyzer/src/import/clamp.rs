//! Untrusted times, made safe once for every importer.
//!
//! Importers keep times as the source stores them; `import_trace` then runs
//! [`clamp_times`] on whatever they built (Kineto, nsys or native), so analysis can subtract
//! and add times with plain `i64` arithmetic:
//! - every time is clamped to `±LIMIT_NS` (`i64::MAX / 2`, about 146 years either side of
//!   the source's zero), so the difference of any two times fits in an `i64`;
//! - an end before its start becomes the start (a zero duration);
//! - when the durations of the GPU activities (kernels and memops together), or of the host
//!   calls, add up past `LIMIT_NS`, which only absurd inputs do, the longest are cut to a
//!   common ceiling so that any sum of them fits too.
//!
//! Marker ranges keep their `i64::MIN` "absent" sentinel. The kernels' model-derived byte
//! and FLOP counts (engine and native traces) are summed by the analysis too: a value below
//! -1 ("unknown") becomes -1, and the largest are cut like durations when their sum would not
//! fit. Every change is counted and reported as one warning.

use gapscope_traces::Trace;

/// The largest magnitude a time keeps.
pub const LIMIT_NS: i64 = i64::MAX / 2;

/// What [`clamp_times`] changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Clamped {
    /// Times outside `±LIMIT_NS`.
    pub out_of_range: u64,
    /// Ends before their start, set to the start.
    pub reversed: u64,
    /// Durations cut so that their sum fits.
    pub cut: u64,
    /// The ceiling those durations were cut to.
    pub ceiling_ns: i64,
    /// Kernel byte or FLOP counts below -1, or cut so that their sum fits.
    pub costs: u64,
}

impl Clamped {
    pub fn any(&self) -> bool {
        self.out_of_range + self.reversed + self.cut + self.costs > 0
    }

    /// One line for the report, or `None` when nothing changed.
    pub fn warning(&self) -> Option<String> {
        if !self.any() {
            return None;
        }
        let mut parts = Vec::new();
        if self.out_of_range > 0 {
            parts.push(format!(
                "{} times beyond ±{LIMIT_NS} ns (about 146 years) clamped to that bound",
                self.out_of_range
            ));
        }
        if self.reversed > 0 {
            parts.push(format!(
                "{} ends before their start set to the start (zero duration)",
                self.reversed
            ));
        }
        if self.cut > 0 {
            parts.push(format!(
                "{} durations cut to {} ns so that their sum fits in 64 bits",
                self.cut, self.ceiling_ns
            ));
        }
        if self.costs > 0 {
            parts.push(format!(
                "{} kernel byte or FLOP counts below -1 or too large to add up clamped",
                self.costs
            ));
        }
        Some(format!("untrusted times: {}", parts.join("; ")))
    }
}

/// Clamps every time column of `t` in place; see the module doc.
pub fn clamp_times(t: &mut Trace) -> Clamped {
    let mut c = Clamped::default();
    let k = &mut t.kernels;
    span_pairs(&mut k.gpu_start_ns, &mut k.gpu_end_ns, &mut c);
    let m = &mut t.memops;
    span_pairs(&mut m.gpu_start_ns, &mut m.gpu_end_ns, &mut c);
    let l = &mut t.launches;
    span_pairs(&mut l.host_start_ns, &mut l.host_end_ns, &mut c);
    let mk = &mut t.markers;
    marker_pairs(&mut mk.gpu_start_ns, &mut mk.gpu_end_ns, &mut c);
    marker_pairs(&mut mk.host_start_ns, &mut mk.host_end_ns, &mut c);
    let sc = &mut t.scopes;
    span_pairs(&mut sc.host_start_ns, &mut sc.host_end_ns, &mut c);
    for v in &mut t.samples.host_ns {
        clamp_one(v, &mut c);
    }
    let k = &mut t.kernels;
    let m = &mut t.memops;
    fit_sum(
        &mut [
            (&k.gpu_start_ns[..], &mut k.gpu_end_ns[..]),
            (&m.gpu_start_ns[..], &mut m.gpu_end_ns[..]),
        ],
        &mut c,
    );
    let l = &mut t.launches;
    fit_sum(
        &mut [(&l.host_start_ns[..], &mut l.host_end_ns[..])],
        &mut c,
    );
    c.costs += fit_costs(&mut t.kernels.bytes) + fit_costs(&mut t.kernels.flops);
    c
}

/// Non-negative counts keep their value unless their sum would pass `LIMIT_NS`; anything
/// below -1 ("unknown") becomes -1. Returns how many values changed.
fn fit_costs(v: &mut [i64]) -> u64 {
    let mut changed = 0;
    for x in v.iter_mut() {
        if *x < -1 {
            *x = -1;
            changed += 1;
        }
    }
    let total = |ceiling: i64| -> i128 { v.iter().map(|&x| i128::from(x.clamp(0, ceiling))).sum() };
    if let Some(c) = largest_ceiling(total) {
        for x in v.iter_mut() {
            if *x > c {
                *x = c;
                changed += 1;
            }
        }
    }
    changed
}

/// The largest ceiling whose capped total is at most `LIMIT_NS`, or `None` when the
/// uncapped total already is.
fn largest_ceiling(total: impl Fn(i64) -> i128) -> Option<i64> {
    if total(i64::MAX) <= i128::from(LIMIT_NS) {
        return None;
    }
    let (mut lo, mut hi) = (0i64, i64::MAX);
    while lo < hi {
        let mid = lo + (hi - lo) / 2 + 1;
        if total(mid) <= i128::from(LIMIT_NS) {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    Some(lo)
}

fn clamp_one(v: &mut i64, c: &mut Clamped) {
    if !(-LIMIT_NS..=LIMIT_NS).contains(v) {
        *v = (*v).clamp(-LIMIT_NS, LIMIT_NS);
        c.out_of_range += 1;
    }
}

/// Start/end columns; a projected read may have left either empty, and then only the
/// loaded one is clamped.
fn span_pairs(starts: &mut [i64], ends: &mut [i64], c: &mut Clamped) {
    for v in starts.iter_mut().chain(ends.iter_mut()) {
        clamp_one(v, c);
    }
    if starts.len() == ends.len() {
        for (s, e) in starts.iter().zip(ends.iter_mut()) {
            if *e < *s {
                *e = *s;
                c.reversed += 1;
            }
        }
    }
}

/// Like [`span_pairs`], but a start of `i64::MIN` means "no range on this clock": its end
/// becomes `i64::MIN` too.
fn marker_pairs(starts: &mut [i64], ends: &mut [i64], c: &mut Clamped) {
    if starts.len() != ends.len() {
        return;
    }
    for (s, e) in starts.iter_mut().zip(ends.iter_mut()) {
        if *s == i64::MIN {
            if *e != i64::MIN {
                *e = i64::MIN;
                c.out_of_range += 1;
            }
            continue;
        }
        clamp_one(s, c);
        clamp_one(e, c);
        if *e < *s {
            *e = *s;
            c.reversed += 1;
        }
    }
}

/// Cuts the longest durations of the given (already clamped, non-negative) spans to one
/// ceiling so that all of them together add up to at most `LIMIT_NS`.
fn fit_sum(spans: &mut [(&[i64], &mut [i64])], c: &mut Clamped) {
    let usable = |s: &[i64], e: &[i64]| s.len() == e.len();
    let total = |ceiling: i64, spans: &[(&[i64], &mut [i64])]| -> i128 {
        spans
            .iter()
            .filter(|(s, e)| usable(s, e))
            .flat_map(|(s, e)| s.iter().zip(e.iter()))
            .map(|(&s, &e)| i128::from((e - s).clamp(0, ceiling)))
            .sum()
    };
    let Some(lo) = largest_ceiling(|c| total(c, spans)) else {
        return;
    };
    for (s, e) in spans.iter_mut() {
        if s.len() != e.len() {
            continue;
        }
        for (&s, e) in s.iter().zip(e.iter_mut()) {
            if *e - s > lo {
                *e = s + lo;
                c.cut += 1;
            }
        }
    }
    c.ceiling_ns = lo;
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_traces::{KernelRow, Manifest, MarkerRow};

    fn kernels(spans: &[(i64, i64)]) -> Trace {
        let mut t = Trace::new(Manifest::new("synthetic"));
        for &(s, e) in spans {
            t.kernels.push(KernelRow {
                gpu_start_ns: s,
                gpu_end_ns: e,
                ..Default::default()
            });
        }
        t
    }

    #[test]
    fn extremes_are_clamped_and_counted() {
        let mut t = kernels(&[(i64::MIN, i64::MAX), (10, 5), (-10, i64::MAX), (-1, 0)]);
        let c = clamp_times(&mut t);
        assert_eq!(c.out_of_range, 3);
        assert_eq!(c.reversed, 1);
        assert_eq!(t.kernels.gpu_start_ns[0], -LIMIT_NS);
        assert_eq!(t.kernels.gpu_end_ns[1], 10);
        // Three spans of about 2^63, 0, 2^62 and 1 ns cannot all keep their length.
        assert!(c.cut >= 1);
        let sum: i128 = (0..4)
            .map(|i| i128::from(t.kernels.gpu_end_ns[i] - t.kernels.gpu_start_ns[i]))
            .sum();
        assert!(sum <= i128::from(LIMIT_NS), "{sum}");
        assert_eq!(t.kernels.gpu_end_ns[3] - t.kernels.gpu_start_ns[3], 1);
        assert!(c.warning().unwrap().contains("3 times beyond"));
    }

    /// Host scopes (Kineto `cpu_op`, `python_function`) are clamped like every other time:
    /// a `ts` of 1e30 once reached the explorer's axis as about i64::MAX.
    #[test]
    fn host_scope_times_are_clamped() {
        let mut t = Trace::default();
        t.scopes.push(gapscope_traces::ScopeRow {
            host_start_ns: i64::MAX - 5,
            host_end_ns: i64::MIN,
            ..Default::default()
        });
        let c = clamp_times(&mut t);
        assert_eq!(c.out_of_range, 2);
        assert_eq!(t.scopes.host_start_ns[0], LIMIT_NS);
        assert_eq!(
            t.scopes.host_end_ns[0], LIMIT_NS,
            "a reversed scope ends at its start"
        );
    }

    #[test]
    fn ordinary_traces_are_untouched() {
        let mut t = kernels(&[(1_790_857_026_000_000_000, 1_790_857_026_000_005_000)]);
        let before = t.kernels.clone();
        assert_eq!(clamp_times(&mut t), Clamped::default());
        assert_eq!(t.kernels.gpu_end_ns, before.gpu_end_ns);
    }

    /// Found by the native_import fuzz target: byte counts near `i64::MAX` in a crafted
    /// `.gst` overflowed the per-bucket sums of the analysis.
    #[test]
    fn kernel_costs_are_bounded() {
        let mut t = kernels(&[(0, 1), (1, 2), (2, 3)]);
        t.kernels.bytes = vec![i64::MAX, i64::MAX - 1, 7];
        t.kernels.flops = vec![-5, -1, 3];
        let c = clamp_times(&mut t);
        assert_eq!(c.costs, 3);
        let sum: i128 = t.kernels.bytes.iter().map(|&b| i128::from(b)).sum();
        assert!(sum <= i128::from(LIMIT_NS), "{sum}");
        assert_eq!(t.kernels.bytes[2], 7);
        assert_eq!(t.kernels.flops, vec![-1, -1, 3]);
        assert!(
            c.warning()
                .unwrap()
                .contains("3 kernel byte or FLOP counts")
        );
    }

    #[test]
    fn marker_sentinels_survive() {
        let mut t = Trace::new(Manifest::new("synthetic"));
        t.markers.push(MarkerRow {
            gpu_start_ns: 5,
            gpu_end_ns: 9,
            ..Default::default()
        });
        t.markers.push(MarkerRow {
            host_end_ns: 7,
            ..Default::default()
        });
        let c = clamp_times(&mut t);
        assert_eq!(t.markers.host_start_ns, vec![i64::MIN, i64::MIN]);
        assert_eq!(t.markers.host_end_ns, vec![i64::MIN, i64::MIN]);
        assert_eq!(t.markers.gpu_end_ns, vec![9, i64::MIN]);
        assert_eq!(c.out_of_range, 1);
    }
}
