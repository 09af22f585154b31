//! `gapscope roofline`: weight-read, KV-read and compute floors per batch, the crossover
//! batch, and measured decode steps placed against their floor.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use gapscope_analyzer::roofline::report::{
    BatchSource, ContextChoice, ContextSource, RooflineReport, TpChoice, TpSource, TraceAtBatch,
    roofline_at,
};
use gapscope_analyzer::roofline::{
    CeilingSource, HardwareSpec, MAX_BATCH, MAX_BATCHES, MAX_CTX, ModelSpec, TensorPath,
    WeightFormat, hw, verify_floor,
};

use gapscope_traces::{check_output, write_output};

use crate::render::{count, pct1, text, x_floor};
use crate::report_cmd::TraceArgs;
use gapscope_analyzer::text::{against_floor, floor_headline};

#[derive(Args)]
pub struct RooflineArgs {
    /// Hugging Face config.json of the model.
    #[arg(long, value_name = "config.json")]
    pub model: PathBuf,
    /// GPU: id (h100-sxm, h100-pcie, h200, a100-40, a100-80, l40s, rtx4090, rtx5090, gb10,
    /// b200, mi300x) or the name a trace reports [default: GAPSCOPE_HW, else `hw` in the
    /// config file; one of --hw and --hw-profile is needed].
    #[arg(long = "hw", value_name = "GPU")]
    pub hardware: Option<String>,
    /// Measured ceilings from `gapscope-engine calibrate -o PROFILE.json` instead of a datasheet.
    #[arg(long, value_name = "PROFILE.json", conflicts_with = "hardware")]
    pub hw_profile: Option<PathBuf>,
    /// Weight format: bf16, fp8, q8_0, q4_0, q4_k, nvfp4, mxfp4.
    #[arg(long, default_value = "bf16")]
    pub weights: String,
    /// Batches (sequences decoded together), comma-separated [default: 1,2,4,...,256].
    #[arg(long, value_delimiter = ',', value_name = "LIST")]
    pub batch: Vec<u64>,
    /// Context length (tokens already in the KV cache) [default: each trace's own when its
    /// step markers carry it (vLLM's detailed annotations), else 4096, said as assumed].
    #[arg(long, value_name = "TOKENS")]
    pub ctx: Option<u64>,
    /// Tensor-parallel degree (1..=64): the floors are one rank's, which reads 1/N of the
    /// linear weights and of the KV cache (at least one KV head) and does 1/N of the FLOPs
    /// [default: the trace's rank count when it gives one (Kineto's world_size, the
    /// recorded WORLD_SIZE), else 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub tp: Option<u64>,
    /// Traces whose decode steps are placed against the floor.
    #[arg(long = "trace", value_name = "TRACE")]
    pub traces: Vec<PathBuf>,
    /// Batch of the traces' decode steps when their markers carry none [default: 1, said in
    /// the output].
    #[arg(long, value_name = "N")]
    pub trace_batch: Option<u64>,
    /// JSON output (with schema_version).
    #[arg(long)]
    pub json: bool,
    /// Also write the log-log roofline chart as SVG.
    #[arg(long, value_name = "OUT.svg")]
    pub svg: Option<PathBuf>,
    /// Speculative decoding: the floor of a verify forward of K+1 rows per sequence against
    /// a plain decode step, at each batch (1..=64).
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..=64))]
    pub spec_k: Option<u64>,
    #[command(flatten)]
    pub analysis: TraceArgs,
}

pub(crate) const DEFAULT_BATCHES: [u64; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];
/// Tokens in the KV cache the floors are taken at, unless `--ctx` says.
pub(crate) const DEFAULT_CTX: u64 = 4096;

/// Where a context comes from, as the text says it.
pub(crate) fn context_source(s: ContextSource) -> &'static str {
    gapscope_analyzer::text::context_from(s, "--ctx")
}

/// Where a tensor-parallel degree comes from, as the text says it.
pub(crate) fn tp_source(s: TpSource) -> &'static str {
    gapscope_analyzer::text::tp_from(s, "--tp")
}

