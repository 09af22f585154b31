//! Automatic step detection from the periodic kernel-name sequence, for traces without step
//! markers (or with `--no-markers`).
//!
//! An anchor kernel cuts the sequence into segments, one per step. Most segments repeat the
//! same name sequence (the modal segment); a segment that does not, and that does more
//! GEMM/attention work on other matmul kernels or for much longer, is a prefill: before,
//! between or after the decode steps.

use std::collections::{HashMap, HashSet};

use gapscope_traces::Phase;

use super::{PhaseSource, Step, StepKind, StepSource, Steps};
use crate::analysis::prepared::Prepared;
use crate::analysis::stats::upper_median;
use crate::bucket::Bucket;

mod boundaries;

use boundaries::{start_after_idle, step_start, widen_to_step};

/// A segment that differs from the modal one is a prefill only with at least this much
/// GEMM/attention time, relative to the median of the modal segments.
const PREFILL_MIN_HEAVY_RATIO: f64 = 1.2;
/// ... and either its matmuls run on kernels the modal segment does not use, or its
/// GEMM/attention time is at least this ratio of the modal median.
const PREFILL_LONG_HEAVY_RATIO: f64 = 2.0;
/// An anchor qualifies when this share of neighbouring segment pairs are identical (a kernel
/// variant that switches once, halfway, still qualifies) ...
const MIN_SAME_NEIGHBOURS: f64 = 0.9;
/// ... or when this share of its segments repeat the modal one (several odd segments, such
/// as one prefill per request, spread over the trace).
const MIN_MODAL_SHARE: f64 = 0.8;

/// Matmul work: a prefill runs it on other kernels than decode (another token count).
fn is_matmul(b: Bucket) -> bool {
    matches!(
        b,
        Bucket::Gemv | Bucket::GemmQuant | Bucket::GemmDense | Bucket::Moe
    )
}

/// GEMM/attention work, the part of a step that grows with the tokens it processes.
fn is_heavy(b: Bucket) -> bool {
    is_matmul(b) || matches!(b, Bucket::Attention | Bucket::LinearAttnSsm)
}

/// The kernel-name sequence of one device with prefix hashes, so that any two segments
/// compare in O(1) (equal hashes are confirmed on the names where it matters).
struct Sequence {
    names: Vec<u32>,
    prefix: Vec<u64>,
    pow: Vec<u64>,
}

impl Sequence {
    fn new(names: Vec<u32>) -> Self {
        const B: u64 = 0x100_0000_01b3;
        let n = names.len();
        let mut prefix = vec![0u64; n + 1];
        let mut pow = vec![1u64; n + 1];
        for j in 0..n {
            prefix[j + 1] = prefix[j].wrapping_mul(B).wrapping_add(names[j] as u64 + 1);
            pow[j + 1] = pow[j].wrapping_mul(B);
        }
        Self { names, prefix, pow }
    }

    fn hash(&self, a: usize, b: usize) -> u64 {
        self.prefix[b].wrapping_sub(self.prefix[a].wrapping_mul(self.pow[b - a]))
    }

    /// Length and hash: the identity of a segment's name sequence.
    fn key(&self, (a, b): (usize, usize)) -> (usize, u64) {
        (b - a, self.hash(a, b))
    }
}

/// Segments cut at each anchor position: from one occurrence to the next, the last to the end.
fn segments(pos: &[usize], n: usize) -> Vec<(usize, usize)> {
    pos.iter()
        .enumerate()
        .map(|(w, &a)| (a, pos.get(w + 1).copied().unwrap_or(n)))
        .collect()
}

/// Index of the first segment of the most common name sequence, and how many share it.
fn modal(seq: &Sequence, segs: &[(usize, usize)]) -> (usize, usize) {
    let mut count: HashMap<(usize, u64), (usize, usize)> = HashMap::new();
    for (w, &s) in segs.iter().enumerate() {
        count.entry(seq.key(s)).or_insert((w, 0)).1 += 1;
    }
    count
        .into_values()
        .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
        .unwrap_or((0, 0))
}

