//! Where the steps of a periodic kernel sequence begin: an anchor that runs once per group of
//! layers widens to the step, and a step starts after the host's idle between steps, not at
//! the anchor kernel (see `docs/decisions/2026-11-26-llamacpp-steps.md`).

use std::collections::HashSet;

use gapscope_traces::MemopKind;

use super::{
    Anchor, MIN_SAME_NEIGHBOURS, PREFILL_LONG_HEAVY_RATIO, Sequence, Work, median_gap, modal,
    segments,
};
use crate::analysis::prepared::Prepared;
use crate::analysis::stats::upper_median;

/// Most segments one step may hold when the anchor runs once per group of layers (see
/// [`widen_to_step`]).
const MAX_GROUPS_PER_STEP: usize = 128;

/// Widens an anchor that runs once per group of layers to one step: when its segments do not
/// repeat neighbour to neighbour (the group holding the LM head differs from the others) but
/// repeat every `m`-th segment, the smallest such `m` is the number of groups per step, and
/// every `m`-th occurrence starts a step (from the offset after the longest idle). Only when
/// the segment that differs is the rest of a step (no prefill: see the check inside).
///
/// A Qwen3.5-style hybrid repeats three gated-DeltaNet layers and one full-attention layer;
/// when no kernel runs exactly once per step (llama.cpp's LM head is the same `mul_mat_q` as
/// every projection), the full-attention kernel is the rarest that repeats, and would make
/// each group of four layers a step.
pub(super) fn widen_to_step(
    p: &Prepared,
    order: &[u32],
    seq: &Sequence,
    anchor: Anchor,
    all: &[usize],
    gap_before: &[i64],
) -> Anchor {
    let pos = anchor.positions(all);
    let keys: Vec<(usize, u64)> = pos.windows(2).map(|w| seq.key((w[0], w[1]))).collect();
    let c = keys.len();
    let same = |m: usize| {
        let hits = (0..c - m).filter(|&i| keys[i] == keys[i + m]).count();
        hits as f64 >= MIN_SAME_NEIGHBOURS * (c - m) as f64
    };
    if c < 6 || same(1) {
        return anchor;
    }
    let Some(m) = (2..=MAX_GROUPS_PER_STEP.min(c / 3)).find(|&m| same(m)) else {
        return anchor;
    };
    // The segment that differs every m-th must be the rest of a step (the LM head), not a
    // prefill that comes back every m-th step (one request after another): it runs the
    // modal segment's matmul kernels and is not twice as heavy.
    let segs: Vec<(usize, usize)> = pos.windows(2).map(|w| (w[0], w[1])).collect();
    let (mi, _) = modal(seq, &segs);
    let modal_key = keys[mi];
    let modal_set: HashSet<u32> = seq.names[segs[mi].0..segs[mi].1].iter().copied().collect();
    let work = |seg| Work::of(p, order, &seq.names, &modal_set, seg);
    let mut modal_heavy: Vec<i64> = (0..c)
        .filter(|&i| keys[i] == modal_key)
        .map(|i| work(segs[i]).heavy_ns)
        .collect();
    let median = upper_median(&mut modal_heavy).unwrap_or(0) as f64;
    let step_tail = (0..c - m)
        .filter(|&i| keys[i] != modal_key && keys[i + m] == keys[i])
        .any(|i| {
            let w = work(segs[i]);
            !(w.other_matmuls || w.heavy_ns as f64 >= PREFILL_LONG_HEAVY_RATIO * median)
        });
    if !step_tail {
        return anchor;
    }
    let o = (0..m)
        .max_by_key(|&o| {
            let at = pos.iter().skip(o).step_by(m).copied();
            (median_gap(gap_before, at), std::cmp::Reverse(o))
        })
        .unwrap_or(0);
    Anchor {
        name: anchor.name,
        stride: anchor.stride * m,
        offset: anchor.offset + o * anchor.stride,
    }
}

/// Where a step that starts with a kernel at `kernel_start` begins, given the GPU idle of
/// `idle` ns before that kernel: copies in that idle (the logits read back, the next
/// step's inputs written) split it, and the step begins with the activity after the longest
/// part, the host's work between the steps. Without copies in the idle, at the kernel.
pub(super) fn step_start(p: &Prepared, memops: &[u32], kernel_start: i64, idle: i64) -> i64 {
    if idle <= 0 {
        return kernel_start;
    }
    let m = &p.trace.memops;
    let from = kernel_start - idle;
    let (mut cursor, mut longest, mut start) = (from, -1i64, kernel_start);
    for i in memops_in(p, memops, from, kernel_start) {
        let (a, b) = (m.gpu_start_ns[i], m.gpu_end_ns[i]);
        if a - cursor > longest {
            (longest, start) = (a - cursor, a);
        }
        cursor = cursor.max(b);
    }
    if kernel_start - cursor > longest {
        start = kernel_start;
    }
    start
}

