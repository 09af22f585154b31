//! Several ranks of one run analysed together: their steps aligned, their collectives
//! matched, each collective's time split into waiting (inside the kernel before the last
//! rank arrived) and transfer, per step and rank a split of the step into compute,
//! transfer, wait and idle, and the verdict on the rank that sets the step.
//!
//! Each rank is first analysed alone ([`crate::session::AnalyzedRun`]); this reads their
//! tables and traces and returns typed tables ([`RanksTables`]) and a report made from
//! them ([`RanksReport`]). Decisions are enums; English is rendered by the front ends.

pub mod align;
pub mod cause;
pub mod collectives;
pub mod digest;
pub mod split;
pub mod tables;
pub mod text;
pub mod verdict;

use serde::Serialize;

pub use align::{ClockFit, StepPairing};
pub use collectives::{Collective, CollectiveKind};
pub use digest::{RankDigest, RunRef};
pub use tables::{CollectiveRow, CollectiveTable, RankStepRow, RankStepTable};
pub use verdict::{LateBy, RanksVerdict, Refusal, Straggler};

use crate::session::{AnalyzedRun, RankSource};
use crate::tables::StepTable;
use align::RankSteps;
use cause::{WindowUse, Work};

/// The multi-rank tables.
#[derive(Debug, Clone, Default)]
pub struct RanksTables {
    pub collectives: CollectiveTable,
    pub steps: RankStepTable,
}

/// One rank as the report names it.
#[derive(Debug, Clone, Serialize)]
pub struct RankInfo {
    pub rank: u32,
    pub trace: String,
    /// How its rank was known.
    pub source: RankSource,
    /// The GPU its collectives ran on.
    pub device: u32,
    /// Its report steps.
    pub steps: u32,
}

/// One rank's figures: medians over the aligned steps (robust to a step where the ranks
/// started out of step), so the columns need not add up to the step.
#[derive(Debug, Clone, Serialize)]
pub struct RankRow {
    pub rank: u32,
    pub step_ms: f64,
    /// The step's longest wait at one collective (a stall the others sat out).
    pub longest_wait_ms: f64,
    pub compute_ms: f64,
    pub transfer_ms: f64,
    pub wait_ms: f64,
    pub unsplit_ms: f64,
    pub idle_ms: f64,
    /// GPU busy share of the step, communication waiting included (what a one-rank report
    /// calls busy).
    pub busy_pct: f64,
    /// Busy share without the waiting: compute and transfer (and unsplit communication).
    pub working_pct: f64,
    /// Share of matched collectives this rank arrived last at.
    pub late_share: f64,
}

/// What the multi-rank analysis noticed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RanksNote {
    /// The ranks have different numbers of report steps; only the common ones are compared.
    StepCountsDiffer { counts: Vec<u32>, aligned: u32 },
    /// Some communication kernels matched no other rank's.
    Unmatched { per_rank: Vec<u32> },
    /// The ranks' traces say different world sizes, or fewer ranks than the world size.
    WorldSize { said: u32, given: u32 },
    /// A rank's clock was moved onto the first rank's.
    ClockMoved {
        rank: u32,
        offset_ns: i64,
        residual_ns: i64,
    },
}

/// The multi-rank report.
#[derive(Debug, Clone, Serialize)]
pub struct RanksReport {
    pub world_size: Option<u32>,
    pub ranks: Vec<RankInfo>,
    pub pairing: StepPairing,
    pub aligned_steps: u32,
    pub clocks: Vec<ClockFit>,
    pub matched_collectives: u32,
    pub collectives_per_step: f64,
    /// The run's step: the slowest rank's, per aligned step (median and mean, ms).
    pub step_ms_median: f64,
    pub step_ms_mean: f64,
    /// Median transfer of one collective (after the last rank arrived), µs.
    pub transfer_us_median: f64,
    /// The first rank's messages against its GPU links' floor, when known (the floor counts
    /// no latency).
    pub floor: Option<collectives::MessageFloor>,
    pub per_rank: Vec<RankRow>,
    pub verdict: RanksVerdict,
    pub notes: Vec<RanksNote>,
}

