// Long on purpose: the accumulators and the report assembly share private types (the row builders
// are in decompose/rows.rs); about 120 lines are tests.
//! Per-step decomposition: bucket times per step, overlap-correct busy time, idle split into
//! launch gaps and host gaps, and step-time statistics.

use gapscope_traces::Phase;

use super::host::idle_cause::{Causes, IdleAttribution};
use super::host::{self, GroupBy, HostIndex};
use super::intervals::{extent_sorted, merge_two};
use super::plausibility::{self, StepFacts};
use super::prepared::Prepared;
use super::report::*;
use super::stats::Summary;
use super::steps::{StepKind, StepSettings, Steps, detect};
use super::telemetry::{self, TelemetryReport};
use crate::bucket::Bucket;
use crate::import::Imported;
use crate::rules::RuleSet;

mod rows;
use rows::{StepSets, bucket_rows, span_ms, step_report, with_gpu_work};

const NB: usize = Bucket::ALL.len();
const NS_PER_MS: f64 = 1e6;

/// Settings for one report.
#[derive(Debug, Clone)]
pub struct AnalysisSettings {
    pub steps: StepSettings,
    /// Names listed per bucket.
    pub top_per_bucket: usize,
    /// Names listed for `other`.
    pub top_other: usize,
    /// Host scopes listed in the idle attribution.
    pub top_host_scopes: usize,
    /// `report --by`: group GPU and host time by this key.
    pub group_by: Option<GroupBy>,
    /// The most steps analysed (`None`: all). Each step costs about 1 KB while it is
    /// analysed; a trace with more keeps its first steps and says so (a defect: the gate
    /// never passes it).
    pub max_steps: Option<usize>,
}

/// Steps analysed at most by default: far more than a profiled decode run holds (thousands),
/// and about 100 MB of per-step figures.
pub const DEFAULT_MAX_STEPS: usize = 100_000;

impl Default for AnalysisSettings {
    fn default() -> Self {
        Self {
            steps: StepSettings::default(),
            top_per_bucket: 3,
            top_other: 8,
            top_host_scopes: 5,
            group_by: None,
            max_steps: Some(DEFAULT_MAX_STEPS),
        }
    }
}

/// A step's model-derived cost per bucket (engine traces).
#[derive(Clone, Default)]
struct StepCost {
    bytes: [i64; NB],
    flops: [i64; NB],
    ns: [i64; NB],
}

/// Per-step accumulators on the primary device.
#[derive(Clone)]
struct StepAcc {
    bucket_ns: [i64; NB],
    calls: [u32; NB],
    /// Engine traces: model-derived bytes and FLOPs, and the time of the kernels that
    /// carry them (so a bucket's % of floor only counts kernels with a cost). Allocated at
    /// the first kernel with a cost: other traces pay 8 bytes a step for it, not 408.
    cost: Option<Box<StepCost>>,
    first_start: i64,
    last_end: i64,
    busy_ns: i64,
    cur_start: i64,
    cur_end: i64,
    /// Longest idle gap inside the step and where it starts.
    max_gap: i64,
    max_gap_at: i64,
    /// Idle gaps inside the step: start, end, and the activity that ends it (kernel index,
    /// or `-(memop index + 1)`); kept only when `keep_gaps` (the trace has launch records
    /// for the idle attribution to read).
    gaps: Vec<(i64, i64, i64)>,
    keep_gaps: bool,
    /// The step's first activity (same encoding).
    first_tag: i64,
}

impl Default for StepAcc {
    fn default() -> Self {
        Self {
            bucket_ns: [0; NB],
            calls: [0; NB],
            cost: None,
            first_start: i64::MAX,
            last_end: i64::MIN,
            busy_ns: 0,
            cur_start: i64::MIN,
            cur_end: i64::MIN,
            max_gap: 0,
            max_gap_at: 0,
            gaps: Vec::new(),
            keep_gaps: false,
            first_tag: 0,
        }
    }
}

impl StepAcc {
    fn add(&mut self, b: usize, s: i64, e: i64, tag: i64) {
        self.bucket_ns[b] += (e - s).max(0);
        self.calls[b] += 1;
        if s < self.first_start {
            self.first_start = s;
            self.first_tag = tag;
        }
        if e <= s {
            return;
        }
        self.last_end = self.last_end.max(e);
        // Activities arrive start-sorted: a running union.
        if s <= self.cur_end {
            self.cur_end = self.cur_end.max(e);
        } else {
            if self.cur_end > self.cur_start {
                self.busy_ns += self.cur_end - self.cur_start;
                if self.keep_gaps {
                    self.gaps.push((self.cur_end, s, tag));
                }
                if s - self.cur_end > self.max_gap {
                    self.max_gap = s - self.cur_end;
                    self.max_gap_at = self.cur_end;
                }
            }
            self.cur_start = s;
            self.cur_end = e;
        }
    }
    fn cost(&mut self, b: usize, bytes: i64, flops: i64, ns: i64) {
        if bytes < 0 && flops < 0 {
            return;
        }
        let c = self.cost.get_or_insert_with(Default::default);
        c.bytes[b] += bytes.max(0);
        c.flops[b] += flops.max(0);
        c.ns[b] += ns.max(0);
    }

