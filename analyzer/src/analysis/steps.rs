//! Step detection. Markers first, tried in the tiers of the marker-kind table
//! (`engine_markers`): engine step markers (vLLM, SGLang, TensorRT-LLM, gapscope-engine),
//! bare engine markers (vLLM V0), annotations that name a phase (`decode_step`),
//! `ProfilerStep#N`, other step-like ranges; the periodic kernel sequence (`auto_steps`) only
//! when no marker delimits steps. A user's `--step-regex` replaces the tiers. Each step then
//! gets its phase from its marker's metadata, else from kernel evidence (`phase_evidence`);
//! training traces get iterations instead of decode steps. Steps the periodic detector found
//! are checked for being layers (`layer_check`).

use std::collections::HashMap;
use std::sync::LazyLock;

use gapscope_traces::{MarkerSource, Phase};
use regex::Regex;
use serde::Serialize;

use super::prepared::Prepared;
#[cfg(test)]
use crate::bucket::Bucket;
pub(crate) use crate::text::short;

mod auto_steps;
pub mod engine_markers;
mod layer_check;
#[cfg(test)]
mod marker_tests;
mod phase_evidence;
mod source;
use auto_steps::auto_detect;
use engine_markers::{KINDS, Meta, Role, Tier};
pub use phase_evidence::Evidence;
pub use source::{EvidenceCount, MarkerRanges, PhaseSource, Projection, StepSource};

/// The generic step-name pattern: the last marker tier of automatic detection, and the
/// value of `--step-regex` that means "automatic" (any other pattern replaces the tiers).
pub const DEFAULT_STEP_REGEX: &str = r"(?i)decode|prefill|step|forward|generate";

/// On training traces the generic tier skips the names of an iteration's parts.
static TRAINING_PART: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)forward|backward|optim|zero_grad|loss").expect("constant regex")
});

/// How steps are found.
#[derive(Debug, Clone)]
pub struct StepSettings {
    /// Marker names that delimit steps. [`DEFAULT_STEP_REGEX`] means automatic detection
    /// (engine markers first); any other pattern is the user's override and wins.
    pub regex: Regex,
    /// Ignore markers and detect steps from the kernel sequence.
    pub ignore_markers: bool,
}

impl Default for StepSettings {
    fn default() -> Self {
        Self {
            regex: Regex::new(DEFAULT_STEP_REGEX).expect("constant regex"),
            ignore_markers: false,
        }
    }
}

impl StepSettings {
    /// The user's pattern, when it is not the default.
    pub fn user_regex(&self) -> Option<&Regex> {
        (self.regex.as_str() != DEFAULT_STEP_REGEX).then_some(&self.regex)
    }
}

/// What the steps of a trace are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// Inference engine steps: prefill, decode or mixed.
    InferenceSteps,
    /// Training iterations (`ProfilerStep#N`, or the periodic sequence of a training run).
    TrainingIterations,
}

/// One step's window on the GPU timeline of the primary device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Step {
    pub phase: Phase,
    pub gpu_start_ns: i64,
    pub gpu_end_ns: i64,
}

impl Step {
    /// Whether the step counts as decode work: marked decode, or of unknown phase (a
    /// matching marker name that says neither prefill nor decode).
    pub fn is_decode(&self) -> bool {
        self.phase == Phase::Decode || self.phase == Phase::Unknown
    }
}

/// Detected steps and how they were found.
#[derive(Debug, Clone, Serialize)]
pub struct Steps {
    pub steps: Vec<Step>,
    /// Requests (sequences) in each step when its marker says, else 0; same order as `steps`.
    pub batch: Vec<u32>,
    /// The step's own number when its marker carries one (gapscope-engine markers), else -1;
    /// same order as `steps` (empty: none known). A trace that keeps only some steps (the
    /// engine's sampled launch timing) has gaps in these numbers, and steps that are not
    /// neighbours in the run give no TPOT period.
    pub numbers: Vec<i64>,
    /// How the steps were found; its `Display` is the line a report shows, e.g. `markers:
    /// gpu_user_annotation "decode_step"`.
    pub source: StepSource,
    pub device: Option<u32>,
    /// True when windows tile the timeline (auto detection): a step runs to the next start.
    pub contiguous: bool,
    pub kind: StepKind,
    /// Engine or framework whose markers delimit the steps (`vLLM V1`, `SGLang`, ...).
    pub engine: Option<String>,
    /// How the steps' phases were found.
    pub phase_source: PhaseSource,
    /// Why the trace counts as training, when it does.
    pub training: Option<String>,
    /// Reasons to doubt that the steps are steps (layers of one step taken for steps); the
    /// plausibility check reports them.
    pub doubts: Vec<String>,
    /// Speculative decoding's forwards and tokens, one cycle per step, when the steps are
    /// its verify forwards.
    #[serde(skip)]
    pub spec: Option<crate::analysis::spec::SpecDecode>,
    /// Median KV-cache length of a decode request over the decode steps, tokens, when the
    /// step markers say (vLLM's detailed annotations).
    pub context_tokens: Option<u64>,
}

