//! `gapscope report`: the per-step decomposition of each trace.

mod html;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::host::GroupBy;
use gapscope_analyzer::analysis::ranks::{RankDigest, RanksReport, RunRef, analyze_digests};
use gapscope_analyzer::analysis::spec::SpecSetting;
use gapscope_analyzer::session::ranks::{
    DigestSet, LeftOut, OpenedSet, RankMode, open_digests, open_set, reopen,
};
use gapscope_analyzer::session::{self, AnalyzedRun, Knobs, Run, SessionSettings};

use crate::progress::Bar;
use crate::render;

#[derive(Args)]
pub struct ReportArgs {
    /// Trace files: Kineto .json/.json.gz, nsys .sqlite, or gapscope .gst directories; a
    /// directory of traces; a recording `run.gst` brings its per-process `run.pidN.gst`.
    /// Traces that each name a different rank (torch.distributed's `distributedInfo`, the
    /// recorded process's `RANK`) are read as the ranks of one run.
    #[arg(required = true)]
    pub traces: Vec<PathBuf>,
    /// Read the traces as the ranks of one run even when they do not name their ranks (a
    /// trace without one takes its position).
    #[arg(long, conflicts_with = "separate")]
    pub ranks: bool,
    /// Report each trace on its own, even when they name different ranks of one run.
    #[arg(long)]
    pub separate: bool,
    /// JSON output (with schema_version).
    #[arg(long, group = "fmt")]
    pub json: bool,
    /// CSV of the bucket table.
    #[arg(long, group = "fmt")]
    pub csv: bool,
    /// Markdown report.
    #[arg(long, group = "fmt")]
    pub markdown: bool,
    /// Also group GPU and host time per step by a key: `scope` (innermost host scope),
    /// `op` (framework op, or the engine's op), `module` (nn.Module class) or `layer`
    /// (decoder layer). Kernels go to the scopes around the launch that issued them.
    #[arg(long, value_name = "KEY", value_parser = parse_group_by)]
    pub by: Option<GroupBy>,
    /// Speculative runs: also predict step time and tokens/s at this draft length and
    /// conditional acceptance per position, `K:P1,P2,...` (`4:0.8,0.6,0.4,0.2`; a shorter
    /// list repeats its last rate; `K` alone: the measured acceptance). Repeatable.
    #[arg(long, value_name = "K:P1,P2,...")]
    pub spec_setting: Vec<SpecSetting>,
    #[command(flatten)]
    pub html: html::HtmlArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

fn parse_group_by(s: &str) -> std::result::Result<GroupBy, String> {
    GroupBy::parse(s).ok_or_else(|| format!("{s:?}: use scope, op, module or layer"))
}

/// Options shared by the commands whose output lists kernel names per bucket (`report`,
/// `diff`, the Python module): the analysis options and `--top`.
#[derive(Args, Clone)]
pub struct AnalysisArgs {
    #[command(flatten)]
    pub trace: TraceArgs,
    /// Kernel names listed per bucket: JSON keeps 3 by default; given, the table and
    /// Markdown reports add a "top kernels" section with N names per bucket.
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
}

/// Options shared by every command that analyses traces. Commands that list no kernel names
/// per bucket (`gate`, `roofline`, `history add`) take these alone, so `--top` there is a
/// usage error rather than an option that does nothing.
#[derive(Args, Clone)]
pub struct TraceArgs {
    /// Extra bucket rules (TOML), tried before the built-in ones [default: GAPSCOPE_RULES,
    /// else `rules` in the config file].
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Marker names that delimit steps (regex); overrides the automatic choice (known
    /// engines' step markers, then ProfilerStep#N, decode/prefill/step/forward/generate
    /// annotations, then the periodic kernel sequence).
    #[arg(long, value_name = "REGEX")]
    pub step_regex: Option<String>,
    /// Ignore markers and annotations; detect steps from the periodic kernel sequence.
    #[arg(long)]
    pub no_markers: bool,
    /// Load what a truncated JSON/gzip file holds instead of failing.
    #[arg(long)]
    pub allow_truncated: bool,
    /// The trace torch.profiler wrote while the engine captured its CUDA graphs (vLLM's
    /// `capture_torch_profiler_dir`, SGLang's `--enable-profile-cuda-graph`): with `--by`,
    /// graph-replayed kernels are put on the ops and modules around their capture-time
    /// launches (docs/decisions/2026-11-29-graph-capture.md).
    #[arg(long, value_name = "FILE")]
    pub graph_capture: Option<PathBuf>,
    /// Refuse inputs with more events than this (kernels, memops, launches, markers,
    /// samples and host scopes together; native .gst traces too); default 3,000,000, which
    /// keeps every command under 1 GB of memory. 0 lifts the limit.
    #[arg(long, value_name = "N")]
    pub max_events: Option<u64>,
    /// Analyse at most this many steps; a trace with more keeps its first N, says so, and
    /// never passes the gate. Default 100,000; 0 lifts the limit.
    #[arg(long, value_name = "N")]
    pub max_steps: Option<usize>,
    /// Speculative runs whose trace does not show acceptance (vLLM's markers, llama.cpp
    /// recordings): the engine's counters, from vLLM's `SpecDecoding metrics:` log lines,
    /// `vllm bench serve` output, vLLM's Prometheus text, SGLang's `accept len:` log lines, or
    /// llama.cpp's verbose log (`accepted A/D draft tokens` per step, or its `statistics`
    /// line).
    #[arg(long, value_name = "FILE")]
    pub spec_metrics: Option<PathBuf>,
}

/// The analysis session's settings built once from [`AnalysisArgs`], and how to show progress.
pub struct Analyser {
    pub settings: SessionSettings,
    knobs: Knobs,
    quiet: bool,
}

impl Analyser {
    /// Groups GPU and host time by `by` too (`report --by`).
    pub fn group_by(&mut self, by: GroupBy) -> Result<()> {
        self.knobs.group_by = Some(by);
        self.settings = SessionSettings::resolve(&self.knobs)?;
        Ok(())
    }