    /// Model-derived bytes, FLOPs and costed time of bucket `b` (zeros without a cost).
    fn cost_of(&self, b: usize) -> (i64, i64, i64) {
        self.cost
            .as_ref()
            .map_or((0, 0, 0), |c| (c.bytes[b], c.flops[b], c.ns[b]))
    }

    fn close(&mut self) {
        if self.cur_end > self.cur_start {
            self.busy_ns += self.cur_end - self.cur_start;
        }
        self.cur_start = i64::MIN;
        self.cur_end = i64::MIN;
    }
}

/// Time per distinct name in scope.
#[derive(Clone, Copy, Default)]
struct NameAcc {
    ns: i64,
    calls: u64,
    bucket: u8,
}

struct NameEntry {
    name: u32,
    is_memop: bool,
    ns: i64,
    calls: u64,
    bucket: u8,
}

struct NameTimes {
    kernels: Vec<NameAcc>,
    memops: Vec<NameAcc>,
}

impl NameTimes {
    fn new(n: usize) -> Self {
        Self {
            kernels: vec![NameAcc::default(); n],
            memops: vec![NameAcc::default(); n],
        }
    }

    fn add(&mut self, is_memop: bool, name: u32, bucket: u8, ns: i64) {
        let v = if is_memop {
            &mut self.memops
        } else {
            &mut self.kernels
        };
        if let Some(e) = v.get_mut(name as usize) {
            if e.calls == 0 {
                e.bucket = bucket;
            }
            e.ns += ns;
            e.calls += 1;
        }
    }

    fn iter(&self) -> impl Iterator<Item = NameEntry> + '_ {
        let side = |v: &'_ [NameAcc], is_memop: bool| {
            v.iter()
                .enumerate()
                .filter(|(_, e)| e.calls > 0)
                .map(move |(i, e)| NameEntry {
                    name: i as u32,
                    is_memop,
                    ns: e.ns,
                    calls: e.calls,
                    bucket: e.bucket,
                })
                .collect::<Vec<_>>()
        };
        side(&self.kernels, false)
            .into_iter()
            .chain(side(&self.memops, true))
    }
}

/// Analyses one imported trace.
pub fn analyze(imported: &Imported, rules: &RuleSet, settings: &AnalysisSettings) -> Report {
    analyze_parts(imported, rules, settings).0
}

/// One step's decomposition on the steps' device, for every step (the report keeps only
/// the steps in its scope).
#[derive(Debug, Clone)]
pub struct StepParts {
    /// GPU time per bucket ([`Bucket::ALL`] order), ns.
    pub bucket_ns: [i64; NB],
    /// Activities per bucket.
    pub calls: [u32; NB],
    /// Overlap-correct GPU busy time, ns.
    pub busy_ns: i64,
    /// First activity start and last activity end (`i64::MAX`/`i64::MIN` without activity).
    pub first_ns: i64,
    pub last_ns: i64,
    /// The longest idle gap inside the step and where it starts.
    pub max_gap_ns: i64,
    pub max_gap_at_ns: i64,
}

/// What the analysis computed on the way to the report and the report does not carry:
/// each activity's bucket, the steps, every step's decomposition and the host scopes. The
/// explorer draws these (`crate::explore`).
pub struct Parts {
    /// Bucket index ([`Bucket::ALL`]) per kernel and per memop.
    pub kernel_bucket: Vec<u8>,
    pub memop_bucket: Vec<u8>,
    pub steps: Steps,
    /// Same order as `steps.steps`.
    pub step_parts: Vec<StepParts>,
    /// The host scope forest and launch map.
    pub host: HostIndex,
}

