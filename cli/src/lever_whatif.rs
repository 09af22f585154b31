//! `gapscope diff SLOW --what-if hybrid [--measured LEVER=TRACE ...]`: each lever's step
//! predicted from the slow configuration's trace alone, and, for the levers measured since,
//! the measured step and the prediction's error.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use gapscope_analyzer::analysis::host::GroupBy;
use gapscope_analyzer::diff::levers::{LeverPrediction, LeverWhatIf};
use gapscope_analyzer::diff::whatif::{LeverSet, WhatIfOutput, compare, find_lever, predict};

use crate::render::markdown::{Align, Cell, table};
use crate::render::{md_code, md_text, text};
use crate::report_cmd::Analyser;

/// A `--measured LEVER=TRACE` argument.
#[derive(Debug, Clone)]
pub struct Measured {
    pub lever: String,
    pub path: PathBuf,
}

pub fn parse_measured(s: &str) -> std::result::Result<Measured, String> {
    let (lever, path) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected LEVER=TRACE, e.g. all=fast.gst"))?;
    Ok(Measured {
        lever: lever.trim().to_owned(),
        path: PathBuf::from(path.trim()),
    })
}

/// Analyses the slow trace with the op grouping and each measured trace, then asks the
/// analyzer for the what-if.
pub fn run(
    set: &str,
    slow: &Path,
    measured: &[Measured],
    analyser: &mut Analyser,
) -> Result<WhatIfOutput> {
    let Some(set) = LeverSet::parse(set) else {
        let known: Vec<&str> = LeverSet::ALL.iter().map(|s| s.as_str()).collect();
        bail!(
            "--what-if {set:?}: unknown lever set; the sets are {}",
            known.join(", ")
        );
    };
    analyser.group_by(GroupBy::Op)?;
    let report = analyser.run(slow)?;
    // A lever the slow trace does not predict is refused before any measured trace is read.
    let prediction = predict(set, &report)?;
    let mut runs = Vec::new();
    for m in measured {
        find_lever(&prediction, &m.lever)?;
        runs.push((m.lever.clone(), analyser.run(&m.path)?));
    }
    Ok(compare(prediction, &report, &runs)?)
}

fn cells(w: &WhatIfOutput, p: &LeverPrediction) -> Vec<String> {
    let m = w.measured.iter().find(|c| c.lever == p.lever);
    vec![
        p.lever.to_string(),
        format!("{:.3}", p.removed_ms),
        format!("{:.3}", p.added_ms),
        format!("{:.0}", p.launches_removed),
        format!("{:.3}", p.gaps_removed_ms),
        format!("{:.3}", p.predicted_step_ms),
        m.map_or("-".into(), |c| {
            format!("{:.3} ({:.1}%)", c.measured_step_ms, c.measured_cv_pct)
        }),
        m.map_or("-".into(), |c| format!("{:+.1}%", c.error_pct)),
    ]
}

const HEAD: [&str; 8] = [
    "lever",
    "removes ms",
    "adds ms",
    "launches",
    "gaps ms",
    "predicted ms",
    "measured ms (CV)",
    "error",
];

fn header(w: &LeverWhatIf) -> String {
    format!(
        "{} decode steps{}: step {:.3} ms (median span, CV {:.1}%), {:.0} launches per step, {:.4} ms idle per launch",
        w.decode_steps,
        w.batch_size
            .map(|b| format!(" at batch {b}"))
            .unwrap_or_default(),
        w.step_ms,
        w.step_cv_pct,
        w.launches_per_step,
        w.gap_per_launch_ms
    )
}

pub fn render_text(w: &WhatIfOutput) -> String {
    let p = &w.prediction;
    let mut s = format!(
        "what-if (hybrid levers) from {}\n{}\n\n",
        text(&p.path),
        header(p)
    );
    let rows: Vec<Vec<String>> = p.levers.iter().map(|l| cells(w, l)).collect();
    crate::render::table::grid(&HEAD, &rows, &mut s);
    s.push('\n');
    for l in &p.levers {
        s.push_str(&format!("{}: {}\n", l.lever, text(&l.basis)));
    }
    s
}

pub fn render_markdown(w: &WhatIfOutput) -> String {
    let p = &w.prediction;
    let mut s = format!(
        "## What-if: hybrid levers\n\nFrom {}: {}.\n\n",
        md_code(&p.path),
        md_text(&header(p))
    );
    let aligns: Vec<Align> = std::iter::once(Align::Left)
        .chain(std::iter::repeat_n(Align::Right, HEAD.len() - 1))
        .collect();
    let rows: Vec<Vec<Cell>> = p
        .levers
        .iter()
        .map(|l| cells(w, l).into_iter().map(Cell::Text).collect())
        .collect();
    s.push_str(&table(&HEAD, &aligns, &rows));
    s.push('\n');
    for l in &p.levers {
        s.push_str(&format!("- `{}`: {}\n", l.lever, md_text(&l.basis)));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_arguments_name_a_lever_and_a_trace() {
        let m = parse_measured("state_update=runs/inplace.gst").unwrap();
        assert_eq!(m.lever, "state_update");
        assert_eq!(m.path, PathBuf::from("runs/inplace.gst"));
        assert!(
            parse_measured("fast.gst")
                .unwrap_err()
                .contains("LEVER=TRACE")
        );
    }
}