    /// Imports and analyses one trace (`-`: standard input).
    pub fn open(&self, path: &std::path::Path) -> Result<AnalyzedRun> {
        let bar = Bar::new(self.quiet, "import");
        let t0 = std::time::Instant::now();
        // `-` is standard input: spooled to a temporary file, since the importers sniff
        // the format and read gzip and SQLite from files.
        let spool = if path == std::path::Path::new("-") {
            let mut f =
                tempfile::NamedTempFile::new().context("stdin: cannot create a spool file")?;
            std::io::copy(&mut std::io::stdin().lock(), &mut f).context("stdin: cannot read")?;
            Some(f.into_temp_path())
        } else {
            None
        };
        let run = match &spool {
            Some(p) => Run {
                label: Some("- (standard input)".to_owned()),
                ..Run::new(p.to_path_buf())
            },
            None => Run::new(path),
        };
        let imported = session::import_run(&run, &self.settings, &bar).map_err(|e| {
            // A truncation keeps its type (the error line's hint reads it), naming `-`.
            if e.is_truncation() {
                return match &spool {
                    Some(p) => e.renamed(p, std::path::Path::new("-")),
                    None => e,
                }
                .into();
            }
            anyhow::anyhow!("{}", e.to_string().replace(&spool_name(&spool), "-"))
        })?;
        let t1 = std::time::Instant::now();
        let analyzed = session::analyze_run(run, imported, &self.settings);
        tracing::info!(
            "{}: import {:.1} ms, analysis {:.1} ms",
            path.display(),
            (t1 - t0).as_secs_f64() * 1e3,
            t1.elapsed().as_secs_f64() * 1e3
        );
        Ok(analyzed)
    }

