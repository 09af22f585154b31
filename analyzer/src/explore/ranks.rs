//! What the explorer draws for a run of several ranks: one lane per rank on the first
//! rank's clock (the multi-rank analysis's common clock), with the rank's aligned steps,
//! its matched collectives (each split into waiting and transfer) and its other kernels,
//! and queries that return, for a visible window and a pixel width, what to draw at about
//! one item per pixel. Which rank sets the step and what is waiting are the multi-rank
//! analysis's decisions ([`crate::analysis::ranks`]); this only indexes them for drawing.

use std::ops::Range;

use super::Exploration;
mod row;

pub use row::{LINK_MIN_PX, MIN_PX, Row};

use super::lanes::{LaneSet, Spans};
use super::step_view;
use crate::analysis::ranks::{CollectiveKind, CollectiveTable, RankStepTable, RanksAnalysis};
use crate::bucket::Bucket;
use crate::session::AnalyzedRun;

/// One rank's aligned steps on the common clock.
#[derive(Debug, Default, Clone)]
pub struct LaneSteps {
    pub spans: Spans,
    /// The aligned step's position.
    pub step: Vec<u32>,
    /// Its row in [`crate::analysis::ranks::RankStepTable`].
    pub row: Vec<u32>,
}

/// One rank's matched collectives on the common clock, start-sorted.
#[derive(Debug, Default, Clone)]
pub struct LaneCollectives {
    pub row: Row,
    /// The collective's position among the matched ones (the same on every rank).
    pub collective: Vec<u32>,
    /// Its row in [`crate::analysis::ranks::CollectiveTable`].
    pub table_row: Vec<u32>,
    pub kind: Vec<CollectiveKind>,
    pub wait_ns: Vec<i64>,
    pub transfer_ns: Vec<i64>,
    pub last: Vec<bool>,
    /// Running sums of wait, transfer and arrivals last (one more entry than items).
    wait_sum: Vec<i64>,
    transfer_sum: Vec<i64>,
    last_sum: Vec<u32>,
}

/// One rank's kernels other than its collectives, on its collectives' GPU, start-sorted
/// on the common clock.
#[derive(Debug, Default, Clone)]
pub struct LaneKernels {
    pub row: Row,
    /// The kernel's row in the rank's kernel table.
    pub kernel: Vec<u32>,
    pub bucket: Vec<u8>,
}

/// One rank's lane.
#[derive(Debug, Clone)]
pub struct RankLane {
    pub rank: u32,
    /// The rank's trace, as its report names it.
    pub trace: String,
    /// The GPU its collectives ran on.
    pub device: u32,
    /// The verdict names this rank as the one that sets the step.
    pub sets_step: bool,
    /// Added to the rank's own times to put them on the common clock.
    pub clock_correction_ns: i64,
    pub steps: LaneSteps,
    pub collectives: LaneCollectives,
    pub kernels: LaneKernels,
}

/// Collectives to draw: one, or a run of narrow ones folded together.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveDraw {
    /// Items of the lane's collectives.
    pub items: Range<usize>,
    pub start_ns: i64,
    pub end_ns: i64,
    /// Where the waiting part ends: one collective's start plus its wait; for a fold, its
    /// start plus its span times the fold's waiting share.
    pub wait_end_ns: i64,
    pub wait_ns: i64,
    pub transfer_ns: i64,
    /// How many of the items this rank arrived last at.
    pub last: u32,
}

/// Kernels to draw: one, or a fold coloured by its longest kernel's bucket.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelDraw {
    pub items: Range<usize>,
    pub start_ns: i64,
    pub end_ns: i64,
    pub bucket: u8,
    /// The longest item of the range.
    pub longest: usize,
}

/// A step window to draw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepDraw {
    /// Item of the lane's steps.
    pub item: usize,
    pub step: u32,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// One collective's end on every lane, to link them.
#[derive(Debug, Clone, PartialEq)]
pub struct Link {
    pub collective: u32,
    /// Per lane, the collective's end on the common clock (`None` when that rank has none).
    pub end_ns: Vec<Option<i64>>,
    /// The lane of the rank that arrived last.
    pub last_lane: Option<usize>,
}

/// Everything to say about one collective on one rank (the hover).
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveDetail {
    pub rank: u32,
    pub collective: u32,
    pub step: u32,
    pub kind: CollectiveKind,
    pub name: String,
    pub start_ns: i64,
    pub end_ns: i64,
    pub wait_ns: i64,
    pub transfer_ns: i64,
    /// This rank arrived last.
    pub last: bool,
    /// The rank that arrived last.
    pub last_rank: Option<u32>,
}

