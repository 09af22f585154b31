//! The per-step accumulators as the step and step × bucket tables.

use gapscope_traces::Phase;

use super::NB;
use super::accumulate::StepAcc;
use crate::analysis::steps::Steps;
use crate::tables::steps::Cell;
use crate::tables::{Role, StepBuckets, StepRow, StepTable};

/// A step's role from its phase (speculative decoding fills `draft` from its markers).
fn role(phase: Phase) -> Role {
    match phase {
        Phase::Prefill => Role::Prefill,
        Phase::Sample => Role::Sample,
        _ => Role::Target,
    }
}

/// Tokens a step produced: a speculative step's known tokens (per sequence, times its
/// sequences), 0 when unknown; otherwise one per sequence of a decode step.
fn tokens(steps: &Steps, i: usize, phase: Phase, batch: u32) -> u32 {
    match &steps.spec {
        Some(spec) => spec.cycles.get(i).and_then(|c| c.tokens).map_or(0, |t| {
            u32::try_from(t).unwrap_or(0).saturating_mul(batch.max(1))
        }),
        None if phase == Phase::Decode => batch,
        None => 0,
    }
}

/// One accumulator's figures per bucket.
pub(super) fn cells(a: &StepAcc) -> [Cell; NB] {
    std::array::from_fn(|b| {
        let (bytes, flops, costed_ns) = a.cost_of(b);
        Cell {
            ns: a.bucket_ns[b],
            calls: a.calls[b],
            bytes,
            flops,
            costed_ns,
        }
    })
}

/// The step table and the step × bucket table; `in_report[i]` says whether the report's
/// figures cover step `i`.
pub(super) fn step_tables(
    steps: &Steps,
    accs: &[StepAcc],
    in_report: &[bool],
    rank: u32,
) -> (StepTable, StepBuckets) {
    let mut table = StepTable::default();
    table.reserve(accs.len());
    let mut buckets = StepBuckets::with_steps(accs.len());
    let mut report_steps = 0i64;
    for (i, (s, a)) in steps.steps.iter().zip(accs).enumerate() {
        let batch = steps.batch.get(i).copied().unwrap_or(0);
        let cycle = steps.spec.as_ref().and_then(|sp| sp.cycles.get(i));
        let covered = in_report.get(i).copied().unwrap_or(false);
        table.push(StepRow {
            rank,
            step: i as u32,
            number: steps.numbers.get(i).copied().unwrap_or(-1),
            phase: s.phase as u8,
            role: role(s.phase) as u8,
            in_report: u8::from(covered),
            report_step: if covered {
                report_steps += 1;
                report_steps - 1
            } else {
                -1
            },
            batch,
            tokens: tokens(steps, i, s.phase, batch),
            gpu_start_ns: s.gpu_start_ns,
            gpu_end_ns: s.gpu_end_ns,
            draft_forwards: cycle.map_or(0, |c| c.draft_forwards),
            verify_start_ns: cycle.map_or(s.gpu_start_ns, |c| c.verify_start_ns),
            gpu_first_ns: a.first_start,
            gpu_last_ns: a.last_end,
            busy_ns: a.busy_ns,
            max_gap_ns: a.max_gap,
            gpu_max_gap_at_ns: a.max_gap_at,
        });
        buckets.push_step(rank, i as u32, &cells(a));
    }
    (table, buckets)
}
