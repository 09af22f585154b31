//! The `gapscope` command line as a library: the `gapscope` binary's `main` and the Python
//! module's `gapscope` command both call [`main`], so the two are one program (same parsing,
//! output and exit codes). Only front ends link this crate; it reads the environment
//! (`RUST_LOG`, `NO_COLOR`, the defaults of [`config`]) as a binary does.

pub mod buckets_cmd;
pub mod config;
pub mod config_cmd;
pub mod diff_cmd;
pub mod export_cmd;
pub mod gate_cmd;
pub mod gui_cmd;
pub mod history_cmd;
pub mod import_cmd;
pub mod join_cmd;
pub mod lever_whatif;
pub mod numerics_cmd;
pub mod progress;
pub mod render;
pub mod report_cmd;
pub mod roofline_cmd;

use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use render::names::{Width, with_width};

#[derive(Parser)]
#[command(
    name = "gapscope",
    version,
    about = "Decode-step profiler for LLM inference engines: buckets, steps, busy time",
    long_about = "gapscope reads PyTorch/Kineto traces (.json, .json.gz), Nsight Systems SQLite exports \
(.sqlite) and its own .gst traces, sorts GPU work into buckets, finds decode steps and reports \
where each step's time goes.",
    after_help = "Defaults for --db, --hw and --rules: the environment (GAPSCOPE_DB, GAPSCOPE_HW, \
GAPSCOPE_RULES), then the config file ($XDG_CONFIG_HOME/gapscope/config.toml, \
~/.config/gapscope/config.toml, or --config / GAPSCOPE_CONFIG); a flag beats both. \
`gapscope config` shows them and where each came from."
)]
struct Cli {
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// More log output on stderr (repeat for more).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    verbose: u8,
    /// Whole kernel names on a terminal too (piped output always has them; a terminal gets
    /// names cut in the middle to 80 characters, and tables cut to its width).
    #[arg(long, global = true)]
    wide: bool,
    #[command(flatten)]
    config: config::ConfigFlags,
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
    /// Whether engines say the same thing: logits (and hidden-state) dumps against a
    /// reference, per position and per layer, with a verdict.
    Numerics(numerics_cmd::NumericsArgs),
    /// Open traces in the explorer window (runs gapscope-gui).
    Gui(gui_cmd::GuiArgs),
    /// Show the defaults of --db, --hw and --rules (environment, config file) and where
    /// each came from.
    Config(config_cmd::ConfigArgs),
    /// Print a completion script for a shell (bash, zsh, fish, elvish, powershell).
    Completions(CompletionsArgs),
}

/// `gapscope completions SHELL`.
#[derive(clap::Args)]
struct CompletionsArgs {
    /// The shell: bash (`gapscope completions bash > ~/.local/share/bash-completion/completions/gapscope`),
    /// zsh (into a file named `_gapscope` on `$fpath`), fish
    /// (`~/.config/fish/completions/gapscope.fish`), elvish or powershell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// The completion script for `shell`, generated from the command line's own definition.
fn completions(a: &CompletionsArgs, g: &Global) -> Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(
        a.shell,
        &mut <Cli as clap::CommandFactory>::command(),
        "gapscope",
        &mut script,
    );
    g.write(&String::from_utf8_lossy(&script))?;
    Ok(ExitCode::SUCCESS)
}

/// Settings every subcommand gets, and where its output goes.
pub struct Global {
    pub quiet: bool,
    /// `None`: standard output; `Some`: kept for the caller ([`run_captured`]).
    captured: Option<std::cell::RefCell<String>>,
    /// Whether output may be in colour: stdout is a terminal and `NO_COLOR` is not set.
    colour: bool,
}

impl Global {
    /// Writes a command's output: to stdout (a closed pipe counts as success), or into the
    /// capture. Either way control characters from an input are escaped first.
    pub fn write(&self, s: &str) -> Result<()> {
        match &self.captured {
            None => render::write_stdout(s),
            Some(c) => {
                c.borrow_mut().push_str(&render::terminal_safe(s));
                Ok(())
            }
        }
    }

    /// Writes output with words marked in colour: coloured on a terminal (see
    /// [`Global::colour`]), plain everywhere else.
    pub fn write_toned(&self, t: &render::colour::Toned) -> Result<()> {
        match &self.captured {
            None if self.colour => render::write_stdout_raw(&t.to_ansi()),
            _ => self.write(t.as_str()),
        }
    }
}

