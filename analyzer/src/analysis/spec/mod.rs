//! Speculative decoding: which forwards are drafts and which verify, the speculative steps
//! (a draft's forwards belong to the step they propose for), the tokens each step produced
//! and the acceptance per draft position.
//!
//! Evidence, in order: two model instances whose forwards interleave (the one with more
//! kernels per forward is the target, as in HF `generate(assistant_model=…)`); or one
//! model whose forwards after the prefill feed more than one token per sequence (n-gram
//! prompt lookup, or a self-speculative draft that shares the model). Tokens produced come
//! from the attention op's shapes (`record_shapes`): the KV length each target forward
//! sees grows by the tokens the previous step produced. Without shapes acceptance is
//! unknown, and the report says so. Traces that name nothing (llama.cpp recorded with CUPTI)
//! are cut into forwards at the engine's device-to-host reads (`host_reads`): two depths of
//! forward that alternate are a draft and its target.

pub mod by_bucket;
pub mod forwards;
pub mod host_reads;
pub mod markers;
pub mod metrics;
mod report;
pub mod whatif;

use gapscope_traces::{Phase, Trace};
use serde::Serialize;

pub use self::by_bucket::SpecBucket;
pub use self::forwards::{AttentionShape, Forward, ModelKey};
pub use self::metrics::{MetricsFormat, SpecMetrics};
pub use self::report::{PositionAcceptance, SpecReport};
pub use self::whatif::{SpecCosts, SpecPrediction, SpecSetting, SpecWhatIf};

/// What decided that a run decodes speculatively.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecEvidence {
    /// Two model instances whose forwards interleave: the smaller proposes, the larger
    /// verifies.
    ModelInstances,
    /// One model whose forwards after the first feed several tokens per sequence into a
    /// filled cache (prompt lookup, n-gram or self-speculative drafts).
    VerifyRows,
    /// gapscope-engine's markers name each forward (`spec_draft`, `spec_verify`) and the
    /// tokens each verify produced.
    EngineMarkers,
    /// An engine's step markers schedule more tokens than requests (vLLM V1's
    /// `generation_M(K)` with K > M): the extra tokens are drafts.
    MarkerTokens,
    /// No names at all (llama.cpp under CUPTI): the kernel sequence cut at the engine's
    /// device-to-host reads falls into forwards of two depths that alternate; the shallower
    /// drafts.
    ForwardDepths,
}

impl SpecEvidence {
    pub fn describe(self) -> &'static str {
        match self {
            Self::ModelInstances => {
                "two model instances interleave (module scopes): the one with fewer kernels per forward drafts"
            }
            Self::EngineMarkers => {
                "the engine's markers name each draft and verify forward and the tokens each step produced"
            }
            Self::MarkerTokens => {
                "the step markers schedule more tokens than requests (the drafts); the work between one step's marker and the next is the proposer's"
            }
            Self::ForwardDepths => {
                "forwards of two depths alternate between the engine's device-to-host reads (kernel counts; no markers or module scopes): the shallower drafts"
            }
            Self::VerifyRows => {
                "one model feeds several tokens per sequence after its prefill (attention shapes): drafts without a draft model (n-gram or prompt lookup)"
            }
        }
    }
}

/// Where each step's tokens come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokensSource {
    /// The growth of the KV length the target's attention sees, from one forward to the next.
    AttentionShapes,
    /// The trace has no input shapes (`record_shapes` was off): acceptance is unknown.
    Unknown,
    /// The engine's verify markers carry the tokens each step produced.
    EngineMarkers,
    /// The engine's acceptance counters (`--spec-metrics`): tokens per step on average, not
    /// step by step.
    Metrics,
    /// The engine's per-step acceptance log (`--spec-metrics`, llama.cpp's verbose lines),
    /// one line per decode step, matched to the steps in order.
    MetricsPerStep,
    /// The engine's markers give the tokens each step scheduled, not those it accepted:
    /// acceptance is unknown.
    NotInMarkers,
}

/// One speculative step: the target forward that verifies, and the draft forwards since the
/// previous one.
#[derive(Debug, Clone, Serialize)]
pub struct Cycle {
    pub phase: Phase,
    /// The step's window: from its first forward's first kernel to the next step's start
    /// (the last: its last kernel's end).
    pub gpu_start_ns: i64,
    pub gpu_end_ns: i64,
    /// Where the verify forward's first kernel starts (the draft window ends).
    pub verify_start_ns: i64,
    pub draft_forwards: u32,
    /// Kernel time of the draft forwards and of the target forward.
    pub draft_ns: i64,
    pub verify_ns: i64,
    /// Sequences in the verify forward (0: unknown).
    pub batch: u32,
    /// Tokens the verify forward fed per sequence: the pending token and the candidates.
    pub rows: Option<i64>,
    /// Tokens produced per sequence (accepted candidates + 1); `None` when unknown (no
    /// shapes, or the last step, whose successor is not in the trace).
    pub tokens: Option<i64>,
}

