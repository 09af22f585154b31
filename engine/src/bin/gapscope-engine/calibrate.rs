//! `gapscope-engine calibrate`: the GPU's measured ceilings, printed and written as the
//! hardware profile `gapscope roofline --hw-profile FILE` reads.

use crate::env::open_device;
use gapscope_engine::{EngineError, Result, calibrate};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct CalibrateArgs {
    /// Write the hardware profile (JSON) here.
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[arg(long, default_value_t = 0)]
    device: usize,
}

pub fn run(a: CalibrateArgs) -> Result<ExitCode> {
    let dev = open_device(a.device)?;
    let c = calibrate::measure(&dev)?;
    if let Some(p) = &a.output {
        let profile = calibrate::hw_profile(&dev.info, &c);
        let text = serde_json::to_string_pretty(&profile)
            .map_err(|e| EngineError::invalid(e.to_string()))?
            + "\n";
        gapscope_traces::write_output(p, &[], text.as_bytes())?;
    }
    let (copy, bf16, int8) = (c.copy_bytes_per_s, c.bf16_tflops, c.int8_tops);
    println!("{} ({} SMs)", dev.info.name, dev.info.sm_count);
    println!(
        "  copy  {:.3} TB/s (min {:.3}, max {:.3})",
        copy.median / 1e12,
        copy.min / 1e12,
        copy.max / 1e12
    );
    println!(
        "  bf16  {:.1} TFLOP/s (min {:.1}, max {:.1})",
        bf16.median, bf16.min, bf16.max
    );
    println!(
        "  int8  {:.1} TOP/s (min {:.1}, max {:.1})",
        int8.median, int8.min, int8.max
    );
    Ok(ExitCode::SUCCESS)
}
