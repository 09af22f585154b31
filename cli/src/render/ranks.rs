//! The multi-rank section: how the ranks were recognised and aligned, the verdict, and the
//! per-rank split of the step. The table and Markdown renderers share these cells.

use gapscope_analyzer::analysis::ranks::{RanksReport, StepPairing};
use gapscope_analyzer::text::ms;

use super::text;

/// Headers of the per-rank table.
pub const RANK_HEADERS: [&str; 12] = [
    "rank",
    "step ms",
    "compute",
    "transfer",
    "wait",
    "longest wait",
    "unsplit",
    "idle",
    "busy %",
    "working %",
    "last %",
    "trace",
];

fn pct_or_na(v: f64, digits: usize) -> String {
    if v.is_finite() {
        format!("{v:.digits$}")
    } else {
        "n/a".to_owned()
    }
}

use gapscope_analyzer::analysis::ranks::text::us;

/// The verdict in one sentence.
pub fn verdict(r: &RanksReport) -> String {
    gapscope_analyzer::analysis::ranks::text::verdict(r, &|s: &str| text(s))
}

/// The summary lines (label, value).
pub fn summary(r: &RanksReport) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let sources: Vec<&str> = {
        let mut s: Vec<&str> = r.ranks.iter().map(|x| x.source.as_str()).collect();
        s.dedup();
        s
    };
    v.push((
        "run".into(),
        format!(
            "{} ranks{} (rank from {})",
            r.ranks.len(),
            r.world_size.map(|w| format!(" of {w}")).unwrap_or_default(),
            sources.join(", ")
        ),
    ));
    let shared = r.clocks.iter().all(|c| c.shared);
    let worst = r.clocks.iter().map(|c| c.residual_ns).max().unwrap_or(0);
    v.push((
        "steps".into(),
        format!(
            "{} aligned, paired {}; clocks {}",
            r.aligned_steps,
            match r.pairing {
                StepPairing::Numbers => "by their numbers",
                StepPairing::Order => "in order",
            },
            if r.matched_collectives == 0 {
                "not compared (no collective matched)".to_owned()
            } else if worst > gapscope_analyzer::analysis::ranks::verdict::COMPLETION_RESIDUAL_NS {
                format!(
                    "not aligned: the paired kernels do not end together (residual {})",
                    us(worst)
                )
            } else if shared {
                format!("shared (collective completions agree within {})", us(worst))
            } else {
                format!(
                    "aligned on collective completions (residual up to {})",
                    us(worst)
                )
            }
        ),
    ));
    v.push((
        "collectives".into(),
        if r.matched_collectives == 0 {
            "none matched across the ranks".to_owned()
        } else if !r.transfer_us_median.is_finite() {
            format!(
                "{} paired ({:.1} per step), but they are not the same collectives (see the verdict)",
                r.matched_collectives, r.collectives_per_step
            )
        } else {
            format!(
                "{} matched ({:.1} per step); transfer median {} per collective{}",
                r.matched_collectives,
                r.collectives_per_step,
                us((r.transfer_us_median * 1e3) as i64),
                r.floor.map_or(String::new(), |f| format!(
                    " (its {} message needs {} at {} GB/s each way: bandwidth alone, no latency)",
                    super::bytes_label(f.message_bytes_median),
                    us((f.floor_ms_per_collective * 1e6) as i64),
                    (f.link_bytes_per_s / 1e9).round()
                ))
            )
        },
    ));
    v.push((
        "step".into(),
        format!(
            "median {} ms, mean {} ms (the slowest rank's)",
            ms(r.step_ms_median),
            ms(r.step_ms_mean)
        ),
    ));
    v.push(("verdict".into(), verdict(r)));
    for n in &r.notes {
        v.push((
            "note".into(),
            text(&gapscope_analyzer::analysis::ranks::text::note(n)),
        ));
    }
    v
}