/// [`analyze`], also returning the [`Parts`] behind the report.
pub fn analyze_parts(
    imported: &Imported,
    rules: &RuleSet,
    settings: &AnalysisSettings,
) -> (Report, Parts) {
    let trace = &imported.trace;
    let mut p = {
        let _span = tracing::debug_span!("prepare").entered();
        Prepared::new(trace, rules)
    };
    let _span = tracing::debug_span!("decompose").entered();
    // Steps on the other core while the host side is indexed (unless the buckets already
    // needed it): the idle attribution below reads both.
    // The devices' busy time too: it needs no steps.
    let (mut steps, built, devices) = std::thread::scope(|s| {
        let steps = s.spawn(|| detect(&p, &settings.steps));
        let built = p.host.is_none().then(|| HostIndex::build(trace));
        let devices: Vec<DeviceBusy> = p.devices.iter().map(|&(d, _)| device_busy(&p, d)).collect();
        let steps = steps
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (steps, built, devices)
    });
    let steps_cut = settings
        .max_steps
        .filter(|&max| steps.steps.len() > max)
        .map(|max| {
            let found = steps.steps.len();
            steps.steps.truncate(max);
            steps.batch.truncate(max);
            steps.numbers.truncate(max);
            crate::import::defects::SourceDefect::StepsCut { kept: max, found }
        });
    let host: HostIndex = match (built, p.host.take()) {
        (Some(h), _) | (None, Some(h)) => h,
        (None, None) => unreachable!("the host index is built above when Prepared has none"),
    };
    let hi = &host;

    let decode: Vec<bool> = steps.steps.iter().map(|s| s.is_decode()).collect();
    let any_decode = decode.iter().any(|&d| d);
    let Accumulated {
        accs,
        outside,
        names,
        prefill_names,
        other_kernel_ns,
        kernel_ns_in_scope,
        activity_in_steps_ns,
        activity_total_ns,
        scope_acts,
    } = accumulate(&p, &steps, &decode, settings);

    let decode_idx: Vec<usize> = (0..accs.len()).filter(|&i| decode[i]).collect();
    let of_phase = |ph: Phase| -> Vec<usize> {
        (0..accs.len())
            .filter(|&i| steps.steps[i].phase == ph)
            .collect()
    };
    let prefill_idx = of_phase(Phase::Prefill);
    let mixed_idx = of_phase(Phase::Mixed);
    let training = steps.kind == StepKind::TrainingIterations;
    let scope_idx: Vec<usize> = if any_decode {
        decode_idx.clone()
    } else {
        (0..accs.len()).collect()
    };

    let mut step_report = step_report(
        &steps,
        &accs,
        &StepSets {
            scope: &scope_idx,
            decode: any_decode,
            prefill: &prefill_idx,
            mixed: &mixed_idx,
        },
    );
    let marker_batch = trace
        .markers
        .batch_size
        .iter()
        .copied()
        .filter(|&b| b > 0)
        .max();
    step_report.batch_size = decode_idx
        .iter()
        .filter_map(|&i| steps.batch.get(i).copied())
        .filter(|&b| b > 0)
        .max()
        .or(marker_batch);
    let scope_mean = step_report
        .tpot_ms
        .or(step_report.iteration_period_ms)
        .or(step_report.decode_span_ms)
        .or(step_report.iteration_ms)
        .map(|s| s.mean)
        .or_else(|| {
            let spans: Vec<f64> = scope_idx
                .iter()
                .map(|&i| span_ms(&steps.steps[i]))
                .collect();
            (!spans.is_empty()).then(|| Summary::of(&spans).mean)
        });

    let bucket_scope = if steps.steps.is_empty() {
        BucketScope::WholeTrace
    } else if training {
        BucketScope::TrainingIterations
    } else if any_decode {
        BucketScope::DecodeSteps
    } else {
        BucketScope::AllSteps
    };
    let buckets = if steps.steps.is_empty() {
        bucket_rows(&[outside], &[0], None, false, &names, trace, settings)
    } else {
        bucket_rows(&accs, &scope_idx, scope_mean, true, &names, trace, settings)
    };
    let prefill_buckets = if prefill_idx.is_empty() {
        Vec::new()
    } else {
        let mean = step_report.prefill_ms.map(|s| s.mean);
        bucket_rows(
            &accs,
            &prefill_idx,
            mean,
            true,
            &prefill_names,
            trace,
            settings,
        )
    };

    let mut other_top: Vec<NameTime> = names
        .iter()
        .filter(|e| e.bucket == Bucket::Other as u8 && !e.is_memop)
        .map(|e| NameTime {
            name: trace.strings.get(e.name).to_owned(),
            ms: e.ns as f64 / NS_PER_MS,
            calls: e.calls,
        })
        .collect();
    other_top.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    other_top.truncate(settings.top_other);

    let mut notes = trace.manifest.notes.clone();
    if p.devices.len() > 1
        && let Some(d) = steps.device
    {
        notes.push(format!(
            "{} devices in the trace; steps and buckets cover device {d}, busy % covers each",
            p.devices.len()
        ));
    }
    let mut warnings = imported.warnings.clone();
    let distortion = super::distortion::distortion(trace);
    if let Some(d) = &distortion {
        warnings.insert(0, d.warning());
    }
    let telemetry = telemetry_of(&p, &steps, &mut warnings);
    let windows: Vec<(i64, i64)> = scope_idx
        .iter()
        .map(|&i| {
            let st = &steps.steps[i];
            (
                st.gpu_end_ns.saturating_sub(st.gpu_start_ns),
                accs[i].busy_ns,
            )
        })
        .collect();
    let plausibility = plausibility::check(&StepFacts {
        unit: if training {
            "iterations"
        } else if any_decode {
            "decode steps"
        } else {
            "steps"
        },
        decode_steps: scope_idx.len(),
        tpot: step_report
            .tpot_ms
            .as_ref()
            .or(step_report.iteration_period_ms.as_ref()),
        periods: &step_report.series.tpot_ms,
        windows_ns: &windows,
        activity_in_steps_ns,
        activity_total_ns,
        buckets: &buckets,
        doubts: &steps.doubts,
    });
    // Why the GPU sat idle: the decode steps (or iterations) with GPU work, as the idle
    // figures of the step report count them.
    let active: Vec<usize> = if any_decode || training {
        with_gpu_work(&scope_idx, &accs)
    } else {
        Vec::new()
    };
    let host_idle = host_idle_of(trace, hi, &accs, &active, scope_mean, settings);
    let groups = settings.group_by.map(|by| {
        host::by_key::group(
            trace,
            &hi.forest,
            &hi.launch_map,
            &scope_acts,
            scope_idx.len().max(1),
            by,
        )
    });
    if p.scope_classified > 0 {
        notes.push(format!(
            "{} kernels were bucketed by the host scope they were launched in (scope rules)",
            p.scope_classified
        ));
    }
    let mut source = source_info(imported, &p, &steps, notes);
    if let Some(cut) = steps_cut {
        warnings.insert(0, format!("this trace {}", cut.describe()));
        source.defects.push(cut);
    }
    let report = Report {
        schema_version: REPORT_SCHEMA_VERSION,
        source,
        warnings,
        plausibility,
        bucket_scope,
        devices,
        steps: step_report,
        buckets,
        prefill_buckets,
        other: OtherReport {
            share_of_kernel_time_pct: pct(other_kernel_ns as f64, kernel_ns_in_scope as f64),
            top: other_top,
        },
        telemetry,
        distortion,
        host_idle,
        groups,
    };
    let step_parts = accs
        .iter()
        .map(|a| StepParts {
            bucket_ns: a.bucket_ns,
            calls: a.calls,
            busy_ns: a.busy_ns,
            first_ns: a.first_start,
            last_ns: a.last_end,
            max_gap_ns: a.max_gap,
            max_gap_at_ns: a.max_gap_at,
        })
        .collect();
    let Prepared {
        kernel_bucket,
        memop_bucket,
        ..
    } = p;
    let parts = Parts {
        kernel_bucket,
        memop_bucket,
        steps,
        step_parts,
        host,
    };
    (report, parts)
}

