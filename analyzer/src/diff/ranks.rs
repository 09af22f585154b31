//! Two multi-rank runs compared: the run's step (the slowest rank's), and per rank how its
//! compute, communication transfer, communication wait and idle moved, so that a regression
//! in waiting (another rank got slower) is told apart from one in transfer or compute.

use serde::Serialize;

use crate::analysis::ranks::{RankRow, RanksReport};

/// One figure on both sides, ms.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    pub a: f64,
    pub b: f64,
    /// A − B.
    pub delta: f64,
}

impl Change {
    fn of(a: f64, b: f64) -> Self {
        Self { a, b, delta: a - b }
    }
}

/// What part of a rank's step moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    Compute,
    Transfer,
    Wait,
    Idle,
}

impl Component {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compute => "compute",
            Self::Transfer => "transfer",
            Self::Wait => "wait",
            Self::Idle => "idle",
        }
    }
}

/// One rank's figures on both sides (medians over the aligned steps, ms).
#[derive(Debug, Clone, Serialize)]
pub struct RankChange {
    pub rank: u32,
    pub step: Change,
    pub compute: Change,
    pub transfer: Change,
    pub wait: Change,
    pub idle: Change,
}

impl RankChange {
    fn of(a: &RankRow, b: &RankRow) -> Self {
        Self {
            rank: a.rank,
            step: Change::of(a.step_ms, b.step_ms),
            compute: Change::of(a.compute_ms, b.compute_ms),
            transfer: Change::of(a.transfer_ms, b.transfer_ms),
            wait: Change::of(a.wait_ms, b.wait_ms),
            idle: Change::of(a.idle_ms, b.idle_ms),
        }
    }

    fn components(&self) -> [(Component, f64); 4] {
        [
            (Component::Compute, self.compute.delta),
            (Component::Transfer, self.transfer.delta),
            (Component::Wait, self.wait.delta),
            (Component::Idle, self.idle.delta),
        ]
    }
}

/// The component that moved most on one rank.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Moved {
    pub rank: u32,
    pub component: Component,
    pub delta_ms: f64,
}

/// The two runs compared rank by rank.
#[derive(Debug, Clone, Serialize)]
pub struct RanksDiff {
    pub world_a: u32,
    pub world_b: u32,
    /// The run's step: median over aligned steps of the slowest rank's.
    pub step: Change,
    /// Ranks present on both sides.
    pub per_rank: Vec<RankChange>,
    /// The largest move in the step's direction (a rise when A is slower) of any rank's
    /// compute, transfer or idle (what a rank itself does), and of any rank's wait (what it
    /// suffers from another).
    pub own: Option<Moved>,
    pub waiting: Option<Moved>,
    /// The rank that sets the step on each side, when one does.
    pub late_a: Option<u32>,
    pub late_b: Option<u32>,
}

/// Compares run A with run B.
pub fn diff_ranks(a: &RanksReport, b: &RanksReport) -> RanksDiff {
    let per_rank: Vec<RankChange> = a
        .per_rank
        .iter()
        .filter_map(|x| {
            let y = b.per_rank.iter().find(|y| y.rank == x.rank)?;
            Some(RankChange::of(x, y))
        })
        .collect();
    // For a slower A the largest rise, for a faster A the largest fall.
    let sign = if a.step_ms_median >= b.step_ms_median {
        1.0
    } else {
        -1.0
    };
    let best = |f: &dyn Fn(Component) -> bool| {
        per_rank
            .iter()
            .flat_map(|r| {
                r.components()
                    .into_iter()
                    .filter(|(c, _)| f(*c))
                    .map(move |(c, d)| Moved {
                        rank: r.rank,
                        component: c,
                        delta_ms: d,
                    })
            })
            .max_by(|x, y| (sign * x.delta_ms).total_cmp(&(sign * y.delta_ms)))
    };
    RanksDiff {
        world_a: a.ranks.len() as u32,
        world_b: b.ranks.len() as u32,
        step: Change::of(a.step_ms_median, b.step_ms_median),
        own: best(&|c| c != Component::Wait),
        waiting: best(&|c| c == Component::Wait),
        per_rank,
        late_a: a.verdict.late_rank(),
        late_b: b.verdict.late_rank(),
    }
}
