//! `gapscope-engine kbench`: single-kernel bandwidth against the measured copy bandwidth,
//! MMQ against chunked MMVQ, and MMQ's two activation layouts.

use crate::args::write_json;
use crate::env::open_device;
use gapscope_engine::{Result, kbench};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct KbenchArgs {
    #[arg(long, default_value_t = 50)]
    reps: usize,
    #[arg(long)]
    json: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    device: usize,
}

pub fn run(a: KbenchArgs) -> Result<ExitCode> {
    let dev = open_device(a.device)?;
    let r = kbench::run(&dev, a.reps)?;
    println!(
        "device: {}; D2D copy {:.3} TB/s (read+write, median of {})",
        r.device,
        r.copy_bw_bytes_per_s.median / 1e12,
        r.copy_bw_bytes_per_s.n
    );
    for k in &r.kernels {
        println!(
            "{:<10} {:<22} {:>9.2} us ({:.2}-{:.2})  {:>6.1}% of copy bandwidth  ({} regs, {} blocks/SM)",
            k.name,
            k.shape,
            k.time_us.median,
            k.time_us.min,
            k.time_us.max,
            k.pct_of_copy_bw,
            k.registers_per_thread,
            k.blocks_per_sm
        );
    }
    for (b, mmq, mmvq, x) in &r.mmq_vs_mmvq {
        println!(
            "batch {b:<4} MMQ {mmq:>9.2} us  MMVQ (chunks of 8) {mmvq:>9.2} us  MMQ faster by {x:.2}x"
        );
    }
    for l in &r.mmq_layouts {
        println!(
            "mmq_q8_0 {:<10} batch {:<4} row-major {:>8.2} us  k-major {:>8.2} us  k-major/row-major {:.3}  (policy: {})",
            l.shape,
            l.batch,
            l.row_major_us.median,
            l.k_major_us.median,
            l.k_major_us.median / l.row_major_us.median,
            if l.policy_k_major {
                "k-major"
            } else {
                "row-major"
            }
        );
    }
    write_json(&a.json, &r)?;
    Ok(ExitCode::SUCCESS)
}