/// What one pass over the steps' device's activities adds up: per step, outside the steps,
/// per name, and the totals the plausibility check and `report --by` need.
struct Accumulated {
    /// One per step, closed.
    accs: Vec<StepAcc>,
    /// The whole device, when there are no steps.
    outside: StepAcc,
    /// Per-name time in scope, and in the prefill steps, indexed by name id (kernels,
    /// memops): dense, so no hashing.
    names: NameTimes,
    prefill_names: NameTimes,
    other_kernel_ns: i64,
    kernel_ns_in_scope: i64,
    /// GPU activity time inside any step, and on the whole device.
    activity_in_steps_ns: i64,
    activity_total_ns: i64,
    /// The activities in scope (`report --by`).
    scope_acts: Vec<i64>,
}

/// The accumulation pass: every kernel and memop of the steps' device, in start order, added
/// to its step (or to `outside` without steps) and, when in scope, to the per-name times.
/// A long pass runs as two halves on two threads, split at a step boundary that no step
/// crosses: each half then meets its activities in the same order and with the same steps
/// as the single pass, and the sums it adds to are integers.
fn accumulate(
    p: &Prepared,
    steps: &Steps,
    decode: &[bool],
    settings: &AnalysisSettings,
) -> Accumulated {
    let trace = p.trace;
    let (k, m) = (&trace.kernels, &trace.memops);
    let n = trace.strings.len();
    // Only the idle attribution reads the gaps, and only with launch records.
    let step_acc = StepAcc {
        keep_gaps: trace.launches.len > 0,
        ..StepAcc::default()
    };
    let fresh = || Accumulated {
        accs: vec![step_acc.clone(); steps.steps.len()],
        outside: StepAcc::default(),
        names: NameTimes::new(n),
        prefill_names: NameTimes::new(n),
        other_kernel_ns: 0,
        kernel_ns_in_scope: 0,
        activity_in_steps_ns: 0,
        activity_total_ns: 0,
        scope_acts: Vec::new(),
    };
    let mut acc = match steps.device.or(p.primary_device()) {
        None => fresh(),
        Some(dev) => {
            let ko = p.kernels_on(dev);
            let mo = p.memops_on(dev);
            let run = |ko: &[u32], mo: &[u32]| {
                let mut acc = fresh();
                accumulate_range(p, steps, decode, settings, ko, mo, &mut acc);
                acc
            };
            match split_point(&steps.steps, ko, mo, p) {
                None => run(ko, mo),
                Some((step, t)) => {
                    let ks = ko.partition_point(|&i| k.gpu_start_ns[i as usize] < t);
                    let ms = mo.partition_point(|&i| m.gpu_start_ns[i as usize] < t);
                    let (first, second) = std::thread::scope(|s| {
                        let second = s.spawn(|| run(&ko[ks..], &mo[ms..]));
                        let first = run(&ko[..ks], &mo[..ms]);
                        let second = second
                            .join()
                            .unwrap_or_else(|e| std::panic::resume_unwind(e));
                        (first, second)
                    });
                    first.join(second, step)
                }
            }
        }
    };
    acc.accs.iter_mut().for_each(StepAcc::close);
    acc.outside.close();
    acc
}

