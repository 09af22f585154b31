//! Recording distortion: a capture tool that spends a noticeable share of the recorded span
//! on itself (CUPTI's command buffer filling up, its buffer flushes) stretches what it
//! records. The report and the gate warn with the figure instead of leaving it in a note.

use serde::Serialize;

use gapscope_traces::Trace;

/// Capture overhead above this share of the recorded span distorts timings.
pub const MAX_OVERHEAD_SHARE: f64 = 0.01;

/// The capture tool's own time against the recorded span.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Distortion {
    /// Overhead by kind, ms, largest first.
    pub overhead_ms: Vec<(String, f64)>,
    pub total_ms: f64,
    /// The span of GPU and host activity in the trace, ms.
    pub span_ms: f64,
    pub share_pct: f64,
}

impl Distortion {
    /// The one-line warning.
    pub fn warning(&self) -> String {
        let kinds: Vec<String> = self
            .overhead_ms
            .iter()
            .map(|(k, ms)| format!("{k} {ms:.1} ms"))
            .collect();
        format!(
            "timings are distorted: the capture tool's own overhead is {:.1} ms, {:.1}% of the \
             {:.1} ms recorded span (more than {:.0}%): {}",
            self.total_ms,
            self.share_pct,
            self.span_ms,
            100.0 * MAX_OVERHEAD_SHARE,
            kinds.join(", ")
        )
    }
}

/// Overhead by kind from the manifest, or, for recordings made before it had a field for
/// it, from their `CUPTI overhead (KIND): X ms` notes.
fn overhead_ns(trace: &Trace) -> Vec<(String, u64)> {
    let m = &trace.manifest;
    if !m.capture_overhead_ns.is_empty() {
        return m
            .capture_overhead_ns
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
    }
    m.notes
        .iter()
        .filter_map(|n| {
            let rest = n.strip_prefix("CUPTI overhead (")?;
            let (kind, ms) = rest.split_once("): ")?;
            let ms: f64 = ms.strip_suffix(" ms")?.parse().ok()?;
            (ms.is_finite() && ms >= 0.0).then(|| (kind.to_owned(), (ms * 1e6) as u64))
        })
        .collect()
}

/// The span of everything timed in the trace (kernels, memops, launches), ns.
fn span_ns(trace: &Trace) -> i64 {
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    let mut see = |s: i64, e: i64| {
        lo = lo.min(s);
        hi = hi.max(e.max(s));
    };
    let k = &trace.kernels;
    for i in 0..k.len {
        see(k.gpu_start_ns[i], k.gpu_end_ns[i]);
    }
    let m = &trace.memops;
    for i in 0..m.len {
        see(m.gpu_start_ns[i], m.gpu_end_ns[i]);
    }
    let l = &trace.launches;
    for i in 0..l.len {
        see(l.host_start_ns[i], l.host_end_ns[i]);
    }
    if hi > lo { hi.saturating_sub(lo) } else { 0 }
}

/// The distortion of a recording whose capture overhead is above [`MAX_OVERHEAD_SHARE`] of
/// its span; `None` when it is below, or the trace states no overhead.
pub fn distortion(trace: &Trace) -> Option<Distortion> {
    let mut by_kind = overhead_ns(trace);
    let total: u64 = by_kind.iter().map(|(_, v)| *v).sum();
    let span = span_ns(trace);
    if total == 0 || span <= 0 {
        return None;
    }
    let share = total as f64 / span as f64;
    if share <= MAX_OVERHEAD_SHARE {
        return None;
    }
    by_kind.sort_by_key(|b| std::cmp::Reverse(b.1));
    Some(Distortion {
        overhead_ms: by_kind
            .into_iter()
            .map(|(k, v)| (k, v as f64 / 1e6))
            .collect(),
        total_ms: total as f64 / 1e6,
        span_ms: span as f64 / 1e6,
        share_pct: 100.0 * share,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_traces::{KernelRow, Manifest};

    fn trace(span_ms: i64) -> Trace {
        let mut t = Trace::new(Manifest::new("cupti"));
        let n = t.strings.intern("k");
        for (s, e) in [
            (0, 1_000),
            (span_ms * 1_000_000 - 1_000, span_ms * 1_000_000),
        ] {
            t.kernels.push(KernelRow {
                name: n,
                gpu_start_ns: s,
                gpu_end_ns: e,
                ..Default::default()
            });
        }
        t
    }

    #[test]
    fn overhead_above_one_percent_of_the_span_is_distortion() {
        // The audit's recording: 5.2 s of "command buffer full" in a 14 s span.
        let mut t = trace(14_000);
        t.manifest
            .capture_overhead_ns
            .insert("command buffer full".into(), 5_200_000_000);
        let d = distortion(&t).expect("distorted");
        assert!((d.share_pct - 37.142_857).abs() < 1e-3, "{d:?}");
        assert!(
            d.warning().contains("command buffer full 5200.0 ms"),
            "{}",
            d.warning()
        );
        // 100 ms in 14 s is 0.7%: fine.
        let mut t = trace(14_000);
        t.manifest
            .capture_overhead_ns
            .insert("CUPTI buffer flush".into(), 100_000_000);
        assert_eq!(distortion(&t), None);
        assert_eq!(distortion(&trace(10)), None);
    }

    #[test]
    fn older_recordings_state_it_in_their_notes() {
        let mut t = trace(1_000);
        t.manifest.notes = vec![
            "CUPTI overhead (command buffer full): 25.000 ms".into(),
            "CUPTI overhead (CUPTI buffer flush): 5.500 ms".into(),
            "CUPTI overhead (bogus): nan ms".into(),
        ];
        let d = distortion(&t).expect("3% overhead");
        assert_eq!(d.overhead_ms[0].0, "command buffer full");
        assert!((d.total_ms - 30.5).abs() < 1e-9, "{d:?}");
    }
}