impl Cycle {
    /// Candidates verified per sequence.
    pub fn candidates(&self) -> Option<i64> {
        self.rows.map(|r| (r - 1).max(0))
    }

    /// Candidates accepted per sequence.
    pub fn accepted(&self) -> Option<i64> {
        self.tokens.map(|t| t - 1)
    }
}

/// A run's steps from its model forwards: speculative (a verify forward with its drafts
/// per step) or plain (one forward of a whole language model per step).
#[derive(Debug, Clone, Serialize)]
pub struct SpecDecode {
    /// What shows speculative decoding; `None` for a plain run.
    pub evidence: Option<SpecEvidence>,
    pub tokens_source: TokensSource,
    #[serde(skip)]
    pub target: ModelKey,
    #[serde(skip)]
    pub draft: Option<ModelKey>,
    pub target_forwards: usize,
    pub draft_forwards: usize,
    pub cycles: Vec<Cycle>,
    /// Each forward's kernels with their step and role, where the forwards overlap in time
    /// (models on streams of their own) and a step's window cannot tell the roles apart.
    #[serde(skip)]
    pub kernel_roles: Option<Vec<KernelRole>>,
}

/// The steps of a trace from its model forwards: when they show speculative decoding, or
/// when one whole language model (`…ForCausalLM`) runs one forward per step. `None` without
/// module scopes or with other top-level modules; the steps are then found as before.
pub fn detect(trace: &Trace, device: u32) -> Option<SpecDecode> {
    let mut forwards: Vec<Forward> = forwards::find(trace, device)
        .into_iter()
        .filter(Forward::has_kernels)
        .collect();
    if forwards.is_empty() {
        // No module scopes: forwards cut at the engine's host reads, kept only when two
        // depths alternate (`roles` below); a plain run keeps the steps found as before.
        forwards = host_reads::find(trace, device);
    }
    if forwards.len() < 3 {
        return None;
    }
    let (target, draft, evidence) = match roles(&forwards) {
        Some((t, d, e)) => (t, d, Some(e)),
        None => (plain_model(trace, &forwards)?, None, None),
    };
    let is_target: Vec<bool> = forwards.iter().map(|f| f.instance == target).collect();
    let targets: Vec<usize> = (0..forwards.len()).filter(|&i| is_target[i]).collect();
    let shapes = targets.iter().all(|&i| forwards[i].shape.is_some());
    let mut cycles = Vec::with_capacity(targets.len());
    // Forwards found by depth run each model on its own stream: a draft forward launched
    // while the verify runs (llama.cpp's draft catching up on the verified batch) works beside
    // it and joins its step.
    let by_depth = evidence == Some(SpecEvidence::ForwardDepths);
    let mut kernel_roles = by_depth.then(Vec::new);
    let mut first = 0;
    for (n, &t) in targets.iter().enumerate() {
        let mut last = t;
        if by_depth {
            let next = targets.get(n + 1).copied().unwrap_or(forwards.len());
            while last + 1 < next && forwards[last + 1].gpu_start_ns < forwards[t].gpu_end_ns {
                last += 1;
            }
        }
        let group = &forwards[first..=last];
        first = last + 1;
        let fw = &forwards[t];
        if let Some(roles) = kernel_roles.as_mut() {
            for f in group {
                let draft = f.instance != target;
                roles.extend(f.kernel_ids.iter().map(|&kernel| KernelRole {
                    kernel,
                    cycle: n as u32,
                    draft,
                }));
            }
        }
        let drafts = group.iter().filter(|f| f.instance != target);
        let gpu_start_ns = group
            .iter()
            .map(|f| f.gpu_start_ns)
            .min()
            .unwrap_or(fw.gpu_start_ns);
        let next = targets.get(n + 1).and_then(|&u| forwards[u].shape);
        let tokens = match (fw.shape, next) {
            (Some(a), Some(b)) if n > 0 || a.past() > 0 => Some(b.past() - a.past()),
            _ => None,
        };
        cycles.push(Cycle {
            phase: Phase::Decode,
            gpu_start_ns,
            gpu_end_ns: fw.gpu_end_ns,
            verify_start_ns: fw.gpu_start_ns,
            draft_forwards: drafts.clone().count() as u32,
            draft_ns: drafts.map(|f| f.busy_ns).sum(),
            verify_ns: fw.busy_ns,
            batch: fw.shape.map_or(0, |s| u32::try_from(s.batch).unwrap_or(0)),
            rows: fw.shape.map(|s| s.rows).or(fw.rows),
            tokens: tokens.filter(|&t| t >= 1),
        });
    }
    // Steps tile the timeline: each runs to the next one's start (sampling and the
    // bookkeeping between forwards belong to the step they follow).
    for i in 1..cycles.len() {
        let next = cycles[i].gpu_start_ns;
        cycles[i - 1].gpu_end_ns = next;
    }
    mark_prefill(&forwards, &targets, &mut cycles, evidence);
    Some(SpecDecode {
        evidence,
        tokens_source: if shapes {
            TokensSource::AttentionShapes
        } else {
            TokensSource::Unknown
        },
        target,
        draft,
        target_forwards: targets.len(),
        draft_forwards: forwards.len() - targets.len(),
        cycles,
        kernel_roles,
    })
}

