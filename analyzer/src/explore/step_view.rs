//! Every step of a run with its bucket decomposition, for the explorer's step bars and its
//! step-aligned timeline.

use gapscope_traces::Phase;

use crate::analysis::StepParts;
use crate::analysis::stats::percentile;
use crate::analysis::steps::Steps;
use crate::bucket::Bucket;

const NB: usize = Bucket::ALL.len();

/// One step: its window, phase and where its time went.
#[derive(Debug, Clone, PartialEq)]
pub struct StepView {
    pub index: usize,
    pub phase: Phase,
    /// Sequences in the step when its marker says, else 0.
    pub batch: u32,
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
    /// The bar's height: bucket time plus idle, ms.
    pub fn stacked_ms(&self) -> f64 {
        self.bucket_ms.iter().sum::<f64>() + self.idle_ms
    }
}

/// The views of all steps, in time order.
pub fn views(steps: &Steps, parts: &[StepParts]) -> Vec<StepView> {
    let ms = |ns: i64| ns as f64 / 1e6;
    let mut out: Vec<StepView> = steps
        .steps
        .iter()
        .zip(parts)
        .enumerate()
        .map(|(index, (s, p))| {
            let active = if p.first_ns < p.last_ns {
                p.last_ns - p.first_ns
            } else {
                0
            };
            let mut bucket_ms = [0.0; NB];
            for (o, &ns) in bucket_ms.iter_mut().zip(&p.bucket_ns) {
                *o = ms(ns);
            }
            StepView {
                index,
                phase: s.phase,
                batch: steps.batch.get(index).copied().unwrap_or(0),
                start_ns: s.gpu_start_ns,
                end_ns: s.gpu_end_ns,
                bucket_ms,
                busy_ms: ms(p.busy_ns),
                active_ms: ms(active),
                idle_ms: ms((active - p.busy_ns).max(0)),
                max_gap_ms: ms(p.max_gap_ns),
                max_gap_at_ns: p.max_gap_at_ns,
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
    use crate::analysis::steps::{Step, StepKind};

    fn parts(first: i64, last: i64, busy: i64) -> StepParts {
        let mut bucket_ns = [0; NB];
        bucket_ns[0] = busy;
        StepParts {
            bucket_ns,
            calls: [0; NB],
            busy_ns: busy,
            first_ns: first,
            last_ns: last,
            max_gap_ns: 0,
            max_gap_at_ns: 0,
        }
    }

    #[test]
    fn a_step_with_four_times_the_idle_is_a_stall() {
        let mk = |a: i64, b: i64| Step {
            phase: Phase::Decode,
            gpu_start_ns: a,
            gpu_end_ns: b,
        };
        let steps = Steps {
            steps: vec![mk(0, 1000), mk(1000, 2000), mk(2000, 3000), mk(3000, 4500)],
            batch: vec![],
            numbers: vec![],
            source: Default::default(),
            device: Some(0),
            contiguous: false,
            kind: StepKind::InferenceSteps,
            engine: None,
            phase_source: Default::default(),
            training: None,
            doubts: vec![],
        };
        let p = vec![
            parts(0, 1000, 900),
            parts(1000, 2000, 900),
            parts(2000, 3000, 900),
            parts(3000, 4400, 900),
        ];
        let v = views(&steps, &p);
        assert_eq!(
            v.iter().map(|s| s.stall).collect::<Vec<_>>(),
            [false, false, false, true]
        );
        assert!((v[3].idle_ms - 0.0005).abs() < 1e-12);
        assert!((v[3].stacked_ms() - 0.0014).abs() < 1e-12);
    }
}
