//! The typed "why the GPU sat idle" section of a report, and the lever it points at.

use serde::Serialize;

use super::idle_cause::{Causes, Charge, IdleAttribution};
use gapscope_traces::ScopeKind;

/// Idle time by cause, per step.
#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct IdleCauseRow {
    pub idle_ms_per_step: f64,
    /// The host was inside launch calls, or the work was issued and starting (up to the
    /// launch latency allowance).
    pub launch_ms_per_step: f64,
    /// The host was inside an op, module, Python function or non-launching runtime call.
    pub host_compute_ms_per_step: f64,
    /// The host was blocked in a synchronising call.
    pub sync_ms_per_step: f64,
    /// The work was issued in time and waited on the GPU side (another stream, an event).
    pub gpu_wait_ms_per_step: f64,
    /// The host thread was outside every recorded scope, or the work has no launch record.
    pub unexplained_ms_per_step: f64,
}

impl IdleCauseRow {
    pub fn of(c: &Causes, steps: usize) -> Self {
        let n = steps.max(1) as f64;
        let ms = |ns: i64| ns as f64 / 1e6 / n;
        Self {
            idle_ms_per_step: ms(c.total()),
            launch_ms_per_step: ms(c.launch),
            host_compute_ms_per_step: ms(c.host_compute),
            sync_ms_per_step: ms(c.sync),
            gpu_wait_ms_per_step: ms(c.gpu_wait),
            unexplained_ms_per_step: ms(c.unexplained),
        }
    }

    /// The causes with their ms per step, largest first.
    pub fn ranked(&self) -> Vec<(IdleCause, f64)> {
        let mut v = vec![
            (IdleCause::HostCompute, self.host_compute_ms_per_step),
            (IdleCause::Launch, self.launch_ms_per_step),
            (IdleCause::Sync, self.sync_ms_per_step),
            (IdleCause::GpuWait, self.gpu_wait_ms_per_step),
            (IdleCause::Unexplained, self.unexplained_ms_per_step),
        ];
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        v
    }
}

/// One cause of GPU idle time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleCause {
    HostCompute,
    Launch,
    Sync,
    GpuWait,
    Unexplained,
}

impl IdleCause {
    /// The name reports show.
    pub fn label(self) -> &'static str {
        match self {
            Self::HostCompute => "host compute",
            Self::Launch => "launch",
            Self::Sync => "sync",
            Self::GpuWait => "GPU-side wait",
            Self::Unexplained => "unexplained",
        }
    }

    /// The key in JSON ([`Lever::cause`]).
    pub fn key(self) -> &'static str {
        match self {
            Self::HostCompute => "host_compute",
            Self::Launch => "launch",
            Self::Sync => "sync",
            Self::GpuWait => "gpu_wait",
            Self::Unexplained => "unexplained",
        }
    }
}

/// Host compute charged to one scope (or runtime call) during idle gaps inside the steps.
#[derive(Debug, Clone, Serialize)]
pub struct ScopeTime {
    pub name: String,
    /// `op`, `module`, `python`, `annotation`, `other` or `api` (a runtime call).
    pub kind: String,
    pub ms_per_step: f64,
    /// Share of the idle time inside the steps, %.
    pub share_of_idle_pct: f64,
    /// Where the largest stretch of it sat: the scope and the ops and modules around it,
    /// innermost first.
    pub stack: Vec<String>,
}

/// What the idle split points at.
#[derive(Debug, Clone, Serialize)]
pub struct Lever {
    /// `none` (the GPU is busy), `host_compute`, `launch`, `sync`, `gpu_wait` or
    /// `unexplained`.
    pub cause: String,
    pub text: String,
}

/// Why the GPU sat idle in the steps of the report.
#[derive(Debug, Clone, Serialize)]
pub struct HostIdleReport {
    /// Host scopes in the trace (ops, modules, Python functions, annotations, NVTX ranges).
    pub scopes: usize,
    /// Idle gaps attributed, and the share whose ending work had a launch record, %.
    pub gaps: usize,
    pub linked_pct: f64,
    /// Steps the figures are per.
    pub steps: usize,
    /// Idle between the first and last GPU activity of each step (the "launch gaps").
    pub inside_steps: IdleCauseRow,
    /// Idle between consecutive steps (the "host gaps").
    pub between_steps: IdleCauseRow,
    /// The scopes the host was in during the idle inside the steps, most time first.
    pub top_scopes: Vec<ScopeTime>,
    pub lever: Lever,
}

/// Idle under this share of the step is not worth a lever.
const MIN_IDLE_SHARE: f64 = 0.05;

pub struct Inputs<'a, 'b> {
    pub attribution: &'b IdleAttribution<'a>,
    pub inside: Causes,
    pub between: Causes,
    pub steps: usize,
    pub gaps: usize,
    pub linked: usize,
    pub scopes: usize,
    /// Mean step time, ms, for the idle share.
    pub step_ms: Option<f64>,
    pub top: usize,
}

