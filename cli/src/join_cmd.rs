//! `gapscope join ENGINE RECORDED -o OUT.gst`: copies an engine trace's launch metadata (op,
//! layer, bucket, bytes, FLOPs) and its steps onto a recording of the same run made by another
//! tool, so the recording can be put against the roofline and bucketed exactly.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Result, bail};
use clap::Args;
use gapscope_analyzer::import::{ImportOptions, import_trace};
use gapscope_analyzer::join::{DEFAULT_MIN_MATCH, JoinSettings, join_engine_metadata};
use gapscope_traces::SourceFormat;

use crate::progress::Bar;

#[derive(Args)]
pub struct JoinArgs {
    /// The engine's own trace (gapscope-engine `bench -o`).
    pub engine: PathBuf,
    /// A recording of the same run by another tool (CUPTI recorder .gst, nsys .sqlite, Kineto).
    pub recorded: PathBuf,
    /// Output .gst directory: the recording with the engine's metadata and steps.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Print the join report as JSON.
    #[arg(long)]
    pub json: bool,
    /// How many kernels the walk may skip to resynchronise.
    #[arg(long, default_value_t = 16)]
    pub max_skip: usize,
    /// Least share of the engine's launches that must match a recorded kernel (0..1);
    /// below it the recording is taken for one of another run and nothing is written.
    #[arg(long, default_value_t = DEFAULT_MIN_MATCH, value_name = "SHARE")]
    pub min_match: f64,
    /// Refuse inputs with more events than this (kernels, memops, launches, markers,
    /// samples and host scopes together); default 3,000,000, for every format. 0 lifts it.
    #[arg(long, value_name = "N")]
    pub max_events: Option<u64>,
}

pub fn run(a: JoinArgs, g: &crate::Global) -> Result<ExitCode> {
    if !(0.0..=1.0).contains(&a.min_match) {
        bail!("--min-match {} is outside 0..=1", a.min_match);
    }
    let opts = ImportOptions {
        kernel_columns: None,
        allow_truncated: false,
        max_events: crate::import_cmd::event_limit(a.max_events),
        scratch_dir: Some(crate::import_cmd::scratch_dir()),
    };
    let engine = import_trace(&a.engine, &opts, &Bar::new(g.quiet, "engine"))?.trace;
    if engine.manifest.source_format != SourceFormat::Engine {
        bail!(
            "{}: not a gapscope-engine trace (source format {:?})",
            a.engine.display(),
            engine.manifest.source_format.as_str()
        );
    }
    let mut recorded = import_trace(&a.recorded, &opts, &Bar::new(g.quiet, "recorded"))?.trace;
    let settings = JoinSettings {
        max_skip: a.max_skip,
        ..JoinSettings::default()
    };
    let rep = join_engine_metadata(&engine, &mut recorded, settings);
    if rep.joined == 0 {
        bail!(
            "{}: no recorded kernel matched the engine's launches of {}",
            a.recorded.display(),
            a.engine.display()
        );
    }
    if let Err(why) = rep.check(a.min_match) {
        bail!("{}: {why}", a.recorded.display());
    }
    recorded
        .manifest
        .notes
        .push(rep.note(&a.engine.display().to_string()));
    gapscope_traces::write_trace(&a.output, &recorded)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&rep)?);
    } else {
        println!("{rep}; wrote {}", a.output.display());
    }
    Ok(ExitCode::SUCCESS)
}
