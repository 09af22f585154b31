//! Two-trace diff: where the per-step gap between A and B lives, by bucket (so two different
//! engines compare through buckets, not kernel names), plus structural changes and what-ifs.

pub mod groups;
pub mod levers;
pub mod ranks;
pub mod spec;
pub mod whatif;

use std::collections::BTreeMap;

use serde::Serialize;

use gapscope_traces::StringTable;

use crate::analysis::Report;
use crate::bucket::Bucket;
use crate::tables::{ActivityKind, NameScope, Tables};
pub use groups::{GROUPS, Grouping};
pub use spec::SpecDelta;

/// Version of the JSON diff schema (2: shares may be null, groups, idle, levers).
pub const DIFF_SCHEMA_VERSION: u32 = 2;

/// Kernels a diff lists as moved and as only on one side, unless asked for another number.
pub const DEFAULT_LIST: usize = 10;

/// Shares of the gap are given only when the gap is at least this share of the slower
/// step: below it, the shares of a near-zero gap are noise divided by noise.
pub const MIN_GAP_SHARE: f64 = 0.005;

#[derive(Debug, Clone, Serialize)]
pub struct DiffReport {
    pub schema_version: u32,
    pub a: Side,
    pub b: Side,
    /// Mean step time of A minus B, ms (positive: A is slower).
    pub gap_ms: f64,
    /// Whether the gap is large enough (see [`MIN_GAP_SHARE`]) for shares of it to mean
    /// anything; when false every `share_of_gap_pct` is null.
    pub gap_is_meaningful: bool,
    pub buckets: Vec<BucketDelta>,
    /// The multi-bucket equivalence groups (linear layers, pointwise ops) taken together,
    /// and whether the what-ifs treat each as one lever.
    pub groups: Vec<GroupDelta>,
    /// The part of the gap no bucket explains: idle time (launch and host gaps) and overlap.
    pub residual_ms: f64,
    pub residual_share_pct: Option<f64>,
    /// The idle split of each side, ms/step: the residual's main parts.
    pub idle: IdleDelta,
    pub structural: Structural,
    pub top_moved: Vec<KernelMove>,
    /// Predicted A step time if one lever changed, best first; levers follow the grouping.
    pub what_if: Vec<WhatIf>,
    /// One side speculative, the other plain: the tokens-per-second change, attributed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<SpecDelta>,
}

impl DiffReport {
    /// Levers that would make A faster, by taking B's time or by reaching their floor; best
    /// gain against B first.
    pub fn gaining(&self) -> Vec<&WhatIf> {
        self.what_if
            .iter()
            .filter(|w| w.gain_as_b_ms > 0.0 || w.at_floor_ms.is_some_and(|f| f < self.a.step_ms))
            .collect()
    }
}

/// A multi-bucket group's time on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct GroupDelta {
    pub group: &'static str,
    pub buckets: Vec<Bucket>,
    pub a_ms_per_step: f64,
    pub b_ms_per_step: f64,
    pub delta_ms: f64,
    pub share_of_gap_pct: Option<f64>,
    /// True when the sides file the group's work differently, so what-ifs use the group.
    pub grouped: bool,
    pub why: String,
}