impl RanksReport {
    /// The report of no rank at all: refused.
    fn empty() -> Self {
        Self {
            world_size: None,
            ranks: Vec::new(),
            pairing: StepPairing::Order,
            aligned_steps: 0,
            clocks: Vec::new(),
            matched_collectives: 0,
            collectives_per_step: 0.0,
            step_ms_median: 0.0,
            step_ms_mean: 0.0,
            transfer_us_median: 0.0,
            floor: None,
            per_rank: Vec::new(),
            verdict: RanksVerdict::Refused {
                reason: Refusal::OneRank,
            },
            notes: Vec::new(),
        }
    }
}

/// The tables and the report.
pub struct RanksAnalysis {
    pub tables: RanksTables,
    pub report: RanksReport,
}

pub(crate) fn median_f(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    let m = v.len() / 2;
    *v.select_nth_unstable_by(m, f64::total_cmp).1
}

fn mean(v: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = v.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 { 0.0 } else { s / n as f64 }
}

/// Analyses `runs` (one per rank, any order) as the ranks of one run.
pub fn analyze_ranks(runs: &[&AnalyzedRun]) -> RanksAnalysis {
    let n = runs.len() as u32;
    let digests: Vec<RankDigest> = runs.iter().map(|r| RankDigest::of(r, n)).collect();
    let fetch = |rank: u32| {
        runs.iter()
            .find(|r| r.run.rank == rank)
            .map(|r| RunRef::Borrowed(r))
    };
    analyze_digests(digests, &fetch, None)
}

/// [`analyze_ranks`] over digested ranks. The cause of a straggler is read from the traces
/// `fetch` hands over (by rank): the late rank's, and those of every other rank (`others`
/// `None`) or of the `others` ranks that waited most; one at a time, each dropped after.
pub fn analyze_digests<'a>(
    mut digests: Vec<RankDigest>,
    fetch: &dyn Fn(u32) -> Option<RunRef<'a>>,
    others: Option<usize>,
) -> RanksAnalysis {
    if digests.is_empty() {
        return RanksAnalysis {
            tables: RanksTables::default(),
            report: RanksReport::empty(),
        };
    }
    digests.sort_by_key(|d| d.run.rank);
    let n = digests.len();
    let rank_ids: Vec<u32> = digests.iter().map(|d| d.run.rank).collect();
    let colls: Vec<Vec<Collective>> = digests
        .iter_mut()
        .map(|d| std::mem::take(&mut d.colls))
        .collect();
    let steps: Vec<RankSteps> = digests
        .iter_mut()
        .map(|d| std::mem::take(&mut d.rank_steps))
        .collect();
    let devices: Vec<u32> = digests.iter().map(|d| d.device).collect();
    let mut notes = Vec::new();
    let world = digests.iter().filter_map(|d| d.world_size).max();
    if let Some(w) = world
        && w != n as u32
    {
        notes.push(RanksNote::WorldSize {
            said: w,
            given: n as u32,
        });
    }
    let counts: Vec<u32> = steps.iter().map(|s| s.index.len() as u32).collect();
    let info: Vec<RankInfo> = digests
        .iter()
        .enumerate()
        .map(|(i, d)| RankInfo {
            rank: d.run.rank,
            trace: d.trace.clone(),
            source: d.run.rank_source,
            device: devices[i],
            steps: counts[i],
        })
        .collect();
    let al = align::align(&rank_ids, &steps, &colls);
    let k_steps = al.steps.len();
    notes.extend(alignment_notes(&counts, &al));
    let mut tables = RanksTables::default();
    let sp = split::split(&colls, &al, &rank_ids, &mut tables);
    let step_tables: Vec<&StepTable> = digests.iter().map(|d| &d.steps).collect();
    let slowest = split::step_rows(&step_tables, &colls, &al, &sp, &rank_ids, &mut tables);
    let per_rank = split::rank_rows(&tables, &sp, &rank_ids, al.groups.len());
    let mut sorted = slowest.clone();
    sorted.sort_unstable();
    let step_ms_median = sorted
        .get(sorted.len() / 2)
        .map_or(0.0, |&x| x as f64 / 1e6);
    let step_ms_mean = mean(slowest.iter().map(|&x| x as f64 / 1e6));
    let mut transfers: Vec<i64> = tables.collectives.transfer_ns.clone();
    transfers.sort_unstable();
    let transfer_us_median = transfers
        .get(transfers.len() / 2)
        .map_or(0.0, |&x| x as f64 / 1e3);
    let verdict = decide(&Inputs {
        digests: &digests,
        fetch,
        others,
        colls: &colls,
        al: &al,
        sp: &sp,
        per_rank: &per_rank,
        rank_ids: &rank_ids,
        devices: &devices,
        step_ms_median,
    });
    // Kernels that are not the same collectives give no wait or transfer: not shown.
    let mut per_rank = per_rank;
    let mut transfer_us_median = transfer_us_median;
    if verdict
        == (RanksVerdict::Refused {
            reason: Refusal::CompletionsDisagree,
        })
    {
        for p in &mut per_rank {
            p.transfer_ms = f64::NAN;
            p.wait_ms = f64::NAN;
            p.longest_wait_ms = f64::NAN;
            p.working_pct = f64::NAN;
            p.late_share = f64::NAN;
        }
        transfer_us_median = f64::NAN;
    }
    RanksAnalysis {
        report: RanksReport {
            world_size: world,
            ranks: info,
            pairing: al.pairing,
            aligned_steps: k_steps as u32,
            clocks: al.clocks.clone(),
            matched_collectives: al.groups.len() as u32,
            collectives_per_step: if k_steps == 0 {
                0.0
            } else {
                al.groups.len() as f64 / k_steps as f64
            },
            step_ms_median,
            step_ms_mean,
            transfer_us_median,
            floor: digests.first().and_then(|d| d.floor),
            per_rank,
            verdict,
            notes,
        },
        tables,
    }
}

