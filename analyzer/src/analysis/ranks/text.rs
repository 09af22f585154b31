//! The multi-rank report in English, for every front end (the CLI and the explorer say
//! the same): the verdict sentence and the notes. Names from the trace go through the front
//! end's `name` (escaping for a terminal, cutting for a label).

use super::{LateBy, RanksNote, RanksReport, RanksVerdict};
use crate::text::ms;

/// Nanoseconds as microseconds with the unit: `6.21 µs`.
pub fn us(ns: i64) -> String {
    format!("{:.2} µs", ns as f64 / 1e3)
}

/// The verdict in one sentence.
pub fn verdict(r: &RanksReport, shown: &dyn Fn(&str) -> String) -> String {
    match &r.verdict {
        RanksVerdict::Straggler(s) => {
            let why = match &s.late_by {
                LateBy::Host {
                    excess_idle_ms_per_step,
                    scope,
                    scope_ms_per_step,
                    scope_only_here,
                } => match scope {
                    Some(scope) => format!(
                        "its host is busy in `{}` ({} ms/step{}) while its GPU sits idle ({} ms/step more than the others')",
                        shown(scope),
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
                    shown(kernel),
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

/// A note in one sentence.
pub fn note(n: &RanksNote) -> String {
    match n {
        RanksNote::StepCountsDiffer { counts, aligned } => format!(
            "the ranks have different step counts ({}): {aligned} steps found on every rank are compared",
            counts
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        RanksNote::Unmatched { per_rank } => format!(
            "communication kernels that matched no other rank's, per rank: {} (their time is `unsplit`)",
            per_rank
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
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
