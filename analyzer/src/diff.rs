//! Two-trace diff: where the per-step gap between A and B lives, by bucket (so two different
//! engines compare through buckets, not kernel names), plus structural changes and what-ifs.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::analysis::Report;
use crate::bucket::Bucket;

/// Version of the JSON diff schema.
pub const DIFF_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    pub schema_version: u32,
    pub a: Side,
    pub b: Side,
    /// Mean step time of A minus B, ms (positive: A is slower).
    pub gap_ms: f64,
    pub buckets: Vec<BucketDelta>,
    /// The part of the gap no bucket explains: idle time (launch and host gaps) and overlap.
    pub residual_ms: f64,
    pub residual_share_pct: f64,
    pub structural: Structural,
    pub top_moved: Vec<KernelMove>,
    /// Predicted A step time if one bucket changed, best first.
    pub what_if: Vec<WhatIf>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub path: String,
    pub decode_steps: usize,
    /// Mean start-to-start step time, ms.
    pub step_ms: f64,
    /// Busy (kernels + memops) per step, ms.
    pub busy_ms: f64,
    pub graph_kernels: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct BucketDelta {
    pub bucket: Bucket,
    pub a_ms_per_step: f64,
    pub b_ms_per_step: f64,
    pub delta_ms: f64,
    /// delta / gap, %; bucket shares plus the residual share sum to 100%.
    pub share_of_gap_pct: f64,
    pub a_calls_per_step: f64,
    pub b_calls_per_step: f64,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Structural {
    /// Kernels per step, A and B.
    pub a_kernels_per_step: f64,
    pub b_kernels_per_step: f64,
    /// Names only in A (or only in B), with their calls per step.
    pub only_in_a: Vec<(String, f64)>,
    pub only_in_b: Vec<(String, f64)>,
    /// Copy and gather calls per step that A has beyond B.
    pub extra_copies_per_step: f64,
    pub extra_gathers_per_step: f64,
    /// "present in both", "lost in A", "gained in A" or "none".
    pub graph_replays: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelMove {
    pub name: String,
    pub bucket: Bucket,
    pub a_ms_per_step: f64,
    pub b_ms_per_step: f64,
    pub delta_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WhatIf {
    pub bucket: Bucket,
    /// A's step if this bucket took B's time.
    pub as_b_ms: f64,
    /// A's step if this bucket disappeared.
    pub without_ms: f64,
    pub gain_as_b_ms: f64,
    /// A's step if this bucket ran at its floor (A's declared bytes/FLOPs on the given GPU);
    /// `None` without a GPU or for buckets whose kernels declare no cost.
    pub at_floor_ms: Option<f64>,
}

/// The ceilings that turn declared bytes/FLOPs into a bucket floor for what-ifs.
#[derive(Debug, Clone, Copy)]
pub struct FloorCeilings {
    pub bytes_per_s: f64,
    pub flops_per_s: f64,
}

fn mean_ms(r: &Report, b: Bucket) -> f64 {
    r.buckets
        .iter()
        .find(|x| x.bucket == b)
        .and_then(|x| x.ms_per_step.map(|s| s.mean))
        .unwrap_or(0.0)
}

fn calls(r: &Report, b: Bucket) -> f64 {
    r.buckets
        .iter()
        .find(|x| x.bucket == b)
        .and_then(|x| x.calls_per_step)
        .unwrap_or(0.0)
}

fn side(r: &Report) -> Side {
    let busy = Bucket::ALL.iter().map(|&b| mean_ms(r, b)).sum();
    Side {
        path: r.source.path.clone(),
        decode_steps: r.steps.decode_steps,
        step_ms: r.steps.tpot_ms.map(|t| t.mean).unwrap_or(busy),
        busy_ms: busy,
        graph_kernels: r.source.graph_kernels,
    }
}

/// Per-name ms/step and calls/step; needs reports built with every name kept per bucket.
fn names(r: &Report) -> BTreeMap<String, (Bucket, f64, f64)> {
    let n = r.steps.decode_steps.max(1) as f64;
    let mut m = BTreeMap::new();
    for b in &r.buckets {
        for t in &b.top {
            m.insert(t.name.clone(), (b.bucket, t.ms / n, t.calls as f64 / n));
        }
    }
    m
}

/// Diffs two analysed traces. Both should come from `analyze` with a large
/// `top_per_bucket`, so every kernel name is present for the structural part.
pub fn diff(a: &Report, b: &Report, top: usize) -> DiffReport {
    diff_with_floor(a, b, top, None)
}

/// [`diff`], with what-ifs against each bucket's floor when ceilings are given.
pub fn diff_with_floor(
    a: &Report,
    b: &Report,
    top: usize,
    floor: Option<FloorCeilings>,
) -> DiffReport {
    let sa = side(a);
    let sb = side(b);
    let gap = sa.step_ms - sb.step_ms;
    let share = |d: f64| if gap != 0.0 { 100.0 * d / gap } else { 0.0 };
    let mut buckets = Vec::new();
    let mut explained = 0.0;
    for bk in Bucket::ALL {
        let (am, bm) = (mean_ms(a, bk), mean_ms(b, bk));
        let (ac, bc) = (calls(a, bk), calls(b, bk));
        if am == 0.0 && bm == 0.0 && ac == 0.0 && bc == 0.0 {
            continue;
        }
        explained += am - bm;
        buckets.push(BucketDelta {
            bucket: bk,
            a_ms_per_step: am,
            b_ms_per_step: bm,
            delta_ms: am - bm,
            share_of_gap_pct: share(am - bm),
            a_calls_per_step: ac,
            b_calls_per_step: bc,
        });
    }
    buckets.sort_by(|x, y| y.delta_ms.abs().total_cmp(&x.delta_ms.abs()));
    let residual = gap - explained;

    let na = names(a);
    let nb = names(b);
    let mut only_in_a: Vec<(String, f64)> = na
        .iter()
        .filter(|(k, _)| !nb.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.2))
        .collect();
    let mut only_in_b: Vec<(String, f64)> = nb
        .iter()
        .filter(|(k, _)| !na.contains_key(*k))
        .map(|(k, v)| (k.clone(), v.2))
        .collect();
    only_in_a.sort_by(|x, y| y.1.total_cmp(&x.1));
    only_in_b.sort_by(|x, y| y.1.total_cmp(&x.1));
    only_in_a.truncate(top);
    only_in_b.truncate(top);
    let kernels_per_step =
        |r: &Report| -> f64 { r.buckets.iter().filter_map(|x| x.calls_per_step).sum() };
    let graph_replays = match (sa.graph_kernels > 0, sb.graph_kernels > 0) {
        (true, true) => "present in both",
        (false, true) => "lost in A (B replays CUDA graphs, A does not)",
        (true, false) => "gained in A (A replays CUDA graphs, B does not)",
        (false, false) => "none",
    };
    let structural = Structural {
        a_kernels_per_step: kernels_per_step(a),
        b_kernels_per_step: kernels_per_step(b),
        only_in_a,
        only_in_b,
        extra_copies_per_step: calls(a, Bucket::Copy) - calls(b, Bucket::Copy),
        extra_gathers_per_step: calls(a, Bucket::EmbedGather) - calls(b, Bucket::EmbedGather),
        graph_replays: graph_replays.to_owned(),
    };

    let mut keys: Vec<&String> = na.keys().chain(nb.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut top_moved: Vec<KernelMove> = keys
        .into_iter()
        .map(|k| {
            let x = na.get(k);
            let y = nb.get(k);
            let am = x.map(|v| v.1).unwrap_or(0.0);
            let bm = y.map(|v| v.1).unwrap_or(0.0);
            KernelMove {
                name: k.clone(),
                bucket: x.or(y).map(|v| v.0).unwrap_or(Bucket::Other),
                a_ms_per_step: am,
                b_ms_per_step: bm,
                delta_ms: am - bm,
            }
        })
        .collect();
    top_moved.sort_by(|x, y| y.delta_ms.abs().total_cmp(&x.delta_ms.abs()));
    top_moved.truncate(top);

    let mut what_if: Vec<WhatIf> = buckets
        .iter()
        .map(|d| {
            let at_floor_ms = floor.and_then(|c| {
                let cost = a.buckets.iter().find(|x| x.bucket == d.bucket)?.cost?;
                let floor_ms = (cost.bytes_per_step / c.bytes_per_s)
                    .max(cost.flops_per_step / c.flops_per_s)
                    * 1e3;
                // Only the costed kernels shrink to their floor; the rest keep their time.
                Some(sa.step_ms - (cost.costed_ms_per_step - floor_ms).max(0.0))
            });
            WhatIf {
                bucket: d.bucket,
                as_b_ms: sa.step_ms - d.delta_ms,
                without_ms: sa.step_ms - d.a_ms_per_step,
                gain_as_b_ms: d.delta_ms,
                at_floor_ms,
            }
        })
        .collect();
    what_if.sort_by(|x, y| y.gain_as_b_ms.total_cmp(&x.gain_as_b_ms));

    DiffReport {
        schema_version: DIFF_SCHEMA_VERSION,
        a: sa,
        b: sb,
        gap_ms: gap,
        buckets,
        residual_ms: residual,
        residual_share_pct: share(residual),
        structural,
        top_moved,
        what_if,
    }
}