/// Activities a pass needs before it is split in two (unit tests split every pass, so each
/// of them checks the split against its expected figures).
const SPLIT_ACTIVITIES: usize = if cfg!(test) { 2 } else { 1 << 18 };

/// Where to split a long pass: a step `i` and its start `t` such that every step before `i`
/// ends by `t` and none from `i` on starts before it, the one nearest the middle kernel.
fn split_point(
    steps: &[super::steps::Step],
    ko: &[u32],
    mo: &[u32],
    p: &Prepared,
) -> Option<(usize, i64)> {
    if ko.len() + mo.len() < SPLIT_ACTIVITIES || steps.len() < 2 {
        return None;
    }
    let &middle = ko.get(ko.len() / 2)?;
    let mid = p.trace.kernels.gpu_start_ns[middle as usize];
    let mut later_min = vec![i64::MAX; steps.len() + 1];
    for i in (0..steps.len()).rev() {
        later_min[i] = later_min[i + 1].min(steps[i].gpu_start_ns);
    }
    let mut before_max = i64::MIN;
    let mut best: Option<(usize, i64)> = None;
    for (i, st) in steps.iter().enumerate() {
        let t = st.gpu_start_ns;
        if i > 0
            && before_max <= t
            && later_min[i] >= t
            && best.is_none_or(|(_, b)| t.abs_diff(mid) < b.abs_diff(mid))
        {
            best = Some((i, t));
        }
        before_max = before_max.max(st.gpu_end_ns);
    }
    best
}

impl NameTimes {
    /// Adds `other`'s times, which came after this one's.
    fn join(&mut self, other: &NameTimes) {
        for (mine, theirs) in [
            (&mut self.kernels, &other.kernels),
            (&mut self.memops, &other.memops),
        ] {
            for (a, b) in mine.iter_mut().zip(theirs) {
                if b.calls > 0 {
                    if a.calls == 0 {
                        a.bucket = b.bucket;
                    }
                    a.ns += b.ns;
                    a.calls += b.calls;
                }
            }
        }
    }
}

impl Accumulated {
    /// This pass over the activities before step `from`'s start, and `other` over the rest.
    fn join(mut self, other: Accumulated, from: usize) -> Accumulated {
        self.accs.truncate(from);
        self.accs.extend(other.accs.into_iter().skip(from));
        self.names.join(&other.names);
        self.prefill_names.join(&other.prefill_names);
        self.other_kernel_ns += other.other_kernel_ns;
        self.kernel_ns_in_scope += other.kernel_ns_in_scope;
        self.activity_in_steps_ns = self
            .activity_in_steps_ns
            .saturating_add(other.activity_in_steps_ns);
        self.activity_total_ns = self
            .activity_total_ns
            .saturating_add(other.activity_total_ns);
        self.scope_acts.extend(other.scope_acts);
        self
    }
}