/// The lanes of a run of several ranks.
#[derive(Debug, Clone, Default)]
pub struct RankLanes {
    /// In rank order.
    pub lanes: Vec<RankLane>,
    /// First and last instant of any lane's steps, collectives or kernels (common clock).
    pub span_ns: (i64, i64),
    /// Per collective, its item in each lane (`u32::MAX` where a lane has none).
    by_collective: Vec<Vec<u32>>,
    /// Per lane, the kernel names of its rank (for details).
    names: Vec<Vec<String>>,
}

fn running_sum<T: Copy + std::ops::Add<Output = T> + Default>(v: &[T]) -> Vec<T> {
    let mut s = T::default();
    std::iter::once(s)
        .chain(v.iter().map(|&x| {
            s = s + x;
            s
        }))
        .collect()
}

impl LaneCollectives {
    /// The collectives of `ct`'s `rows`, in that order.
    fn of(ct: &CollectiveTable, rows: &[usize]) -> Self {
        let col = |f: &dyn Fn(usize) -> i64| rows.iter().map(|&i| f(i)).collect::<Vec<i64>>();
        let wait_ns = col(&|i| ct.wait_ns[i]);
        let transfer_ns = col(&|i| ct.transfer_ns[i]);
        let last: Vec<bool> = rows.iter().map(|&i| ct.last[i] != 0).collect();
        let last_u: Vec<u32> = last.iter().map(|&l| u32::from(l)).collect();
        Self {
            row: Row::new(Spans::new(
                col(&|i| ct.gpu_start_ns[i]),
                col(&|i| ct.gpu_end_ns[i].max(ct.gpu_start_ns[i])),
            )),
            collective: rows.iter().map(|&i| ct.collective[i]).collect(),
            table_row: rows.iter().map(|&i| i as u32).collect(),
            kind: rows
                .iter()
                .map(|&i| {
                    CollectiveKind::ALL
                        .get(ct.collective_kind[i] as usize)
                        .copied()
                        .unwrap_or(CollectiveKind::Other)
                })
                .collect(),
            wait_sum: running_sum(&wait_ns),
            transfer_sum: running_sum(&transfer_ns),
            last_sum: running_sum(&last_u),
            wait_ns,
            transfer_ns,
            last,
        }
    }
}

impl LaneSteps {
    /// `rank`'s rows of the step table, by start.
    fn of(st: &RankStepTable, rank: u32) -> Self {
        let mut srows: Vec<usize> = (0..st.len).filter(|&i| st.rank[i] == rank).collect();
        srows.sort_by_key(|&i| (st.gpu_start_ns[i], st.step[i]));
        Self {
            spans: Spans::new(
                srows.iter().map(|&i| st.gpu_start_ns[i]).collect(),
                srows
                    .iter()
                    .map(|&i| st.gpu_end_ns[i].max(st.gpu_start_ns[i]))
                    .collect(),
            ),
            step: srows.iter().map(|&i| st.step[i]).collect(),
            row: srows.iter().map(|&i| i as u32).collect(),
        }
    }
}

impl LaneKernels {
    /// `run`'s kernels on `device` other than communication, moved by `correction`.
    fn of(run: &AnalyzedRun, device: u32, correction: i64) -> Self {
        let k = &run.trace.kernels;
        let comm = Bucket::Comm as u8;
        let bucket_of = |i: usize| {
            run.tables
                .kernel_bucket
                .get(i)
                .copied()
                .unwrap_or(Bucket::Other as u8)
        };
        let mut ks: Vec<u32> = (0..k.len)
            .filter(|&i| k.device[i] == device && bucket_of(i) != comm)
            .map(|i| i as u32)
            .collect();
        ks.sort_by_key(|&i| k.gpu_start_ns[i as usize]);
        let moved = |t: i64| t.saturating_add(correction);
        Self {
            row: Row::new(Spans::new(
                ks.iter()
                    .map(|&i| moved(k.gpu_start_ns[i as usize]))
                    .collect(),
                ks.iter()
                    .map(|&i| {
                        let i = i as usize;
                        moved(k.gpu_end_ns[i].max(k.gpu_start_ns[i]))
                    })
                    .collect(),
            )),
            bucket: ks.iter().map(|&i| bucket_of(i as usize)).collect(),
            kernel: ks,
        }
    }
}