/// Whether a degree is worth a word: one GPU is said only when `--tp` said it.
fn tp_said(tp: u64, source: TpSource) -> bool {
    tp > 1 || source != TpSource::Assumed
}

pub fn run(a: RooflineArgs, g: &crate::Global) -> Result<ExitCode> {
    let inputs: Vec<&Path> = [&a.model]
        .into_iter()
        .chain(&a.hw_profile)
        .chain(&a.traces)
        .chain(&a.analysis.rules)
        .chain(&a.analysis.graph_capture)
        .map(PathBuf::as_path)
        .collect();
    if let Some(out) = &a.svg {
        // `-` is standard output for `export --chrome`; here it would be a file named `-`.
        if out.as_os_str() == "-" {
            anyhow::bail!("--svg -: the chart is written to a file; give a path");
        }
        check_output(out, &inputs)?;
    }
    let model = ModelSpec::load(&a.model)?;
    let hardware = match (&a.hw_profile, &a.hardware) {
        (Some(p), _) => hw::load_profile(p)?,
        (None, Some(gpu)) => hw::lookup(gpu)?,
        (None, None) => anyhow::bail!(
            "roofline: give --hw GPU or --hw-profile FILE (or set a default GPU: GAPSCOPE_HW, \
             or `hw` in the config file; `gapscope config` shows it)"
        ),
    };
    let fmt = WeightFormat::parse(&a.weights).with_context(|| {
        format!(
            "--weights {:?}: use bf16, fp8, q8_0, q4_0, q4_k, nvfp4 or mxfp4",
            a.weights
        )
    })?;
    let batch_given = !a.batch.is_empty();
    let batches = if batch_given {
        a.batch.clone()
    } else {
        DEFAULT_BATCHES.to_vec()
    };
    if batches.len() > MAX_BATCHES {
        anyhow::bail!(
            "--batch: {} batch sizes given; at most {MAX_BATCHES}",
            batches.len()
        );
    }
    for (what, b) in batches
        .iter()
        .map(|b| ("--batch", b))
        .chain(a.trace_batch.iter().map(|b| ("--trace-batch", b)))
    {
        if !(1..=MAX_BATCH).contains(b) {
            anyhow::bail!("{what} {b}: batch sizes are 1..={MAX_BATCH}");
        }
    }
    if let Some(ctx) = a.ctx.filter(|&c| c > MAX_CTX) {
        anyhow::bail!("--ctx {ctx}: the context is 0..={MAX_CTX} tokens");
    }
    let analyser = a.analysis.analyser(g.quiet)?;
    let mut reports = Vec::new();
    for t in &a.traces {
        reports.push(analyser.run(t)?);
    }
    let traces: Vec<TraceAtBatch> = reports
        .iter()
        .map(|report| {
            let (batch, batch_source) = BatchSource::resolve(report, a.trace_batch);
            let notes = batch_notes(batch, batch_source, a.trace_batch, batch_given, &batches);
            TraceAtBatch {
                report,
                batch,
                batch_source,
                notes,
            }
        })
        .collect();
    let choice = ContextChoice::new(a.ctx, DEFAULT_CTX);
    let mut r = roofline_at(
        &model,
        &hardware,
        fmt,
        &batches,
        choice,
        TpChoice::new(a.tp),
        &traces,
    );
    if let Some(k) = a.spec_k {
        let rank = model.per_rank(r.tp);
        r.verify = batches
            .iter()
            .map(|&b| verify_floor(&rank, &hardware, fmt, b, k, r.ctx))
            .collect();
    }
    if let Some(out) = &a.svg {
        let doc = crate::render::roofline_svg::render(&r, &model, &hardware)?;
        write_output(out, &inputs, doc.as_bytes())?;
    }
    let text = if a.json {
        serde_json::to_string_pretty(&r)? + "\n"
    } else {
        table(&r)
    };
    g.write(&text)?;
    Ok(ExitCode::SUCCESS)
}