/// The pass over the kernels `ko` and memops `mo` (start-sorted) into `acc`.
fn accumulate_range(
    p: &Prepared,
    steps: &Steps,
    decode: &[bool],
    settings: &AnalysisSettings,
    ko: &[u32],
    mo: &[u32],
    acc: &mut Accumulated,
) {
    let trace = p.trace;
    let (k, m) = (&trace.kernels, &trace.memops);
    let any_decode = decode.iter().any(|&d| d);
    // Scope: the decode steps; the iterations of a training trace; all steps when none is a
    // decode step; the whole primary device without steps.
    if !ko.is_empty() || !mo.is_empty() {
        let acts = merge_two(
            ko.iter().map(|&i| (k.gpu_start_ns[i as usize], i as i64)),
            mo.iter()
                .map(|&i| (m.gpu_start_ns[i as usize], -(i as i64) - 1)),
        );
        let mut sp = 0usize;
        for (start, tag) in acts {
            let (is_memop, idx) = if tag >= 0 {
                (false, tag as usize)
            } else {
                (true, (-tag - 1) as usize)
            };
            let (end, b, name) = if is_memop {
                (m.gpu_end_ns[idx], p.memop_bucket[idx] as usize, m.name[idx])
            } else {
                (
                    k.gpu_end_ns[idx],
                    p.kernel_bucket[idx] as usize,
                    k.name[idx],
                )
            };
            while sp < steps.steps.len() && steps.steps[sp].gpu_end_ns <= start {
                sp += 1;
            }
            let in_step = sp < steps.steps.len() && steps.steps[sp].gpu_start_ns <= start;
            // Copies that end before the first step (loading the weights: 8 GB of HtoD in a
            // llama.cpp recording) are set-up, not work acc.outside the steps.
            let loading = is_memop && steps.steps.first().is_some_and(|f| end <= f.gpu_start_ns);
            if !loading {
                acc.activity_total_ns = acc.activity_total_ns.saturating_add((end - start).max(0));
            }
            if in_step {
                acc.activity_in_steps_ns = acc
                    .activity_in_steps_ns
                    .saturating_add((end - start).max(0));
            }
            let in_scope = if steps.steps.is_empty() {
                acc.outside.add(b, start, end, tag);
                true
            } else if in_step {
                acc.accs[sp].add(b, start, end, tag);
                if !is_memop {
                    let bytes = k.bytes.get(idx).copied().unwrap_or(-1);
                    let flops = k.flops.get(idx).copied().unwrap_or(-1);
                    acc.accs[sp].cost(b, bytes, flops, end - start);
                }
                decode[sp] || !any_decode
            } else {
                false
            };
            if in_step && steps.steps[sp].phase == Phase::Prefill {
                acc.prefill_names
                    .add(is_memop, name, b as u8, (end - start).max(0));
            }
            if in_scope {
                if settings.group_by.is_some() {
                    acc.scope_acts.push(tag);
                }
                acc.names.add(is_memop, name, b as u8, (end - start).max(0));
                if !is_memop {
                    acc.kernel_ns_in_scope += (end - start).max(0);
                    if b == Bucket::Other as usize {
                        acc.other_kernel_ns += (end - start).max(0);
                    }
                }
            }
        }
    }
}

/// Why the GPU sat idle inside the `active` steps and between them, by the host scopes
/// around each gap; `None` without active steps or without launch records.
fn host_idle_of(
    trace: &gapscope_traces::Trace,
    hi: &HostIndex,
    accs: &[StepAcc],
    active: &[usize],
    scope_mean: Option<f64>,
    settings: &AnalysisSettings,
) -> Option<host::HostIdleReport> {
    if active.is_empty() || trace.launches.len == 0 {
        return None;
    }
    let mut inside = Causes::default();
    let mut att = IdleAttribution::new(trace, &hi.forest, &hi.launch_map);
    for &i in active {
        for &(a, b, tag) in &accs[i].gaps {
            att.gap(a, b, tag, &mut inside);
        }
    }
    let mut between = Causes::default();
    let mut between_att = IdleAttribution::new(trace, &hi.forest, &hi.launch_map);
    for w in active.windows(2) {
        let (prev, cur) = (&accs[w[0]], &accs[w[1]]);
        between_att.gap(prev.last_end, cur.first_start, cur.first_tag, &mut between);
    }
    Some(host::report::build(
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
        },
        trace,
    ))
}

