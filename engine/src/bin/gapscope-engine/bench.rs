//! `gapscope-engine bench`: llama-batched-bench-style sweep over npl, per timing mode; prints
//! a table, writes the native trace of the last timed mode (`-o`) and a JSON report.

use crate::args::{
    LeverArgs, ModelArgs, check_shape, find_tokenizer, load, no_tokenizer, write_json,
};
use crate::env::open_device;
use gapscope_engine::bench::{self, BenchRow, BenchSettings};
use gapscope_engine::cuda::{Capacity, CudaBackend, LatencyCalibration, Timing};
use gapscope_engine::records::TraceOut;
use gapscope_engine::{EngineError, ModelConfig, Result};
use gapscope_traces::{GpuInfo, Manifest, SourceFormat};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub levers: LeverArgs,
    /// Comma-separated numbers of parallel sequences.
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub npl: Vec<usize>,
    #[arg(long, default_value_t = 128)]
    pub npp: usize,
    #[arg(long, default_value_t = 128)]
    pub ntg: usize,
    #[arg(long, default_value_t = 5)]
    pub reps: usize,
    #[arg(long, default_value_t = 1)]
    pub warmup: usize,
    /// Timing modes to run in turn (off, step, launch); e.g. off,launch,off,launch measures
    /// the cost of per-launch events side by side.
    #[arg(long, default_value = "launch", value_delimiter = ',')]
    timing: Vec<String>,
    /// With launch timing, time every launch of one decode step in N (the others get a
    /// step-level event pair; the trace holds the fully timed steps). 1 times every step.
    #[arg(long, default_value_t = 16)]
    pub timing_sample: usize,
    /// Write the native trace of the last timed mode here (with --hybrid-sweep: a directory
    /// for one trace per setting and npl).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    #[arg(long)]
    json: Option<PathBuf>,
    /// Skip measuring the D2D copy bandwidth (then no floor is reported).
    #[arg(long)]
    no_copy_bw: bool,
    /// Prompt text (tokenized with --tokenizer or MODEL/tokenizer.json, tiled to npp);
    /// seeded random token ids when absent.
    #[arg(long)]
    prompt: Option<String>,
    #[arg(long)]
    tokenizer: Option<PathBuf>,
    /// Keep raw per-launch event times. By default, with launch timing, the latency of a
    /// launch's event pair (about 3 us on an H200) is calibrated once on a probe kernel
    /// and subtracted from each timed launch.
    #[arg(long)]
    pub raw_event_timing: bool,
    /// Hybrid models: run the all-slow setting of the DeltaNet levers, each lever alone
    /// switched to its fast side, and all fast, each npl on its own, and write
    /// `-o DIR/{slow,state_update,state_read,out_proj,all}-npl{N}.gst` (the other levers as
    /// given; one timing mode).
    #[arg(long)]
    pub hybrid_sweep: bool,
}

