//! `gapscope gate --baseline B --current C`: the CI gate. Exit 0 pass, 1 regression,
//! 2 error.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::gate::{
    GateOptions, GateReport, Judgement, Policy, Verdict, gate_runs, gate_with,
};
use gapscope_history::History;
use gapscope_traces::{check_output, write_output};

use crate::render::markdown::{Align, Cell, table};
use crate::render::{md_code, md_text, text, write_stdout};
use crate::report_cmd::AnalysisArgs;

#[derive(Args)]
pub struct GateArgs {
    /// Baseline trace (the accepted run).
    #[arg(
        long,
        required_unless_present = "baseline_history",
        conflicts_with = "baseline_history"
    )]
    pub baseline: Option<PathBuf>,
    /// Use the last N accepted runs of the history as the baseline instead of a trace.
    #[arg(long, value_name = "N")]
    pub baseline_history: Option<i64>,
    /// History database for --baseline-history (SQLite file or postgres:// URL).
    #[arg(long, default_value = ".gapscope/history.sqlite")]
    pub db: String,
    /// Current trace (the run under test).
    #[arg(long)]
    pub current: PathBuf,
    /// Policy TOML: min_effect, confidence, bootstrap_resamples, seed, min_share,
    /// max_extra_kernels_per_step, min_kernels_ratio, gate_step_time.
    #[arg(long, value_name = "gate.toml")]
    pub policy: Option<PathBuf>,
    /// Compare anyway when the traces differ in GPU, batch size or step kind, or their
    /// steps look implausible (the differences are listed in the output).
    #[arg(long)]
    pub allow_incomparable: bool,
    /// JSON output.
    #[arg(long, group = "fmt")]
    pub json: bool,
    /// Markdown summary (for a CI step summary).
    #[arg(long, group = "fmt")]
    pub markdown: bool,
    /// Also write a JUnit XML report.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

pub fn run(a: GateArgs, g: &crate::Global) -> Result<ExitCode> {
    let db = Path::new(&a.db);
    let inputs: Vec<&Path> = [&a.current]
        .into_iter()
        .chain(&a.baseline)
        .chain(&a.policy)
        .chain(&a.analysis.rules)
        .map(PathBuf::as_path)
        .chain(a.baseline_history.map(|_| db))
        .collect();
    if let Some(out) = &a.junit {
        check_output(out, &inputs)?;
    }
    let policy = match &a.policy {
        Some(p) => Policy::from_file(p)?,
        None => Policy::default(),
    };
    let analyser = a.analysis.analyser(g.quiet)?;
    let current = analyser.run(&a.current)?;
    let options = GateOptions {
        allow_incomparable: a.allow_incomparable,
    };
    let r = match (&a.baseline, a.baseline_history) {
        (Some(p), _) => gate_with(&analyser.run(p)?, &current, &policy, options),
        (None, Some(n)) => {
            let h = History::open_in(&a.db, &crate::import_cmd::scratch_dir())?;
            let runs = h.accepted_buckets(n)?;
            if runs.is_empty() {
                anyhow::bail!(
                    "history {}: no accepted runs to use as a baseline",
                    h.name()
                );
            }
            // Stored figures that are not finite numbers are left out; a baseline left with
            // nothing to judge against is an error, not a pass.
            if let Some(w) = h.check_baseline(&runs)? {
                eprintln!("gapscope: warning: {}", text(&w));
            }
            gate_runs(
                &gapscope_history::baseline(&runs),
                &current,
                &policy,
                options,
            )
        }
        (None, None) => anyhow::bail!("give --baseline TRACE or --baseline-history N"),
    };
    // The JUnit report is written whatever the verdict, so CI finds a failing case for a
    // gate that could not compare, too.
    if let Some(path) = &a.junit {
        write_output(path, &inputs, junit(&r).as_bytes())?;
    }
    if r.verdict == Verdict::Incomparable {
        anyhow::bail!("gate: {}", r.headline());
    }
    let out = if a.json {
        serde_json::to_string_pretty(&r)? + "\n"
    } else {
        render(&r, a.markdown)
    };
    write_stdout(&out)?;
    match r.verdict {
        Verdict::Regression => Ok(ExitCode::from(1)),
        // Never exit 0 on a side that misses work: the report above says what is missing.
        Verdict::Inconclusive => anyhow::bail!("gate: {}", r.headline()),
        _ => Ok(ExitCode::SUCCESS),
    }
}

/// One table row per judged metric: name, judgement.
fn rows(r: &GateReport) -> Vec<(String, &Judgement)> {
    r.steps
        .iter()
        .map(|s| (s.metric.as_str().to_owned(), &s.judgement))
        .chain(
            r.buckets
                .iter()
                .map(|b| (b.bucket.to_string(), &b.judgement)),
        )
        .collect()
}