/// Whether the segments cut at `pos` repeat over most of the trace (see
/// [`MIN_SAME_NEIGHBOURS`] and [`MIN_MODAL_SHARE`]).
fn repeats(seq: &Sequence, pos: &[usize], n: usize, min_share: usize) -> bool {
    let c = pos.len();
    if c < 3 {
        return false;
    }
    // The periodic region must be a large part of the trace (1 / `min_share` of it), not a
    // short burst. A region that runs to the trace's end (its last segment at most twice the
    // mean period) is measured from its start: what comes before it is the prompt's prefill
    // (llama.cpp at npl 128 prefills 16k tokens, four times the kernels of 8 decode steps),
    // judged as such later.
    let span = pos[c - 1] - pos[0];
    let to_end = (n - pos[c - 1]) * (c - 1) <= 2 * span;
    let whole = if to_end { n - pos[0] } else { n };
    if span * c * min_share < whole * (c - 1) {
        return false;
    }
    // The last segment runs to the end of the trace; only whole periods are compared.
    let segs: Vec<(usize, usize)> = pos.windows(2).map(|w| (w[0], w[1])).collect();
    let comparisons = segs.len() - 1;
    if comparisons == 0 {
        return false;
    }
    let same = segs
        .windows(2)
        .filter(|w| seq.key(w[0]) == seq.key(w[1]))
        .count();
    let (_, modal_count) = modal(seq, &segs);
    (same as f64) >= MIN_SAME_NEIGHBOURS * comparisons as f64
        || (modal_count as f64) >= MIN_MODAL_SHARE * segs.len() as f64
}

/// The median GPU idle before the kernels at positions `at` (the upper one of an even count);
/// 0 for none.
fn median_gap(gap_before: &[i64], at: impl Iterator<Item = usize>) -> i64 {
    let mut g: Vec<i64> = at.map(|j| gap_before[j]).collect();
    upper_median(&mut g).unwrap_or(0)
}

/// Most occurrences of one name per step that the anchor search tries (see [`find_anchor`]).
const MAX_STRIDE: usize = 4;

/// The anchor: a kernel name, and which of its occurrences start a step (every `stride`-th
/// from `offset`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Anchor {
    name: u32,
    stride: usize,
    offset: usize,
}

impl Anchor {
    fn positions(&self, all: &[usize]) -> Vec<usize> {
        all.iter()
            .copied()
            .skip(self.offset)
            .step_by(self.stride)
            .collect()
    }
}

/// The anchor kernel name: every name occurring at least three times is a candidate. A
/// candidate qualifies when its segments repeat (see [`MIN_SAME_NEIGHBOURS`] and
/// [`MIN_MODAL_SHARE`]) over most of the trace. The qualifying candidate with the fewest
/// occurrences is the step (a per-layer kernel repeats more often, and its segments break at
/// every step boundary); among equals, the one after the largest idle gap marks the step start.
///
/// A name that runs more than once per step, and whose own segments therefore do not repeat
/// (llama.cpp gathers the token embedding and the output rows with the same `k_get_rows`
/// kernel in every step), is also tried with every 2nd, 3rd or 4th occurrence as the step
/// start, from each offset; the smallest such stride counts. A name whose own segments
/// already repeat is not tried so: every 2nd occurrence of a per-step kernel would make
/// steps of two steps.
fn find_anchor(
    seq: &Sequence,
    positions: &HashMap<u32, Vec<usize>>,
    gap_before: &[i64],
) -> Option<Anchor> {
    let n = seq.names.len();
    // (count, stride, median gap, name, offset): fewest occurrences, then the plain anchor,
    // then the largest gap before it.
    let mut best: Option<(usize, usize, i64, u32, usize)> = None;
    let consider =
        |a: Anchor, pos: &[usize], best: &mut Option<(usize, usize, i64, u32, usize)>| {
            let c = pos.len();
            let g = median_gap(gap_before, pos.iter().copied());
            let better = match *best {
                None => true,
                Some((bc, bs, bg, bn, bo)) => {
                    (c, a.stride, std::cmp::Reverse(g), a.name, a.offset)
                        < (bc, bs, std::cmp::Reverse(bg), bn, bo)
                }
            };
            if better {
                *best = Some((c, a.stride, g, a.name, a.offset));
            }
        };
    // Plain anchors first; the period (median kernels per segment) of the best one bounds
    // the stride anchors below.
    let mut strided: Vec<(u32, &Vec<usize>)> = Vec::new();
    for (&name, pos) in positions {
        let c = pos.len();
        if c < 3 || c > n / 2 {
            continue;
        }
        if repeats(seq, pos, n, 2) {
            let a = Anchor {
                name,
                stride: 1,
                offset: 0,
            };
            consider(a, pos, &mut best);
        } else {
            strided.push((name, pos));
        }
    }
    let period = |p: &[usize]| {
        let mut d: Vec<usize> = p.windows(2).map(|w| w[1] - w[0]).collect();
        upper_median(&mut d).unwrap_or(0)
    };
    let plain_period = best.map(|(_, _, _, name, _)| period(&positions[&name]));
    for (name, pos) in strided {
        let c = pos.len();
        for stride in 2..=MAX_STRIDE {
            if c / stride < 3 {
                break;
            }
            // The smallest stride that repeats is the name's count per step: a larger one
            // would make steps of several steps.
            let mut found = false;
            for offset in 0..stride {
                let a = Anchor {
                    name,
                    stride,
                    offset,
                };
                let p = a.positions(pos);
                // A strided anchor must find a longer period than the best plain one (at
                // least 1.5 times): an attention variant that takes over halfway repeats
                // every 2nd layer of the steps a plain anchor already finds, in half the
                // trace, and is no step.
                // A third of the trace: a strided anchor is held to a longer period than the
                // plain ones (below), so it may leave a long prefill (llama.cpp's 32 × 128
                // prompt tokens before 8 decode steps) outside its periodic region.
                if repeats(seq, &p, n, 3) {
                    found = true;
                    if plain_period.is_none_or(|pp| 2 * period(&p) >= 3 * pp) {
                        consider(a, &p, &mut best);
                    }
                }
            }
            if found {
                break;
            }
        }
    }
    best.map(|(_, stride, _, name, offset)| Anchor {
        name,
        stride,
        offset,
    })
}

