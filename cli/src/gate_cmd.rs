//! `gapscope gate --baseline B --current C`: the CI gate. Exit 0 pass, 1 regression,
//! 2 error.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use gapscope_analyzer::gate::{GateReport, Policy, Verdict, baseline_from_history, gate};
use gapscope_analyzer::history::History;

use crate::render::write_stdout;
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
    /// max_extra_kernels_per_step.
    #[arg(long, value_name = "gate.toml")]
    pub policy: Option<PathBuf>,
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
    let policy = match &a.policy {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("{}: cannot read", p.display()))?;
            toml::from_str::<Policy>(&text).map_err(|e| {
                anyhow::anyhow!(
                    "{}: invalid policy: {}",
                    p.display(),
                    e.to_string().lines().next().unwrap_or("")
                )
            })?
        }
        None => Policy::default(),
    };
    let analyser = a.analysis.analyser(g.quiet, true)?;
    let current = analyser.run(&a.current)?;
    let baseline = match (&a.baseline, a.baseline_history) {
        (Some(p), _) => analyser.run(p)?,
        (None, Some(n)) => {
            let runs = History::open(&a.db)?.accepted_buckets(n)?;
            if runs.is_empty() {
                anyhow::bail!("history {}: no accepted runs to use as a baseline", a.db);
            }
            baseline_from_history(&current, &runs)
        }
        (None, None) => anyhow::bail!("give --baseline TRACE or --baseline-history N"),
    };
    let r = gate(&baseline, &current, &policy);
    if let Some(path) = &a.junit {
        std::fs::write(path, junit(&r))
            .with_context(|| format!("{}: cannot write", path.display()))?;
    }
    let out = if a.json {
        serde_json::to_string_pretty(&r)? + "\n"
    } else {
        render(&r, a.markdown)
    };
    write_stdout(&out)?;
    Ok(if r.verdict == Verdict::Regression {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Regression => "REGRESSION",
        Verdict::Improvement => "improvement",
        Verdict::Inconclusive => "inconclusive",
    }
}

fn render(r: &GateReport, md: bool) -> String {
    let mut s = String::new();
    if md {
        s.push_str(&format!("## gapscope gate: **{}**\n\n", word(r.verdict)));
        s.push_str(&format!(
            "baseline `{}`, current `{}`\n\n",
            r.baseline, r.current
        ));
        s.push_str("| bucket | verdict | baseline ms/step | current ms/step | change | reason |\n|---|---|---:|---:|---:|---|\n");
    } else {
        s.push_str(&format!(
            "gate: {}\nbaseline {}\ncurrent  {}\n\n",
            word(r.verdict),
            r.baseline,
            r.current
        ));
    }
    for b in &r.buckets {
        if md {
            s.push_str(&format!(
                "| {} | {} | {:.4} | {:.4} | {:+.1}% | {} |\n",
                b.bucket,
                word(b.verdict),
                b.baseline_median_ms,
                b.current_median_ms,
                100.0 * b.rel_change,
                b.reason
            ));
        } else {
            s.push_str(&format!(
                "{:<16} {:<13} {:>9.4} -> {:>9.4} ms/step  {}\n",
                b.bucket.to_string(),
                word(b.verdict),
                b.baseline_median_ms,
                b.current_median_ms,
                b.reason
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
            c.detail
        ));
    }
    s
}

fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn junit(r: &GateReport) -> String {
    let failures = r
        .buckets
        .iter()
        .filter(|b| b.verdict == Verdict::Regression)
        .count()
        + r.structural.iter().filter(|c| c.failed).count();
    let mut s = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuite name=\"gapscope gate\" tests=\"{}\" failures=\"{failures}\">\n",
        r.buckets.len() + r.structural.len()
    );
    for b in &r.buckets {
        s.push_str(&format!(
            "  <testcase classname=\"bucket\" name=\"{}\">",
            b.bucket
        ));
        if b.verdict == Verdict::Regression {
            s.push_str(&format!("<failure message=\"{}\"/>", xml(&b.reason)));
        } else {
            s.push_str(&format!(
                "<system-out>{}: {}</system-out>",
                word(b.verdict),
                xml(&b.reason)
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