/// Finds the steps of a prepared trace.
pub fn detect(p: &Prepared, settings: &StepSettings) -> Steps {
    let _span = tracing::debug_span!("steps").entered();
    let device = p.primary_device();
    let training = phase_evidence::training(p, device);
    let rows = classify_rows(p);
    let mut found = None;
    if !settings.ignore_markers {
        found = match settings.user_regex() {
            Some(re) => from_markers(p, device, &rows, |i| {
                re.is_match(p.trace.strings.get(p.trace.markers.name[i]))
            }),
            None => {
                let tiers: &[Tier] = if training.is_some() {
                    &Tier::TRAINING
                } else {
                    &Tier::INFERENCE
                };
                let part = |i: usize| {
                    training.is_some()
                        && TRAINING_PART.is_match(p.trace.strings.get(p.trace.markers.name[i]))
                };
                // Loose name patterns only apply to ranges someone put there to mark work
                // (annotations, NVTX, engine markers), not to other recorded scopes.
                let annotation = |i: usize| {
                    matches!(
                        MarkerSource::from_code(p.trace.markers.source[i]),
                        MarkerSource::Engine
                            | MarkerSource::Nvtx
                            | MarkerSource::KinetoGpuAnnotation
                            | MarkerSource::KinetoUserAnnotation
                    )
                };
                tiers.iter().find_map(|&tier| {
                    from_markers(p, device, &rows, |i| {
                        rows[i].is_some_and(|(k, _)| {
                            let k = &KINDS[k as usize];
                            k.tier == tier && k.role != Role::Exclude
                        }) && !(tier == Tier::Generic && part(i))
                            && (tier < Tier::PhaseName
                                || tier == Tier::ProfilerStep
                                || annotation(i))
                    })
                })
            }
        };
    }
    if found.is_none()
        && training.is_none()
        && let Some(d) = device
        && let Some(spec) = crate::analysis::spec::detect(p.trace, d)
    {
        return from_spec(p, d, spec);
    }
    let (mut steps, from_auto) = match found {
        Some(s) => (s, false),
        None => match device.and_then(|d| auto_detect(p, d, training.is_some())) {
            Some(s) => (s, true),
            None => {
                tracing::debug!("no step markers and no periodic kernel sequence");
                return Steps {
                    steps: Vec::new(),
                    batch: Vec::new(),
                    numbers: Vec::new(),
                    source: if p.trace.kernels.is_empty() {
                        StepSource::NoKernels
                    } else {
                        StepSource::NotFound
                    },
                    device,
                    contiguous: false,
                    kind: kind_of(&training),
                    engine: None,
                    phase_source: PhaseSource::None,
                    training,
                    doubts: Vec::new(),
                    spec: None,
                    context_tokens: None,
                };
            }
        },
    };
    steps.kind = kind_of(&training);
    if training.is_some() {
        steps.steps.iter_mut().for_each(|s| s.phase = Phase::Train);
        steps.phase_source = PhaseSource::Training;
    } else if from_auto {
        steps.phase_source = PhaseSource::Periodic;
    } else {
        let (evidence, example) = phase_evidence::label(p, device, &mut steps.steps);
        let says = match steps.phase_source {
            PhaseSource::Evidence { says, .. } => says,
            _ => None,
        };
        steps.phase_source = PhaseSource::from_evidence(&evidence, example, says);
    }
    if steps.batch.len() != steps.steps.len() {
        steps.batch = vec![0; steps.steps.len()];
    }
    steps.training = training;
    if from_auto {
        steps.doubts = layer_check::doubts(p, device, &rows, &steps.steps);
    }
    tracing::debug!(
        source = %steps.source,
        auto = from_auto,
        steps = steps.steps.len(),
        phases = %steps.phase_source,
        "step source chosen"
    );
    steps
}

/// One step per speculative cycle, its window and phase.
fn cycle_steps(spec: &crate::analysis::spec::SpecDecode) -> Vec<Step> {
    spec.cycles
        .iter()
        .map(|c| Step {
            phase: c.phase,
            gpu_start_ns: c.gpu_start_ns,
            gpu_end_ns: c.gpu_end_ns,
        })
        .collect()
}

