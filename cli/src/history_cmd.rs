//! `gapscope history add|list|show|trend`: the run history (SQLite file by default,
//! PostgreSQL with `--db postgres://...`). Only `add` creates a database; the others read
//! one and never create or modify anything.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use gapscope_analyzer::bucket::Bucket;
use gapscope_analyzer::history::History;

use crate::render::{ms, write_stdout};
use crate::report_cmd::AnalysisArgs;

/// The default database; `history add` creates its `.gapscope` directory when missing.
const DEFAULT_DB: &str = ".gapscope/history.sqlite";

#[derive(Args)]
pub struct HistoryArgs {
    /// SQLite file path (taken literally), or a sqlite://, postgres:// or postgresql:// URL.
    #[arg(long, global = true, default_value = DEFAULT_DB)]
    pub db: String,
    /// JSON output.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: HistoryCommand,
}

#[derive(Subcommand)]
pub enum HistoryCommand {
    /// Analyse a trace and store its per-bucket figures.
    Add {
        trace: PathBuf,
        /// A label (commit, branch, engine version).
        #[arg(long, default_value = "")]
        label: String,
        /// Mark the run as an accepted baseline.
        #[arg(long)]
        accepted: bool,
        #[command(flatten)]
        analysis: AnalysisArgs,
    },
    /// The latest runs.
    List {
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(i64).range(1..))]
        limit: i64,
    },
    /// One run's buckets.
    Show { id: i64 },
    /// A bucket's median ms/step over the latest runs, oldest first.
    Trend {
        #[arg(long)]
        bucket: String,
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(i64).range(1..))]
        limit: i64,
    },
}

/// The canonical name of `bucket` (aliases accepted), or a name stored in the history;
/// otherwise an error listing the valid names.
fn bucket_name(bucket: &str, h: &History) -> Result<String> {
    if let Some(b) = Bucket::parse(bucket) {
        return Ok(b.as_str().to_owned());
    }
    if h.bucket_names()?.iter().any(|n| n == bucket) {
        return Ok(bucket.to_owned());
    }
    let valid: Vec<&str> = Bucket::ALL.iter().map(|b| b.as_str()).collect();
    anyhow::bail!(
        "unknown bucket `{}`; valid buckets: {}",
        bucket.escape_debug(),
        valid.join(", ")
    )
}

pub fn run(a: HistoryArgs, g: &crate::Global) -> Result<ExitCode> {
    let out = match a.command {
        HistoryCommand::Add {
            trace,
            label,
            accepted,
            analysis,
        } => {
            // Analyse first: a trace that does not load leaves no database behind.
            let r = analysis.analyser(g.quiet, false)?.run(&trace)?;
            if a.db == DEFAULT_DB {
                let dir = std::path::Path::new(DEFAULT_DB)
                    .parent()
                    .unwrap_or(std::path::Path::new("."));
                std::fs::create_dir_all(dir)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
            }
            let h = History::open_or_create(&a.db)?;
            let id = h.add(&r, &label, accepted)?;
            if a.json {
                serde_json::json!({"schema_version": 1, "id": id}).to_string() + "\n"
            } else {
                format!(
                    "added run {id} ({}, {} decode steps)\n",
                    trace.display(),
                    r.steps.decode_steps
                )
            }
        }
        HistoryCommand::List { limit } => {
            let runs = History::open(&a.db)?.list(limit)?;
            if a.json {
                serde_json::to_string_pretty(
                    &serde_json::json!({"schema_version": 1, "runs": runs}),
                )? + "\n"
            } else {
                let mut s =
                    String::from("   id  accepted  steps   TPOT ms   busy %  label  trace\n");
                for r in runs {
                    s.push_str(&format!(
                        "{:>5}  {:>8}  {:>5}  {:>8}  {:>7}  {}  {}\n",
                        r.id,
                        if r.accepted { "yes" } else { "" },
                        r.decode_steps,
                        r.tpot_median_ms.map(ms).unwrap_or_else(|| "-".into()),
                        r.busy_pct
                            .map(|b| format!("{b:.2}"))
                            .unwrap_or_else(|| "-".into()),
                        r.label,
                        r.trace_path
                    ));
                }
                s
            }
        }
        HistoryCommand::Show { id } => {
            let h = History::open(&a.db)?;
            if h.run(id)?.is_none() {
                anyhow::bail!("history {}: no run {id}", h.name());
            }
            let b = h.buckets(id)?;
            if a.json {
                serde_json::to_string_pretty(
                    &serde_json::json!({"schema_version": 1, "id": id, "buckets": b}),
                )? + "\n"
            } else {
                let mut s = format!("run {id}\nbucket            ms/step  calls/step   % busy\n");
                for x in b {
                    s.push_str(&format!(
                        "{:<16} {:>8}  {:>10}  {:>6.2}%\n",
                        x.bucket,
                        x.ms_per_step_median.map(ms).unwrap_or_else(|| "-".into()),
                        x.calls_per_step
                            .map(|c| format!("{c:.1}"))
                            .unwrap_or_else(|| "-".into()),
                        x.share_of_busy_pct
                    ));
                }
                s
            }
        }
        HistoryCommand::Trend { bucket, limit } => {
            let h = History::open(&a.db)?;
            let bucket = bucket_name(&bucket, &h)?;
            let t = h.trend(&bucket, limit)?;
            if a.json {
                serde_json::to_string_pretty(
                    &serde_json::json!({"schema_version": 1, "bucket": bucket, "points": t}),
                )? + "\n"
            } else {
                let mut s = format!("{bucket}: median ms/step per run, oldest first\n");
                for p in t {
                    s.push_str(&format!(
                        "{:>5}  {:>9}  {}\n",
                        p.id,
                        p.ms_per_step_median.map(ms).unwrap_or_else(|| "-".into()),
                        p.label
                    ));
                }
                s
            }
        }
    };
    write_stdout(&out)?;
    Ok(ExitCode::SUCCESS)
}
