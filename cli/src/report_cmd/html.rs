//! `report --html OUT.html [--model config.json [--hw GPU] [--weights FMT]]`: the
//! self-contained HTML report, written beside the usual output (which still goes to
//! standard output), through the project's one safe way of writing a file.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::ranks::RanksReport;
use gapscope_analyzer::roofline::report::{
    BatchSource, ContextChoice, TpChoice, TraceAtBatch, roofline_at,
};
use gapscope_analyzer::roofline::{HardwareSpec, ModelSpec, WeightFormat, hw};
use gapscope_analyzer::tables::Tables;
use gapscope_traces::{check_output, write_output};

use crate::render::html::{RooflineInput, report_page};
use crate::roofline_cmd::{DEFAULT_BATCHES, DEFAULT_CTX, batch_notes};

#[derive(Args, Clone, Default)]
pub struct HtmlArgs {
    /// Also write a self-contained HTML report to this file (headline, warnings, idle
    /// causes, bucket table, per-step and bucket charts; inline CSS and SVG, no script, no
    /// external file). Standard output gets the usual output all the same.
    #[arg(long, value_name = "OUT.html")]
    pub html: Option<PathBuf>,
    /// With --html: the model's Hugging Face config.json; the page adds the roofline chart
    /// with the traces' decode steps placed on it (at context 4096, batch from the markers).
    #[arg(long, value_name = "config.json", requires = "html")]
    pub model: Option<PathBuf>,
    /// With --model: the GPU, an id (h100-sxm, h200, ...) or the name a trace reports
    /// [default: GAPSCOPE_HW, else `hw` in the config file, else the GPU the traces name].
    #[arg(long = "hw", value_name = "GPU", requires = "model")]
    pub hardware: Option<String>,
    /// With --model: the weight format (bf16, fp8, q8_0, q4_0, q4_k, nvfp4, mxfp4)
    /// [default: bf16].
    #[arg(long, value_name = "FMT", requires = "model")]
    pub weights: Option<String>,
}

/// What the page needs besides the analysis, read before any trace is.
pub struct HtmlPlan {
    out: PathBuf,
    model_path: Option<PathBuf>,
    model: Option<(ModelSpec, Option<HardwareSpec>, WeightFormat)>,
}

impl HtmlArgs {
    /// Checks the output path against links, non-regular files and every input, and reads
    /// the model (and the GPU when named), so that a bad option fails before the analysis.
    /// `None` without `--html`.
    pub fn plan(&self, inputs: &[&Path]) -> Result<Option<HtmlPlan>> {
        let Some(out) = &self.html else {
            return Ok(None);
        };
        if out.as_os_str() == "-" {
            anyhow::bail!("--html -: the report is written to a file; give a path");
        }
        let mut all: Vec<&Path> = inputs.to_vec();
        all.extend(self.model.as_deref());
        check_output(out, &all)?;
        let model = match &self.model {
            Some(m) => {
                let spec = ModelSpec::load(m)?;
                let hardware = self.hardware.as_deref().map(hw::lookup).transpose()?;
                let name = self.weights.as_deref().unwrap_or("bf16");
                let fmt = WeightFormat::parse(name).with_context(|| {
                    format!("--weights {name:?}: use bf16, fp8, q8_0, q4_0, q4_k, nvfp4 or mxfp4")
                })?;
                Some((spec, hardware, fmt))
            }
            None => None,
        };
        Ok(Some(HtmlPlan {
            out: out.clone(),
            model_path: self.model.clone(),
            model,
        }))
    }
}

impl HtmlPlan {
    /// Writes the page for `reports` (each with its tables, in the same order) and the
    /// ranks' report of a run of ranks. `inputs`: every file the command read.
    pub fn write(
        &self,
        inputs: &[&Path],
        reports: &[Report],
        tables: &[Tables],
        ranks: Option<&RanksReport>,
    ) -> Result<()> {
        let traces: Vec<(&Report, &Tables)> = reports.iter().zip(tables).collect();
        let page = match &self.model {
            Some((model, hardware, fmt)) => {
                let hardware = match hardware {
                    Some(h) => h.clone(),
                    None => traces_gpu(reports)?,
                };
                let placed: Vec<TraceAtBatch> = reports
                    .iter()
                    .map(|report| {
                        let (batch, batch_source) = BatchSource::resolve(report, None);
                        TraceAtBatch {
                            report,
                            batch,
                            batch_source,
                            notes: batch_notes(batch, batch_source, None, false, &DEFAULT_BATCHES),
                        }
                    })
                    .collect();
                let r = roofline_at(
                    model,
                    &hardware,
                    *fmt,
                    &DEFAULT_BATCHES,
                    ContextChoice::new(None, DEFAULT_CTX),
                    TpChoice::default(),
                    &placed,
                );
                let input = RooflineInput {
                    report: &r,
                    model,
                    hardware: &hardware,
                };
                report_page(&traces, ranks, Some(&input))
            }
            None => report_page(&traces, ranks, None),
        };
        let mut all: Vec<&Path> = inputs.to_vec();
        all.extend(self.model_path.as_deref());
        write_output(&self.out, &all, page.as_bytes())?;
        Ok(())
    }
}

/// The built-in GPU the traces' steps ran on, for a roofline without `--hw`.
fn traces_gpu(reports: &[Report]) -> Result<HardwareSpec> {
    let named = reports.iter().find_map(|r| r.source.step_gpu.clone());
    match named {
        Some(name) => hw::lookup(&name).with_context(|| {
            format!(
                "--model: the traces' GPU {:?} is not in the built-in table; give --hw GPU",
                crate::render::text(&name)
            )
        }),
        None => anyhow::bail!("--model: the traces do not name their GPU; give --hw GPU"),
    }
}
