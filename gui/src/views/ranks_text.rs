//! The ranks view's words: the verdict sentence (as `gapscope report` words it, rendered
//! here from the typed verdict), the notes, and the hover texts.

use gapscope_analyzer::analysis::ranks::{RanksNote, RanksReport};
use gapscope_analyzer::explore::ranks::{CollectiveDetail, CollectiveDraw};
use gapscope_analyzer::text::ms;

use super::format;

fn us(ns: i64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

/// The verdict in one sentence (the analyzer's wording, names cut for a label).
pub fn verdict(r: &RanksReport) -> String {
    gapscope_analyzer::analysis::ranks::text::verdict(r, &|s: &str| format::cut(s, 80))
}

/// The run in one line: ranks, aligned steps, collectives, the run's step.
pub fn summary(r: &RanksReport) -> String {
    format!(
        "{} ranks{} · {} aligned steps · {} collectives matched ({:.1} per step, transfer median {}) · step median {} ms, mean {} ms (the slowest rank's)",
        r.ranks.len(),
        r.world_size.map(|w| format!(" of {w}")).unwrap_or_default(),
        r.aligned_steps,
        r.matched_collectives,
        r.collectives_per_step,
        us((r.transfer_us_median * 1e3) as i64),
        ms(r.step_ms_median),
        ms(r.step_ms_mean),
    )
}

pub fn note(n: &RanksNote) -> String {
    gapscope_analyzer::analysis::ranks::text::note(n)
}

/// The hover text of one collective on one rank.
pub fn collective(d: &CollectiveDetail) -> String {
    let arrival = match (d.last, d.last_rank) {
        (true, _) => "arrived last: the others waited for this rank".to_owned(),
        (false, Some(r)) => format!("arrived before rank {r}, which arrived last"),
        (false, None) => "arrived before the last rank".to_owned(),
    };
    format!(
        "rank {} · {} #{} · step {}\nwait {} · transfer {} · {}\n{arrival}\n{}",
        d.rank,
        d.kind.as_str(),
        d.collective,
        d.step,
        us(d.wait_ns),
        us(d.transfer_ns),
        format::dur_ns((d.end_ns - d.start_ns) as f64),
        format::cut(&gapscope_analyzer::text::short(&d.name), 80)
    )
}

/// The hover text of collectives folded together.
pub fn folded(rank: u32, c: &CollectiveDraw) -> String {
    format!(
        "rank {rank} · {} collectives folded (zoom in to see them)\nwait {} · transfer {} in all\narrived last at {} of them",
        format::count(c.items.len() as u64),
        us(c.wait_ns),
        us(c.transfer_ns),
        c.last
    )
}