    /// Imports and analyses every trace `paths` stand for (directories and recordings
    /// expanded), deciding whether they are the ranks of one run.
    pub fn open_set(&self, paths: &[PathBuf], mode: RankMode) -> Result<OpenedSet> {
        self.open_many(|jobs, bar| {
            let set = open_set(paths, mode, jobs, &self.settings, bar)?;
            Ok(((set.runs.len(), set.as_ranks), set.left_out.clone(), set))
        })
    }

    /// [`Self::open_set`] keeping only each trace's report and digest (a run of many ranks).
    pub fn open_digests(&self, paths: &[PathBuf], mode: RankMode) -> Result<DigestSet> {
        self.open_many(|jobs, bar| {
            let set = open_digests(paths, mode, jobs, &self.settings, bar)?;
            Ok(((set.reports.len(), set.as_ranks), set.left_out.clone(), set))
        })
    }

    /// Runs `open` with one job per core and a progress bar, then logs what it opened and
    /// names the files it left out.
    fn open_many<T>(
        &self,
        open: impl FnOnce(usize, &Bar) -> Result<((usize, bool), Vec<(PathBuf, LeftOut)>, T)>,
    ) -> Result<T> {
        let bar = Bar::new(self.quiet, "import");
        // Traces are imported and analysed side by side, one per core.
        let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
        let t0 = std::time::Instant::now();
        let ((n, as_ranks), left_out, set) = open(jobs, &bar)?;
        tracing::info!(
            "{n} trace(s): import and analysis {:.1} ms ({jobs} at a time){}",
            t0.elapsed().as_secs_f64() * 1e3,
            if as_ranks {
                ", read as ranks of one run"
            } else {
                ""
            }
        );
        for (p, why) in &left_out {
            eprintln!(
                "gapscope: note: {}: left out: {}",
                crate::render::text(&p.display().to_string()),
                crate::render::text(&why.describe())
            );
        }
        Ok(set)
    }

    /// Imports and analyses one trace; only its report is kept.
    pub fn run(&self, path: &std::path::Path) -> Result<Report> {
        Ok(self.open(path)?.report)
    }
}

/// The spool file's path as error messages name it, or a string no message contains.
fn spool_name(spool: &Option<tempfile::TempPath>) -> String {
    spool
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "\0".to_owned())
}

impl AnalysisArgs {
    /// The knobs these options set, as every front end passes them to the session.
    pub fn knobs(&self) -> Knobs {
        Knobs {
            top: self.top,
            ..self.trace.knobs()
        }
    }

    /// The analyser these options describe.
    pub fn analyser(&self, quiet: bool) -> Result<Analyser> {
        Analyser::new(self.knobs(), quiet)
    }
}

impl Analyser {
    fn new(knobs: Knobs, quiet: bool) -> Result<Self> {
        Ok(Analyser {
            settings: SessionSettings::resolve(&knobs)?,
            knobs,
            quiet,
        })
    }
}

impl TraceArgs {
    /// The knobs these options set, as every front end passes them to the session.
    pub fn knobs(&self) -> Knobs {
        Knobs {
            rules_file: self.rules.clone(),
            step_regex: self.step_regex.clone(),
            no_markers: self.no_markers,
            allow_truncated: self.allow_truncated,
            max_events: self.max_events,
            max_steps: self.max_steps,
            top: None,
            group_by: None,
            all_columns: false,
            scratch_dir: Some(crate::import_cmd::scratch_dir()),
            spec_metrics: self.spec_metrics.clone(),
            graph_capture: self.graph_capture.clone(),
        }
    }