/// Where the report's figures come from: the input, its GPUs and what it holds.
fn source_info(imported: &Imported, p: &Prepared, steps: &Steps, notes: Vec<String>) -> SourceInfo {
    let trace = &imported.trace;
    let (graph_launches, graph_kernels) = graph_counts(trace);
    SourceInfo {
        path: trace.manifest.source_path.clone().unwrap_or_default(),
        converted_from: None,
        format: imported.format.as_str().to_owned(),
        gpus: trace
            .manifest
            .gpus
            .iter()
            .map(|g| match g.sm_count {
                Some(sm) => format!("{}: {} ({} SMs)", g.device, g.name, sm),
                None => format!("{}: {}", g.device, g.name),
            })
            .collect(),
        step_gpu: steps
            .device
            .or(p.primary_device())
            .and_then(|d| trace.manifest.gpus.iter().find(|g| g.device == d))
            .map(|g| g.name.clone())
            .filter(|n| !n.is_empty()),
        kernels: trace.kernels.len,
        memops: trace.memops.len,
        launches: trace.launches.len,
        markers: trace.markers.len,
        scopes: trace.scopes.len(),
        graph_launches,
        graph_kernels,
        truncated: trace.manifest.truncated,
        untimed_events: trace.manifest.untimed_events,
        defects: imported.defects.clone(),
        model_config: trace.manifest.model_config.clone(),
        engine_config: trace.manifest.engine_config.clone(),
        notes,
    }
}

/// NVML telemetry of the steps' device over the decode steps (the device's kernel span
/// without steps).
fn telemetry_of(
    p: &Prepared,
    steps: &Steps,
    warnings: &mut Vec<String>,
) -> Option<TelemetryReport> {
    let k = &p.trace.kernels;
    let device = steps.device.or(p.primary_device());
    let kernel_span = device.and_then(|d| {
        let on = p.kernels_on(d);
        let start = k.gpu_start_ns[*on.first()? as usize];
        let end = on.iter().map(|&i| k.gpu_end_ns[i as usize]).max()?;
        Some((start, end.max(start)))
    });
    telemetry::telemetry(
        &p.trace.samples,
        device,
        telemetry::window(&steps.steps, kernel_span),
        warnings,
    )
}

/// Graph launches on the host and the kernels they replayed: kernels sharing a graph
/// launch's correlation, or carrying a graph id.
fn graph_counts(trace: &gapscope_traces::Trace) -> (usize, usize) {
    let l = &trace.launches;
    let graph_names: Vec<bool> = trace
        .strings
        .values()
        .iter()
        .map(|v| v.contains("GraphLaunch"))
        .collect();
    let graph_launches: Vec<usize> = (0..l.len)
        .filter(|&i| {
            graph_names
                .get(l.name[i] as usize)
                .copied()
                .unwrap_or(false)
        })
        .collect();
    let corr: std::collections::HashSet<u64> =
        graph_launches.iter().map(|&i| l.correlation[i]).collect();
    let k = &trace.kernels;
    let has_graph_id = k.graph_id.len() == k.len;
    let kernels = (0..k.len)
        .filter(|&i| (has_graph_id && k.graph_id[i] != 0) || corr.contains(&k.correlation[i]))
        .count();
    (graph_launches.len(), kernels)
}

fn pct(a: f64, b: f64) -> f64 {
    if b > 0.0 { 100.0 * a / b } else { 0.0 }
}

fn device_busy(p: &Prepared, d: u32) -> DeviceBusy {
    let k = &p.trace.kernels;
    let m = &p.trace.memops;
    let ki = || {
        p.kernels_on(d)
            .iter()
            .map(|&i| (k.gpu_start_ns[i as usize], k.gpu_end_ns[i as usize]))
    };
    let mi = || {
        p.memops_on(d)
            .iter()
            .map(|&i| (m.gpu_start_ns[i as usize], m.gpu_end_ns[i as usize]))
    };
    // One pass over the kernels; a second over both only where the device has memops.
    let kernels = extent_sorted(ki());
    let all = if p.memops_on(d).is_empty() {
        kernels
    } else {
        extent_sorted(merge_two(ki(), mi()))
    };
    let (lo, hi) = (all.lo, all.hi);
    let span = if hi > lo { hi - lo } else { 0 };
    let kernel_busy = kernels.union;
    let busy = all.union;
    DeviceBusy {
        device: d,
        span_ns: span,
        kernel_busy_ns: kernel_busy,
        busy_ns: busy,
        kernel_busy_pct: pct(kernel_busy as f64, span as f64),
        busy_pct: pct(busy as f64, span as f64),
    }
}

#[cfg(test)]
mod tests {
    use gapscope_traces::{KernelRow, Manifest, MarkerRow, MarkerSource, Trace};

    use super::*;
    use crate::import::InputFormat;

