//! What the explorer (`gapscope-gui`) draws, computed here so that the front end holds no
//! analysis: the report, each activity's bucket, per-lane sorted columns, every step's
//! decomposition, the kernel table and the sums of a box selection.

//! The kernel table is built apart ([`KernelTable::build`]): the explorer shows the
//! timeline first and builds it in the background.

pub mod activity;
pub mod kernel_table;
pub mod lanes;
mod levers;
pub mod ranks;
pub mod selection;
pub mod step_view;

use gapscope_traces::Trace;

use crate::analysis::host::Forest;
use crate::analysis::host::launch_map::LaunchMap;
use crate::analysis::{Analyzed, Report};
use crate::diff::{DiffSide, NameTimes};
use crate::import::Imported;
use crate::session::{self, Run, SessionSettings};
use crate::tables::Tables;

pub use activity::{ActRef, ActivityDetail};
pub use kernel_table::{KernelRow, KernelTable, SortKey, TableQuery};
pub use lanes::{GpuLane, HostLane, HostRow, LaneSet, MarkerLane, Spans};
pub use selection::BoxSums;
pub use step_view::StepView;

/// One opened trace, analysed for the explorer.
pub struct Exploration {
    pub trace: Trace,
    pub report: Report,
    /// The analysis tables the report was made from (each activity's bucket among them).
    pub tables: Tables,
    /// Every name's time over the report's steps, for diffs.
    pub names: NameTimes,
    /// Every step (prefill, decode, mixed, iterations), in time order.
    pub steps: Vec<StepView>,
    pub lanes: LaneSet,
    /// The host scopes the host lanes point into.
    pub forest: Forest,
    /// Each correlation's launch, for the host side of a grouping.
    pub launch_map: LaunchMap,
    /// First and last instant of anything on the timeline, ns (0, 0 for an empty trace).
    pub span_ns: (i64, i64),
}

/// The stages of [`explore`], reported as they start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Analysing,
    Lanes,
}

impl Stage {
    pub fn label(self) -> &'static str {
        match self {
            Self::Analysing => "analysing (buckets, steps, host scopes)",
            Self::Lanes => "building the timeline lanes",
        }
    }
}

/// Analyses an imported trace of `run` for the explorer, as every front end's session does;
/// `stage` hears each stage as it starts.
pub fn explore(
    run: &Run,
    imported: Imported,
    settings: &SessionSettings,
    stage: &dyn Fn(Stage),
) -> Exploration {
    stage(Stage::Analysing);
    // The lanes' sorted columns need no analysis: built on the other core meanwhile.
    let (a, mut lanes) = std::thread::scope(|s| {
        let lanes = s.spawn(|| LaneSet::build(&imported.trace));
        let a = session::analyze(run, &imported, settings);
        let lanes = lanes
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (a, lanes)
    });
    stage(Stage::Lanes);
    let trace = imported.trace;
    let (
        Analyzed {
            report,
            tables,
            host,
            ..
        },
        names,
    ) = a;
    lanes.fill_buckets(&tables.kernel_bucket, &tables.memop_bucket);
    lanes.add_host(&host.forest);
    let steps = step_view::views(&tables);
    let span_ns = lanes.span_ns(&steps);
    Exploration {
        trace,
        report,
        steps,
        lanes,
        forest: host.forest,
        launch_map: host.launch_map,
        span_ns,
        tables,
        names,
    }
}

impl Exploration {
    /// This run as one side of a diff.
    pub fn diff_side(&self) -> DiffSide<'_> {
        DiffSide {
            report: &self.report,
            names: &self.names,
        }
    }

    /// Everything there is to show about one kernel or memop.
    pub fn detail(&self, a: ActRef) -> Option<ActivityDetail> {
        ActivityDetail::of(
            &self.trace,
            &self.tables.kernel_bucket,
            &self.tables.memop_bucket,
            a,
        )
    }

    /// The step that holds instant `t`, if any.
    pub fn step_at(&self, t: i64) -> Option<usize> {
        let i = self.steps.partition_point(|s| s.start_ns <= t);
        (i > 0 && t < self.steps[i - 1].end_ns).then(|| i - 1)
    }
}