/// A kernel of a speculative step's forward: its step, and whether a draft forward ran it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelRole {
    pub kernel: u32,
    pub cycle: u32,
    pub draft: bool,
}

/// The one model of a plain run whose every top-level forward is a whole language model's.
fn plain_model(trace: &Trace, forwards: &[Forward]) -> Option<ModelKey> {
    let first = forwards[0].instance;
    let lm = |key| {
        let ModelKey::Named(id) = key else {
            return false;
        };
        let name = trace.strings.get(id);
        let class = name.rsplit_once('_').map_or(name, |(c, _)| c);
        class.ends_with("ForCausalLM") || class.ends_with("ForConditionalGeneration")
    };
    (lm(first) && forwards.iter().all(|f| f.instance == first)).then_some(first)
}

/// The target instance, the draft instance if any, and the evidence; `None` for a plain run.
fn roles(forwards: &[Forward]) -> Option<(ModelKey, Option<ModelKey>, SpecEvidence)> {
    let mut instances: Vec<(ModelKey, Vec<u32>)> = Vec::new();
    for f in forwards {
        match instances.iter_mut().find(|(id, _)| *id == f.instance) {
            Some((_, k)) => k.push(f.kernels),
            None => instances.push((f.instance, vec![f.kernels])),
        }
    }
    let median = |k: &[u32]| {
        let mut k = k.to_vec();
        k.sort_unstable();
        k[k.len() / 2]
    };
    if instances.len() >= 2 {
        instances.sort_by_key(|(_, k)| (std::cmp::Reverse(median(k)), k.len()));
        let target = instances[0].0;
        let draft = instances[1].0;
        let n_target = instances[0].1.len();
        // A draft proposes between the target's forwards: it runs about as often, and some
        // of its forwards sit between two of the target's.
        let first_t = forwards.iter().position(|f| f.instance == target)?;
        let last_t = forwards.iter().rposition(|f| f.instance == target)?;
        let between = forwards[first_t..last_t]
            .iter()
            .any(|f| f.instance == draft);
        if instances[1].1.len() + 1 >= n_target && n_target >= 2 && between {
            let evidence = match target {
                ModelKey::Named(_) => SpecEvidence::ModelInstances,
                ModelKey::Depth(_) => SpecEvidence::ForwardDepths,
            };
            return Some((target, Some(draft), evidence));
        }
        return None;
    }
    let target = instances[0].0;
    let verify = forwards
        .iter()
        .skip(1)
        .filter_map(|f| f.shape)
        .any(|s| s.rows > 1 && s.past() > 0);
    verify.then_some((target, None, SpecEvidence::VerifyRows))
}

/// The first step is a prefill when its target forward starts from an empty cache (with
/// shapes), or, without shapes, when its verify forward does at least twice the median
/// kernel time of the others. Forwards found by depth (`host_reads`) may start with warm-up
/// forwards of the engine: there the prefill is the first of the first four target forwards
/// that does twice the median, and the steps before it are prefill steps too.
fn mark_prefill(
    forwards: &[Forward],
    targets: &[usize],
    cycles: &mut [Cycle],
    evidence: Option<SpecEvidence>,
) {
    let Some(&t0) = targets.first() else {
        return;
    };
    let heavy = |t: usize| {
        let mut busy: Vec<i64> = targets
            .iter()
            .filter(|&&u| u != t)
            .map(|&u| forwards[u].busy_ns)
            .collect();
        busy.sort_unstable();
        busy.get(busy.len() / 2)
            .is_some_and(|&m| forwards[t].busy_ns >= 2 * m.max(1))
    };
    let last = match forwards[t0].shape {
        Some(s) => (s.past() == 0).then_some(0),
        None if evidence == Some(SpecEvidence::ForwardDepths) => {
            targets.iter().take(4).position(|&t| heavy(t))
        }
        None => heavy(t0).then_some(0),
    };
    if let Some(last) = last {
        for c in &mut cycles[..=last] {
            c.phase = Phase::Prefill;
            c.tokens = None;
        }
    }
}
