//! `gapscope-engine selftest`: every kernel and whole-model logits against the CPU reference
//! (exit 1 when a check fails).

use crate::args::write_json;
use crate::env::open_device;
use gapscope_engine::{Result, selftest};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct SelftestArgs {
    /// Input seed; defaults to the clock so every run sees fresh inputs.
    #[arg(long)]
    seed: Option<u64>,
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run only this family of checks (one of the names `--help` lists).
    #[arg(long, value_parser = clap::builder::PossibleValuesParser::new(selftest::names()))]
    only: Option<String>,
    #[arg(long, default_value_t = 0)]
    device: usize,
}

pub fn run(a: SelftestArgs) -> Result<ExitCode> {
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let dev = open_device(a.device)?;
    println!("device: {}, input seed {seed}", dev.info.name);
    let only = a.only.as_deref();
    let mut checks = selftest::op_checks_only(&dev, seed, only)?;
    drop(dev);
    checks.extend(selftest::model_checks_only(seed, only, &|| {
        open_device(a.device)
    })?);
    let mut failed = 0;
    for c in &checks {
        println!(
            "{:<4} {:<70} rel_err {:>10.3e}  tol {:.0e}",
            if c.pass { "ok" } else { "FAIL" },
            c.name,
            c.rel_err,
            c.tolerance
        );
        failed += usize::from(!c.pass);
    }
    println!("{} checks, {} failed", checks.len(), failed);
    write_json(
        &a.json,
        &serde_json::json!({"seed": seed, "checks": checks}),
    )?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
