//! `gapscope history add|list|show|trend`: the run history (SQLite file by default,
//! PostgreSQL with `--db postgres://...`). Only `add` creates a database; the others read
//! one and never create or modify anything (a SQLite file's `-wal` and `-shm` included).
//! Stored text (labels, paths, bucket names) is escaped for the terminal, and a stored figure
//! that is not a finite number is shown as `invalid`, with one warning on stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use gapscope_analyzer::bucket::Bucket;
use gapscope_history::{self as history, History};

// The default database; `history add` creates its `.gapscope` directory when missing.
use crate::config::DEFAULT_DB;
use crate::render::{ms, text};
use crate::report_cmd::TraceArgs;

#[derive(Args)]
pub struct HistoryArgs {
    /// SQLite file path (taken literally), or a sqlite://, postgres:// or postgresql:// URL
    /// [default: GAPSCOPE_DB, else `db` in the config file, else .gapscope/history.sqlite].
    #[arg(long, global = true, value_name = "DB")]
    pub db: Option<String>,
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
        /// The trace to analyse and store (any format `report` reads; `-` reads standard
        /// input); a directory or recording of several ranks stores one run of ranks.
        trace: PathBuf,
        /// A label (commit, branch, engine version).
        #[arg(long, default_value = "")]
        label: String,
        /// Mark the run as an accepted baseline.
        #[arg(long)]
        accepted: bool,
        #[command(flatten)]
        analysis: TraceArgs,
    },
    /// The latest runs, newest first.
    List {
        /// How many runs to list (the newest ones).
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(i64).range(1..))]
        limit: i64,
    },
    /// One run's buckets.
    Show {
        /// The run's id, as `history add` and `history list` print it.
        id: i64,
    },
    /// A bucket's median ms/step over the latest runs, oldest first.
    Trend {
        /// The bucket to follow (`gemm_dense`, `attention`, ...; `gapscope buckets` lists
        /// them), or a bucket name stored in the history.
        #[arg(long)]
        bucket: String,
        /// How many runs to show (the newest ones).
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

/// A stored figure as text: `invalid` when the stored value is not a finite number, `-`
/// when there is none.
fn figure(v: Option<f64>, invalid: bool, f: impl Fn(f64) -> String) -> String {
    match v {
        Some(x) => f(x),
        None if invalid => "invalid".into(),
        None => "-".into(),
    }
}

/// One warning line for the runs whose stored figures are not finite numbers.
fn warn_invalid(h: &History, ids: impl IntoIterator<Item = i64>) {
    let ids: Vec<String> = ids.into_iter().map(|i| i.to_string()).collect();
    if !ids.is_empty() {
        eprintln!(
            "gapscope: warning: history {}: run{} {} store{} figures that are not finite numbers (shown as `invalid`, null in JSON)",
            text(h.name()),
            if ids.len() == 1 { "" } else { "s" },
            ids.join(", "),
            if ids.len() == 1 { "s" } else { "" }
        );
    }
}

pub fn run(a: HistoryArgs, g: &crate::Global) -> Result<ExitCode> {
    let db = a.db.as_deref().unwrap_or(DEFAULT_DB);
    let out = match a.command {
        HistoryCommand::Add {
            trace,
            label,
            accepted,
            analysis,
        } => {
            // Analyse first: a trace that does not load, or whose figures cannot be stored,
            // leaves no database behind. A run of several ranks (a directory, a recording
            // with per-process traces) stores its rank count and run-level figures, and the
            // buckets of the rank that sets its step (else rank 0).
            let analyser = analysis.analyser(g.quiet)?;
            let (r, ranks) = if trace.as_os_str() == "-" {
                (analyser.run(&trace)?, None)
            } else {
                crate::gate_cmd::open_side(&analyser, &trace)?.pick_run_rank()
            };
            if let Err(m) = history::check_storable(&r) {
                anyhow::bail!("history {}: {m}", history::redacted(db));
            }
            if db == DEFAULT_DB {
                let dir = std::path::Path::new(DEFAULT_DB)
                    .parent()
                    .unwrap_or(std::path::Path::new("."));
                std::fs::create_dir_all(dir)
                    .map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))?;
            }
            let h = History::open_or_create(db)?;
            let id = h.add_run(&r, ranks.as_ref(), &label, accepted)?;
            if a.json {
                serde_json::json!({"schema_version": 1, "id": id}).to_string() + "\n"
            } else {
                format!(
                    "added run {id} ({}, {} decode steps{})\n",
                    text(&trace.display().to_string()),
                    r.steps.decode_steps,
                    ranks
                        .as_ref()
                        .map(|k| format!(", {} ranks", k.ranks.len()))
                        .unwrap_or_default()
                )
            }
        }
        HistoryCommand::List { limit } => {
            let h = History::open_in(db, &crate::import_cmd::scratch_dir())?;
            let runs = h.list(limit)?;
            warn_invalid(
                &h,
                runs.iter().filter(|r| !r.invalid.is_empty()).map(|r| r.id),
            );
            if a.json {
                serde_json::to_string_pretty(
                    &serde_json::json!({"schema_version": 1, "runs": runs}),
                )? + "\n"
            } else {
                list_table(&runs)
            }
        }
        HistoryCommand::Show { id } => {
            let h = History::open_in(db, &crate::import_cmd::scratch_dir())?;
            let Some(run) = h.run(id)? else {
                anyhow::bail!("history {}: no run {id}", h.name());
            };
            let b = h.buckets(id)?;
            warn_invalid(&h, b.iter().any(|x| !x.invalid.is_empty()).then_some(id));
            if a.json {
                serde_json::to_string_pretty(
                    &serde_json::json!({"schema_version": 1, "id": id, "buckets": b}),
                )? + "\n"
            } else {
                let mut s = format!(
                    "{}\nbuckets per decode step (the stored medians)\nbucket            ms/step  calls/step   % busy\n",
                    run_line(&run)
                );
                for x in b {
                    let bad = |f: &str| x.invalid.contains(&f);
                    s.push_str(&format!(
                        "{:<16} {:>8}  {:>10}  {:>7}\n",
                        text(&x.bucket),
                        figure(x.ms_per_step_median, bad("ms_per_step_median"), ms),
                        figure(x.calls_per_step, bad("calls_per_step"), |c| format!(
                            "{c:.1}"
                        )),
                        figure(x.share_of_busy_pct, bad("share_of_busy_pct"), |p| format!(
                            "{p:.2}%"
                        )),
                    ));
                }
                s
            }
        }
        HistoryCommand::Trend { bucket, limit } => {
            let h = History::open_in(db, &crate::import_cmd::scratch_dir())?;
            let bucket = bucket_name(&bucket, &h)?;
            let t = h.trend(&bucket, limit)?;
            warn_invalid(&h, t.iter().filter(|p| !p.invalid.is_empty()).map(|p| p.id));
            if a.json {
                serde_json::to_string_pretty(
                    &serde_json::json!({"schema_version": 1, "bucket": bucket, "points": t}),
                )? + "\n"
            } else {
                let mut s = format!(
                    "{}: median ms/step per run, oldest first\n   id  {:<16}    ms/step  label\n",
                    text(&bucket),
                    "date (UTC)"
                );
                for p in t {
                    let bad = p.invalid.contains(&"ms_per_step_median");
                    s.push_str(&format!(
                        "{:>5}  {:<16}  {:>9}  {}\n",
                        p.id,
                        utc_minute(p.created_unix_ms),
                        figure(p.ms_per_step_median, bad, ms),
                        text(&p.label)
                    ));
                }
                s
            }
        }
    };
    g.write(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// `history list`'s table: one line per run, the text columns (GPU, label) padded to their
/// widest value, the trace last.
fn list_table(runs: &[history::RunSummary]) -> String {
    let gpus: Vec<String> = runs.iter().map(|r| text(&r.gpu)).collect();
    let labels: Vec<String> = runs.iter().map(|r| text(&r.label)).collect();
    let width = |v: &[String], head: &str| {
        v.iter()
            .map(|x| x.chars().count())
            .chain([head.chars().count()])
            .max()
            .unwrap_or(0)
    };
    let (gw, lw) = (width(&gpus, "gpu"), width(&labels, "label"));
    let mut s = format!(
        "   id  {:<16}  accepted  steps   TPOT ms   busy %  ms/token  tok/step  ranks  {:<gw$}  {:<lw$}  trace\n",
        "date (UTC)", "gpu", "label"
    );
    for ((r, gpu), label) in runs.iter().zip(&gpus).zip(&labels) {
        let bad = |f: &str| r.invalid.contains(&f);
        s.push_str(&format!(
            "{:>5}  {:<16}  {:>8}  {:>5}  {:>8}  {:>7}  {:>8}  {:>8}  {:>5}  {gpu:<gw$}  {label:<lw$}  {}\n",
            r.id,
            utc_minute(r.created_unix_ms),
            if r.accepted { "yes" } else { "" },
            r.decode_steps,
            figure(r.tpot_median_ms, bad("tpot_median_ms"), ms),
            figure(r.busy_pct, bad("busy_pct"), |b| format!("{b:.2}")),
            figure(r.time_per_token_ms, bad("time_per_token_ms"), ms),
            figure(r.tokens_per_step, bad("tokens_per_step"), |t| format!("{t:.3}")),
            r.world_size.unwrap_or(1),
            text(&r.trace_path)
        ));
    }
    s
}

/// The line that names a run above its buckets: id, date, label, GPU, steps, trace.
fn run_line(r: &history::RunSummary) -> String {
    format!(
        "run {} ({} UTC{}; {}; {} decode steps{}{}): {}",
        r.id,
        utc_minute(r.created_unix_ms),
        if r.label.is_empty() {
            String::new()
        } else {
            format!(", label {}", text(&r.label))
        },
        if r.gpu.is_empty() {
            "GPU not named".to_owned()
        } else {
            format!("GPU {}", text(&r.gpu))
        },
        r.decode_steps,
        r.world_size
            .filter(|w| *w > 1)
            .map(|w| format!(", {w} ranks"))
            .unwrap_or_default(),
        if r.accepted { ", accepted" } else { "" },
        text(&r.trace_path)
    )
}

/// A time stored as Unix milliseconds as `YYYY-MM-DD HH:MM`, in UTC.
fn utc_minute(unix_ms: i64) -> String {
    let secs = unix_ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Howard Hinnant's civil_from_days: days since 1970-01-01 to a proleptic Gregorian date.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60
    )
}

#[cfg(test)]
mod tests {
    use super::utc_minute;

    #[test]
    fn dates_are_utc_calendar_dates() {
        assert_eq!(utc_minute(0), "1970-01-01 00:00");
        assert_eq!(utc_minute(951_782_400_000), "2000-02-29 00:00");
        assert_eq!(utc_minute(1_795_923_420_227), "2026-11-29 03:37");
        assert_eq!(utc_minute(-60_000), "1969-12-31 23:59");
    }
}