pub fn build(inp: Inputs, trace: &gapscope_traces::Trace) -> HostIdleReport {
    let inside = IdleCauseRow::of(&inp.inside, inp.steps);
    let between = IdleCauseRow::of(&inp.between, inp.steps);
    let idle_ns = inp.inside.total().max(1) as f64;
    let forest_nodes = |node: u32| inp.attribution.stack_names(node, 6);
    let mut charged: Vec<(&Charge, i64, Option<u32>)> = inp
        .attribution
        .charged
        .iter()
        .map(|(c, v)| (c, v.ns, v.example.map(|e| e.0)))
        .collect();
    // Most time first; equal times in name order, so the report is deterministic.
    charged.sort_by_key(|c| (std::cmp::Reverse(c.1), *c.0));
    let n = inp.steps.max(1) as f64;
    let kind_of = |node: Option<u32>| -> String {
        node.and_then(|id| inp.attribution.node_kind(id))
            .map_or("other", ScopeKind::as_str)
            .to_owned()
    };
    let top_scopes: Vec<ScopeTime> = charged
        .iter()
        .take(inp.top)
        .map(|(c, ns, ex)| {
            let (name, kind, stack) = match c {
                Charge::Scope(id) => (
                    trace.strings.get(*id).to_owned(),
                    kind_of(*ex),
                    ex.map(forest_nodes).unwrap_or_default(),
                ),
                Charge::Api(id) => (trace.strings.get(*id).to_owned(), "api".into(), vec![]),
            };
            ScopeTime {
                name,
                kind,
                ms_per_step: *ns as f64 / 1e6 / n,
                share_of_idle_pct: 100.0 * *ns as f64 / idle_ns,
                stack,
            }
        })
        .collect();
    let lever = lever(&inside, inp.step_ms, top_scopes.first(), inp.scopes);
    HostIdleReport {
        scopes: inp.scopes,
        gaps: inp.gaps,
        linked_pct: if inp.gaps > 0 {
            100.0 * inp.linked as f64 / inp.gaps as f64
        } else {
            0.0
        },
        steps: inp.steps,
        inside_steps: inside,
        between_steps: between,
        top_scopes,
        lever,
    }
}

fn lever(
    row: &IdleCauseRow,
    step_ms: Option<f64>,
    top: Option<&ScopeTime>,
    scopes: usize,
) -> Lever {
    let idle = row.idle_ms_per_step;
    if let Some(step) = step_ms
        && step > 0.0
        && idle < MIN_IDLE_SHARE * step
    {
        return Lever {
            cause: "none".into(),
            text: format!(
                "the GPU is idle {:.1}% of each step: idle time is not the lever; look at the buckets",
                100.0 * idle / step
            ),
        };
    }
    let (cause, ms) = row.ranked()[0];
    let share = if idle > 0.0 { 100.0 * ms / idle } else { 0.0 };
    let text = match cause {
        IdleCause::HostCompute => match top {
            // Time inside an annotation (a step range) but in no finer scope: the trace
            // does not say which code it was.
            Some(t) if t.kind == "annotation" => format!(
                "host compute is {share:.0}% of the idle, {:.3} ms/step of it inside `{}` but in no finer recorded scope; record ops, Python functions or NVTX ranges inside it (torch.profiler with_stack, NVTX) to name the code",
                t.ms_per_step, t.name
            ),
            _ => {
                let what = top.map_or_else(
                    || "host code".to_owned(),
                    |t| format!("`{}` ({:.3} ms/step)", t.name, t.ms_per_step),
                );
                format!(
                    "host compute is {share:.0}% of the idle: the host is busy in {what} while the GPU waits; make that work cheaper or take it off the critical path (another backend or implementation, cache its set-up), or capture the step in a CUDA graph"
                )
            }
        },
        IdleCause::Launch => format!(
            "launch overhead is {share:.0}% of the idle: the host spends the gaps issuing work; fewer, fused kernels or a CUDA graph per step"
        ),
        IdleCause::Sync => format!(
            "synchronisation is {share:.0}% of the idle: the host blocks until the GPU drains; remove host syncs from the step (.item(), .cpu(), .tolist(), blocking copies)"
        ),
        IdleCause::GpuWait => format!(
            "{share:.0}% of the idle is work issued in time that waited on the GPU side (another stream or an event): look at cross-stream dependencies, not the host"
        ),
        IdleCause::Unexplained if scopes == 0 => format!(
            "{share:.0}% of the idle is unexplained: the trace has no host scopes; record CPU activity (torch.profiler with CPU events, with_stack or with_modules, or NVTX ranges) to name the cause"
        ),
        IdleCause::Unexplained => format!(
            "{share:.0}% of the idle is unexplained: the launching thread was outside every recorded scope; add NVTX ranges or with_stack to name it"
        ),
    };
    Lever {
        cause: cause.key().into(),
        text,
    }
}