/// What a segment holds, for telling a prefill from a decode step.
struct Work {
    /// Summed duration of its GEMM/attention kernels.
    heavy_ns: i64,
    has_heavy: bool,
    /// It runs matmul kernels that the modal segment does not.
    other_matmuls: bool,
}

impl Work {
    /// The work of the kernels `a..b` of `order` (one device's, by start), whose names are
    /// `names`; `modal_set` holds the modal segment's names.
    fn of(
        p: &Prepared,
        order: &[u32],
        names: &[u32],
        modal_set: &HashSet<u32>,
        (a, b): (usize, usize),
    ) -> Self {
        let k = &p.trace.kernels;
        let mut w = Work {
            heavy_ns: 0,
            has_heavy: false,
            other_matmuls: false,
        };
        for (&i, name) in order[a..b].iter().zip(&names[a..b]) {
            let i = i as usize;
            let bk = Bucket::ALL[p.kernel_bucket[i] as usize];
            if !is_heavy(bk) {
                continue;
            }
            w.has_heavy = true;
            w.heavy_ns = w
                .heavy_ns
                .saturating_add(k.gpu_end_ns[i].saturating_sub(k.gpu_start_ns[i]).max(0));
            if is_matmul(bk) && !modal_set.contains(name) {
                w.other_matmuls = true;
            }
        }
        w
    }
}