/// Whether stdout takes colour: a terminal, and `NO_COLOR` (https://no-color.org) unset or
/// empty, as for the log on stderr.
#[expect(
    clippy::disallowed_methods,
    reason = "the program's entry reads its environment (NO_COLOR)"
)]
fn stdout_colour() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stdout())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// What one command run in-process gave: the exit code, its output and, on failure, the
/// one-line error the binary would print (without the `gapscope: error: ` prefix).
pub struct Outcome {
    pub code: u8,
    pub output: String,
    pub error: Option<String>,
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

/// The `gapscope` program: parses `args` (the program name first), runs the command and
/// returns its exit code; output to stdout, errors as one line on stderr.
pub fn main<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut cli = match Cli::try_parse_from(args) {
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
    if let Err(e) = init_logging(cli.verbose) {
        return fail(&e, false);
    }
    let defaults = match cli.take_defaults() {
        Ok(d) => d,
        Err(e) => return fail(&e, false),
    };
    let g = Global {
        quiet: cli.quiet,
        captured: None,
        colour: stdout_colour(),
    };
    let hint = cli.command.truncation_hint();
    // Names are cut only for a person at a terminal.
    let names = if cli.wide || !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        Width::Whole
    } else {
        Width::Cut(render::names::NAME_CHARS)
    };
    match with_width(names, || dispatch(cli.command, &g, defaults.as_ref())) {
        Ok(code) => code,
        Err(e) => fail(&e, hint),
    }
}

/// Runs one command as [`main`] does, keeping its standard output (`--help` text included)
/// and its error line instead of printing them. Logging and progress still go to stderr.
pub fn run_captured<I, T>(args: I) -> Outcome
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let failed = |error: String| Outcome {
        code: 2,
        output: String::new(),
        error: Some(error),
    };
    let mut cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) if !e.use_stderr() => {
            return Outcome {
                code: 0,
                output: e.render().to_string(),
                error: None,
            };
        }
        Err(e) => return failed(usage_error_line(&e)),
    };
    if let Err(e) = init_logging(cli.verbose) {
        return failed(error_line(&e));
    }
    let defaults = match cli.take_defaults() {
        Ok(d) => d,
        Err(e) => return failed(error_line(&e)),
    };
    let g = Global {
        quiet: cli.quiet,
        captured: Some(std::cell::RefCell::new(String::new())),
        colour: false,
    };
    let hint = cli.command.truncation_hint();
    // The output is kept, not shown on a terminal: whole names.
    let result = with_width(Width::Whole, || {
        dispatch(cli.command, &g, defaults.as_ref())
    });
    let output = g.captured.map(|c| c.into_inner()).unwrap_or_default();
    match result {
        Ok(code) => Outcome {
            code: exit_status(code),
            output,
            error: None,
        },
        Err(e) => Outcome {
            code: 2,
            output,
            error: Some(with_hint(&e, hint)),
        },
    }
}

/// An exit code as a number: 0, 1 (a gate's regression), 2 (an error) or, from `gui`, the
/// explorer's own. `ExitCode` has no accessor, so the number is the one that compares equal.
pub fn exit_status(code: ExitCode) -> u8 {
    (0..=u8::MAX)
        .find(|&c| ExitCode::from(c) == code)
        .unwrap_or(2)
}

/// Logging on stderr, set up once per process (a Python process may run many commands).
#[expect(
    clippy::disallowed_methods,
    reason = "the program's entry reads its environment (NO_COLOR)"
)]
fn init_logging(verbose: u8) -> Result<()> {
    let filter = log_filter(verbose)?;
    // Colour only on a terminal, and never under NO_COLOR (https://no-color.org).
    let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    // `try_init`: when a subscriber is already set, the first set-up stays.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .with_env_filter(filter)
        .without_time()
        .try_init();
    Ok(())
}

/// What a failed command's error line ends with when an input turned out truncated.
pub const TRUNCATION_HINT: &str = "(--allow-truncated loads what it holds)";

impl Command {
    /// Whether a truncated input's error should point at `--allow-truncated`: the command
    /// takes the option and it was not given (with it, an input that still fails holds
    /// nothing to load).
    fn truncation_hint(&self) -> bool {
        let not_given = |t: &report_cmd::TraceArgs| !t.allow_truncated;
        match self {
            Command::Report(a) => not_given(&a.analysis.trace),
            Command::Diff(a) => not_given(&a.analysis.trace),
            Command::Export(a) => not_given(&a.analysis.trace),
            Command::Gate(a) => not_given(&a.analysis),
            Command::Roofline(a) => not_given(&a.analysis),
            Command::History(a) => match &a.command {
                history_cmd::HistoryCommand::Add { analysis, .. } => not_given(analysis),
                _ => false,
            },
            Command::Import(a) => !a.allow_truncated,
            Command::Buckets(_)
            | Command::Join(_)
            | Command::Numerics(_)
            | Command::Gui(_)
            | Command::Config(_)
            | Command::Completions(_) => false,
        }
    }

