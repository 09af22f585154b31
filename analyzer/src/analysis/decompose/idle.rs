//! Why the GPU sat idle in the report's steps: each gap with its host cause into the idle-gap
//! table, the host time charged per step into the step-scope table, and the report's idle
//! attribution summed from them.

use super::AnalysisSettings;
use super::accumulate::StepAcc;
use crate::analysis::host::idle_cause::{Causes, Charge, IdleAttribution};
use crate::analysis::host::{self, HostIndex};
use crate::tables::{
    ActivityKind, ChargeKind, GapKind, IdleGapRow, IdleGapTable, StepScopeRow, StepScopeTable,
};

/// The idle tables of one run.
pub(super) struct Idle {
    pub gaps: IdleGapTable,
    pub scopes: StepScopeTable,
    pub report: Option<host::HostIdleReport>,
}

/// An activity tag (kernel index, or `-(memop index + 1)`) as kind and row.
fn activity(tag: i64) -> (ActivityKind, u32) {
    if tag >= 0 {
        (ActivityKind::Kernel, tag as u32)
    } else {
        (ActivityKind::Memop, (-tag - 1) as u32)
    }
}

/// Attributes the gaps inside the `active` steps and between neighbours among them. The
/// report part is `None` without active steps or without launch records.
pub(super) fn idle(
    trace: &gapscope_traces::Trace,
    hi: &HostIndex,
    accs: &[StepAcc],
    (active, replayed_kernels): (&[usize], usize),
    scope_mean: Option<f64>,
    settings: &AnalysisSettings,
    rank: u32,
) -> Idle {
    let mut out = Idle {
        gaps: IdleGapTable::default(),
        scopes: StepScopeTable::default(),
        report: None,
    };
    let mut inside = Causes::default();
    let mut between = Causes::default();
    let mut att = IdleAttribution::new(trace, &hi.forest, &hi.launch_map);
    let mut between_att = IdleAttribution::new(trace, &hi.forest, &hi.launch_map);
    for (n, &i) in active.iter().enumerate() {
        let mut step = Gaps {
            rank,
            step: i as u32,
            table: &mut out.gaps,
        };
        let mut here = IdleAttribution::new(trace, &hi.forest, &hi.launch_map);
        for &(a, b, tag) in &accs[i].gaps {
            step.gap(&mut here, GapKind::InsideStep, (a, b, tag), &mut inside);
        }
        let mut before = IdleAttribution::new(trace, &hi.forest, &hi.launch_map);
        if n > 0 {
            let (prev, cur) = (&accs[active[n - 1]], &accs[i]);
            let g = (prev.last_end, cur.first_start, cur.first_tag);
            step.gap(&mut before, GapKind::BetweenSteps, g, &mut between);
        }
        for (kind, a) in [
            (GapKind::InsideStep, &here),
            (GapKind::BetweenSteps, &before),
        ] {
            charges(a, kind, rank, i as u32, &mut out.scopes);
        }
        att.absorb(here);
        between_att.absorb(before);
    }
    if active.is_empty() || trace.launches.len == 0 {
        return out;
    }
    out.report = Some(host::report::build(
        host::report::Inputs {
            attribution: &att,
            inside,
            between,
            steps: active.len(),
            gaps: att.gaps + between_att.gaps,
            linked: att.linked + between_att.linked,
            scopes: hi.forest.nodes.len(),
            step_ms: scope_mean,
            top: settings.top_host_scopes,
            replayed_kernels,
        },
        trace,
    ));
    out
}

/// One step's gaps going into the table.
struct Gaps<'a> {
    rank: u32,
    step: u32,
    table: &'a mut IdleGapTable,
}

impl Gaps<'_> {
    /// Attributes gap `(start, end, next activity)` with `att`, adds its causes to `sum`
    /// and records it.
    fn gap(
        &mut self,
        att: &mut IdleAttribution<'_>,
        kind: GapKind,
        (a, b, tag): (i64, i64, i64),
        sum: &mut Causes,
    ) {
        if b <= a {
            return;
        }
        let mut c = Causes::default();
        att.gap(a, b, tag, &mut c);
        *sum += c;
        let (next_kind, next_index) = activity(tag);
        self.table.push(IdleGapRow {
            rank: self.rank,
            step: self.step,
            kind: kind as u8,
            gpu_start_ns: a,
            gpu_end_ns: b,
            next_kind: next_kind as u8,
            next_index,
            launch_ns: c.launch,
            host_compute_ns: c.host_compute,
            sync_ns: c.sync,
            gpu_wait_ns: c.gpu_wait,
            unexplained_ns: c.unexplained,
        });
    }
}

/// The host time one step's attribution charged, one row per scope or call, by name id.
fn charges(a: &IdleAttribution<'_>, kind: GapKind, rank: u32, step: u32, t: &mut StepScopeTable) {
    let mut rows: Vec<(Charge, i64)> = a.charged.iter().map(|(k, c)| (*k, c.ns)).collect();
    rows.sort_unstable();
    for (charge, ns) in rows {
        let (charge, name) = match charge {
            Charge::Scope(n) => (ChargeKind::Scope, n),
            Charge::Api(n) => (ChargeKind::Api, n),
        };
        t.push(StepScopeRow {
            rank,
            step,
            charge: charge as u8,
            name,
            gap_kind: kind as u8,
            host_ns: ns,
        });
    }
}