/// What the verdict is decided from.
struct Inputs<'a, 'r> {
    digests: &'a [RankDigest],
    fetch: &'a dyn Fn(u32) -> Option<RunRef<'r>>,
    others: Option<usize>,
    colls: &'a [Vec<Collective>],
    al: &'a align::Alignment,
    sp: &'a split::Split,
    per_rank: &'a [RankRow],
    rank_ids: &'a [u32],
    devices: &'a [u32],
    step_ms_median: f64,
}

/// The verdict: refused with the reason, no rank setting the step, or the straggler and why.
fn decide(x: &Inputs<'_, '_>) -> RanksVerdict {
    let (colls, al, per_rank, rank_ids, devices) =
        (x.colls, x.al, x.per_rank, x.rank_ids, x.devices);
    let (late_count, last_of, worst_lag) = (&x.sp.late_count, &x.sp.last_of, &x.sp.worst_lag);
    let n = x.digests.len();
    let k_steps = al.steps.len();
    let step_ms_median = x.step_ms_median;
    if n < 2 {
        RanksVerdict::Refused {
            reason: Refusal::OneRank,
        }
    } else if k_steps == 0 {
        RanksVerdict::Refused {
            reason: Refusal::NoCommonSteps,
        }
    } else if al.groups.is_empty() {
        RanksVerdict::Refused {
            reason: Refusal::NoMatchedCollectives,
        }
    } else if al
        .clocks
        .iter()
        .any(|c| c.residual_ns > verdict::COMPLETION_RESIDUAL_NS)
    {
        RanksVerdict::Refused {
            reason: Refusal::CompletionsDisagree,
        }
    } else {
        let late = (0..n).max_by_key(|&r| (late_count[r], n - r)).unwrap_or(0);
        let share = per_rank[late].late_share;
        let others = |f: &dyn Fn(&RankRow) -> f64| {
            mean((0..n).filter(|&r| r != late).map(|r| f(&per_rank[r])))
        };
        let others_wait = others(&|p| p.wait_ms);
        if share >= verdict::LATE_SHARE && others_wait >= verdict::WAIT_SHARE * step_ms_median {
            // The windows before the late rank's worst arrival of each step.
            let worst: Vec<usize> = worst_lag
                .iter()
                .flatten()
                .filter(|(ci, lag)| last_of[*ci] == late && *lag > 0)
                .map(|(ci, _)| *ci)
                .collect();
            // The others the cause compares with: all, or those that waited most.
            let mut compare: Vec<usize> = (0..n).filter(|&r| r != late).collect();
            compare.sort_by(|a, b| per_rank[*b].wait_ms.total_cmp(&per_rank[*a].wait_ms));
            if let Some(k) = x.others {
                compare.truncate(k.max(1));
            }
            let late_by = late_by(&Cause {
                fetch: x.fetch,
                digests: x.digests,
                colls,
                al,
                worst: &worst,
                devices,
                late,
                compare: &compare,
            });
            RanksVerdict::Straggler(Straggler {
                rank: rank_ids[late],
                late_share: share,
                others_wait_ms_per_step: others_wait,
                others_longest_wait_ms: others(&|p| p.longest_wait_ms),
                late_by,
            })
        } else {
            RanksVerdict::Even {
                late_rank: rank_ids[late],
                late_share: share,
                wait_ms_per_step: mean(per_rank.iter().map(|p| p.wait_ms)),
            }
        }
    }
}

