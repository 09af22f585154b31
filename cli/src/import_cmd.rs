//! `gapscope import IN -o OUT`: convert any supported trace to the native format.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use gapscope_analyzer::import::{ImportOptions, import_trace};

use crate::progress::Bar;

#[derive(Args)]
pub struct ImportArgs {
    /// Input trace (Kineto .json/.json.gz, nsys .sqlite, or .gst).
    pub input: PathBuf,
    /// Output .gst directory.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Keep what a truncated input holds instead of failing.
    #[arg(long)]
    pub allow_truncated: bool,
    /// Refuse inputs with more than N events (kernel, memop, launch, marker, sample and
    /// host-scope rows). Default: 3,000,000, for every format. 0 lifts the limit.
    #[arg(long, value_name = "N")]
    pub max_events: Option<u64>,
}

/// Where the importers and history reads may make a private copy of a file they cannot read
/// in place without writing beside it: the system's temporary directory (`TMPDIR`), read
/// here, in the binary.
pub fn scratch_dir() -> std::path::PathBuf {
    std::env::temp_dir()
}

/// `--max-events N` as the importers take it: 0 means no limit.
pub fn event_limit(n: Option<u64>) -> Option<u64> {
    n.map(|n| if n == 0 { u64::MAX } else { n })
}

pub fn run(a: ImportArgs, g: &crate::Global) -> Result<ExitCode> {
    let bar = Bar::new(g.quiet, "import");
    let opts = ImportOptions {
        kernel_columns: None,
        allow_truncated: a.allow_truncated,
        max_events: event_limit(a.max_events),
        scratch_dir: Some(scratch_dir()),
    };
    let imported = import_trace(&a.input, &opts, &bar)?;
    for w in &imported.warnings {
        eprintln!("gapscope: warning: {}: {w}", a.input.display());
    }
    let t = &imported.trace;
    gapscope_traces::write_trace(&a.output, t)?;
    if !g.quiet {
        eprintln!(
            "wrote {} ({} kernels, {} memops, {} launches, {} markers, {} names)",
            a.output.display(),
            t.kernels.len(),
            t.memops.len(),
            t.launches.len(),
            t.markers.len(),
            t.strings.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}
