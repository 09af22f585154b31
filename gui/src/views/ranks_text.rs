//! The ranks view's words: the verdict sentence (as `gapscope report` words it, rendered
//! here from the typed verdict), the notes, and the hover texts.

use gapscope_analyzer::analysis::ranks::{LateBy, RanksNote, RanksReport, RanksVerdict};
use gapscope_analyzer::explore::ranks::{CollectiveDetail, CollectiveDraw};
use gapscope_analyzer::text::ms;

use super::format;

fn us(ns: i64) -> String {
    format!("{:.1} µs", ns as f64 / 1e3)
}

/// The verdict in one sentence.
pub fn verdict(r: &RanksReport) -> String {
    match &r.verdict {
        RanksVerdict::Straggler(s) => {
            let why = match &s.late_by {
                LateBy::Host {
                    excess_idle_ms_per_step,
                    scope,
                    scope_ms_per_step,
                    scope_only_here,
                } => match scope {
                    Some(name) => format!(
                        "its host is busy in `{}` ({} ms/step{}) while its GPU sits idle ({} ms/step more than the others')",
                        format::cut(name, 80),
                        ms(*scope_ms_per_step),
                        if *scope_only_here {
                            ", on no other rank"
                        } else {
                            " more than on the others"
                        },
                        ms(*excess_idle_ms_per_step)
                    ),
                    None => format!(
                        "its GPU sits idle {} ms/step more than the others' (its host; no host scope or NVTX range covers that time)",
                        ms(*excess_idle_ms_per_step)
                    ),
                },
                LateBy::Gpu {
                    excess_busy_ms_per_step,
                    kernel,
                    bucket,
                    kernel_ms_per_step,
                    kernel_only_here,
                } => format!(
                    "its GPU is busy in bucket {} ({} ms/step more than the others'), most in `{}` ({} ms/step{})",
                    bucket.as_str(),
                    ms(*excess_busy_ms_per_step),
                    format::cut(kernel, 80),
                    ms(*kernel_ms_per_step),
                    if *kernel_only_here {
                        ", on no other rank"
                    } else {
                        " more"
                    }
                ),
            };
            format!(
                "rank {} sets the step: it arrives last at {:.0}% of collectives; the others wait {} ms/step, {} ms of it at one collective; {}",
                s.rank,
                100.0 * s.late_share,
                ms(s.others_wait_ms_per_step),
                ms(s.others_longest_wait_ms),
                why
            )
        }
        RanksVerdict::Even {
            late_rank,
            late_share,
            wait_ms_per_step,
        } => format!(
            "no rank sets the step: rank {late_rank} arrives last at {:.0}% of collectives, and the ranks wait {} ms/step on average",
            100.0 * late_share,
            ms(*wait_ms_per_step)
        ),
        RanksVerdict::Refused { reason } => format!("no verdict: {}", reason.as_str()),
    }
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
    let list = |v: &[u32]| {
        v.iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match n {
        RanksNote::StepCountsDiffer { counts, aligned } => format!(
            "the ranks have different step counts ({}): the {aligned} steps found on every rank are compared",
            list(counts)
        ),
        RanksNote::Unmatched { per_rank } => format!(
            "communication kernels that matched no other rank's, per rank: {}",
            list(per_rank)
        ),
        RanksNote::WorldSize { said, given } => {
            format!("the traces say a world of {said} ranks; {given} were given")
        }
        RanksNote::ClockMoved {
            rank,
            offset_ns,
            residual_ns,
        } => format!(
            "rank {rank}'s clock moved by {} onto rank 0's (residual {})",
            us(-offset_ns),
            us(*residual_ns)
        ),
    }
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