/// Steps from speculative decoding's cycles: one per verify forward.
fn from_spec(p: &Prepared, device: u32, spec: crate::analysis::spec::SpecDecode) -> Steps {
    let name = |key: crate::analysis::spec::ModelKey| key.render(p.trace);
    let steps = cycle_steps(&spec);
    tracing::debug!(
        steps = steps.len(),
        evidence = ?spec.evidence,
        "step source chosen: speculative forwards"
    );
    Steps {
        batch: spec.cycles.iter().map(|c| c.batch).collect(),
        numbers: Vec::new(),
        source: StepSource::Forwards {
            evidence: spec.evidence,
            target: name(spec.target),
            target_forwards: spec.target_forwards,
            draft: spec.draft.map(name),
            draft_forwards: spec.draft_forwards,
        },
        device: Some(device),
        contiguous: true,
        kind: StepKind::InferenceSteps,
        engine: None,
        phase_source: if spec.evidence == Some(crate::analysis::spec::SpecEvidence::ForwardDepths) {
            PhaseSource::ForwardDepths
        } else {
            PhaseSource::Forwards
        },
        training: None,
        doubts: Vec::new(),
        steps,
        spec: Some(spec),
        context_tokens: None,
    }
}

/// Median KV length of a decode request over the decode steps whose markers carry it.
fn decode_context(metas: impl Iterator<Item = Meta>) -> Option<u64> {
    let mut kv: Vec<u64> = metas
        .filter(|m| m.phase == Phase::Decode && m.context > 0)
        .map(|m| m.context)
        .collect();
    if kv.is_empty() {
        return None;
    }
    kv.sort_unstable();
    Some(kv[kv.len() / 2])
}

fn kind_of(training: &Option<String>) -> StepKind {
    if training.is_some() {
        StepKind::TrainingIterations
    } else {
        StepKind::InferenceSteps
    }
}

/// Each marker row's kind in [`KINDS`] and what its name (or engine columns) say.
fn classify_rows(p: &Prepared) -> Vec<Option<(u16, Meta)>> {
    let m = &p.trace.markers;
    // Names repeat (one per step): classify each (name, engine source) pair once.
    let mut cache: HashMap<(u32, bool), Option<(usize, Meta)>> = HashMap::new();
    (0..m.len)
        .map(|i| {
            let source = MarkerSource::from_code(m.source[i]);
            let key = (m.name[i], source == MarkerSource::Engine);
            let (kind, meta) = (*cache.entry(key).or_insert_with(|| {
                engine_markers::classify(p.trace.strings.get(m.name[i]), source)
            }))?;
            let meta = engine_markers::row_meta(
                kind,
                meta,
                m.phase[i],
                m.batch_size.get(i).copied().unwrap_or(0),
                m.tokens.get(i).copied().unwrap_or(0),
            );
            Some((kind as u16, meta))
        })
        .collect()
}

/// A candidate step range on one clock.
#[derive(Clone, Copy)]
struct Range {
    name: u32,
    kind: Option<u16>,
    meta: Meta,
    /// The engine marker's step number, -1 when the marker has none.
    number: i64,
    source: MarkerSource,
    start: i64,
    end: i64,
}

/// Keeps the innermost ranges: a range that contains another candidate is a wrapper
/// (ProfilerStep around decode_step, generate around its steps, vLLM's execute marker
/// around SGLang's step marker).
fn leaves(mut r: Vec<Range>) -> Vec<Range> {
    r.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut keep = vec![true; r.len()];
    for i in 0..r.len() {
        // Any later range starting before this one ends and ending inside it is nested.
        let mut j = i + 1;
        while j < r.len() && r[j].start < r[i].end {
            if r[j].end <= r[i].end {
                keep[i] = false;
                break;
            }
            j += 1;
        }
    }
    r.into_iter()
        .zip(keep)
        .filter_map(|(x, k)| k.then_some(x))
        .collect()
}

/// The selected marker ranges of both clocks, innermost only: GPU ranges on `device` and
/// host ranges.
fn candidate_ranges(
    p: &Prepared,
    device: Option<u32>,
    rows: &[Option<(u16, Meta)>],
    select: &impl Fn(usize) -> bool,
) -> (Vec<Range>, Vec<Range>) {
    let m = &p.trace.markers;
    let (mut gpu, mut host) = (Vec::new(), Vec::new());
    for (i, row) in rows.iter().enumerate().take(m.len) {
        let on_gpu = m.gpu_start_ns[i] != i64::MIN && device.is_none_or(|d| d == m.device[i]);
        let on_host = m.host_start_ns[i] != i64::MIN;
        if !(on_gpu || on_host) || !select(i) {
            continue;
        }
        // A user's pattern may pick any name; only recognised steps carry metadata.
        let (kind, meta) = match *row {
            Some((k, meta)) if KINDS[k as usize].role != Role::Exclude => (Some(k), meta),
            _ => (None, Meta::default()),
        };
        let from_engine = MarkerSource::from_code(m.source[i]) == MarkerSource::Engine;
        let r = Range {
            name: m.name[i],
            kind,
            meta,
            number: if from_engine {
                m.step.get(i).copied().unwrap_or(-1)
            } else {
                -1
            },
            source: MarkerSource::from_code(m.source[i]),
            start: 0,
            end: 0,
        };
        // A range that ends before it starts (a hostile or broken file) delimits nothing.
        if on_gpu && m.gpu_end_ns[i] >= m.gpu_start_ns[i] {
            gpu.push(Range {
                start: m.gpu_start_ns[i],
                end: m.gpu_end_ns[i],
                ..r
            });
        }
        if on_host && m.host_end_ns[i] >= m.host_start_ns[i] {
            host.push(Range {
                start: m.host_start_ns[i],
                end: m.host_end_ns[i],
                ..r
            });
        }
    }
    (leaves(gpu), leaves(host))
}