fn render(r: &GateReport, md: bool) -> String {
    let mut s = String::new();
    if md {
        s.push_str(&format!("## gapscope gate: **{}**\n\n", r.verdict));
        s.push_str(&format!(
            "baseline `{}`, current `{}`\n\n{}\n\n",
            md_code(&r.baseline),
            md_code(&r.current),
            md_text(&r.headline())
        ));
        for o in &r.overridden {
            s.push_str(&format!(
                "- compared despite: {}\n",
                md_text(&o.to_string())
            ));
        }
        for w in &r.warnings {
            s.push_str(&format!("- **warning**: {}\n", md_text(w)));
        }
        if !r.overridden.is_empty() || !r.warnings.is_empty() {
            s.push('\n');
        }
    } else {
        s.push_str(&format!(
            "gate: {}\nbaseline {}\ncurrent  {}\n{}\n",
            r.verdict,
            text(&r.baseline),
            text(&r.current),
            text(&r.headline())
        ));
        for o in &r.overridden {
            s.push_str(&format!("compared despite: {}\n", text(&o.to_string())));
        }
        for w in &r.warnings {
            s.push_str(&format!("warning: {}\n", text(w)));
        }
        s.push('\n');
    }
    if md {
        s.push_str(&md_judgements(r));
    } else {
        for (name, j) in rows(r) {
            s.push_str(&format!(
                "{:<16} {:<13} {:>9.4} -> {:>9.4} ms/step  {}\n",
                name, j.verdict, j.baseline_median_ms, j.current_median_ms, j.reason
            ));
        }
    }
    s.push('\n');
    for c in &r.structural {
        s.push_str(&format!(
            "{}{}: {} ({})\n",
            if md { "- " } else { "" },
            c.check,
            if c.failed { "FAILED" } else { "ok" },
            if md {
                md_text(&c.detail)
            } else {
                text(&c.detail)
            }
        ));
    }
    s
}

/// The judgements as a Markdown table.
fn md_judgements(r: &GateReport) -> String {
    use Align::{Left, Right};
    let rows: Vec<Vec<Cell>> = rows(r)
        .into_iter()
        .map(|(name, j)| {
            vec![
                Cell::Text(name),
                Cell::Text(j.verdict.to_string()),
                Cell::Text(format!("{:.4}", j.baseline_median_ms)),
                Cell::Text(format!("{:.4}", j.current_median_ms)),
                Cell::Text(if j.rel_change.is_finite() {
                    format!("{:+.1}%", 100.0 * j.rel_change)
                } else {
                    "new".to_owned()
                }),
                Cell::Prose(j.reason.clone()),
            ]
        })
        .collect();
    table(
        &[
            "metric",
            "verdict",
            "baseline ms/step",
            "current ms/step",
            "change",
            "reason",
        ],
        &[Left, Left, Right, Right, Right, Left],
        &rows,
    )
}

fn xml(s: &str) -> String {
    text(s)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn junit(r: &GateReport) -> String {
    let judged = rows(r);
    let failures = judged
        .iter()
        .filter(|(_, j)| j.verdict == Verdict::Regression)
        .count()
        + r.structural.iter().filter(|c| c.failed).count()
        + r.incomplete.len()
        + r.incomparable.len();
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"gapscope gate\" tests=\"{}\" failures=\"{failures}\">\n",
        judged.len() + r.structural.len() + r.incomplete.len() + r.incomparable.len()
    );
    // Traces that cannot be compared (the gate judged nothing), and a side that misses work,
    // fail a case each: CI never reads either as a pass.
    let incomparable: Vec<String> = r.incomparable.iter().map(|c| c.to_string()).collect();
    let cases = [
        ("comparability", "traces comparable", &incomparable),
        ("completeness", "trace complete", &r.incomplete),
    ];
    for (class, name, why) in cases {
        for m in why {
            s.push_str(&format!(
                "  <testcase classname=\"{class}\" name=\"{name}\"><failure message=\"{}\"/></testcase>\n",
                xml(m)
            ));
        }
    }
    for (i, (name, j)) in judged.iter().enumerate() {
        let class = if i < r.steps.len() { "step" } else { "bucket" };
        s.push_str(&format!(
            "  <testcase classname=\"{class}\" name=\"{}\">",
            xml(name)
        ));
        if j.verdict == Verdict::Regression {
            s.push_str(&format!("<failure message=\"{}\"/>", xml(&j.reason)));
        } else {
            s.push_str(&format!(
                "<system-out>{}: {}</system-out>",
                j.verdict,
                xml(&j.reason)
            ));
        }
        s.push_str("</testcase>\n");
    }
    for c in &r.structural {
        s.push_str(&format!(
            "  <testcase classname=\"structural\" name=\"{}\">",
            xml(&c.check)
        ));
        if c.failed {
            s.push_str(&format!("<failure message=\"{}\"/>", xml(&c.detail)));
        }
        s.push_str("</testcase>\n");
    }
    s.push_str("</testsuite>\n");
    s
}
