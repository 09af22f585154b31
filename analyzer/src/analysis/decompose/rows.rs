//! The report's rows from the accumulated steps: the step-time report and the bucket rows.

use super::{AnalysisSettings, NS_PER_MS, NameTimes, StepAcc, pct};
use crate::analysis::report::*;
use crate::analysis::stats::Summary;
use crate::analysis::steps::{Step, StepKind, Steps};
use crate::bucket::Bucket;

/// Which steps a report covers: `scope` are the decode steps (`decode`), else the
/// iterations of a training trace or all steps.
pub(super) struct StepSets<'a> {
    pub scope: &'a [usize],
    pub decode: bool,
    pub prefill: &'a [usize],
    pub mixed: &'a [usize],
}

/// The steps of `scope` with GPU work: those the idle figures count.
pub(super) fn with_gpu_work(scope: &[usize], accs: &[StepAcc]) -> Vec<usize> {
    scope
        .iter()
        .copied()
        .filter(|&i| accs[i].first_start < accs[i].last_end)
        .collect()
}

pub(super) fn span_ms(s: &Step) -> f64 {
    (s.gpu_end_ns - s.gpu_start_ns) as f64 / NS_PER_MS
}

fn summary(v: &[f64]) -> Option<Summary> {
    (!v.is_empty()).then(|| Summary::of(v))
}

pub(super) fn step_report(steps: &Steps, accs: &[StepAcc], sets: &StepSets) -> StepReport {
    let s = &steps.steps;
    let scope = sets.scope;
    let training = steps.kind == StepKind::TrainingIterations;
    // Idle and busy figures cover decode steps or training iterations, not a lone prefill.
    let timed = sets.decode || training;
    // TPOT: start-to-start periods of consecutive decode steps; the last step has no
    // successor, so n steps give n-1 periods (a single step has no TPOT, only its span).
    // Steps numbered by their markers must also be neighbours in the run: a trace that keeps
    // one decode step in N (the engine's sampled launch timing) has no TPOT period, only spans.
    // Whether step `b` follows step `a` in the run, as far as their markers' numbers say.
    let follows = |a: usize, b: usize| {
        let number = |i: usize| steps.numbers.get(i).copied().unwrap_or(-1);
        let (na, nb) = (number(a), number(b));
        na < 0 || nb < 0 || nb == na + 1
    };
    let mut periods = Vec::new();
    for w in scope.windows(2) {
        if w[1] == w[0] + 1 && follows(w[0], w[1]) {
            periods.push((s[w[1]].gpu_start_ns - s[w[0]].gpu_start_ns) as f64 / NS_PER_MS);
        }
    }
    let spans: Vec<f64> = scope.iter().map(|&i| span_ms(&s[i])).collect();
    let active: Vec<usize> = if timed {
        with_gpu_work(scope, accs)
    } else {
        Vec::new()
    };
    let (mut launch_gap, mut host_gap, mut busy) = (0i64, 0i64, 0i64);
    let mut series = StepSeries {
        tpot_ms: if sets.decode {
            periods.clone()
        } else {
            Vec::new()
        },
        ..StepSeries::default()
    };
    let mut worst: Option<Stall> = None;
    for (n, &i) in active.iter().enumerate() {
        let a = &accs[i];
        let inside = (a.last_end - a.first_start - a.busy_ns).max(0);
        launch_gap += inside;
        series.launch_gap_ms.push(inside as f64 / NS_PER_MS);
        busy += a.busy_ns;
        if a.max_gap > 0
            && worst
                .as_ref()
                .is_none_or(|w| a.max_gap as f64 / NS_PER_MS > w.ms)
        {
            worst = Some(Stall {
                ms: a.max_gap as f64 / NS_PER_MS,
                step: scope.iter().position(|&d| d == i).unwrap_or(0),
                gpu_start_ns: a.max_gap_at,
                between_steps: false,
            });
        }
        // Between steps only where the previous step with work is this one's neighbour in
        // the run (a sampled trace's kept steps have other steps between them).
        if n > 0 && follows(active[n - 1], i) {
            let prev = &accs[active[n - 1]];
            let gap = (a.first_start - prev.last_end).max(0);
            host_gap += gap;
            series.host_gap_ms.push(gap as f64 / NS_PER_MS);
            if worst.as_ref().is_none_or(|w| gap as f64 / NS_PER_MS > w.ms) {
                worst = Some(Stall {
                    ms: gap as f64 / NS_PER_MS,
                    step: scope.iter().position(|&d| d == i).unwrap_or(0),
                    gpu_start_ns: prev.last_end,
                    between_steps: true,
                });
            }
        }
    }
    // The steps' own spans and the idle between neighbours: first to last activity when
    // every step is in the trace; without the left-out steps when only some are.
    let window: i64 = active
        .iter()
        .map(|&i| (accs[i].last_end - accs[i].first_start).max(0))
        .sum::<i64>()
        + host_gap;
    let n = active.len().max(1) as f64;
    let has = !active.is_empty();
    let durations = |idx: &[usize]| -> Vec<f64> { idx.iter().map(|&i| span_ms(&s[i])).collect() };
    StepReport {
        source: steps.source.clone(),
        kind: steps.kind,
        engine: steps.engine.clone(),
        phase_source: steps.phase_source.clone(),
        training: steps.training.clone(),
        device: steps.device,
        decode_steps: if sets.decode { scope.len() } else { 0 },
        prefill_steps: sets.prefill.len(),
        mixed_steps: sets.mixed.len(),
        iterations: if training { scope.len() } else { 0 },
        batch_size: None,
        tpot_ms: if sets.decode { summary(&periods) } else { None },
        decode_span_ms: if sets.decode { summary(&spans) } else { None },
        iteration_ms: if training { summary(&spans) } else { None },
        iteration_period_ms: if training { summary(&periods) } else { None },
        decode_busy_pct: has.then(|| pct(busy as f64, window as f64)),
        launch_gap_ms_per_step: has.then(|| launch_gap as f64 / NS_PER_MS / n),
        host_gap_ms_per_step: has.then(|| host_gap as f64 / NS_PER_MS / n),
        launch_gap_pct: has.then(|| pct(launch_gap as f64, window as f64)),
        host_gap_pct: has.then(|| pct(host_gap as f64, window as f64)),
        worst_stall: worst.filter(|w| w.ms > 0.0),
        prefill_ms: summary(&durations(sets.prefill)),
        mixed_ms: summary(&durations(sets.mixed)),
        series,
    }
}