    /// Engine-marked steps of `phases`, each `len` ns long with one 500 ns kernel, 1 µs apart.
    fn trace(phases: &[(Phase, i64)]) -> Imported {
        let mut t = Trace::new(Manifest::new("test"));
        let k = t.strings.intern("gemv_bf16_b1");
        let mut now = 1_000;
        for &(ph, len) in phases {
            let name = t.strings.intern(ph.as_str());
            t.kernels.push(KernelRow {
                name: k,
                gpu_start_ns: now,
                gpu_end_ns: now + 500,
                ..KernelRow::default()
            });
            t.markers.push(MarkerRow {
                name,
                source: MarkerSource::Engine as u8,
                phase: ph as u8,
                gpu_start_ns: now,
                gpu_end_ns: now + len,
                batch_size: 8,
                ..MarkerRow::default()
            });
            now += 1_000_000;
        }
        Imported {
            trace: t,
            format: InputFormat::Native,
            warnings: Vec::new(),
            defects: Vec::new(),
        }
    }

    fn report(phases: &[(Phase, i64)]) -> Report {
        analyze(
            &trace(phases),
            &RuleSet::builtin(),
            &AnalysisSettings::default(),
        )
    }

    #[test]
    fn mixed_steps_are_reported_apart_and_stay_out_of_tpot() {
        let (d, m, p) = (Phase::Decode, Phase::Mixed, Phase::Prefill);
        let r = report(&[
            (p, 900_000),
            (d, 600_000),
            (d, 600_000),
            (m, 800_000),
            (d, 600_000),
            (d, 600_000),
            (d, 600_000),
        ]);
        let s = &r.steps;
        assert_eq!((s.decode_steps, s.prefill_steps, s.mixed_steps), (5, 1, 1));
        // Periods only between consecutive decode steps: 1-2, 4-5, 5-6.
        assert_eq!(s.tpot_ms.unwrap().n, 3);
        assert_eq!(s.series.tpot_ms.len(), 3);
        let mixed = s.mixed_ms.unwrap();
        assert_eq!(mixed.n, 1);
        assert!((mixed.median - 0.8).abs() < 1e-9);
        assert_eq!(s.decode_span_ms.unwrap().n, 5);
        assert_eq!(s.batch_size, Some(8));
        assert_eq!(s.kind, StepKind::InferenceSteps);
    }

    #[test]
    fn a_single_decode_step_keeps_its_span_and_a_mixed_only_trace_has_no_tpot() {
        let r = report(&[(Phase::Decode, 700_000)]);
        assert!(r.steps.tpot_ms.is_none());
        assert!((r.steps.decode_span_ms.unwrap().median - 0.7).abs() < 1e-9);

        let r = report(&[(Phase::Mixed, 700_000)]);
        assert_eq!(r.steps.decode_steps, 0);
        assert!(r.steps.tpot_ms.is_none() && r.steps.decode_span_ms.is_none());
        // The bucket table covers the mixed step rather than nothing.
        let gemv = r.buckets.iter().find(|b| b.bucket == Bucket::Gemv).unwrap();
        assert_eq!(gemv.calls, 1);
        assert!(r.plausibility.plausible, "{:?}", r.plausibility);
    }

    #[test]
    fn training_iterations_are_not_tpot() {
        let mut imp = trace(&[(Phase::Decode, 600_000); 4]);
        let t = &mut imp.trace;
        let name = t.strings.intern("ProfilerStep#1");
        for i in 0..t.markers.len {
            t.markers.name[i] = name;
            t.markers.source[i] = MarkerSource::KinetoGpuAnnotation as u8;
            t.markers.phase[i] = Phase::Unknown as u8;
        }
        let opt = t.strings.intern("Optimizer.step#SGD.step");
        t.markers.push(MarkerRow {
            name: opt,
            source: MarkerSource::KinetoUserAnnotation as u8,
            host_start_ns: 0,
            host_end_ns: 10,
            ..MarkerRow::default()
        });
        let r = analyze(&imp, &RuleSet::builtin(), &AnalysisSettings::default());
        let s = &r.steps;
        assert_eq!(s.kind, StepKind::TrainingIterations);
        assert_eq!((s.decode_steps, s.iterations), (0, 4));
        assert!(s.tpot_ms.is_none() && s.decode_span_ms.is_none());
        assert!(s.series.tpot_ms.is_empty());
        assert!((s.iteration_ms.unwrap().median - 0.6).abs() < 1e-9);
        assert!((s.iteration_period_ms.unwrap().median - 1.0).abs() < 1e-9);
        assert!(
            r.buckets
                .iter()
                .any(|b| b.bucket == Bucket::Gemv && b.calls == 4)
        );
    }
}
