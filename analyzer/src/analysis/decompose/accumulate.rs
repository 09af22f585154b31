//! One pass over the steps' device: each activity to its step, per-step accumulators, and
//! the per-name times of the report's steps and of prefill steps.

use gapscope_traces::Phase;

use super::{AnalysisSettings, NB};
use crate::analysis::intervals::merge_two;
use crate::analysis::prepared::Prepared;
use crate::analysis::steps::Steps;
use crate::bucket::Bucket;
use crate::tables::names::NameAccumulator;
use crate::tables::{ActivityKind, NO_STEP};

/// A step's model-derived cost per bucket (engine traces).
#[derive(Clone, Default)]
pub(super) struct StepCost {
    pub(super) bytes: [i64; NB],
    pub(super) flops: [i64; NB],
    pub(super) ns: [i64; NB],
}

/// Per-step accumulators on the primary device.
#[derive(Clone)]
pub(super) struct StepAcc {
    pub(super) bucket_ns: [i64; NB],
    pub(super) calls: [u32; NB],
    /// Engine traces: model-derived bytes and FLOPs, and the time of the kernels that
    /// carry them (so a bucket's % of floor only counts kernels with a cost). Allocated at
    /// the first kernel with a cost: other traces pay 8 bytes a step for it, not 408.
    pub(super) cost: Option<Box<StepCost>>,
    pub(super) first_start: i64,
    pub(super) last_end: i64,
    pub(super) busy_ns: i64,
    pub(super) cur_start: i64,
    pub(super) cur_end: i64,
    /// Longest idle gap inside the step and where it starts.
    pub(super) max_gap: i64,
    pub(super) max_gap_at: i64,
    /// Idle gaps inside the step: start, end, and the activity that ends it (kernel index,
    /// or `-(memop index + 1)`); kept only when `keep_gaps` (the trace has launch records
    /// for the idle attribution to read).
    pub(super) gaps: Vec<(i64, i64, i64)>,
    pub(super) keep_gaps: bool,
    /// The step's first activity (same encoding).
    pub(super) first_tag: i64,
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
    pub(super) fn add(&mut self, b: usize, s: i64, e: i64, tag: i64) {
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
    pub(super) fn cost(&mut self, b: usize, bytes: i64, flops: i64, ns: i64) {
        if bytes < 0 && flops < 0 {
            return;
        }
        let c = self.cost.get_or_insert_with(Default::default);
        c.bytes[b] += bytes.max(0);
        c.flops[b] += flops.max(0);
        c.ns[b] += ns.max(0);
    }

    /// Model-derived bytes, FLOPs and costed time of bucket `b` (zeros without a cost).
    pub(super) fn cost_of(&self, b: usize) -> (i64, i64, i64) {
        self.cost
            .as_ref()
            .map_or((0, 0, 0), |c| (c.bytes[b], c.flops[b], c.ns[b]))
    }

    pub(super) fn close(&mut self) {
        if self.cur_end > self.cur_start {
            self.busy_ns += self.cur_end - self.cur_start;
        }
        self.cur_start = i64::MIN;
        self.cur_end = i64::MIN;
    }
}

/// What one pass over the activities gives.
pub(super) struct Accumulated {
    pub(super) accs: Vec<StepAcc>,
    /// Without steps: the whole device as one pseudo-step.
    pub(super) outside: StepAcc,
    /// Per-name times over the report's steps and over prefill steps.
    pub(super) names: NameAccumulator,
    pub(super) prefill_names: NameAccumulator,
    pub(super) other_kernel_ns: i64,
    pub(super) kernel_ns_in_scope: i64,
    pub(super) activity_in_steps_ns: i64,
    pub(super) activity_total_ns: i64,
    /// `report --by`: the activities in scope (kernel index, or `-(memop index + 1)`).
    pub(super) scope_acts: Vec<i64>,
    /// Each kernel's and memop's step ([`NO_STEP`] outside the steps or on another device).
    pub(super) kernel_step: Vec<u32>,
    pub(super) memop_step: Vec<u32>,
}

/// The accumulation pass: every kernel and memop of the steps' device, in start order, added
/// to its step (or to `outside` without steps) and, when in scope, to the per-name times.
/// A long pass runs as two halves on two threads, split at a step boundary that no step
/// crosses: each half then meets its activities in the same order and with the same steps
/// as the single pass, and the sums it adds to are integers.
pub(super) fn accumulate(
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
        names: NameAccumulator::new(n),
        prefill_names: NameAccumulator::new(n),
        other_kernel_ns: 0,
        kernel_ns_in_scope: 0,
        activity_in_steps_ns: 0,
        activity_total_ns: 0,
        scope_acts: Vec::new(),
        kernel_step: vec![NO_STEP; k.len],
        memop_step: vec![NO_STEP; m.len],
    };
    let mut acc = match steps.device.or(p.primary_device()) {
        None => fresh(),
        Some(dev) => {
            let ko = p.kernels_on(dev);
            let mo = p.memops_on(dev);
            let run = |ko: &[u32], mo: &[u32]| {
                let mut acc = fresh();
                accumulate_range(p, steps, decode, settings, (ko, mo), &mut acc);
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
    steps: &[crate::analysis::steps::Step],
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
        for (mine, theirs) in [
            (&mut self.kernel_step, &other.kernel_step),
            (&mut self.memop_step, &other.memop_step),
        ] {
            for (a, &b) in mine.iter_mut().zip(theirs) {
                if b != NO_STEP {
                    *a = b;
                }
            }
        }
        self
    }
}

/// The pass over the kernels and memops `(ko, mo)` (start-sorted) into `acc`.
fn accumulate_range(
    p: &Prepared,
    steps: &Steps,
    decode: &[bool],
    settings: &AnalysisSettings,
    (ko, mo): (&[u32], &[u32]),
    acc: &mut Accumulated,
) {
    let trace = p.trace;
    let (k, m) = (&trace.kernels, &trace.memops);
    let any_decode = decode.iter().any(|&d| d);
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
            let kind = if is_memop {
                ActivityKind::Memop
            } else {
                ActivityKind::Kernel
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
            // llama.cpp recording) are set-up, not work outside the steps.
            let loading = is_memop && steps.steps.first().is_some_and(|f| end <= f.gpu_start_ns);
            if !loading {
                acc.activity_total_ns = acc.activity_total_ns.saturating_add((end - start).max(0));
            }
            if in_step {
                let slot = if is_memop {
                    &mut acc.memop_step
                } else {
                    &mut acc.kernel_step
                };
                slot[idx] = sp as u32;
                acc.activity_in_steps_ns = acc
                    .activity_in_steps_ns
                    .saturating_add((end - start).max(0));
            }
            let in_scope = if steps.steps.is_empty() {
                acc.outside.add(b, start, end, tag);
                true
            } else if in_step {
                acc.accs[sp].add(b, start, end, tag);
                // A collective's bytes are its message, not memory traffic: no roofline cost.
                if !is_memop && b != Bucket::Comm as usize {
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
                    .add(kind, name, b as u8, (end - start).max(0));
            }
            if in_scope {
                if settings.group_by.is_some() {
                    acc.scope_acts.push(tag);
                }
                acc.names.add(kind, name, b as u8, (end - start).max(0));
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