/// GPU idle per step on both sides, ms.
#[derive(Debug, Clone, Serialize)]
pub struct IdleDelta {
    pub a_launch_gap_ms: f64,
    pub b_launch_gap_ms: f64,
    pub a_host_gap_ms: f64,
    pub b_host_gap_ms: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Side {
    pub path: String,
    pub decode_steps: usize,
    /// Mean start-to-start step time, ms.
    pub step_ms: f64,
    /// Busy (kernels + memops) per step, ms.
    pub busy_ms: f64,
    /// GPU idle inside and between steps, ms/step.
    pub launch_gap_ms: f64,
    pub host_gap_ms: f64,
    pub graph_kernels: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct BucketDelta {
    pub bucket: Bucket,
    pub a_ms_per_step: f64,
    pub b_ms_per_step: f64,
    pub delta_ms: f64,
    /// delta / gap, %; bucket shares plus the residual share sum to 100%. Null when the
    /// gap is too small for shares to mean anything.
    pub share_of_gap_pct: Option<f64>,
    pub a_calls_per_step: f64,
    pub b_calls_per_step: f64,
}

#[derive(Debug, Clone, Serialize, Default)]
pub struct Structural {
    /// Kernels per step, A and B.
    pub a_kernels_per_step: f64,
    pub b_kernels_per_step: f64,
    /// Names only in A (or only in B), with their calls per step: the first `top` by calls.
    pub only_in_a: Vec<(String, f64)>,
    pub only_in_b: Vec<(String, f64)>,
    /// How many names are only in A (only in B) in all, listed or not.
    pub only_in_a_total: usize,
    pub only_in_b_total: usize,
    /// Copy and gather calls per step that A has beyond B.
    pub extra_copies_per_step: f64,
    pub extra_gathers_per_step: f64,
    /// Which sides replay CUDA graphs. JSON: `graph_replays`, the phrase ("present in
    /// both", "lost in A (…)", "gained in A (…)", "none"), and `graph_replays_kind`.
    #[serde(flatten, serialize_with = "graph_replays_fields")]
    pub graph_replays: GraphReplays,
}

fn graph_replays_fields<S: serde::Serializer>(v: &GraphReplays, s: S) -> Result<S::Ok, S::Error> {
    crate::text::text_and_kind(v, s, "graph_replays", "graph_replays_kind")
}

/// Which sides of a diff replay CUDA graphs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GraphReplays {
    /// Both.
    Both,
    /// B does, A does not.
    LostInA,
    /// A does, B does not.
    GainedInA,
    /// Neither.
    #[default]
    None,
}

impl std::fmt::Display for GraphReplays {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Both => "present in both",
            Self::LostInA => "lost in A (B replays CUDA graphs, A does not)",
            Self::GainedInA => "gained in A (A replays CUDA graphs, B does not)",
            Self::None => "none",
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct KernelMove {
    pub name: String,
    pub bucket: Bucket,
    pub a_ms_per_step: f64,
    pub b_ms_per_step: f64,
    pub delta_ms: f64,
}

/// What a what-if changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LeverKind {
    /// One bucket.
    Bucket,
    /// A multi-bucket equivalence group the sides file differently.
    Group,
    /// GPU idle inside steps.
    LaunchGaps,
    /// GPU idle between steps.
    HostGaps,
}

#[derive(Debug, Clone, Serialize)]
pub struct WhatIf {
    /// The lever's name: a bucket, a group ("linear layers"), "launch gaps" or "host gaps".
    pub lever: String,
    pub kind: LeverKind,
    /// The bucket, for a single-bucket lever.
    pub bucket: Option<Bucket>,
    /// The buckets the lever covers (empty for idle levers).
    pub buckets: Vec<Bucket>,
    /// A's step if this lever took B's time.
    pub as_b_ms: f64,
    /// A's step if this lever's time disappeared.
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
        step_ms: r
            .steps
            .tpot_ms
            .or(r.steps.decode_span_ms)
            .map(|t| t.mean)
            .unwrap_or(busy),
        busy_ms: busy,
        launch_gap_ms: r.steps.launch_gap_ms_per_step.unwrap_or(0.0),
        host_gap_ms: r.steps.host_gap_ms_per_step.unwrap_or(0.0),
        graph_kernels: r.source.graph_kernels,
    }
}

/// Which side of a diff: A (the one to explain) or B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SideName {
    A,
    B,
}

impl SideName {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::A => "A",
            Self::B => "B",
        }
    }
}

/// Why a diff refuses a side; its `Display` is the clause the refusal shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Refusal {
    /// The side has no decode steps: its ms/step figures would all be zero. Never let
    /// through.
    NoDecodeSteps {
        side: SideName,
        path: String,
        steps: crate::analysis::steps::StepSource,
    },
    /// The side's steps look implausible; `--allow-implausible` lets it through.
    Implausible {
        side: SideName,
        path: String,
        problems: Vec<crate::analysis::plausibility::PlausibilityProblem>,
    },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoDecodeSteps { side, path, steps } => {
                write!(
                    f,
                    "{} ({path}) has no decode steps ({steps})",
                    side.as_str()
                )
            }
            Self::Implausible {
                side,
                path,
                problems,
            } => write!(
                f,
                "{} ({path})'s steps look implausible: {}",
                side.as_str(),
                crate::analysis::Plausibility::summary_of(problems)
            ),
        }
    }
}

