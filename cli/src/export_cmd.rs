//! `gapscope export TRACE --chrome OUT.json | --parquet OUT.parquet | --tables DIR`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::export::{
    chrome::{write_chrome, write_chrome_to},
    parquet::write_parquet,
    tables::{write_rank_tables, write_tables},
};
use gapscope_analyzer::session::{self, Knobs, Run, SessionSettings};
use gapscope_traces::check_output;

use crate::progress::Bar;
use crate::report_cmd::AnalysisArgs;

#[derive(Args)]
pub struct ExportArgs {
    /// Input trace (any format gapscope reads); with --tables also a run of several ranks
    /// (a directory, a recording with its per-process traces): one partition per rank.
    pub input: PathBuf,
    /// Write Chrome trace-event JSON that Perfetto and chrome://tracing open (`-`: stdout).
    #[arg(long, value_name = "OUT.json")]
    pub chrome: Option<PathBuf>,
    /// Write kernels and memops, with names and buckets, to one Parquet file.
    #[arg(long, value_name = "OUT.parquet")]
    pub parquet: Option<PathBuf>,
    /// Analyse the trace and write every analysis table (activities with their step and
    /// role, steps, step x bucket, idle gaps, step scopes, names, plus the string and code
    /// legends) as Parquet files into DIR, a new or empty folder.
    #[arg(long, value_name = "DIR")]
    pub tables: Option<PathBuf>,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

pub fn run(a: ExportArgs, g: &crate::Global) -> Result<ExitCode> {
    if a.chrome.is_none() && a.parquet.is_none() && a.tables.is_none() {
        anyhow::bail!(
            "export: say what to write: --chrome OUT.json, --parquet OUT.parquet and/or --tables DIR"
        );
    }
    if a.analysis.top.is_some() {
        anyhow::bail!("export: --top applies to reports; the exports hold every name");
    }
    let stdout = |p: &Option<PathBuf>| p.as_deref() == Some(Path::new("-"));
    if stdout(&a.parquet) {
        anyhow::bail!("export: --parquet needs a file (Parquet is binary; `-` is for --chrome)");
    }
    // Outputs are checked before the input is read: none may be a link, a FIFO or anything
    // but a regular file, nor an input, and the two may not be one file.
    let inputs: Vec<&Path> = std::iter::once(a.input.as_path())
        .chain(a.analysis.trace.rules.as_deref())
        .chain(a.analysis.trace.graph_capture.as_deref())
        .collect();
    let chrome_file = a.chrome.as_deref().filter(|p| *p != Path::new("-"));
    let chrome_at = chrome_file.map(|p| check_output(p, &inputs)).transpose()?;
    if let Some(parquet) = &a.parquet {
        let at = check_output(parquet, &inputs)?;
        if chrome_at.as_ref() == Some(&at) {
            anyhow::bail!(
                "{}: --chrome and --parquet name the same file; give each its own",
                parquet.display()
            );
        }
    }
    let knobs = Knobs {
        all_columns: true,
        ..a.analysis.knobs()
    };
    let settings = SessionSettings::resolve(&knobs)?;
    let rules = &*settings.rules;
    if a.input.is_dir() && !a.input.join("manifest.json").is_file() || has_process_traces(&a.input)
    {
        return export_ranks(&a, g, &settings, &inputs);
    }
    let bar = Bar::new(g.quiet, "import");
    let run = Run::new(&a.input);
    let imported = session::import_run(&run, &settings, &bar)?;
    if stdout(&a.chrome) {
        let mut w = std::io::BufWriter::new(std::io::stdout().lock());
        match write_chrome_to(&imported.trace, rules, &mut w).and_then(|_| w.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => anyhow::bail!("writing to stdout: {e}"),
        }
    } else if let Some(out) = chrome_file {
        write_chrome(&imported.trace, rules, out, &inputs)?;
        if !g.quiet {
            eprintln!("wrote {}", out.display());
        }
    }
    if a.parquet.is_none() && a.tables.is_none() {
        return Ok(ExitCode::SUCCESS);
    }
    // The Parquet files carry each activity's step and phase: the run is analysed.
    let analyzed = session::analyze_run(run, imported, &settings);
    if let Some(out) = &a.parquet {
        write_parquet(&analyzed, out, &inputs)?;
        if !g.quiet {
            eprintln!("wrote {}", out.display());
        }
    }
    if let Some(dir) = &a.tables {
        let files = write_tables(&analyzed, dir, &inputs)?;
        if !g.quiet {
            eprintln!("wrote {} tables into {}", files.len(), dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `run.gst` with `run.pidN.gst` beside it: a recording of several processes.
fn has_process_traces(p: &Path) -> bool {
    gapscope_analyzer::session::ranks::expand(&[p.to_path_buf()]).is_ok_and(|v| v.len() > 1)
}

/// A directory or a recording of several processes: with --tables, one partition per rank
/// and the multi-rank tables; the single-file exports take one trace.
fn export_ranks(
    a: &ExportArgs,
    g: &crate::Global,
    settings: &SessionSettings,
    inputs: &[&Path],
) -> Result<ExitCode> {
    if a.chrome.is_some() || a.parquet.is_some() {
        anyhow::bail!(
            "export: {} holds several traces; --chrome and --parquet take one trace (--tables DIR writes a partition per rank)",
            a.input.display()
        );
    }
    let Some(dir) = &a.tables else {
        anyhow::bail!("export: say what to write");
    };
    let bar = Bar::new(g.quiet, "import");
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let set = session::ranks::open_set(
        std::slice::from_ref(&a.input),
        session::ranks::RankMode::Auto,
        jobs,
        settings,
        &bar,
    )?;
    if !set.as_ranks {
        anyhow::bail!(
            "export: {} holds {} traces that are not the ranks of one run; export them one by one",
            a.input.display(),
            set.runs.len()
        );
    }
    let refs: Vec<&session::AnalyzedRun> = set.runs.iter().collect();
    let ranks = gapscope_analyzer::analysis::ranks::analyze_ranks(&refs);
    let files = write_rank_tables(&refs, &ranks.tables, dir, inputs)?;
    if !g.quiet {
        eprintln!(
            "wrote {} tables into {} ({} ranks, one partition each)",
            files.len(),
            dir.display(),
            refs.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