pub(super) fn bucket_rows(
    accs: &[StepAcc],
    idx: &[usize],
    step_mean_ms: Option<f64>,
    per_step: bool,
    names: &NameTimes,
    trace: &gapscope_traces::Trace,
    settings: &AnalysisSettings,
) -> Vec<BucketRow> {
    let total_all: i64 = idx
        .iter()
        .map(|&i| accs[i].bucket_ns.iter().sum::<i64>())
        .sum();
    let mut rows = Vec::new();
    for b in Bucket::ALL {
        let bi = b.index();
        let total: i64 = idx.iter().map(|&i| accs[i].bucket_ns[bi]).sum();
        let calls: u64 = idx.iter().map(|&i| accs[i].calls[bi] as u64).sum();
        if calls == 0 && b != Bucket::Other {
            continue;
        }
        let per: Vec<f64> = idx
            .iter()
            .map(|&i| accs[i].bucket_ns[bi] as f64 / NS_PER_MS)
            .collect();
        let ms_per_step = (per_step && !per.is_empty()).then(|| Summary::of(&per));
        let mut top: Vec<NameTime> = names
            .iter()
            .filter(|e| e.bucket as usize == bi)
            .map(|e| NameTime {
                name: if e.is_memop {
                    format!("[memop] {}", trace.strings.get(e.name))
                } else {
                    trace.strings.get(e.name).to_owned()
                },
                ms: e.ns as f64 / NS_PER_MS,
                calls: e.calls,
            })
            .collect();
        top.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        top.truncate(settings.top_per_bucket);
        rows.push(BucketRow {
            bucket: b,
            total_ms: total as f64 / NS_PER_MS,
            share_of_step_pct: match (&ms_per_step, step_mean_ms) {
                (Some(s), Some(t)) if t > 0.0 => Some(100.0 * s.mean / t),
                _ => None,
            },
            ms_per_step,
            calls,
            calls_per_step: (per_step && !idx.is_empty()).then(|| calls as f64 / idx.len() as f64),
            share_of_busy_pct: pct(total as f64, total_all as f64),
            top,
            per_step_ms: if per_step { per } else { Vec::new() },
            cost: {
                let costed: i64 = idx.iter().map(|&i| accs[i].cost_of(bi).2).sum();
                (per_step && costed > 0).then(|| {
                    let n = idx.len() as f64;
                    BucketCost {
                        bytes_per_step: idx.iter().map(|&i| accs[i].cost_of(bi).0).sum::<i64>()
                            as f64
                            / n,
                        flops_per_step: idx.iter().map(|&i| accs[i].cost_of(bi).1).sum::<i64>()
                            as f64
                            / n,
                        costed_ms_per_step: costed as f64 / NS_PER_MS / n,
                    }
                })
            },
        });
    }
    rows
}
