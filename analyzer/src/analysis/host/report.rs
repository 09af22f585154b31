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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
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

/// What host time is charged to: a scope of some kind, or a runtime call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChargeKind {
    Scope(ScopeKind),
    /// A runtime call (`api`).
    Api,
}

impl ChargeKind {
    /// `op`, `module`, `python`, `annotation`, `other` or `api`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scope(k) => k.as_str(),
            Self::Api => "api",
        }
    }
}

impl std::fmt::Display for ChargeKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ChargeKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Host compute charged to one scope (or runtime call) during idle gaps inside the steps.
#[derive(Debug, Clone, Serialize)]
pub struct ScopeTime {
    pub name: String,
    /// `op`, `module`, `python`, `annotation`, `other` or `api` (a runtime call).
    pub kind: ChargeKind,
    pub ms_per_step: f64,
    /// Share of the idle time inside the steps, %.
    pub share_of_idle_pct: f64,
    /// Where the largest stretch of it sat: the scope and the ops and modules around it,
    /// innermost first.
    pub stack: Vec<String>,
}

/// What the idle split points at; its `Display` is the sentence a report shows. JSON:
/// `cause` (`none` when the GPU is busy, else the [`IdleCause`] key), `text` (the sentence),
/// and the figures below.
#[derive(Debug, Clone, PartialEq)]
pub struct Lever {
    /// The cause the idle points at; `None` when the GPU is idle under 5% of the step, so
    /// idle time is not the lever.
    pub cause: Option<IdleCause>,
    /// The GPU's idle inside the steps as a share of the step, %, when the step time is known.
    pub idle_share_of_step_pct: Option<f64>,
    /// The cause's share of the idle inside the steps, % (0 without a cause).
    pub share_of_idle_pct: f64,
    /// Host compute: the scope (or runtime call) the host spent most of it in.
    pub scope: Option<LeverScope>,
    /// Host scopes in the trace.
    pub scopes: usize,
    /// Launch: the scopes whose launch calls took most of the launch time, most first.
    pub launched_in: Vec<LeverScope>,
    /// The trace replays CUDA graphs: how much of its work, and the eager work around it.
    pub graph: Option<GraphReplay>,
}

/// A trace whose steps replay CUDA graphs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GraphReplay {
    /// Kernels replayed from graphs, % of all kernels.
    pub replayed_kernels_pct: f64,
    /// Kernels launched one by one (outside any graph), per step.
    pub eager_kernels_per_step: f64,
}

/// Replayed kernels above this share make a step "graph-replayed": the launch lever then
/// names the eager launches around the graph instead of proposing a graph.
const GRAPHED_PCT: f64 = 50.0;

/// The scope a host-compute lever names.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeverScope {
    pub name: String,
    pub kind: ChargeKind,
    pub ms_per_step: f64,
}

impl Serialize for Lever {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut m = s.serialize_struct("Lever", 8)?;
        m.serialize_field("cause", self.cause.map_or("none", IdleCause::key))?;
        m.serialize_field("text", &self.to_string())?;
        m.serialize_field("idle_share_of_step_pct", &self.idle_share_of_step_pct)?;
        m.serialize_field("share_of_idle_pct", &self.share_of_idle_pct)?;
        m.serialize_field("scope", &self.scope)?;
        m.serialize_field("scopes", &self.scopes)?;
        m.serialize_field("launched_in", &self.launched_in)?;
        m.serialize_field("graph", &self.graph)?;
        m.end()
    }
}