/// Finds the steps of one device from its periodic kernel sequence. With `whole_periods`
/// (training iterations), only the segments from one anchor to the next count: the work
/// before the first anchor and after the last is a partial iteration.
#[expect(
    clippy::too_many_lines,
    reason = "the tiers of the period search are tried in order over shared candidate state; apart they would pass that state around"
)]
pub(super) fn auto_detect(p: &Prepared, device: u32, whole_periods: bool) -> Option<Steps> {
    let order = p.kernels_on(device);
    let k = &p.trace.kernels;
    let n = order.len();
    if n < 6 {
        return None;
    }
    let seq = Sequence::new(order.iter().map(|&i| k.name[i as usize]).collect());
    let mut gap_before = vec![0i64; n];
    let mut max_end = i64::MIN;
    for (j, &i) in order.iter().enumerate() {
        let i = i as usize;
        gap_before[j] = if max_end == i64::MIN {
            0
        } else {
            k.gpu_start_ns[i].saturating_sub(max_end).max(0)
        };
        max_end = max_end.max(k.gpu_end_ns[i]);
    }
    let mut positions: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, &nm) in seq.names.iter().enumerate() {
        positions.entry(nm).or_default().push(j);
    }
    let anchor = find_anchor(&seq, &positions, &gap_before)?;
    let anchor = widen_to_step(
        p,
        order,
        &seq,
        anchor,
        &positions[&anchor.name],
        &gap_before,
    );
    let all = &positions[&anchor.name];
    let pos = &start_after_idle(p, device, &seq, anchor.positions(all), &gap_before);
    let segs = segments(pos, n);
    let (m, _) = modal(&seq, &segs);
    let (ma, mb) = segs[m];
    let modal_names = &seq.names[ma..mb];
    let is_modal = |(a, b): (usize, usize)| seq.names[a..b] == *modal_names;
    let modal_set: HashSet<u32> = modal_names.iter().copied().collect();
    let bucket = |j: usize| Bucket::ALL[p.kernel_bucket[order[j] as usize] as usize];
    let work = |seg| Work::of(p, order, &seq.names, &modal_set, seg);
    let works: Vec<Work> = segs.iter().map(|&s| work(s)).collect();
    let mut modal_heavy: Vec<i64> = segs
        .iter()
        .zip(&works)
        .filter(|(s, _)| is_modal(**s))
        .map(|(_, w)| w.heavy_ns)
        .collect();
    modal_heavy.sort_unstable();
    let median_heavy = modal_heavy.get(modal_heavy.len() / 2).copied().unwrap_or(0) as f64;
    let is_prefill = |s: (usize, usize), w: &Work| {
        let h = w.heavy_ns as f64;
        !is_modal(s)
            && w.has_heavy
            && h >= PREFILL_MIN_HEAVY_RATIO * median_heavy
            && (w.other_matmuls || h >= PREFILL_LONG_HEAVY_RATIO * median_heavy)
    };

    let memops = p.memops_on(device);
    let start_of =
        |j: usize| step_start(p, memops, k.gpu_start_ns[order[j] as usize], gap_before[j]);
    let end_of = |(a, b): (usize, usize)| match b < n {
        true => start_of(b),
        false => order[a..]
            .iter()
            .map(|&i| k.gpu_end_ns[i as usize])
            .max()
            .unwrap_or(start_of(a)),
    };
    let mut steps = Vec::with_capacity(segs.len() + 1);
    let mut prefills = 0usize;
    for (w, (&s, work)) in segs.iter().zip(&works).enumerate() {
        if whole_periods && s.1 >= n {
            break;
        }
        // A last segment that is the start of a modal one and less than half as long is
        // not a step: the trace (or the program's work) ends inside it.
        let len = s.1 - s.0;
        if s.1 >= n
            && w > 0
            && 2 * len < modal_names.len()
            && seq.names[s.0..s.1] == modal_names[..len]
        {
            break;
        }
        let phase = if is_prefill(s, work) {
            prefills += 1;
            Phase::Prefill
        } else {
            Phase::Decode
        };
        steps.push(Step {
            phase,
            gpu_start_ns: start_of(s.0),
            gpu_end_ns: end_of(s),
        });
        // Work before the first anchor: a prefill when it holds GEMM/attention work and is
        // not the tail of a periodic step (a recording that began mid-step). It joins a
        // first segment that is itself a prefill.
        //
        // Before that, decode steps whose kernels are the modal segment's but for a few
        // variants (llama.cpp's first decode step gathers with another `get_rows` kernel,
        // so its anchor differs) are peeled off the end of that work.
        if w == 0 && !whole_periods {
            let ml = modal_names.len();
            let mut lead_end = pos[0];
            let mut lead: Vec<(usize, usize)> = Vec::new();
            while ml > 0 && lead_end >= ml {
                let a = lead_end - ml;
                let differ = seq.names[a..lead_end]
                    .iter()
                    .zip(modal_names)
                    .filter(|(x, y)| x != y)
                    .count();
                if differ * 50 > ml.max(100) {
                    break;
                }
                lead.push((a, lead_end));
                lead_end = a;
            }
            let lead_steps = lead.iter().rev().map(|&(a, b)| Step {
                phase: Phase::Decode,
                gpu_start_ns: start_of(a),
                gpu_end_ns: start_of(b),
            });
            let prefill_first = phase == Phase::Prefill && lead.is_empty();
            let mut front: Vec<Step> = Vec::new();
            if leading_prefill(&seq, lead_end, modal_names, &bucket) {
                if prefill_first {
                    steps[0].gpu_start_ns = start_of(0);
                } else {
                    prefills += 1;
                    front.push(Step {
                        phase: Phase::Prefill,
                        gpu_start_ns: start_of(0),
                        gpu_end_ns: start_of(lead_end),
                    });
                }
            }
            front.extend(lead_steps);
            steps.splice(0..0, front);
        }
    }
    if steps.is_empty() {
        return None;
    }
    Some(Steps {
        source: StepSource::Periodic {
            anchor: p.trace.strings.get(anchor.name).to_owned(),
            stride: anchor.stride,
            starts: pos.len(),
            occurrences: all.len(),
            prefills,
        },
        batch: vec![0; steps.len()],
        numbers: Vec::new(),
        steps,
        device: Some(device),
        contiguous: true,
        kind: StepKind::InferenceSteps,
        engine: None,
        phase_source: PhaseSource::None,
        training: None,
        doubts: Vec::new(),
        spec: None,
        context_tokens: None,
    })
}

/// Whether the `first` kernels before the first anchor are a prefill: at least two kernels,
/// GEMM/attention work among them, and not the tail of the modal segment.
fn leading_prefill(
    seq: &Sequence,
    first: usize,
    modal_names: &[u32],
    bucket: &impl Fn(usize) -> Bucket,
) -> bool {
    first >= 2
        && (0..first).any(|j| is_heavy(bucket(j)))
        && !modal_names.ends_with(&seq.names[..first])
}