impl RankLanes {
    /// The lanes of `runs` (one per rank, any order) as `a` analysed them.
    pub fn build(runs: &[&AnalyzedRun], a: &RanksAnalysis) -> Self {
        let mut runs: Vec<&AnalyzedRun> = runs.to_vec();
        runs.sort_by_key(|r| r.run.rank);
        let ct = &a.tables.collectives;
        let st = &a.tables.steps;
        let late = a.report.verdict.late_rank();
        let n_coll = ct
            .collective
            .iter()
            .map(|&c| c as usize + 1)
            .max()
            .unwrap_or(0);
        let mut by_collective = vec![vec![u32::MAX; runs.len()]; n_coll];
        let mut names = Vec::with_capacity(runs.len());
        let mut lanes = Vec::with_capacity(runs.len());
        for (li, run) in runs.iter().enumerate() {
            let rank = run.run.rank;
            let info = a.report.ranks.iter().find(|r| r.rank == rank);
            let k = &run.trace.kernels;
            // Collectives of this rank, by start.
            let mut rows: Vec<usize> = (0..ct.len).filter(|&i| ct.rank[i] == rank).collect();
            rows.sort_by_key(|&i| (ct.gpu_start_ns[i], ct.collective[i]));
            let correction = rows
                .first()
                .and_then(|&i| {
                    let kr = ct.kernel[i] as usize;
                    (kr < k.len).then(|| ct.gpu_start_ns[i] - k.gpu_start_ns[kr])
                })
                .unwrap_or_else(|| {
                    a.report
                        .clocks
                        .iter()
                        .find(|c| c.rank == rank && !c.shared)
                        .map_or(0, |c| -c.offset_ns)
                });
            let device = info.map_or(0, |r| r.device);
            for (item, &i) in rows.iter().enumerate() {
                by_collective[ct.collective[i] as usize][li] = item as u32;
            }
            let collectives = LaneCollectives::of(ct, &rows);
            let steps = LaneSteps::of(st, rank);
            let kernels = LaneKernels::of(run, device, correction);
            names.push(
                collectives
                    .table_row
                    .iter()
                    .map(|&r| {
                        let kr = ct.kernel[r as usize] as usize;
                        k.name
                            .get(kr)
                            .map(|&n| run.trace.strings.get(n).to_owned())
                            .unwrap_or_default()
                    })
                    .collect(),
            );
            lanes.push(RankLane {
                rank,
                trace: info.map_or_else(|| run.report.source.path.clone(), |r| r.trace.clone()),
                device,
                sets_step: late == Some(rank),
                clock_correction_ns: correction,
                steps,
                collectives,
                kernels,
            });
        }
        let mut lo = i64::MAX;
        let mut hi = i64::MIN;
        for l in &lanes {
            for s in [
                &l.steps.spans,
                &l.collectives.row.spans,
                &l.kernels.row.spans,
            ] {
                if let (Some(&a), Some(&b)) = (s.start_ns.first(), s.end_max_ns.last()) {
                    lo = lo.min(a);
                    hi = hi.max(b);
                }
            }
        }
        Self {
            lanes,
            span_ns: if lo > hi { (0, 0) } else { (lo, hi) },
            by_collective,
            names,
        }
    }

    /// The lane of the rank that sets the step, if the verdict names one.
    pub fn late_lane(&self) -> Option<usize> {
        self.lanes.iter().position(|l| l.sets_step)
    }

    /// The collectives of `lane` to draw in `[t0, t1)` over `width_px` pixels.
    pub fn collectives_in(
        &self,
        lane: usize,
        t0: i64,
        t1: i64,
        width_px: f64,
    ) -> Vec<CollectiveDraw> {
        let Some(l) = self.lanes.get(lane) else {
            return Vec::new();
        };
        let c = &l.collectives;
        let sp = &c.row.spans;
        c.row
            .fold(t0, t1, width_px)
            .into_iter()
            .map(|r| {
                let (i, j) = (r.start, r.end);
                let start_ns = sp.start_ns[i];
                let end_ns = sp.end_ns[i..j].iter().copied().max().unwrap_or(start_ns);
                let wait_ns = c.wait_sum[j] - c.wait_sum[i];
                let transfer_ns = c.transfer_sum[j] - c.transfer_sum[i];
                let wait_end_ns = if j - i == 1 {
                    (start_ns + wait_ns).min(end_ns)
                } else {
                    let share = wait_ns as f64 / (wait_ns + transfer_ns).max(1) as f64;
                    start_ns + ((end_ns - start_ns) as f64 * share) as i64
                };
                CollectiveDraw {
                    items: r,
                    start_ns,
                    end_ns,
                    wait_end_ns,
                    wait_ns,
                    transfer_ns,
                    last: c.last_sum[j] - c.last_sum[i],
                }
            })
            .collect()
    }

    /// The other kernels of `lane` to draw in `[t0, t1)` over `width_px` pixels.
    pub fn kernels_in(&self, lane: usize, t0: i64, t1: i64, width_px: f64) -> Vec<KernelDraw> {
        let Some(l) = self.lanes.get(lane) else {
            return Vec::new();
        };
        let k = &l.kernels;
        let sp = &k.row.spans;
        k.row
            .fold(t0, t1, width_px)
            .into_iter()
            .map(|r| {
                let longest = k.row.longest(r.start, r.end);
                KernelDraw {
                    start_ns: sp.start_ns[r.start],
                    end_ns: sp.end_ns[r.end - 1].max(sp.end_ns[longest]),
                    bucket: k.bucket[longest],
                    longest,
                    items: r,
                }
            })
            .collect()
    }