/// A rank's report steps with their numbers (the engine's, else the marker name's).
pub(crate) fn rank_steps(r: &AnalyzedRun) -> RankSteps {
    let st = &r.tables.steps;
    let index: Vec<u32> = (0..st.len)
        .filter(|&i| st.in_report[i] != 0)
        .map(|i| i as u32)
        .collect();
    let named = marker_numbers(&r.trace);
    RankSteps {
        number: index
            .iter()
            .map(|&i| {
                let i = i as usize;
                if st.number[i] >= 0 {
                    st.number[i]
                } else {
                    named.get(&st.gpu_start_ns[i]).copied().unwrap_or(-1)
                }
            })
            .collect(),
        gpu_end_ns: index.iter().map(|&i| st.gpu_end_ns[i as usize]).collect(),
        index,
    }
}

/// The number at the end of a step marker's name (`ProfilerStep#551`, `decode_step_7`), by
/// the marker's GPU start: what pairs the ranks' steps when the traces begin at different
/// steps. The step table keeps only engine markers' numbers (they also decide TPOT periods).
fn marker_numbers(t: &gapscope_traces::Trace) -> std::collections::HashMap<i64, i64> {
    let m = &t.markers;
    let mut out = std::collections::HashMap::new();
    for i in 0..m.len {
        let start = m.gpu_start_ns[i];
        if start == i64::MIN {
            continue;
        }
        let name = t.strings.get(m.name[i]);
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 || digits > 12 {
            continue;
        }
        let head = &name[..name.len() - digits];
        if !(head.ends_with('#') || head.ends_with('_')) {
            continue;
        }
        if let Ok(n) = name[name.len() - digits..].parse::<i64>() {
            out.insert(start, n);
        }
    }
    out
}

/// What the alignment noticed: step counts that differ, unmatched collectives, moved
/// clocks.
fn alignment_notes(counts: &[u32], al: &align::Alignment) -> Vec<RanksNote> {
    let mut notes = Vec::new();
    let k_steps = al.steps.len();
    if counts.iter().any(|&c| c as usize != k_steps) {
        notes.push(RanksNote::StepCountsDiffer {
            counts: counts.to_vec(),
            aligned: k_steps as u32,
        });
    }
    if al.unmatched.iter().any(|&u| u > 0) {
        notes.push(RanksNote::Unmatched {
            per_rank: al.unmatched.clone(),
        });
    }
    for c in &al.clocks {
        if !c.shared && c.residual_ns <= verdict::COMPLETION_RESIDUAL_NS {
            notes.push(RanksNote::ClockMoved {
                rank: c.rank,
                offset_ns: c.offset_ns,
                residual_ns: c.residual_ns,
            });
        }
    }
    notes
}

/// Why rank position `late` arrived late: the windows before the collectives it arrived
/// last at (from its previous collective's end, or its step's start, to its arrival), on
/// it and on every other rank.
/// What the cause is read from.
struct Cause<'a, 'r> {
    fetch: &'a dyn Fn(u32) -> Option<RunRef<'r>>,
    digests: &'a [RankDigest],
    colls: &'a [Vec<Collective>],
    al: &'a align::Alignment,
    /// The matched collectives of the late rank's latest arrival of each step.
    worst: &'a [usize],
    devices: &'a [u32],
    late: usize,
    /// The other ranks (positions) to compare with.
    compare: &'a [usize],
}

/// How rank position `r` used the windows before `x.worst` (from its previous collective's
/// end, or its first GPU work, to its arrival), from its trace.
fn rank_use(x: &Cause<'_, '_>, r: usize, run: &AnalyzedRun) -> WindowUse {
    let (colls, al) = (x.colls, x.al);
    let work = Work::of(run, x.devices[r]);
    let mut w: Vec<(i64, i64)> = x
        .worst
        .iter()
        .map(|&ci| &al.groups[ci])
        .map(|(k, g)| {
            let i = g[r] as usize;
            let c = &colls[r][i];
            // From the previous collective's end; before the first, from the first GPU work
            // (what precedes the step's window counts too).
            let from = if i > 0 {
                colls[r][i - 1].gpu_end_ns
            } else {
                let s = al.steps[*k as usize][r] as usize;
                let step = x.digests[r].steps.gpu_start_ns[s];
                work.first_start().map_or(step, |f| f.min(step))
            };
            (from.min(c.gpu_start_ns), c.gpu_start_ns)
        })
        .collect();
    w.sort_unstable();
    cause::window_use(run, &work, &w)
}