/// Steps from the selected markers: their GPU ranges, or their host ranges mapped to the GPU
/// through launch correlation. GPU ranges win when they cover the work launched inside their
/// host ranges; where they do not (ROCm builds of Kineto cut `gpu_user_annotation` ranges
/// short), the host ranges' projection is used.
fn from_markers(
    p: &Prepared,
    device: Option<u32>,
    rows: &[Option<(u16, Meta)>],
    select: impl Fn(usize) -> bool,
) -> Option<Steps> {
    let (gpu, host) = candidate_ranges(p, device, rows, &select);
    if gpu.is_empty() && host.is_empty() {
        return None;
    }
    let projected = match device {
        Some(d) if !host.is_empty() => project(p, d, &host),
        _ => Vec::new(),
    };
    let use_gpu = !gpu.is_empty() && (projected.is_empty() || covers(&gpu, &projected));
    let (windows, ranges, projected): (Vec<(Range, i64, i64)>, MarkerRanges, _) = if use_gpu {
        let ranges = match gpu.last().map(|r| r.source) {
            Some(MarkerSource::Engine) => MarkerRanges::Engine,
            Some(MarkerSource::KinetoGpuAnnotation) => MarkerRanges::GpuUserAnnotation,
            Some(MarkerSource::Nvtx) => MarkerRanges::NvtxGpu,
            _ => MarkerRanges::Gpu,
        };
        (
            gpu.iter().map(|r| (*r, r.start, r.end)).collect(),
            ranges,
            None,
        )
    } else if !projected.is_empty() {
        let ranges = match host.last().map(|r| r.source) {
            Some(MarkerSource::KinetoUserAnnotation) => MarkerRanges::UserAnnotation,
            Some(MarkerSource::Nvtx) => MarkerRanges::Nvtx,
            _ => MarkerRanges::Host,
        };
        let why = if gpu.is_empty() {
            Projection::NoGpuRanges
        } else {
            Projection::GpuRangesShort
        };
        (projected, ranges, Some(why))
    } else {
        return None;
    };
    let mut windows = windows;
    windows.sort_by_key(|w| (w.1, w.2));
    let marked: Vec<Range> = windows.iter().map(|w| w.0).collect();
    let mut engines: Vec<&str> = marked
        .iter()
        .filter_map(|r| r.kind.and_then(|k| KINDS[k as usize].engine))
        .collect();
    engines.sort_unstable();
    engines.dedup();
    // What the markers' names say, for the phase line (the first kind that says something).
    let says = marked
        .iter()
        .filter_map(|r| r.kind.map(|k| KINDS[k as usize].says))
        .find(|s| !s.is_empty());
    let (names, more_names) = marker_names(p, &marked);
    let mut steps = Steps {
        source: StepSource::Markers {
            ranges,
            projected,
            names,
            more_names,
        },
        steps: windows
            .iter()
            .map(|(r, s, e)| Step {
                phase: match r.meta.phase {
                    // A sampling range is not a step of its own phase.
                    Phase::Sample => Phase::Unknown,
                    ph => ph,
                },
                gpu_start_ns: *s,
                gpu_end_ns: *e,
            })
            .collect(),
        batch: windows.iter().map(|(r, _, _)| r.meta.batch).collect(),
        numbers: windows.iter().map(|(r, _, _)| r.number).collect(),
        device,
        contiguous: false,
        kind: StepKind::InferenceSteps,
        engine: (!engines.is_empty()).then(|| engines.join(" + ")),
        // What the names say, until `detect` tallies the phases' evidence.
        phase_source: PhaseSource::Evidence {
            counts: Vec::new(),
            example: None,
            says,
        },
        training: None,
        doubts: Vec::new(),
        spec: None,
        context_tokens: decode_context(windows.iter().map(|(r, _, _)| r.meta)),
    };
    if let Some(d) = device {
        let marks: Vec<crate::analysis::spec::markers::Marked> = windows
            .iter()
            .zip(&steps.steps)
            .map(|((r, _, _), s)| crate::analysis::spec::markers::Marked {
                step: *s,
                batch: r.meta.batch,
                tokens: r.meta.tokens,
                name: r.name,
                number: r.number,
            })
            .collect();
        if let Some((spec, closes)) = crate::analysis::spec::markers::engine_cycles(p, d, &marks) {
            steps.steps = cycle_steps(&spec);
            steps.batch = spec.cycles.iter().map(|c| c.batch).collect();
            steps.numbers = closes.iter().map(|&i| marks[i].number).collect();
            steps.spec = Some(spec);
        } else if let Some(spec) = crate::analysis::spec::markers::detect(p, d, &marks) {
            for (s, c) in steps.steps.iter_mut().zip(&spec.cycles) {
                s.gpu_start_ns = c.gpu_start_ns;
            }
            steps.spec = Some(spec);
        }
    }
    Some(steps)
}