    /// The steps of `lane` in `[t0, t1)`, at most one per pixel.
    pub fn steps_in(&self, lane: usize, t0: i64, t1: i64, width_px: f64) -> Vec<StepDraw> {
        let Some(l) = self.lanes.get(lane) else {
            return Vec::new();
        };
        let s = &l.steps;
        let r = s.spans.overlapping(t0, t1);
        let ns_per_px = ((t1 - t0) as f64 / width_px.max(1.0)).max(1.0) as i64;
        let mut out = Vec::new();
        let mut i = r.start;
        while i < r.end {
            out.push(StepDraw {
                item: i,
                step: s.step[i],
                start_ns: s.spans.start_ns[i],
                end_ns: s.spans.end_ns[i],
            });
            // The next step that reaches a pixel past this one's end.
            let next = s.spans.end_ns[i].saturating_add(ns_per_px);
            i = (i + 1).max(s.spans.end_max_ns[..r.end].partition_point(|&e| e < next));
        }
        out
    }

    /// Links between each collective's ends across ranks in `[t0, t1)`, when they are
    /// readable at `width_px` (collectives at least [`LINK_MIN_PX`] apart); else none.
    pub fn links_in(&self, t0: i64, t1: i64, width_px: f64) -> Vec<Link> {
        let mut ids: Vec<u32> = Vec::new();
        for l in &self.lanes {
            let r = l.collectives.row.spans.overlapping(t0, t1);
            if r.len() as f64 * LINK_MIN_PX > width_px {
                return Vec::new();
            }
            ids.extend(&l.collectives.collective[r]);
        }
        ids.sort_unstable();
        ids.dedup();
        ids.into_iter()
            .filter_map(|c| {
                let items = self.by_collective.get(c as usize)?;
                let mut last_lane = None;
                let end_ns = items
                    .iter()
                    .enumerate()
                    .map(|(li, &it)| {
                        let lc = &self.lanes[li].collectives;
                        let it = it as usize;
                        (it < lc.row.len()).then(|| {
                            if lc.last[it] {
                                last_lane = Some(li);
                            }
                            lc.row.spans.end_ns[it]
                        })
                    })
                    .collect();
                Some(Link {
                    collective: c,
                    end_ns,
                    last_lane,
                })
            })
            .collect()
    }

    /// Everything about item `i` of `lane`'s collectives.
    pub fn collective_detail(&self, lane: usize, i: usize) -> Option<CollectiveDetail> {
        let l = self.lanes.get(lane)?;
        let c = &l.collectives;
        if i >= c.row.len() {
            return None;
        }
        let id = c.collective[i];
        let last_rank = self.by_collective.get(id as usize).and_then(|items| {
            items.iter().enumerate().find_map(|(li, &it)| {
                let lc = &self.lanes[li].collectives;
                lc.last
                    .get(it as usize)
                    .copied()
                    .unwrap_or(false)
                    .then(|| self.lanes[li].rank)
            })
        });
        let step = l
            .steps
            .spans
            .start_ns
            .partition_point(|&s| s <= c.row.spans.start_ns[i])
            .checked_sub(1)
            .map_or(0, |s| l.steps.step[s]);
        Some(CollectiveDetail {
            rank: l.rank,
            collective: id,
            step,
            kind: c.kind[i],
            name: self.names[lane].get(i).cloned().unwrap_or_default(),
            start_ns: c.row.spans.start_ns[i],
            end_ns: c.row.spans.end_ns[i],
            wait_ns: c.wait_ns[i],
            transfer_ns: c.transfer_ns[i],
            last: c.last[i],
            last_rank,
        })
    }
}

/// An analysed run as the explorer's [`Exploration`] (the lanes built, the host lanes
/// added), for the views of one rank.
pub fn exploration_of(run: AnalyzedRun) -> Exploration {
    let mut lanes = LaneSet::build(&run.trace);
    lanes.fill_buckets(&run.tables.kernel_bucket, &run.tables.memop_bucket);
    lanes.add_host(&run.host.forest);
    let steps = step_view::views(&run.tables);
    let span_ns = lanes.span_ns(&steps);
    Exploration {
        trace: run.trace,
        report: run.report,
        tables: run.tables,
        names: run.names,
        steps,
        lanes,
        forest: run.host.forest,
        launch_map: run.host.launch_map,
        span_ns,
    }
}

#[cfg(test)]
mod tests;
