//! Every step of a run with its bucket decomposition, for the explorer's step bars and its
//! step-aligned timeline.

use gapscope_traces::Phase;

use crate::analysis::stats::percentile;
use crate::bucket::Bucket;
use crate::tables::Tables;

const NB: usize = Bucket::ALL.len();

/// One step: its window, phase and where its time went.
#[derive(Debug, Clone, PartialEq)]
pub struct StepView {
    pub index: usize,
    pub phase: Phase,
    /// Sequences in the step when its marker says, else 0.
    pub batch: u32,
    /// Tokens the step produced when known, else 0.
    pub tokens: u32,
    /// Speculative steps: the draft forwards, and where the verify forward starts.
    pub draft_forwards: u32,
    pub verify_start_ns: i64,
    /// The step's window on the GPU timeline, ns.
    pub start_ns: i64,
    pub end_ns: i64,
    /// GPU time per bucket ([`Bucket::ALL`] order), ms. Concurrent kernels both count, so
    /// the sum can exceed `busy_ms`.
    pub bucket_ms: [f64; NB],
    /// Overlap-correct GPU busy time, ms.
    pub busy_ms: f64,
    /// First to last GPU activity, ms.
    pub active_ms: f64,
    /// GPU idle between the first and last activity, ms.
    pub idle_ms: f64,
    /// The longest idle gap inside the step, ms, and where it starts.
    pub max_gap_ms: f64,
    pub max_gap_at_ns: i64,
    /// Whether the step stalled: its idle is more than twice the median idle of its phase
    /// and the excess is at least 5% of that phase's median active time.
    pub stall: bool,
}

impl StepView {
    /// A speculative step's draft window as a share of the step (0 for other steps).
    pub fn draft_share(&self) -> f64 {
        let span = (self.end_ns - self.start_ns) as f64;
        if self.draft_forwards == 0 || span <= 0.0 {
            return 0.0;
        }
        ((self.verify_start_ns - self.start_ns) as f64 / span).clamp(0.0, 1.0)
    }

    /// The bar's height: bucket time plus idle, ms.
    pub fn stacked_ms(&self) -> f64 {
        self.bucket_ms.iter().sum::<f64>() + self.idle_ms
    }
}

/// The views of all steps, in time order, from the step and step × bucket tables.
pub fn views(t: &Tables) -> Vec<StepView> {
    let ms = |ns: i64| ns as f64 / 1e6;
    let st = &t.steps;
    let mut out: Vec<StepView> = (0..st.len)
        .map(|index| {
            let active = st.active_ns(index);
            let mut bucket_ms = [0.0; NB];
            for (o, ns) in bucket_ms.iter_mut().zip(t.step_buckets.ns_of_step(index)) {
                *o = ms(ns);
            }
            let busy = st.busy_ns[index];
            StepView {
                index,
                phase: Phase::from_code(st.phase[index]),
                batch: st.batch[index],
                tokens: st.tokens[index],
                draft_forwards: st.draft_forwards[index],
                verify_start_ns: st.verify_start_ns[index],
                start_ns: st.gpu_start_ns[index],
                end_ns: st.gpu_end_ns[index],
                bucket_ms,
                busy_ms: ms(busy),
                active_ms: ms(active),
                idle_ms: ms((active - busy).max(0)),
                max_gap_ms: ms(st.max_gap_ns[index]),
                max_gap_at_ns: st.gpu_max_gap_at_ns[index],
                stall: false,
            }
        })
        .collect();
    mark_stalls(&mut out);
    out
}

fn mark_stalls(steps: &mut [StepView]) {
    for phase in Phase::ALL {
        let of: Vec<usize> = (0..steps.len())
            .filter(|&i| steps[i].phase == phase)
            .collect();
        if of.len() < 3 {
            continue;
        }
        let idle: Vec<f64> = of.iter().map(|&i| steps[i].idle_ms).collect();
        let active: Vec<f64> = of.iter().map(|&i| steps[i].active_ms).collect();
        let (idle_med, active_med) = (percentile(&idle, 50.0), percentile(&active, 50.0));
        for &i in &of {
            let s = &mut steps[i];
            s.stall = s.idle_ms > 2.0 * idle_med && s.idle_ms - idle_med >= 0.05 * active_med;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::steps::Cell;
    use crate::tables::{StepBuckets, StepRow};

    /// Decode steps `(start, end, first, last, busy)`, the busy time all in bucket 0.
    fn tables(steps: &[(i64, i64, i64, i64, i64)]) -> Tables {
        let mut t = Tables {
            step_buckets: StepBuckets::with_steps(steps.len()),
            ..Tables::default()
        };
        for (i, &(start, end, first, last, busy)) in steps.iter().enumerate() {
            t.steps.push(StepRow {
                step: i as u32,
                phase: Phase::Decode as u8,
                gpu_start_ns: start,
                gpu_end_ns: end,
                gpu_first_ns: first,
                gpu_last_ns: last,
                busy_ns: busy,
                ..StepRow::default()
            });
            let mut cells = [Cell::default(); NB];
            cells[0] = Cell {
                ns: busy,
                calls: 1,
                ..Cell::default()
            };
            t.step_buckets.push_step(0, i as u32, &cells);
        }
        t
    }

    #[test]
    fn a_step_with_four_times_the_idle_is_a_stall() {
        let t = tables(&[
            (0, 1000, 0, 1000, 900),
            (1000, 2000, 1000, 2000, 900),
            (2000, 3000, 2000, 3000, 900),
            (3000, 4500, 3000, 4400, 900),
        ]);
        let v = views(&t);
        assert_eq!(
            v.iter().map(|s| s.stall).collect::<Vec<_>>(),
            [false, false, false, true]
        );
        assert!((v[3].idle_ms - 0.0005).abs() < 1e-12);
        assert!((v[3].stacked_ms() - 0.0014).abs() < 1e-12);
    }
}
