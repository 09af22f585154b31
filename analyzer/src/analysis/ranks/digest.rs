//! What the multi-rank analysis keeps of one rank after the rank's own pass: its steps, its
//! collectives and its identity, small beside its trace, so that a run of many ranks holds
//! one trace at a time. The verdict's cause reads a trace again ([`RunRef`]): only the late
//! rank's and those of the ranks it is compared with.

use std::ops::Deref;

use super::align::RankSteps;
use super::collectives::{self, Collective, MessageFloor};
use crate::session::{AnalyzedRun, Run};
use crate::tables::StepTable;

/// One rank, digested.
#[derive(Debug, Clone)]
pub struct RankDigest {
    pub run: Run,
    /// How reports name its trace.
    pub trace: String,
    pub world_size: Option<u32>,
    /// The GPU its collectives ran on.
    pub device: u32,
    pub steps: StepTable,
    pub rank_steps: RankSteps,
    pub colls: Vec<Collective>,
    /// Its messages against the link, among `ranks` (see [`RankDigest::of`]).
    pub floor: Option<MessageFloor>,
}

impl RankDigest {
    /// The digest of an analysed rank of a run of `ranks` ranks.
    pub fn of(r: &AnalyzedRun, ranks: u32) -> Self {
        let colls = collectives::collectives(r);
        let device = colls
            .first()
            .map(|c| r.trace.kernels.device[c.kernel as usize])
            .unwrap_or(0);
        Self {
            run: r.run.clone(),
            trace: r.report.source.path.clone(),
            world_size: r.trace.manifest.world_size,
            device,
            steps: r.tables.steps.clone(),
            rank_steps: super::rank_steps(r),
            floor: collectives::message_floor(&r.trace, &r.tables, &colls, Some(ranks)),
            colls,
        }
    }
}

/// An analysed rank handed to the cause's reading: one held by the caller, or one opened
/// again for the purpose and dropped after.
pub enum RunRef<'a> {
    Borrowed(&'a AnalyzedRun),
    Owned(Box<AnalyzedRun>),
}

impl Deref for RunRef<'_> {
    type Target = AnalyzedRun;

    fn deref(&self) -> &AnalyzedRun {
        match self {
            Self::Borrowed(r) => r,
            Self::Owned(r) => r,
        }
    }
}