/// The memops (indices into the trace's memop table) that start in `[from, to)`, from the
/// start-sorted `memops` of one device.
fn memops_in<'a>(
    p: &'a Prepared,
    memops: &'a [u32],
    from: i64,
    to: i64,
) -> impl Iterator<Item = usize> + 'a {
    let start = &p.trace.memops.gpu_start_ns;
    let first = memops.partition_point(|&i| start[i as usize] < from);
    memops[first..]
        .iter()
        .map(|&i| i as usize)
        .take_while(move |&i| start[i] < to)
}

/// A step starts after the longest idle of its period when that idle is at least this long
/// (and twice the idle before the anchor): the host's work between two steps.
const MIN_BOUNDARY_IDLE_NS: i64 = 5_000;

/// Moves each step start from the anchor to the kernel of the period that follows the
/// longest GPU idle (median over the modal segments), when that idle is clearly longer than
/// the one before the anchor (see [`MIN_BOUNDARY_IDLE_NS`]) and holds a device-to-host copy
/// in most steps.
///
/// The anchor is only a kernel that runs once per step; where it runs inside the step is the
/// engine's business. llama.cpp's anchor is the `get_rows` of the last layer, and the host's
/// work between two steps (reading the logits, sampling, building the next graph) happens
/// before the first layer's norm: cut at the anchor, that idle would sit inside a step and be
/// called a launch gap. Cut after it, it is the host gap between steps that it is.
///
/// Segments that are not modal (a prefill) move to the same kernel name when it stands at
/// the same place, else to that name's occurrence after the longest idle in the segment, else
/// they stay. A last anchor whose step would start past the trace's end is dropped.
pub(super) fn start_after_idle(
    p: &Prepared,
    device: u32,
    seq: &Sequence,
    pos: Vec<usize>,
    gap_before: &[i64],
) -> Vec<usize> {
    let (order, k, memops) = (p.kernels_on(device), &p.trace.kernels, p.memops_on(device));
    let n = seq.names.len();
    let segs = segments(&pos, n);
    let (m, _) = modal(seq, &segs);
    let (ma, mb) = segs[m];
    let len = mb - ma;
    let modal_names = &seq.names[ma..mb];
    let whole: Vec<usize> = segs
        .iter()
        .filter(|&&(a, b)| b - a == len && seq.names[a..b] == *modal_names)
        .map(|&(a, _)| a)
        .collect();
    if len < 2 || whole.len() < 3 {
        return pos;
    }
    let idle_at = |d: usize| median_gap(gap_before, whole.iter().map(|&a| a + d));
    let at_anchor = idle_at(0);
    let Some((d, idle)) = (1..len)
        .map(|d| (d, idle_at(d)))
        .max_by_key(|&(d, g)| (g, std::cmp::Reverse(d)))
    else {
        return pos;
    };
    if idle < 2 * at_anchor || idle - at_anchor < MIN_BOUNDARY_IDLE_NS {
        return pos;
    }
    // The host reads the step's results back before it can start the next step: a
    // device-to-host copy in that idle, in most steps, tells the boundary from a stall of the
    // host inside a step (a Python-side pause in HF eager idles the GPU as long).
    let kind = &p.trace.memops.kind;
    let reads_back = |j: usize| {
        let to = k.gpu_start_ns[order[j] as usize];
        memops_in(p, memops, to - gap_before[j], to).any(|i| kind[i] == MemopKind::DtoH as u8)
    };
    if 2 * whole.iter().filter(|&&a| reads_back(a + d)).count() < whole.len() {
        return pos;
    }
    let target = modal_names[d];
    pos.iter()
        .enumerate()
        .filter_map(|(w, &p)| {
            let end = pos.get(w + 1).copied().unwrap_or(n);
            if p + d < end && seq.names[p + d] == target {
                Some(p + d)
            } else if p + d >= n {
                // The trace ends before the step after the last anchor starts.
                None
            } else {
                Some(
                    (p..end)
                        .filter(|&j| seq.names[j] == target)
                        .max_by_key(|&j| (gap_before[j], std::cmp::Reverse(j)))
                        .unwrap_or(p),
                )
            }
        })
        .collect()
}