    /// Gives each of `--db`, `--hw` and `--rules` that the command takes and was not given
    /// its default (environment, then config file), where the command would use it: `--hw`
    /// not beside `roofline --hw-profile` or `diff --what-if`, nor in `report` without
    /// `--model`.
    fn take_defaults(&mut self, d: &config::Defaults) -> Result<()> {
        match self {
            Command::Report(a) => {
                d.fill_rules(&mut a.analysis.trace.rules)?;
                if a.html.model.is_some() {
                    d.fill_hw(&mut a.html.hardware)?;
                }
            }
            Command::Diff(a) => {
                d.fill_rules(&mut a.analysis.trace.rules)?;
                if a.what_if.is_none() {
                    d.fill_hw(&mut a.hardware)?;
                }
            }
            Command::Export(a) => d.fill_rules(&mut a.analysis.trace.rules)?,
            Command::Gate(a) => {
                d.fill_rules(&mut a.analysis.rules)?;
                d.fill_db(&mut a.db);
            }
            Command::Roofline(a) => {
                d.fill_rules(&mut a.analysis.rules)?;
                if a.hw_profile.is_none() {
                    d.fill_hw(&mut a.hardware)?;
                }
            }
            Command::History(a) => {
                d.fill_db(&mut a.db);
                if let history_cmd::HistoryCommand::Add { analysis, .. } = &mut a.command {
                    d.fill_rules(&mut analysis.rules)?;
                }
            }
            Command::Buckets(a) => d.fill_rules(&mut a.rules)?,
            Command::Gui(a) => a.take_defaults(d)?,
            Command::Import(_)
            | Command::Join(_)
            | Command::Numerics(_)
            | Command::Config(_)
            | Command::Completions(_) => {}
        }
        Ok(())
    }
}

impl Cli {
    /// The defaults from the environment and the config file, given to the command; `None`
    /// for `completions`, which takes none (a broken config file does not stop it).
    fn take_defaults(&mut self) -> Result<Option<config::Defaults>> {
        if matches!(self.command, Command::Completions(_)) {
            return Ok(None);
        }
        let d = config::Defaults::resolve(&self.config, &config::Env::from_process())?;
        self.command.take_defaults(&d)?;
        Ok(Some(d))
    }
}

fn dispatch(command: Command, g: &Global, defaults: Option<&config::Defaults>) -> Result<ExitCode> {
    match command {
        Command::Report(a) => report_cmd::run(a, g),
        Command::Import(a) => import_cmd::run(a, g),
        Command::Export(a) => export_cmd::run(a, g),
        Command::Buckets(a) => buckets_cmd::run(a, g),
        Command::Roofline(a) => roofline_cmd::run(a, g),
        Command::Join(a) => join_cmd::run(a, g),
        Command::Numerics(a) => numerics_cmd::run(a, g),
        Command::Diff(a) => diff_cmd::run(a, g),
        Command::Gate(a) => gate_cmd::run(a, g),
        Command::History(a) => history_cmd::run(a, g),
        Command::Gui(a) => gui_cmd::run(a),
        Command::Config(a) => match defaults {
            Some(d) => config_cmd::run(a, d, g),
            None => anyhow::bail!("config: no defaults were read"),
        },
        Command::Completions(a) => completions(&a, g),
    }
}

/// An error and its causes on one line, never a backtrace; nothing from an input (a path, a
/// GPU or model name) can drive the terminal.
pub fn error_line(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.contains(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    render::text(&msg.replace(['\n', '\r'], " "))
}

/// [`error_line`], ending with [`TRUNCATION_HINT`] when `hint` and the error (or one of its
/// causes) is a truncated input.
fn with_hint(e: &anyhow::Error, hint: bool) -> String {
    let line = error_line(e);
    let truncated = e.chain().any(|c| {
        c.downcast_ref::<gapscope_analyzer::AnalyzerError>()
            .is_some_and(gapscope_analyzer::AnalyzerError::is_truncation)
    });
    if hint && truncated {
        format!("{line} {TRUNCATION_HINT}")
    } else {
        line
    }
}

/// Prints an error on one line (see [`with_hint`]); exit code 2.
fn fail(e: &anyhow::Error, hint: bool) -> ExitCode {
    eprintln!("gapscope: error: {}", with_hint(e, hint));
    ExitCode::from(2)
}