    /// The analyser these options describe.
    pub fn analyser(&self, quiet: bool) -> Result<Analyser> {
        Analyser::new(self.knobs(), quiet)
    }
}

pub fn run(a: ReportArgs, g: &crate::Global) -> Result<ExitCode> {
    let inputs: Vec<&std::path::Path> = a
        .traces
        .iter()
        .chain(&a.analysis.trace.rules)
        .chain(&a.analysis.trace.spec_metrics)
        .chain(&a.analysis.trace.graph_capture)
        .map(PathBuf::as_path)
        .collect();
    // The page's output and model are checked before any trace is read.
    let page = a.html.plan(&inputs)?;
    let mut analyser = a.analysis.analyser(g.quiet)?;
    if let Some(by) = a.by {
        analyser.group_by(by)?;
    }
    let mode = if a.ranks {
        RankMode::Ranks
    } else if a.separate {
        RankMode::Separate
    } else {
        RankMode::Auto
    };
    let (mut reports, tables, ranks) = if a.traces.iter().any(|p| p.as_os_str() == "-") {
        let mut reports = Vec::new();
        let mut tables = Vec::new();
        for p in &a.traces {
            let run = analyser.open(p)?;
            reports.push(run.report);
            if page.is_some() {
                tables.push(run.tables);
            }
        }
        (reports, tables, None)
    } else if page.is_some() {
        // The page draws every step from the analysis tables: every trace stays open.
        let set = analyser.open_set(&a.traces, mode)?;
        let ranks = set.as_ranks.then(|| ranks_of_runs(&set.runs));
        let (reports, tables) = set.runs.into_iter().map(|r| (r.report, r.tables)).unzip();
        (reports, tables, ranks)
    } else {
        let (reports, ranks) = open_digested(&analyser, &a.traces, mode)?;
        (reports, Vec::new(), ranks)
    };
    if ranks.is_some() {
        // The ranks section splits communication into waiting and transfer.
        for r in &mut reports {
            r.communication = None;
        }
    }
    if !a.spec_setting.is_empty() {
        for r in &mut reports {
            if let Some(w) = r.speculative.as_mut().and_then(|s| s.what_if.as_mut()) {
                w.settings = w.costs.what_if(&a.spec_setting).settings;
            }
        }
    }
    if let Some(p) = &page {
        p.write(&inputs, &reports, &tables, ranks.as_ref())?;
    }
    let top = a.analysis.top.is_some();
    let out = if a.json {
        render::json::run_reports(ranks.as_ref(), &reports)?
    } else if a.csv {
        render::csv::reports(&reports)
    } else if a.markdown {
        let mut out = ranks
            .as_ref()
            .map(render::markdown::ranks)
            .unwrap_or_default();
        out.push_str(&render::markdown::reports(&reports, top));
        out
    } else {
        let mut out = ranks
            .as_ref()
            .map(|r| render::ranks::table(r) + "\n")
            .unwrap_or_default();
        out.push_str(&render::table::reports(&reports, top));
        out
    };
    g.write(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The reports of the traces `paths` stand for, each digested after its own analysis and
/// dropped; for the ranks of one run, the ranks' report (the cause of a straggler reopens
/// the late rank's trace and the one that waited most).
fn open_digested(
    analyser: &Analyser,
    paths: &[PathBuf],
    mode: RankMode,
) -> Result<(Vec<Report>, Option<RanksReport>)> {
    let set = analyser.open_digests(paths, mode)?;
    let ranks = set.as_ranks.then(|| {
        let runs: Vec<Run> = set.digests.iter().map(|d| d.run.clone()).collect();
        let settings = &analyser.settings;
        let fetch = |rank: u32| {
            let run = runs.iter().find(|r| r.rank == rank)?;
            match reopen(run, settings) {
                Ok(r) => Some(RunRef::Owned(Box::new(r))),
                Err(e) => {
                    tracing::warn!("{e}");
                    None
                }
            }
        };
        analyze_digests(set.digests, &fetch, Some(1)).report
    });
    Ok((set.reports, ranks))
}

/// The ranks' report of runs held open, as [`open_digested`] makes it (the cause read from
/// the late rank and the one that waited most).
fn ranks_of_runs(runs: &[AnalyzedRun]) -> RanksReport {
    let n = runs.len() as u32;
    let digests: Vec<RankDigest> = runs.iter().map(|r| RankDigest::of(r, n)).collect();
    let fetch = |rank: u32| {
        runs.iter()
            .find(|r| r.run.rank == rank)
            .map(RunRef::Borrowed)
    };
    analyze_digests(digests, &fetch, Some(1)).report
}
