//! The report's rows from the accumulated steps: the step-time report and the bucket rows.

use super::{AnalysisSettings, NS_PER_MS, pct};
use crate::analysis::report::*;
use crate::analysis::stats::Summary;
use crate::analysis::steps::{Step, StepKind, Steps};
use crate::bucket::Bucket;
use crate::tables::{ActivityKind, NameScope, NameTimeTable, StepBuckets, StepTable};

/// Which steps a report covers: `scope` are the decode steps (`decode`), else the
/// iterations of a training trace or all steps.
pub(super) struct StepSets<'a> {
    pub scope: &'a [usize],
    pub decode: bool,
    pub prefill: &'a [usize],
    pub mixed: &'a [usize],
}

/// The steps of `scope` with GPU work: those the idle figures count.
pub(super) fn with_gpu_work(scope: &[usize], t: &StepTable) -> Vec<usize> {
    scope.iter().copied().filter(|&i| t.has_work(i)).collect()
}

pub(super) fn span_ms(s: &Step) -> f64 {
    (s.gpu_end_ns - s.gpu_start_ns) as f64 / NS_PER_MS
}

fn summary(v: &[f64]) -> Option<Summary> {
    (!v.is_empty()).then(|| Summary::of(v))
}

pub(super) fn step_report(steps: &Steps, t: &StepTable, sets: &StepSets) -> StepReport {
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
        with_gpu_work(scope, t)
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
        let inside = (t.gpu_last_ns[i] - t.gpu_first_ns[i] - t.busy_ns[i]).max(0);
        launch_gap += inside;
        series.launch_gap_ms.push(inside as f64 / NS_PER_MS);
        busy += t.busy_ns[i];
        let max_gap = t.max_gap_ns[i];
        if max_gap > 0
            && worst
                .as_ref()
                .is_none_or(|w| max_gap as f64 / NS_PER_MS > w.ms)
        {
            worst = Some(Stall {
                ms: max_gap as f64 / NS_PER_MS,
                step: scope.iter().position(|&d| d == i).unwrap_or(0),
                gpu_start_ns: t.gpu_max_gap_at_ns[i],
                between_steps: false,
            });
        }
        // Between steps only where the previous step with work is this one's neighbour in
        // the run (a sampled trace's kept steps have other steps between them).
        if n > 0 && follows(active[n - 1], i) {
            let prev_last = t.gpu_last_ns[active[n - 1]];
            let gap = (t.gpu_first_ns[i] - prev_last).max(0);
            host_gap += gap;
            series.host_gap_ms.push(gap as f64 / NS_PER_MS);
            if worst.as_ref().is_none_or(|w| gap as f64 / NS_PER_MS > w.ms) {
                worst = Some(Stall {
                    ms: gap as f64 / NS_PER_MS,
                    step: scope.iter().position(|&d| d == i).unwrap_or(0),
                    gpu_start_ns: prev_last,
                    between_steps: true,
                });
            }
        }
    }
    // The steps' own spans and the idle between neighbours: first to last activity when
    // every step is in the trace; without the left-out steps when only some are.
    let window: i64 = active.iter().map(|&i| t.active_ns(i)).sum::<i64>() + host_gap;
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
        context_tokens: None,
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

/// The bucket rows of steps `idx` of `cells` (per-step figures when `per_step`), with the
/// names of `scope` as each bucket's top list.
pub(super) struct BucketInputs<'a> {
    pub cells: &'a StepBuckets,
    pub idx: &'a [usize],
    pub step_mean_ms: Option<f64>,
    pub per_step: bool,
    pub names: &'a NameTimeTable,
    pub scope: NameScope,
}

pub(super) fn bucket_rows(
    inp: &BucketInputs,
    trace: &gapscope_traces::Trace,
    settings: &AnalysisSettings,
) -> Vec<BucketRow> {
    let BucketInputs {
        cells,
        idx,
        step_mean_ms,
        per_step,
        names,
        scope,
    } = *inp;
    let total_all: i64 = idx
        .iter()
        .map(|&i| cells.ns_of_step(i).iter().sum::<i64>())
        .sum();
    let mut rows = Vec::new();
    for b in Bucket::ALL {
        let bi = b.index();
        let cell: Vec<_> = idx.iter().map(|&i| cells.get(i, b)).collect();
        let total: i64 = cell.iter().map(|c| c.ns).sum();
        let calls: u64 = cell.iter().map(|c| c.calls as u64).sum();
        if calls == 0 && b != Bucket::Other {
            continue;
        }
        let per: Vec<f64> = cell.iter().map(|c| c.ns as f64 / NS_PER_MS).collect();
        let ms_per_step = (per_step && !per.is_empty()).then(|| Summary::of(&per));
        let mut top: Vec<NameTime> = names
            .of_scope(scope)
            .filter(|e| e.bucket as usize == bi)
            .map(|e| NameTime {
                name: if ActivityKind::from_code(e.kind) == ActivityKind::Memop {
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
                let costed: i64 = cell.iter().map(|c| c.costed_ns).sum();
                (per_step && costed > 0).then(|| {
                    let n = idx.len() as f64;
                    BucketCost {
                        bytes_per_step: cell.iter().map(|c| c.bytes).sum::<i64>() as f64 / n,
                        flops_per_step: cell.iter().map(|c| c.flops).sum::<i64>() as f64 / n,
                        costed_ms_per_step: costed as f64 / NS_PER_MS / n,
                    }
                })
            },
        });
    }
    rows
}