pub fn run(a: BenchArgs) -> Result<ExitCode> {
    let modes: Vec<Timing> = a
        .timing
        .iter()
        .map(|s| parse_timing(s))
        .collect::<Result<_>>()?;
    check_shape(&a.npl, a.npp, a.ntg, a.reps)?;
    let (cfg, w) = load(&a.model)?;
    let prompt_tokens = match &a.prompt {
        Some(text) => Some(
            find_tokenizer(&a.model, &a.tokenizer)?
                .ok_or_else(no_tokenizer)?
                .encode(text, cfg.vocab)?,
        ),
        None => None,
    };
    if a.hybrid_sweep {
        if modes.len() != 1 {
            return Err(EngineError::invalid("--hybrid-sweep runs one timing mode"));
        }
        let v = crate::sweep::run(&a, &cfg, &w, prompt_tokens, modes[0])?;
        write_json(&a.json, &v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let dev = open_device(a.levers.device)?;
    let cap = Capacity::for_bench(&a.npl, a.npp, a.ntg);
    let lv = a.levers.levers()?;
    let mut be = CudaBackend::new(dev, &cfg, &w, lv, cap, modes[0])?;
    be.rec.sample_every = a.timing_sample.max(1);
    drop(w);
    eprintln!(
        "device: {} ({} SMs), kernels: {} of {} modules from cache",
        be.dev.info.name,
        be.dev.info.sm_count,
        be.dev.cached_modules,
        gapscope_kernels::MODULES.len()
    );
    let event_latency = bench::calibrate_event_latency(&mut be, &modes, a.raw_event_timing)?;
    match &event_latency {
        Some(c) => eprintln!("{}", bench::event_latency_line(c)),
        None if a.raw_event_timing && modes.contains(&Timing::Launch) => eprintln!(
            "event latency: not calibrated (--raw-event-timing); per-launch times include the events' own latency"
        ),
        None => {}
    }
    let bw = if a.no_copy_bw {
        None
    } else {
        Some(bench::copy_bandwidth(&be.dev, 1 << 30, 20)?)
    };
    if let Some(b) = &bw {
        eprintln!(
            "D2D copy bandwidth (read+write): {:.3} TB/s median ({:.3}-{:.3}, n={})",
            b.median / 1e12,
            b.min / 1e12,
            b.max / 1e12,
            b.n
        );
    }
    let settings = BenchSettings {
        npl: a.npl.clone(),
        npp: a.npp,
        ntg: a.ntg,
        reps: a.reps,
        warmup: a.warmup,
        seed: a.model.seed,
        prompt: prompt_tokens,
    };
    let mut all = Vec::new();
    let last_timed = modes.iter().rposition(|m| *m != Timing::Off);
    for (mi, &mode) in modes.iter().enumerate() {
        be.set_timing(mode);
        let trace = match (&a.output, Some(mi) == last_timed) {
            (Some(p), true) => {
                let extra = serde_json::json!({"levers": lv, "settings": settings, "weights": a.model.weights, "timing": mode, "timing_sample": a.timing_sample, "capacity": cap, "event_latency": event_latency});
                let m = manifest(&be, &cfg, extra, (mode, lv.graphs), &event_latency);
                Some((TraceOut::create(p, m)?, p.as_path()))
            }
            _ => None,
        };
        let rows = run_traced(
            &mut be,
            &settings,
            bw.map(|b| b.median),
            trace,
            a.timing_sample,
        )?;
        print_rows(&format!("{mode:?}").to_lowercase(), &rows);
        all.push(serde_json::json!({"timing": mode, "rows": rows}));
    }
    write_json(
        &a.json,
        &serde_json::json!({
            "device": be.dev.info, "copy_bw": bw, "model": cfg, "weights": a.model.weights,
            "levers": lv, "settings": settings, "event_latency": event_latency, "runs": all
        }),
    )?;
    Ok(ExitCode::SUCCESS)
}

fn parse_timing(s: &str) -> Result<Timing> {
    match s {
        "off" => Ok(Timing::Off),
        "step" => Ok(Timing::Step),
        "launch" => Ok(Timing::Launch),
        other => Err(EngineError::invalid(format!(
            "unknown timing mode {other:?}; use off, step or launch"
        ))),
    }
}

/// The trace's manifest: the device, the command line, the model, the run's settings
/// (`extra`) and notes on how launches were timed (the timing mode, the graphs lever).
pub(crate) fn manifest(
    be: &CudaBackend,
    cfg: &ModelConfig,
    extra: serde_json::Value,
    (mode, graphs): (Timing, bool),
    event_latency: &Option<LatencyCalibration>,
) -> Manifest {
    let mut m = Manifest::new(SourceFormat::Engine);
    let i = &be.dev.info;
    m.gpus.push(GpuInfo {
        device: 0,
        name: i.name.clone(),
        sm_count: Some(i.sm_count),
        total_memory_bytes: Some(i.total_memory_bytes),
        compute_capability: Some(format!(
            "{}.{}",
            i.compute_capability.0, i.compute_capability.1
        )),
        l2_cache_bytes: Some(i.l2_cache_bytes),
        ..GpuInfo::default()
    });
    m.driver_version = Some(format!(
        "{}.{}",
        i.driver_version / 1000,
        (i.driver_version % 1000) / 10
    ));
    m.command_line = Some(std::env::args().collect::<Vec<_>>().join(" "));
    m.model_config = serde_json::to_value(cfg).ok();
    m.engine_config = Some(extra);
    m.notes.push(
        "kernel times from CUDA event pairs around each launch; a cuBLAS call is one record".into(),
    );
    if mode == Timing::Launch {
        m.notes.push(match event_latency {
            Some(c) => format!(
                "a calibrated event latency of {} ns ({} ns for a step's first launch; trimmed means of {} probes) is subtracted from each launch, half from its start and half from its end",
                c.mean_ns, c.first_mean_ns, c.n
            ),
            None => "raw event times: each launch includes the latency of its event pair (about 3 us on an H200)".into(),
        });
        if graphs {
            m.notes.push("launch-timed decode steps run as eager launches with stream event records (no graph, no PDL); the other decode steps replay the CUDA graph".into());
        }
    }
    m
}

/// `bench::run`, its steps written to `trace` (when given), which is then closed.
pub(crate) fn run_traced(
    be: &mut CudaBackend,
    settings: &BenchSettings,
    floor_bw: Option<f64>,
    mut trace: Option<(TraceOut, &Path)>,
    timing_sample: usize,
) -> Result<Vec<BenchRow>> {
    let rows = bench::run(
        be,
        settings,
        floor_bw,
        |recs| {
            if let Some((t, _)) = trace.as_mut() {
                for r in recs {
                    t.add_step(r)?;
                }
            }
            Ok(())
        },
        |msg| eprintln!("  {msg}"),
    )?;
    if let Some((t, path)) = trace {
        finish_trace(t, timing_sample, path)?;
    }
    Ok(rows)
}

/// Notes the steps sampling left out, closes the trace and says where it went.
fn finish_trace(mut t: TraceOut, timing_sample: usize, path: &Path) -> Result<()> {
    if t.skipped_steps > 0 {
        let note = format!(
            "per-launch timing sampled on 1 decode step in {timing_sample}; {} step-timed steps are not in the trace",
            t.skipped_steps
        );
        t.manifest_mut().notes.push(note);
    }
    let m = t.finish()?;
    eprintln!(
        "wrote {} ({} kernel batches)",
        path.display(),
        m.batches.get("kernels").copied().unwrap_or(0)
    );
    Ok(())
}

pub(crate) fn print_rows(mode: &str, rows: &[BenchRow]) {
    println!("\ntiming={mode}");
    println!(
        "{:>5} {:>10} {:>12} {:>10} {:>10} {:>7} {:>9} {:>11} {:<12} md5",
        "npl", "S_PP t/s", "S_TG t/s", "(min", "max)", "CV%", "TPOT ms", "%wt-floor", "linears"
    );
    for r in rows {
        println!(
            "{:>5} {:>10.1} {:>12.1} {:>10.1} {:>10.1} {:>7.2} {:>9.3} {:>11} {:<12} {}{}",
            r.npl,
            r.s_pp.median,
            r.s_tg.median,
            r.s_tg.min,
            r.s_tg.max,
            100.0 * r.s_tg.cv,
            r.tpot_ms.median,
            r.pct_of_weight_floor
                .map_or("-".into(), |p| format!("{p:.1}")),
            r.linear_path,
            r.md5,
            if r.md5_stable {
                ""
            } else {
                " (differs across repeats!)"
            }
        );
        if !r.bucket_ms.is_empty() {
            let parts: Vec<String> = r
                .bucket_ms
                .iter()
                .map(|(k, v)| format!("{k} {v:.3}"))
                .collect();
            println!("      ms/step: {}", parts.join(", "));
        }
    }
}