/// Why rank position `x.late` arrived late: the windows before its latest arrival of each
/// step, on it and on the ranks compared with. One trace is held at a time.
fn late_by(x: &Cause<'_, '_>) -> LateBy {
    let late = x.late;
    let rank = |r: usize| x.digests[r].run.rank;
    let Some(me) = (x.fetch)(rank(late)).map(|run| rank_use(x, late, &run)) else {
        return LateBy::Host {
            excess_idle_ms_per_step: f64::NAN,
            scope: None,
            scope_ms_per_step: 0.0,
            scope_only_here: false,
        };
    };
    let candidates: Vec<String> = me.kernels.keys().chain(me.scopes.keys()).cloned().collect();
    let mut uses: Vec<WindowUse> = Vec::with_capacity(x.compare.len());
    let mut seen_elsewhere: std::collections::HashSet<String> = Default::default();
    for &r in x.compare {
        let Some(run) = (x.fetch)(rank(r)) else {
            continue;
        };
        uses.push(rank_use(x, r, &run));
        for name in &candidates {
            if run.trace.strings.lookup(name).is_some() {
                seen_elsewhere.insert(name.clone());
            }
        }
    }
    let worst = x.worst;
    // Per late step: one window per step where this rank arrived last.
    let per_step = |ns: f64| ns / 1e6 / worst.len().max(1) as f64;
    let others = |f: &dyn Fn(&WindowUse) -> i64| mean(uses.iter().map(|u| f(u) as f64));
    let me = &me;
    let excess_busy = me.busy_ns as f64 - others(&|u| u.busy_ns);
    let excess_idle = (me.span_ns - me.busy_ns) as f64 - others(&|u| u.span_ns - u.busy_ns);
    let elsewhere = |name: &str| seen_elsewhere.contains(name);
    if excess_busy > excess_idle {
        let best = me
            .kernels
            .iter()
            .map(|(name, (ns, b))| {
                let o = others(&|u| u.kernels.get(name).map_or(0, |x| x.0));
                (*ns as f64 - o, name, *b)
            })
            .max_by(|a, b| a.0.total_cmp(&b.0).then_with(|| b.1.cmp(a.1)));
        let (ns, kernel, bucket) = best.map(|(ns, k, b)| (ns, k.clone(), b)).unwrap_or((
            0.0,
            String::new(),
            crate::Bucket::Other,
        ));
        LateBy::Gpu {
            excess_busy_ms_per_step: per_step(excess_busy),
            kernel_only_here: !kernel.is_empty() && !elsewhere(&kernel),
            kernel,
            bucket,
            kernel_ms_per_step: per_step(ns),
        }
    } else {
        // Prefer a scope no other rank has; among those (or else among all), the one with
        // the most extra open time during the idle.
        // A scope open through the others' idle as much as through this rank's (a range
        // around the whole run) explains nothing.
        let idle_of = |u: &WindowUse| (u.span_ns - u.busy_ns).max(1) as f64;
        let o_idle = others(&|u| (u.span_ns - u.busy_ns).max(1));
        let ranked: Vec<(bool, f64, &String)> = me
            .scopes
            .iter()
            .filter_map(|(name, ns)| {
                let o = others(&|u| u.scopes.get(name).copied().unwrap_or(0));
                let background = o / o_idle.max(1.0) >= 0.5 * (*ns as f64 / idle_of(me));
                (!background).then(|| (!elsewhere(name), *ns as f64 - o, name))
            })
            .filter(|x| x.1 > 0.0)
            .collect();
        let best = ranked
            .iter()
            .filter(|x| x.0)
            .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.2.cmp(a.2)))
            .or_else(|| {
                ranked
                    .iter()
                    .max_by(|a, b| a.1.total_cmp(&b.1).then_with(|| b.2.cmp(a.2)))
            });
        LateBy::Host {
            excess_idle_ms_per_step: per_step(excess_idle),
            scope: best.map(|x| x.2.clone()),
            scope_ms_per_step: best.map_or(0.0, |x| per_step(x.1)),
            scope_only_here: best.is_some_and(|x| x.0),
        }
    }
}
