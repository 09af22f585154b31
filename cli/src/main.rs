//! `gapscope`: where a decode step's time goes, and how far it is from what the GPU allows.

mod buckets_cmd;
mod diff_cmd;
mod export_cmd;
mod gate_cmd;
mod gui_cmd;
mod history_cmd;
mod import_cmd;
mod join_cmd;
mod lever_whatif;
mod progress;
mod render;
mod report_cmd;
mod roofline_cmd;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "gapscope",
    version,
    about = "Decode-step profiler for LLM inference engines: buckets, steps, busy time",
    long_about = "gapscope reads PyTorch/Kineto traces (.json, .json.gz), Nsight Systems SQLite exports \
(.sqlite) and its own .gst traces, sorts GPU work into buckets, finds decode steps and reports \
where each step's time goes."
)]
struct Cli {
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// More log output on stderr (repeat for more).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Per-step decomposition of one or more traces.
    Report(report_cmd::ReportArgs),
    /// Convert a trace to the native .gst format.
    Import(import_cmd::ImportArgs),
    /// Write a trace as Perfetto-loadable Chrome JSON or as Parquet.
    Export(export_cmd::ExportArgs),
    /// Show the bucket rules, or explain which rule classifies a kernel name.
    Buckets(buckets_cmd::BucketsArgs),
    /// Run history: add, list, show, trend (SQLite file or PostgreSQL).
    History(history_cmd::HistoryArgs),
    /// CI gate on per-bucket regressions: exit 0 pass, 1 regression, 2 error.
    Gate(gate_cmd::GateArgs),
    /// Where the per-step gap between two traces lives, by bucket.
    Diff(diff_cmd::DiffArgs),
    /// Weight-read, KV-read and compute floors per batch, and traces against them.
    Roofline(roofline_cmd::RooflineArgs),
    /// Copy an engine trace's launch metadata and steps onto a recording of the same run.
    Join(join_cmd::JoinArgs),
    /// Open traces in the explorer window (runs gapscope-gui).
    Gui(gui_cmd::GuiArgs),
}

/// Settings every subcommand gets.
pub struct Global {
    pub quiet: bool,
}

/// A usage error on one line, like every other gapscope error: clap's message, its tips
/// and the usage line, joined.
fn usage_error_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let mut message: Option<String> = None;
    let mut in_message = false;
    let mut tips = Vec::new();
    let mut usage = None;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() {
            in_message = false;
        } else if let Some(m) = t.strip_prefix("error: ") {
            in_message = message.is_none();
            message.get_or_insert_with(|| m.to_owned());
        } else if in_message {
            // The message goes on (for example the list of missing arguments).
            if let Some(m) = message.as_mut() {
                m.push(' ');
                m.push_str(t);
            }
        } else if let Some(tip) = t.strip_prefix("tip: ") {
            tips.push(tip.to_owned());
        } else if let Some(u) = t.strip_prefix("Usage: ") {
            usage.get_or_insert_with(|| u.to_owned());
        }
    }
    let message = message.unwrap_or_else(|| match e.kind() {
        clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            "a subcommand is required".to_owned()
        }
        _ => "invalid command line".to_owned(),
    });
    let mut details = tips;
    if let Some(u) = usage {
        details.push(format!("usage: {u}"));
    }
    details.push("see --help".to_owned());
    format!("{message} ({})", details.join("; "))
}

/// The log filter: `RUST_LOG` when set (an invalid one is an error, not ignored), else
/// gapscope's own crates at the level `-v` asks for, and warnings from everything else.
#[expect(
    clippy::disallowed_methods,
    reason = "a binary reads its environment (RUST_LOG)"
)]
fn log_filter(verbose: u8) -> Result<tracing_subscriber::EnvFilter> {
    use tracing_subscriber::EnvFilter;
    let builder = EnvFilter::builder();
    if std::env::var_os(EnvFilter::DEFAULT_ENV).is_some_and(|v| !v.is_empty()) {
        return builder.from_env().context("invalid RUST_LOG directives");
    }
    let ours = match verbose {
        0 => return Ok(EnvFilter::new("warn")),
        1 => "info",
        _ => "debug",
    };
    // A target directive matches by prefix: `gapscope` is the binary's own target, and it
    // covers `gapscope_analyzer` and `gapscope_traces` too.
    Ok(builder.parse(format!("warn,gapscope={ours}"))?)
}

#[expect(
    clippy::disallowed_methods,
    reason = "a binary reads its environment (NO_COLOR)"
)]
fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        // --help and --version print as clap renders them, exit 0.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("gapscope: error: {}", usage_error_line(&e));
            return ExitCode::from(2);
        }
    };
    let filter = match log_filter(cli.verbose) {
        Ok(f) => f,
        Err(e) => return fail(&e),
    };
    // Colour only on a terminal, and never under NO_COLOR (https://no-color.org).
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(filter)
        .without_time()
        .init();
    let g = Global { quiet: cli.quiet };
    let result = match cli.command {
        Command::Report(a) => report_cmd::run(a, &g),
        Command::Import(a) => import_cmd::run(a, &g),
        Command::Export(a) => export_cmd::run(a, &g),
        Command::Buckets(a) => buckets_cmd::run(a),
        Command::Roofline(a) => roofline_cmd::run(a, &g),
        Command::Join(a) => join_cmd::run(a, &g),
        Command::Diff(a) => diff_cmd::run(a, &g),
        Command::Gate(a) => gate_cmd::run(a, &g),
        Command::History(a) => history_cmd::run(a, &g),
        Command::Gui(a) => gui_cmd::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

/// Prints an error on one line, the error and its causes, never a backtrace; exit code 2.
fn fail(e: &anyhow::Error) -> ExitCode {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    // One line, and nothing from an input (a path, a GPU or model name) drives the terminal.
    eprintln!(
        "gapscope: error: {}",
        render::text(&msg.replace(['\n', '\r'], " "))
    );
    ExitCode::from(2)
}