/// Why two reports cannot be diffed: a side without decode steps or with implausible steps.
/// `diff` refuses when this is non-empty; implausible steps can be let through, missing
/// steps cannot.
pub fn refusal(a: &Report, b: &Report, allow_implausible: bool) -> Vec<Refusal> {
    let mut out = Vec::new();
    for (side, r) in [(SideName::A, a), (SideName::B, b)] {
        if r.steps.decode_steps == 0 {
            out.push(Refusal::NoDecodeSteps {
                side,
                path: r.source.path.clone(),
                steps: r.steps.source.clone(),
            });
        } else if !allow_implausible && !r.plausibility.plausible {
            out.push(Refusal::Implausible {
                side,
                path: r.source.path.clone(),
                problems: r.plausibility.problems.clone(),
            });
        }
    }
    out
}

/// Per-name ms/step and calls/step over one run's decode steps, keyed by name (a memop's
/// prefixed `[memop] `): every name the analysis saw, read from its name table, whatever
/// the report lists.
#[derive(Debug, Clone, Default)]
pub struct NameTimes(BTreeMap<String, (Bucket, f64, f64)>);

impl NameTimes {
    /// The names of `tables` (a run whose trace has `strings` and whose report is `r`).
    pub fn of(r: &Report, tables: &Tables, strings: &StringTable) -> Self {
        let n = r.steps.decode_steps.max(1) as f64;
        let mut m = BTreeMap::new();
        for e in tables.names.of_scope(NameScope::Report) {
            let name = strings.get(e.name);
            let key = match ActivityKind::from_code(e.kind) {
                ActivityKind::Memop => format!("[memop] {name}"),
                ActivityKind::Kernel => name.to_owned(),
            };
            let bucket = Bucket::ALL
                .get(e.bucket as usize)
                .copied()
                .unwrap_or(Bucket::Other);
            let ms = e.ns as f64 / 1e6;
            m.insert(key, (bucket, ms / n, e.calls as f64 / n));
        }
        Self(m)
    }
}

/// One side of a diff: its report and the times of its names.
#[derive(Clone, Copy)]
pub struct DiffSide<'a> {
    pub report: &'a Report,
    pub names: &'a NameTimes,
}

/// Diffs two analysed runs.
pub fn diff(a: DiffSide, b: DiffSide, top: usize) -> DiffReport {
    diff_with_floor(a, b, top, None)
}