/// The per-rank table's cells.
pub fn rank_cells(r: &RanksReport) -> Vec<Vec<String>> {
    r.per_rank
        .iter()
        .map(|p| {
            let trace = r
                .ranks
                .iter()
                .find(|x| x.rank == p.rank)
                .map(|x| text(&x.trace))
                .unwrap_or_default();
            vec![
                p.rank.to_string(),
                ms(p.step_ms),
                ms(p.compute_ms),
                ms(p.transfer_ms),
                ms(p.wait_ms),
                ms(p.longest_wait_ms),
                ms(p.unsplit_ms),
                ms(p.idle_ms),
                format!("{:.1}", p.busy_pct),
                pct_or_na(p.working_pct, 1),
                pct_or_na(100.0 * p.late_share, 0),
                trace,
            ]
        })
        .collect()
}

/// The section as terminal text.
pub fn table(r: &RanksReport) -> String {
    let mut out = String::new();
    let s = summary(r);
    let lw = s.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    for (l, v) in &s {
        out.push_str(&format!("{l:<lw$}  {v}\n"));
    }
    out.push_str("\nper rank, medians over the aligned steps, ms (working % = busy without communication wait)\n");
    super::table::grid(&RANK_HEADERS, &rank_cells(r), &mut out);
    out
}

fn signed(v: f64) -> String {
    if v >= 0.0 {
        format!("+{}", ms(v))
    } else {
        format!("-{}", ms(-v))
    }
}

/// Two multi-rank runs compared (`diff`): the run's step, what moved most, per rank.
pub fn diff(d: &gapscope_analyzer::diff::ranks::RanksDiff, md: bool) -> String {
    let late = |l: Option<u32>| {
        l.map_or("no rank sets the step".to_owned(), |r| {
            format!("rank {r} sets the step")
        })
    };
    let mut lines = vec![
        (
            "ranks".to_owned(),
            format!(
                "A {} ({}), B {} ({})",
                d.world_a,
                late(d.late_a),
                d.world_b,
                late(d.late_b)
            ),
        ),
        (
            "step".to_owned(),
            format!(
                "A {} ms, B {} ms, {} ms (the slowest rank's, median)",
                ms(d.step.a),
                ms(d.step.b),
                signed(d.step.delta)
            ),
        ),
    ];
    if let Some(m) = d.own {
        lines.push((
            "own work".to_owned(),
            format!(
                "rank {} {} {} ms/step (what the rank itself does: compute, transfer or idle)",
                m.rank,
                m.component.as_str(),
                signed(m.delta_ms)
            ),
        ));
    }
    if let Some(m) = d.waiting {
        lines.push((
            "waiting".to_owned(),
            format!(
                "rank {} waits {} ms/step (waiting on another rank, not its own work)",
                m.rank,
                signed(m.delta_ms)
            ),
        ));
    }
    let headers = [
        "rank",
        "step A",
        "step B",
        "step Δ",
        "compute Δ",
        "transfer Δ",
        "wait Δ",
        "idle Δ",
    ];
    let rows: Vec<Vec<String>> = d
        .per_rank
        .iter()
        .map(|r| {
            vec![
                r.rank.to_string(),
                ms(r.step.a),
                ms(r.step.b),
                signed(r.step.delta),
                signed(r.compute.delta),
                signed(r.transfer.delta),
                signed(r.wait.delta),
                signed(r.idle.delta),
            ]
        })
        .collect();
    let mut out = String::new();
    if md {
        out.push_str("## gapscope diff: ranks\n\n");
        out.push_str(&super::markdown::facts(&lines));
        out.push('\n');
        let cells: Vec<Vec<super::markdown::Cell>> =
            rows.into_iter().map(super::markdown::text_row).collect();
        let mut align = vec![super::markdown::Align::Right; headers.len()];
        align[0] = super::markdown::Align::Left;
        out.push_str(&super::markdown::table(&headers, &align, &cells));
    } else {
        let lw = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
        for (l, v) in &lines {
            out.push_str(&format!("{l:<lw$}  {v}\n"));
        }
        out.push_str("\nper rank, medians over the aligned steps, ms (A − B)\n");
        let mut h = headers.to_vec();
        h.push("");
        let rows: Vec<Vec<String>> = rows
            .into_iter()
            .map(|mut r| {
                r.push(String::new());
                r
            })
            .collect();
        super::table::grid(&h, &rows, &mut out);
    }
    out
}
