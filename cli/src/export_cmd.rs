//! `gapscope export TRACE --chrome OUT.json | --parquet OUT.parquet`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::RuleSet;
use gapscope_analyzer::export::{chrome::write_chrome, parquet::write_parquet};
use gapscope_analyzer::import::{ImportOptions, import_trace};

use crate::progress::Bar;

#[derive(Args)]
#[group(id = "target", required = true, multiple = true)]
pub struct ExportArgs {
    /// Input trace (any format gapscope reads).
    pub input: PathBuf,
    /// Write Chrome trace-event JSON that Perfetto and chrome://tracing open.
    #[arg(long, value_name = "OUT.json", group = "target")]
    pub chrome: Option<PathBuf>,
    /// Write kernels and memops, with names and buckets, to one Parquet file.
    #[arg(long, value_name = "OUT.parquet", group = "target")]
    pub parquet: Option<PathBuf>,
    /// Extra bucket rules (TOML) for the bucket column.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// Keep what a truncated input holds instead of failing.
    #[arg(long)]
    pub allow_truncated: bool,
}

pub fn run(a: ExportArgs, g: &crate::Global) -> Result<ExitCode> {
    let rules = match &a.rules {
        Some(p) => RuleSet::with_user_file(p)?,
        None => RuleSet::builtin(),
    };
    let bar = Bar::new(g.quiet, "import");
    let opts = ImportOptions {
        kernel_columns: None,
        allow_truncated: a.allow_truncated,
        ..Default::default()
    };
    let imported = import_trace(&a.input, &opts, &bar)?;
    if let Some(out) = &a.chrome {
        write_chrome(&imported.trace, &rules, out)?;
        if !g.quiet {
            eprintln!("wrote {}", out.display());
        }
    }
    if let Some(out) = &a.parquet {
        write_parquet(&imported.trace, &rules, out)?;
        if !g.quiet {
            eprintln!("wrote {}", out.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}