/// [`diff`], with what-ifs against each bucket's floor when ceilings are given.
pub fn diff_with_floor(
    da: DiffSide,
    db: DiffSide,
    top: usize,
    floor: Option<FloorCeilings>,
) -> DiffReport {
    let (a, b) = (da.report, db.report);
    let sa = side(a);
    let sb = side(b);
    let gap = sa.step_ms - sb.step_ms;
    let meaningful = gap.abs() >= MIN_GAP_SHARE * sa.step_ms.max(sb.step_ms) && gap != 0.0;
    let share = |d: f64| meaningful.then(|| 100.0 * d / gap);
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

    let (na, nb) = (&da.names.0, &db.names.0);
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
    let (only_in_a_total, only_in_b_total) = (only_in_a.len(), only_in_b.len());
    only_in_a.truncate(top);
    only_in_b.truncate(top);
    let kernels_per_step =
        |r: &Report| -> f64 { r.buckets.iter().filter_map(|x| x.calls_per_step).sum() };
    let graph_replays = match (sa.graph_kernels > 0, sb.graph_kernels > 0) {
        (true, true) => GraphReplays::Both,
        (false, true) => GraphReplays::LostInA,
        (true, false) => GraphReplays::GainedInA,
        (false, false) => GraphReplays::None,
    };
    let structural = Structural {
        a_kernels_per_step: kernels_per_step(a),
        b_kernels_per_step: kernels_per_step(b),
        only_in_a,
        only_in_b,
        only_in_a_total,
        only_in_b_total,
        extra_copies_per_step: calls(a, Bucket::Copy) - calls(b, Bucket::Copy),
        extra_gathers_per_step: calls(a, Bucket::EmbedGather) - calls(b, Bucket::EmbedGather),
        graph_replays,
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
    top_moved.retain(|k| k.delta_ms != 0.0);
    top_moved.sort_by(|x, y| y.delta_ms.abs().total_cmp(&x.delta_ms.abs()));
    top_moved.truncate(top);

    let same_engine = a.steps.engine == b.steps.engine && a.source.format == b.source.format;
    let sides = if same_engine {
        groups::Sides::SameEngine(structural.a_kernels_per_step, structural.b_kernels_per_step)
    } else {
        groups::Sides::Engines
    };
    let groupings = groups::decide_for(sides, |bk| (calls(a, bk), calls(b, bk)));
    let group_rows: Vec<GroupDelta> = groupings
        .iter()
        .map(|g| {
            let am: f64 = g.buckets.iter().map(|&bk| mean_ms(a, bk)).sum();
            let bm: f64 = g.buckets.iter().map(|&bk| mean_ms(b, bk)).sum();
            GroupDelta {
                group: g.group,
                buckets: g.buckets.clone(),
                a_ms_per_step: am,
                b_ms_per_step: bm,
                delta_ms: am - bm,
                share_of_gap_pct: share(am - bm),
                grouped: g.grouped,
                why: g.why.clone(),
            }
        })
        .collect();
    let what_if = what_ifs(a, &sa, &sb, &buckets, &group_rows, floor);
    let idle = IdleDelta {
        a_launch_gap_ms: sa.launch_gap_ms,
        b_launch_gap_ms: sb.launch_gap_ms,
        a_host_gap_ms: sa.host_gap_ms,
        b_host_gap_ms: sb.host_gap_ms,
    };

    DiffReport {
        schema_version: DIFF_SCHEMA_VERSION,
        a: sa,
        b: sb,
        gap_ms: gap,
        gap_is_meaningful: meaningful,
        buckets,
        groups: group_rows,
        residual_ms: residual,
        residual_share_pct: share(residual),
        idle,
        structural,
        top_moved,
        what_if,
        speculative: spec::spec_delta(a, b),
    }
}

/// The levers: each bucket outside a grouped equivalence group, each grouped group as one,
/// and the two idle parts. Sorted by gain, best first.
fn what_ifs(
    a: &Report,
    sa: &Side,
    sb: &Side,
    buckets: &[BucketDelta],
    groups: &[GroupDelta],
    floor: Option<FloorCeilings>,
) -> Vec<WhatIf> {
    let at_floor = |bks: &[Bucket]| -> Option<f64> {
        let c = floor?;
        let mut shrink = 0.0;
        let mut any = false;
        for bk in bks {
            let Some(cost) = a
                .buckets
                .iter()
                .find(|x| x.bucket == *bk)
                .and_then(|x| x.cost)
            else {
                continue;
            };
            any = true;
            let floor_ms = (cost.bytes_per_step / c.bytes_per_s)
                .max(cost.flops_per_step / c.flops_per_s)
                * 1e3;
            // Only the costed kernels shrink to their floor; the rest keep their time.
            shrink += (cost.costed_ms_per_step - floor_ms).max(0.0);
        }
        any.then_some(sa.step_ms - shrink)
    };
    let grouped: Vec<&GroupDelta> = groups.iter().filter(|g| g.grouped).collect();
    let mut out: Vec<WhatIf> = buckets
        .iter()
        .filter(|d| !grouped.iter().any(|g| g.buckets.contains(&d.bucket)))
        .map(|d| WhatIf {
            lever: d.bucket.to_string(),
            kind: LeverKind::Bucket,
            bucket: Some(d.bucket),
            buckets: vec![d.bucket],
            as_b_ms: sa.step_ms - d.delta_ms,
            without_ms: sa.step_ms - d.a_ms_per_step,
            gain_as_b_ms: d.delta_ms,
            at_floor_ms: at_floor(&[d.bucket]),
        })
        .collect();
    out.extend(grouped.iter().map(|g| WhatIf {
        lever: g.group.to_owned(),
        kind: LeverKind::Group,
        bucket: None,
        buckets: g.buckets.clone(),
        as_b_ms: sa.step_ms - g.delta_ms,
        without_ms: sa.step_ms - g.a_ms_per_step,
        gain_as_b_ms: g.delta_ms,
        at_floor_ms: at_floor(&g.buckets),
    }));
    for (lever, kind, am, bm) in [
        (
            "launch gaps",
            LeverKind::LaunchGaps,
            sa.launch_gap_ms,
            sb.launch_gap_ms,
        ),
        (
            "host gaps",
            LeverKind::HostGaps,
            sa.host_gap_ms,
            sb.host_gap_ms,
        ),
    ] {
        if am == 0.0 && bm == 0.0 {
            continue;
        }
        out.push(WhatIf {
            lever: lever.to_owned(),
            kind,
            bucket: None,
            buckets: Vec::new(),
            as_b_ms: sa.step_ms - (am - bm),
            without_ms: sa.step_ms - am,
            gain_as_b_ms: am - bm,
            at_floor_ms: None,
        });
    }
    out.sort_by(|x, y| y.gain_as_b_ms.total_cmp(&x.gain_as_b_ms));
    out
}