/// How a trace's batch was chosen, and where it disagrees with the options given.
pub(crate) fn batch_notes(
    batch: u64,
    source: BatchSource,
    trace_batch: Option<u64>,
    batch_given: bool,
    batches: &[u64],
) -> Vec<String> {
    let mut notes = vec![match source {
        BatchSource::TraceMarkers => match trace_batch {
            Some(t) if t != batch => {
                format!("batch {batch} from the trace's markers; --trace-batch {t} is not used")
            }
            _ => format!("batch {batch} from the trace's markers"),
        },
        BatchSource::Given => {
            format!("batch {batch} from --trace-batch (the trace's markers carry no batch size)")
        }
        BatchSource::Assumed => "batch 1 assumed: the trace's markers carry no batch size; \
             pass --trace-batch N if it decoded N sequences per step"
            .to_owned(),
    }];
    if batch_given && !batches.contains(&batch) {
        let list: Vec<String> = batches.iter().map(u64::to_string).collect();
        notes.push(format!(
            "--batch {} does not include the trace's batch {batch}: its floor is taken at batch {batch}{}",
            list.join(","),
            if source == BatchSource::TraceMarkers {
                ""
            } else {
                " (--trace-batch sets the trace's batch)"
            }
        ));
    }
    notes
}

/// A peak for the header: the figure, or why there is none.
fn peak_cell(h: &HardwareSpec, path: TensorPath) -> String {
    let v = path.tflops(h);
    if v > 0.0 {
        format!("{v:.0}")
    } else if h.ceilings == CeilingSource::Measured {
        "not measured".to_owned()
    } else {
        "none".to_owned()
    }
}

fn table(r: &RooflineReport) -> String {
    let mut s = String::new();
    let m = &r.model;
    s.push_str(&format!(
        "model     {} ({} params, {} layers: {} full attention, {} linear attention{})\n",
        if m.model_type.is_empty() {
            "decoder".to_owned()
        } else {
            text(&m.model_type)
        },
        count(m.params),
        m.layers,
        m.full_attention_layers,
        m.linear_attention_layers,
        match (m.moe_experts, m.moe_top_k) {
            (Some(e), Some(k)) => format!(", MoE {e} experts top-{k}"),
            _ => String::new(),
        }
    ));
    let h = &r.hardware;
    s.push_str(&format!(
        "hardware  {} ({} ceilings): {:.2} TB/s, bf16 {} / fp8 {} / int8 {} TFLOP/s\n",
        text(&h.name),
        r.ceilings,
        h.hbm_bytes_per_s / 1e12,
        peak_cell(h, TensorPath::Bf16),
        peak_cell(h, TensorPath::Fp8),
        peak_cell(h, TensorPath::Int8),
    ));
    s.push_str(&format!(
        "weights   {}; context {} tokens ({}); KV {:.0} B/token/seq; crossover batch M* = {:.1}\n",
        r.weights,
        r.ctx,
        context_source(r.ctx_source),
        m.kv_bytes_per_token,
        r.crossover_batch
    ));
    if tp_said(r.tp, r.tp_source) {
        s.push_str(&format!(
            "parallel  tensor parallel {} ({}): per rank 1/{} of the linear weights and the LM head, {} KV head{} of {}, 1/{} of the FLOPs; norms and embedding rows whole\n",
            r.tp,
            tp_source(r.tp_source),
            r.tp,
            r.kv_heads_per_rank,
            if r.kv_heads_per_rank == 1 { "" } else { "s" },
            r.model.kv_heads,
            r.tp,
        ));
    }
    let c = &r.compute_peak;
    s.push_str(&format!(
        "compute   {} peak {:.0} TFLOP/s ({} ceiling) for {} weights\n",
        c.path, c.tflops, c.source, r.weights
    ));
    if let Some(note) = &c.note {
        s.push_str(&format!("note      {}\n", text(note)));
    }
    s.push('\n');
    s.push_str(
        "  batch  weights GB  weight ms   KV+state ms  compute ms   floor ms   max tok/s  bound\n",
    );
    for f in &r.floors {
        let bound = f.bound;
        s.push_str(&format!(
            "{:>7}  {:>10.3}  {:>9.4}  {:>12.4}  {:>10.4}  {:>9.4}  {:>10.1}  {bound}\n",
            f.batch,
            f.weight_bytes / 1e9,
            f.weight_floor_s * 1e3,
            f.kv_floor_s * 1e3,
            f.compute_floor_s * 1e3,
            f.step_floor_s * 1e3,
            f.max_tok_per_s
        ));
    }
    if let Some(k) = r.verify.first().map(|v| v.k) {
        s.push_str(&format!(
            "\nspeculative verify of {k} drafts ({} rows per sequence) against a plain step, at its floor\n",
            k + 1
        ));
        s.push_str(&format!(
            "{:>6}  {:>12}  {:>12}  {:>8}  {:>8}\n",
            "batch", "plain ms", "verify ms", "ratio", "bound"
        ));
        for v in &r.verify {
            s.push_str(&format!(
                "{:>6}  {:>12.4}  {:>12.4}  {:>8.3}  {:>8}\n",
                v.batch,
                v.plain.step_floor_s * 1e3,
                v.verify.step_floor_s * 1e3,
                v.ratio,
                v.verify.bound
            ));
        }
    }
    measured(r, &mut s);
    s
}