/// Whether every projected window lies inside a GPU range (within 1% of its length or 1 µs).
/// `gpu` is start-sorted and holds no nested ranges, so the candidates for a window are the
/// last ranges that start before it.
fn covers(gpu: &[Range], projected: &[(Range, i64, i64)]) -> bool {
    projected.iter().all(|&(_, s, e)| {
        let tol = (e.saturating_sub(s) / 100).max(1_000);
        let upto = gpu.partition_point(|g| g.start <= s.saturating_add(tol));
        gpu[upto.saturating_sub(2)..upto]
            .iter()
            .any(|g| g.end >= e.saturating_sub(tol))
    })
}

/// Host ranges reach the GPU through launch correlation: a range's window spans the kernels
/// whose launch call started inside it. Ranges without such kernels are dropped.
fn project(p: &Prepared, device: u32, ranges: &[Range]) -> Vec<(Range, i64, i64)> {
    let l = &p.trace.launches;
    let mut launch_at: HashMap<u64, i64> = HashMap::with_capacity(l.len);
    for i in 0..l.len {
        launch_at
            .entry(l.correlation[i])
            .or_insert(l.host_start_ns[i]);
    }
    let k = &p.trace.kernels;
    let mut windows: Vec<(i64, i64)> = vec![(i64::MAX, i64::MIN); ranges.len()];
    for &i in p.kernels_on(device) {
        let i = i as usize;
        let Some(&t) = launch_at.get(&k.correlation[i]) else {
            continue;
        };
        let r = ranges.partition_point(|r| r.start <= t);
        if r == 0 || t >= ranges[r - 1].end {
            continue;
        }
        let w = &mut windows[r - 1];
        w.0 = w.0.min(k.gpu_start_ns[i]);
        w.1 = w.1.max(k.gpu_end_ns[i]);
    }
    ranges
        .iter()
        .zip(&windows)
        .filter(|(_, w)| w.0 < w.1)
        .map(|(r, w)| (*r, w.0, w.1))
        .collect()
}

/// The markers' distinct names (cut short), the first four in name order, and how many more.
fn marker_names(p: &Prepared, ranges: &[Range]) -> (Vec<String>, usize) {
    let mut names: Vec<&str> = ranges.iter().map(|r| p.trace.strings.get(r.name)).collect();
    names.sort_unstable();
    names.dedup();
    let more = names.len().saturating_sub(4);
    (names.iter().take(4).map(|n| short(n)).collect(), more)
}

#[cfg(test)]
mod tests {
    use gapscope_traces::{KernelRow, Manifest, MemopKind, MemopRow, Trace};

    use super::marker_tests::phases;
    use super::*;
    use crate::rules::RuleSet;