impl std::fmt::Display for Lever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let share = self.share_of_idle_pct;
        let Some(cause) = self.cause else {
            return write!(
                f,
                "the GPU is idle {:.1}% of each step: idle time is not the lever; look at the buckets",
                self.idle_share_of_step_pct.unwrap_or(0.0)
            );
        };
        match cause {
            IdleCause::HostCompute => match &self.scope {
                // Time inside an annotation (a step range) but in no finer scope: the trace
                // does not say which code it was.
                Some(t) if t.kind == ChargeKind::Scope(ScopeKind::Annotation) => write!(
                    f,
                    "host compute is {share:.0}% of the idle, {:.3} ms/step of it inside `{}` but in no finer recorded scope; record ops, Python functions or NVTX ranges inside it (torch.profiler with_stack, NVTX) to name the code",
                    t.ms_per_step,
                    crate::text::scope_name(&t.name)
                ),
                top => {
                    let what = top.as_ref().map_or_else(
                        || "host code".to_owned(),
                        |t| {
                            format!(
                                "`{}` ({:.3} ms/step)",
                                crate::text::scope_name(&t.name),
                                t.ms_per_step
                            )
                        },
                    );
                    write!(
                        f,
                        "host compute is {share:.0}% of the idle: the host is busy in {what} while the GPU waits; make that work cheaper or take it off the critical path (another backend or implementation, cache its set-up), or capture the step in a CUDA graph"
                    )
                }
            },
            IdleCause::Launch => {
                let names: Vec<String> = self
                    .launched_in
                    .iter()
                    .map(|s| format!("`{}`", crate::text::scope_name(&s.name)))
                    .collect();
                match self.graph {
                    Some(g) if g.replayed_kernels_pct >= GRAPHED_PCT => write!(
                        f,
                        "launch overhead is {share:.0}% of the idle, but the steps already replay a CUDA graph ({:.0}% of the kernels): the idle is in the eager launches around it (about {:.0} kernels per step){}; move that work (input preparation, sampling) into the graph or overlap it with the replay",
                        g.replayed_kernels_pct,
                        g.eager_kernels_per_step,
                        if names.is_empty() {
                            String::new()
                        } else {
                            format!(", launched in {}", names.join(", "))
                        }
                    ),
                    _ => write!(
                        f,
                        "launch overhead is {share:.0}% of the idle: the host spends the gaps issuing work{}; fewer, fused kernels or a CUDA graph per step",
                        if names.is_empty() {
                            String::new()
                        } else {
                            format!(", most of it in {}", names.join(", "))
                        }
                    ),
                }
            }
            IdleCause::Sync => write!(
                f,
                "synchronisation is {share:.0}% of the idle: the host blocks until the GPU drains; remove host syncs from the step (.item(), .cpu(), .tolist(), blocking copies)"
            ),
            IdleCause::GpuWait => write!(
                f,
                "{share:.0}% of the idle is work issued in time that waited on the GPU side (another stream or an event): look at cross-stream dependencies, not the host"
            ),
            IdleCause::Unexplained if self.scopes == 0 => write!(
                f,
                "{share:.0}% of the idle is unexplained: the trace has no host scopes; record CPU activity (torch.profiler with CPU events, with_stack or with_modules, or NVTX ranges) to name the cause"
            ),
            IdleCause::Unexplained => write!(
                f,
                "{share:.0}% of the idle is unexplained: the launching thread was outside every recorded scope; add NVTX ranges or with_stack to name it"
            ),
        }
    }
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
    /// Kernels of the trace replayed from CUDA graphs.
    pub replayed_kernels: usize,
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
    let kind_of = |node: Option<u32>| -> ChargeKind {
        ChargeKind::Scope(
            node.and_then(|id| inp.attribution.node_kind(id))
                .unwrap_or(ScopeKind::Other),
        )
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
                Charge::Api(id) => (trace.strings.get(*id).to_owned(), ChargeKind::Api, vec![]),
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
    let mut lever = lever(&inside, inp.step_ms, top_scopes.first(), inp.scopes);
    if lever.cause == Some(IdleCause::Launch) {
        let mut launched: Vec<(&gapscope_traces::StrId, &i64)> =
            inp.attribution.launched.iter().collect();
        launched.sort_by_key(|(id, ns)| (std::cmp::Reverse(**ns), **id));
        lever.launched_in = launched
            .into_iter()
            .take(3)
            .map(|(id, ns)| LeverScope {
                name: trace.strings.get(*id).to_owned(),
                kind: ChargeKind::Scope(ScopeKind::Other),
                ms_per_step: *ns as f64 / 1e6 / n,
            })
            .collect();
    }
    lever.graph = graph_replay(trace.kernels.len, inp.replayed_kernels, inp.steps);
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

/// How much of the trace's work is replayed from CUDA graphs; `None` without graphs.
fn graph_replay(kernels: usize, replayed: usize, steps: usize) -> Option<GraphReplay> {
    (replayed > 0 && kernels > 0).then(|| GraphReplay {
        replayed_kernels_pct: 100.0 * replayed as f64 / kernels as f64,
        eager_kernels_per_step: (kernels - replayed) as f64 / steps.max(1) as f64,
    })
}

fn lever(
    row: &IdleCauseRow,
    step_ms: Option<f64>,
    top: Option<&ScopeTime>,
    scopes: usize,
) -> Lever {
    let idle = row.idle_ms_per_step;
    let step = step_ms.filter(|&s| s > 0.0);
    let idle_share_of_step_pct = step.map(|s| 100.0 * idle / s);
    if step.is_some_and(|s| idle < MIN_IDLE_SHARE * s) {
        return Lever {
            cause: None,
            idle_share_of_step_pct,
            share_of_idle_pct: 0.0,
            scope: None,
            scopes,
            launched_in: Vec::new(),
            graph: None,
        };
    }
    let (cause, ms) = row.ranked()[0];
    Lever {
        cause: Some(cause),
        idle_share_of_step_pct,
        share_of_idle_pct: if idle > 0.0 { 100.0 * ms / idle } else { 0.0 },
        scope: top
            .filter(|_| cause == IdleCause::HostCompute)
            .map(|t| LeverScope {
                name: t.name.clone(),
                kind: t.kind,
                ms_per_step: t.ms_per_step,
            }),
        scopes,
        launched_in: Vec::new(),
        graph: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lever_sentence_comes_from_its_cause_and_figures() {
        let busy = Lever {
            cause: None,
            idle_share_of_step_pct: Some(3.25),
            share_of_idle_pct: 0.0,
            scope: None,
            scopes: 0,
            launched_in: Vec::new(),
            graph: None,
        };
        assert_eq!(
            busy.to_string(),
            "the GPU is idle 3.2% of each step: idle time is not the lever; look at the buckets"
        );
        let annotation = Lever {
            cause: Some(IdleCause::HostCompute),
            idle_share_of_step_pct: Some(40.0),
            share_of_idle_pct: 90.0,
            scope: Some(LeverScope {
                name: "decode_step".into(),
                kind: ChargeKind::Scope(ScopeKind::Annotation),
                ms_per_step: 0.25,
            }),
            scopes: 2,
            launched_in: Vec::new(),
            graph: None,
        };
        assert!(
            annotation.to_string().starts_with(
                "host compute is 90% of the idle, 0.250 ms/step of it inside `decode_step` but in no finer recorded scope;"
            ),
            "{annotation}"
        );
        let json = serde_json::to_value(&annotation).unwrap();
        assert_eq!(json["cause"], "host_compute");
        assert_eq!(json["text"], annotation.to_string());
        assert_eq!(json["scope"]["kind"], "annotation");
        let unexplained = Lever {
            cause: Some(IdleCause::Unexplained),
            scope: None,
            scopes: 0,
            ..annotation
        };
        assert!(
            unexplained
                .to_string()
                .starts_with("90% of the idle is unexplained: the trace has no host scopes;"),
            "{unexplained}"
        );
    }
}