/// The traces' decode steps against their floors, and the traces not placed.
fn measured(r: &RooflineReport, s: &mut String) {
    if !r.measured.is_empty() || !r.not_placed.is_empty() {
        s.push_str("\nmeasured decode steps (each at its own batch and context)\n");
        for m in &r.measured {
            let tp = if tp_said(m.tp, m.tp_source) {
                format!(", tensor parallel {} ({})", m.tp, tp_source(m.tp_source))
            } else {
                String::new()
            };
            s.push_str(&format!(
                "  {}: batch {}, context {} tokens ({}){tp}, {} steps, {:.1} tok/s, floor {:.4} ms\n    {}; p10 {}\n",
                text(&m.trace),
                m.batch,
                m.ctx,
                context_source(m.ctx_source),
                m.decode_steps,
                m.tok_per_s,
                m.floor_ms,
                floor_headline(m.tpot_median_ms, m.floor_ms, m.pct_of_floor_median),
                against_floor(m.tpot_p10_ms, m.floor_ms, m.pct_of_floor_p10)
            ));
            for n in &m.notes {
                s.push_str(&format!("    note: {}\n", text(n)));
            }
            if m.buckets.is_empty() && m.buckets_without_floor.is_empty() {
                s.push_str("    (no per-bucket times in the decode steps)\n");
                continue;
            }
            s.push_str(&format!(
                "    {:<22} {:>9} {:>10} {:>9} {:>8} {:>11} {:>8}  floor source\n",
                "bucket", "ms/step", "GB/step", "floor ms", "× floor", "efficiency", "% of BW"
            ));
            for b in &m.buckets {
                let name: Vec<&str> = b.buckets.iter().map(|x| x.as_str()).collect();
                s.push_str(&format!(
                    "    {:<22} {:>9.4} {:>10.4} {:>9.4} {:>8} {:>11} {:>8}  {} ({})\n",
                    name.join("+"),
                    b.ms_per_step,
                    b.bytes_per_step / 1e9,
                    b.floor_ms,
                    x_floor(b.ms_per_step, b.floor_ms),
                    pct1(b.pct_of_floor),
                    pct1(b.pct_of_bandwidth),
                    b.source.label(),
                    b.basis
                ));
            }
            for b in &m.buckets_without_floor {
                s.push_str(&format!(
                    "    {:<22} {:>9.4} {:>10} {:>9} {:>8} {:>11} {:>8}  none: {}\n",
                    b.bucket.to_string(),
                    b.ms_per_step,
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    b.reason
                ));
            }
        }
        for n in &r.not_placed {
            s.push_str(&format!(
                "  {}: not placed: {}\n",
                text(&n.trace),
                text(&n.reason)
            ));
        }
    }
}
