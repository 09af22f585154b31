//! `gapscope export TRACE --chrome OUT.json | --parquet OUT.parquet`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::RuleSet;
use gapscope_analyzer::export::{
    chrome::{write_chrome, write_chrome_to},
    parquet::write_parquet,
};
use gapscope_analyzer::import::{ImportOptions, import_trace};
use gapscope_traces::check_output;

use crate::progress::Bar;

#[derive(Args)]
pub struct ExportArgs {
    /// Input trace (any format gapscope reads).
    pub input: PathBuf,
    /// Write Chrome trace-event JSON that Perfetto and chrome://tracing open (`-`: stdout).
    #[arg(long, value_name = "OUT.json")]
    pub chrome: Option<PathBuf>,
    /// Write kernels and memops, with names and buckets, to one Parquet file.
    #[arg(long, value_name = "OUT.parquet")]
    pub parquet: Option<PathBuf>,
    /// Extra bucket rules (TOML) for the bucket column.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Keep what a truncated input holds instead of failing.
    #[arg(long)]
    pub allow_truncated: bool,
    /// Refuse inputs with more events than this (kernels, memops, launches, markers,
    /// samples and host scopes together); default 3,000,000, for every format. 0 lifts it.
    #[arg(long, value_name = "N")]
    pub max_events: Option<u64>,
}

pub fn run(a: ExportArgs, g: &crate::Global) -> Result<ExitCode> {
    if a.chrome.is_none() && a.parquet.is_none() {
        anyhow::bail!("export: say what to write: --chrome OUT.json and/or --parquet OUT.parquet");
    }
    let stdout = |p: &Option<PathBuf>| p.as_deref() == Some(Path::new("-"));
    if stdout(&a.parquet) {
        anyhow::bail!("export: --parquet needs a file (Parquet is binary; `-` is for --chrome)");
    }
    // Outputs are checked before the input is read: none may be a link, a FIFO or anything
    // but a regular file, nor an input, and the two may not be one file.
    let inputs: Vec<&Path> = std::iter::once(a.input.as_path())
        .chain(a.rules.as_deref())
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
    let rules = match &a.rules {
        Some(p) => RuleSet::with_user_file(p)?,
        None => RuleSet::builtin(),
    };
    let bar = Bar::new(g.quiet, "import");
    let opts = ImportOptions {
        kernel_columns: None,
        allow_truncated: a.allow_truncated,
        max_events: crate::import_cmd::event_limit(a.max_events),
        scratch_dir: Some(crate::import_cmd::scratch_dir()),
    };
    let imported = import_trace(&a.input, &opts, &bar)?;
    if stdout(&a.chrome) {
        let mut w = std::io::BufWriter::new(std::io::stdout().lock());
        match write_chrome_to(&imported.trace, &rules, &mut w).and_then(|_| w.flush()) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
            Err(e) => anyhow::bail!("writing to stdout: {e}"),
        }
    } else if let Some(out) = chrome_file {
        write_chrome(&imported.trace, &rules, out, &inputs)?;
        if !g.quiet {
            eprintln!("wrote {}", out.display());
        }
    }
    if let Some(out) = &a.parquet {
        write_parquet(&imported.trace, &rules, out, &inputs)?;
        if !g.quiet {
            eprintln!("wrote {}", out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