    /// One forward pass: kernel names and durations (ns), as an engine would run them.
    type Pass = Vec<(&'static str, i64)>;

    /// A decode step of a two-layer model: gemv matmuls, decode attention.
    fn decode() -> Pass {
        let mut s = vec![("get_rows_bf16", 10)];
        for _ in 0..2 {
            s.extend([
                ("rms_norm_f32", 20),
                ("gemv_bf16_b1", 100),
                ("attn_decode_bf16", 50),
                ("gemv_bf16_b1", 100),
            ]);
        }
        s.extend([("gemv_bf16_b1", 100), ("argmax_f32", 10)]);
        s
    }

    /// The same pass with its matmuls in `gemm`, `factor` times longer (a prompt of
    /// several tokens).
    fn prefill_with(gemm: &'static str, factor: i64) -> Pass {
        decode()
            .into_iter()
            .map(|(n, d)| match n {
                "gemv_bf16_b1" => (gemm, d * factor),
                "attn_decode_bf16" => (n, d * factor),
                _ => (n, d),
            })
            .collect()
    }

    fn prefill() -> Pass {
        prefill_with("cublasGemmEx_bf16", 2)
    }

    /// Kernels back to back with 5 ns launch gaps, passes 200 ns apart, all on device 0.
    fn trace(passes: &[Pass]) -> Trace {
        trace_apart(passes, 200)
    }

    /// As [`trace`], with passes `apart` ns apart.
    fn trace_apart(passes: &[Pass], apart: i64) -> Trace {
        let mut t = Trace::new(Manifest::new("test"));
        let mut now = 1_000;
        for pass in passes {
            for &(name, dur) in pass {
                let name = t.strings.intern(name);
                t.kernels.push(KernelRow {
                    name,
                    gpu_start_ns: now,
                    gpu_end_ns: now + dur,
                    ..KernelRow::default()
                });
                now += dur + 5;
            }
            now += apart;
        }
        t
    }

    fn auto(t: &Trace) -> Steps {
        let p = Prepared::new(t, &RuleSet::builtin());
        let s = StepSettings {
            ignore_markers: true,
            ..StepSettings::default()
        };
        detect(&p, &s)
    }

    fn passes(pattern: &str) -> Vec<Pass> {
        pattern
            .chars()
            .map(|c| if c == 'P' { prefill() } else { decode() })
            .collect()
    }

    #[test]
    fn builtin_rules_file_the_test_kernels_as_assumed() {
        let r = RuleSet::builtin();
        for (name, b) in [
            ("gemv_bf16_b1", Bucket::Gemv),
            ("cublasGemmEx_bf16", Bucket::GemmDense),
            ("attn_decode_bf16", Bucket::Attention),
            ("flash_fwd_splitkv_kernel", Bucket::Attention),
            ("get_rows_bf16", Bucket::EmbedGather),
            ("argmax_f32", Bucket::Sampling),
        ] {
            assert_eq!(r.classify_kernel(name), b, "{name}");
        }
    }

    #[test]
    fn prefill_that_starts_with_the_anchor_is_a_prefill() {
        let s = auto(&trace(&passes("PDDDDDDDD")));
        assert_eq!(phases(&s), "PDDDDDDDD", "{}", s.source);
        assert!(
            matches!(s.source, StepSource::Periodic { prefills: 1, .. }),
            "{}",
            s.source
        );
        // The prefill window runs from its first kernel to the first decode step.
        assert_eq!(s.steps[0].gpu_start_ns, 1_000);
        assert_eq!(s.steps[0].gpu_end_ns, s.steps[1].gpu_start_ns);
    }

    #[test]
    fn second_prefill_between_decode_steps_is_a_prefill() {
        let s = auto(&trace(&passes("PDDDDDDDDPDDDDDDDD")));
        assert_eq!(phases(&s), "PDDDDDDDDPDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn trailing_prefill_is_a_prefill() {
        let s = auto(&trace(&passes("DDDDDDDDDP")));
        assert_eq!(phases(&s), "DDDDDDDDDP", "{}", s.source);
    }

    #[test]
    fn one_prefill_per_request_is_found_for_every_request() {
        let s = auto(&trace(&passes("PDDDDDPDDDDDPDDDDDPDDDDD")));
        assert_eq!(phases(&s), "PDDDDDPDDDDDPDDDDDPDDDDD", "{}", s.source);
        assert!(
            matches!(s.source, StepSource::Periodic { prefills: 4, .. }),
            "{}",
            s.source
        );
    }

    #[test]
    fn prefill_on_the_decode_kernels_is_a_prefill_when_much_longer() {
        // Same matmul kernels, one extra copy, three times the GEMM/attention time.
        let mut long = prefill_with("gemv_bf16_b1", 3);
        long.insert(1, ("copy_f32", 30));
        let mut ps = vec![long];
        ps.extend(passes("DDDDDDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "PDDDDDDDD", "{}", s.source);
    }

    /// A llama.cpp-like step: two gathers at its start (token embedding, output rows) by
    /// the same kernel, and no kernel of its own that runs once per step.
    fn llamacpp_decode(gather: &'static str) -> Pass {
        let mut s = vec![(gather, 10), (gather, 5)];
        s.extend(llamacpp_layers());
        s.extend([("rms_norm_f32", 20), ("mul_mat_vec_q", 100)]);
        s
    }

    /// Two llama.cpp decoder layers at batch 1.
    fn llamacpp_layers() -> Pass {
        let layer = [
            ("rms_norm_f32", 20),
            ("mul_mat_vec_q", 100),
            ("flash_attn_ext_vec", 50),
            ("mul_mat_vec_q", 100),
        ];
        [layer, layer].concat()
    }

    /// A llama.cpp decode step as it runs: the two `get_rows` of the output rows inside the
    /// last layer, not at the step's start.
    fn llamacpp_step() -> Pass {
        let mut s = llamacpp_layers();
        s.extend([("k_get_rows_float", 5), ("k_get_rows_float", 5)]);
        s.extend([("rms_norm_f32", 20), ("mul_mat_vec_q", 100)]);
        s.extend([("rms_norm_f32", 20), ("mul_mat_vec_q", 300)]);
        s
    }

    /// Eight [`llamacpp_step`]s 30 us apart. With `read_back`, each idle holds what
    /// llama.cpp copies there: the logits read back right after the last kernel, and 2 us
    /// before the next step's first kernel its inputs written. Returns the trace and the
    /// input copies' starts (steps 2 to 8).
    fn llamacpp_run(read_back: bool) -> (Trace, Vec<i64>) {
        let ps: Vec<Pass> = std::iter::repeat_n(llamacpp_step(), 8).collect();
        let mut t = trace_apart(&ps, 30_000);
        let per = llamacpp_step().len();
        let mut input_copies = Vec::new();
        for i in 1..8 {
            let first = t.kernels.gpu_start_ns[i * per];
            let last_end = t.kernels.gpu_end_ns[i * per - 1];
            if read_back {
                t.memops.push(MemopRow {
                    kind: MemopKind::DtoH as u8,
                    gpu_start_ns: last_end + 500,
                    gpu_end_ns: last_end + 1_500,
                    ..MemopRow::default()
                });
            }
            t.memops.push(MemopRow {
                kind: MemopKind::HtoD as u8,
                gpu_start_ns: first - 2_000,
                gpu_end_ns: first - 1_000,
                ..MemopRow::default()
            });
            input_copies.push(first - 2_000);
        }
        (t, input_copies)
    }

    #[test]
    fn a_step_starts_after_the_host_idle_that_reads_its_results_back_not_at_the_anchor() {
        // The anchor (every 2nd get_rows) sits in the last layer. Cut there, the host's
        // 30 us between steps would be a launch gap inside each step; the step starts with
        // the input copy after it.
        let (t, input_copies) = llamacpp_run(true);
        let s = auto(&t);
        assert_eq!(phases(&s), "DDDDDDDD", "{}", s.source);
        let starts: Vec<i64> = s.steps[1..].iter().map(|s| s.gpu_start_ns).collect();
        assert_eq!(starts, input_copies);
    }

    #[test]
    fn an_idle_without_a_read_back_does_not_move_the_step_start() {
        // A host pause inside a step (HF eager's Python) idles the GPU as long, but reads
        // nothing back; and idles of 200 ns are no host boundary at all.
        let (t, input_copies) = llamacpp_run(false);
        let s = auto(&t);
        assert_eq!(s.steps.len(), 8, "{}", s.source);
        assert!(!input_copies.contains(&s.steps[1].gpu_start_ns));
        let ps: Vec<Pass> = std::iter::repeat_n(llamacpp_step(), 8).collect();
        let short = trace(&ps);
        let s = auto(&short);
        assert_eq!(s.steps.len(), 8, "{}", s.source);
        assert_ne!(
            s.steps[1].gpu_start_ns,
            short.kernels.gpu_start_ns[llamacpp_step().len()]
        );
    }

    /// A decode step of a hybrid model as llama.cpp runs it: two groups of three
    /// gated-DeltaNet layers and one full-attention layer, the LM head on the same matmul
    /// kernel as every projection, so no kernel runs exactly once per step.
    fn hybrid_step() -> Pass {
        let mut s = Vec::new();
        for _ in 0..2 {
            for _ in 0..3 {
                s.extend([
                    ("rms_norm_f32", 20),
                    ("mul_mat_q", 100),
                    ("ssm_conv_f32", 10),
                    ("gated_delta_net_cuda", 40),
                    ("mul_mat_q", 100),
                ]);
            }
            s.extend([
                ("rms_norm_f32", 20),
                ("mul_mat_q", 100),
                ("flash_attn_ext_f16", 50),
                ("mul_mat_q", 100),
            ]);
        }
        s.extend([("rms_norm_f32", 20), ("mul_mat_q", 300)]);
        s
    }

    #[test]
    fn a_hybrid_model_steps_are_whole_steps_not_groups_of_layers() {
        let ps: Vec<Pass> = std::iter::repeat_n(hybrid_step(), 12).collect();
        let s = auto(&trace(&ps));
        assert_eq!(s.steps.len(), 12, "{}", s.source);
        assert!(
            matches!(s.source, StepSource::Periodic { stride: 2, .. }),
            "{}",
            s.source
        );
    }

    #[test]
    fn a_kernel_run_twice_per_step_anchors_every_second_occurrence() {
        let ps: Vec<Pass> = std::iter::repeat_n(llamacpp_decode("k_get_rows_float"), 8).collect();
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDD", "{}", s.source);
        assert!(
            matches!(s.source, StepSource::Periodic { stride: 2, .. }),
            "{}",
            s.source
        );
    }

    #[test]
    fn a_first_decode_step_with_another_gather_kernel_is_not_lost_in_the_prefill() {
        // llama.cpp's first decode step gathers with another get_rows kernel than the rest,
        // so the anchor's first occurrence is in the second decode step.
        let mut ps = vec![prefill(), llamacpp_decode("k_get_rows_float")];
        ps.extend(std::iter::repeat_n(
            llamacpp_decode("k_get_rows_float_vec"),
            7,
        ));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "PDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn a_short_run_after_a_long_prefill_still_anchors_every_second_gather() {
        // Eight decode steps after a prefill of several batches: the decode is under three
        // quarters of the trace, and its steps are still found.
        let mut ps = vec![prefill(), prefill(), prefill()];
        ps.extend(std::iter::repeat_n(llamacpp_decode("k_get_rows_float"), 8));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "PDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn eight_decode_steps_after_a_prefill_larger_than_them_are_found() {
        // llama.cpp at npl 32: a 4096-token prompt in 8 batches, then 8 decode steps; the
        // decode is under half the trace.
        // (Each batch on its own GEMM kernel, so the batches are not periodic themselves.)
        const GEMMS: [&str; 10] = [
            "gemm_a", "gemm_b", "gemm_c", "gemm_d", "gemm_e", "gemm_f", "gemm_g", "gemm_h",
            "gemm_i", "gemm_j",
        ];
        let mut ps: Vec<Pass> = GEMMS.iter().map(|g| prefill_with(g, 2)).collect();
        ps.extend(std::iter::repeat_n(llamacpp_decode("k_get_rows_float"), 8));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "PDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn a_trailing_partial_step_is_not_a_step() {
        // The program's last work: the start of a step (two gathers and a norm), then exit.
        let mut ps: Vec<Pass> =
            std::iter::repeat_n(llamacpp_decode("k_get_rows_float"), 8).collect();
        ps.push(llamacpp_decode("k_get_rows_float")[..3].to_vec());
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDD", "{}", s.source);
    }

    #[test]
    fn attention_kernel_switch_halfway_stays_decode() {
        // Past some context length the engine switches attention kernels; same time.
        let split: Pass = decode()
            .into_iter()
            .map(|(n, d)| match n {
                "attn_decode_bf16" => ("flash_fwd_splitkv_kernel", d),
                _ => (n, d),
            })
            .collect();
        let mut ps = passes("DDDDDD");
        ps.extend(std::iter::repeat_n(split, 6));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn decode_step_with_an_extra_small_kernel_stays_decode() {
        let mut odd = decode();
        odd.insert(3, ("copy_f32", 40));
        let mut ps = passes("DDDD");
        ps.push(odd);
        ps.extend(passes("DDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn slow_decode_step_on_the_same_kernels_stays_decode() {
        // A throttled step: the same kernels, three times slower. A stall to report, not a
        // prefill to hide.
        let slow: Pass = decode().into_iter().map(|(n, d)| (n, 3 * d)).collect();
        let mut ps = passes("DDDD");
        ps.push(slow);
        ps.extend(passes("DDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn recording_that_starts_mid_step_has_no_prefill() {
        // The tail of a decode step (matmuls included) before the first anchor.
        let d = decode();
        let mut ps = vec![d[d.len() - 4..].to_vec()];
        ps.extend(passes("DDDDDDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDD", "{}", s.source);
    }

    #[test]
    fn prefill_before_the_first_anchor_is_a_prefill() {
        // A prefill whose kernels differ from the start: no anchor inside it.
        let p: Pass = vec![
            ("rms_norm_f32", 20),
            ("cublasGemmEx_bf16", 400),
            ("attn_decode_bf16", 100),
            ("cublasGemmEx_bf16", 400),
        ];
        let mut ps = vec![p];
        ps.extend(passes("DDDDDDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "PDDDDDDDD", "{}", s.source);
        assert_eq!(s.steps[0].gpu_end_ns, s.steps[1].gpu_start_ns);
    }

    #[test]
    fn periodic_trace_has_only_decode_steps() {
        let s = auto(&trace(&passes("DDDDDDDDDDDDDDDD")));
        assert_eq!(phases(&s), "DDDDDDDDDDDDDDDD", "{}", s.source);
        assert!(
            matches!(
                s.source,
                StepSource::Periodic {
                    stride: 1,
                    prefills: 0,
                    ..
                }
            ),
            "{}",
            s.source
        );
    }
}
