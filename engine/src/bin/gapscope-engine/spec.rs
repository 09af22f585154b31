//! `gapscope-engine spec`: self-speculative decoding of one sequence on the CUDA backend,
//! setting by setting, beside plain greedy decode of the same model and prompt; a table, a
//! JSON report and (with `--trace-dir`) one native trace per run.

use crate::args::{LeverArgs, ModelArgs, check_shape, load, write_json};
use crate::bench::manifest;
use crate::env::open_device;
use gapscope_engine::WeightFormat;
use gapscope_engine::bench::{calibrate_event_latency, event_latency_line, prompts};
use gapscope_engine::cuda::{CudaBackend, LatencyCalibration, Timing};
use gapscope_engine::dispatch::Bf16Batch1;
use gapscope_engine::records::TraceOut;
use gapscope_engine::spec::bench::{Mode, run_rep, run_reps};
use gapscope_engine::spec::report::{
    PlainReport, Rep, RunStats, SettingReport, SpecReport, Traced,
};
use gapscope_engine::spec::{Acceptance, SpecSettings, cuda::capacity};
use gapscope_engine::{EngineError, ModelConfig, Result};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct SpecArgs {
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    levers: LeverArgs,
    /// Prompt tokens (seeded random ids).
    #[arg(long, default_value_t = 64)]
    npp: usize,
    /// Tokens to generate after the prefill's.
    #[arg(long, default_value_t = 128)]
    ntg: usize,
    #[arg(long, default_value_t = 5)]
    reps: usize,
    #[arg(long, default_value_t = 1)]
    warmup: usize,
    /// Layers the draft runs (the model's first N); default a quarter of the model's.
    #[arg(long)]
    draft_layers: Option<usize>,
    /// Candidates drafted per step.
    #[arg(long, default_value_t = 4)]
    k: usize,
    /// `argmax` (greedy verification: plain decode's tokens) or per-position acceptance
    /// probabilities `p1,...,pk` (synthetic acceptance).
    #[arg(long, default_value = "argmax")]
    accept: String,
    /// Seed of the synthetic acceptance draws.
    #[arg(long, default_value_t = 0)]
    accept_seed: u64,
    /// A setting to run, `k=K,accept=argmax|p1,...,pk[,draft_layers=N][,seed=S]`; repeat
    /// for several (each gets its own trace). Without any: the one --k/--accept/--draft-layers
    /// give.
    #[arg(long = "setting")]
    settings: Vec<String>,
    /// One launch-timed repeat per run traced to DIR: `plain.gst` and
    /// `spec-k{K}-{argmax|aP1_P2..}[-d{N}].gst` per setting.
    #[arg(long)]
    trace_dir: Option<PathBuf>,
    /// With a single setting: its trace here (no plain trace).
    #[arg(long, conflicts_with = "trace_dir")]
    trace: Option<PathBuf>,
    #[arg(long)]
    json: Option<PathBuf>,
    /// Keep raw per-launch event times in the traces (no event-latency calibration).
    #[arg(long)]
    raw_event_timing: bool,
}

/// `k=4,accept=0.8,0.6,draft_layers=8,seed=1` over the defaults: a bare number continues the
/// previous key's value (the acceptance list).
fn parse_setting(s: &str, a: &SpecArgs, default_layers: usize) -> Result<SpecSettings> {
    let (mut k, mut accept, mut layers, mut seed) =
        (a.k, a.accept.clone(), default_layers, a.accept_seed);
    let mut last = "";
    let bad = |what: String| EngineError::invalid(format!("--setting {s:?}: {what}"));
    let num = |key: &str, v: &str| {
        v.parse::<u64>()
            .map_err(|_| bad(format!("{key}={v:?} is not a whole number")))
    };
    let mut accept_parts: Option<Vec<String>> = None;
    for part in s.split(',') {
        match part.split_once('=') {
            Some(("k", v)) => k = num("k", v)? as usize,
            Some(("draft_layers", v)) => layers = num("draft_layers", v)? as usize,
            Some(("seed", v)) => seed = num("seed", v)?,
            Some(("accept", v)) => accept_parts = Some(vec![v.to_owned()]),
            Some((key, _)) => return Err(bad(format!("unknown key {key:?}"))),
            None if last == "accept" => {
                if let Some(p) = accept_parts.as_mut() {
                    p.push(part.to_owned());
                }
                continue;
            }
            None => return Err(bad(format!("{part:?} follows no accept="))),
        }
        last = part.split_once('=').map_or("", |(key, _)| key);
    }
    if let Some(p) = accept_parts {
        accept = p.join(",");
    }
    Ok(SpecSettings {
        draft_layers: layers,
        k,
        accept: Acceptance::parse(&accept, seed)?,
    })
}

fn settings(a: &SpecArgs, cfg: &ModelConfig) -> Result<(Vec<SpecSettings>, usize)> {
    let default_layers = a.draft_layers.unwrap_or((cfg.layers / 4).max(1));
    let list = if a.settings.is_empty() {
        vec![SpecSettings {
            draft_layers: default_layers,
            k: a.k,
            accept: Acceptance::parse(&a.accept, a.accept_seed)?,
        }]
    } else {
        a.settings
            .iter()
            .map(|s| parse_setting(s, a, default_layers))
            .collect::<Result<_>>()?
    };
    for s in &list {
        s.check(cfg)?;
    }
    if a.trace.is_some() && list.len() != 1 {
        return Err(EngineError::invalid(
            "--trace takes one setting; use --trace-dir for several",
        ));
    }
    Ok((list, default_layers))
}

pub fn run(a: SpecArgs) -> Result<ExitCode> {
    check_shape(&[1], a.npp, a.ntg, a.reps)?;
    let (cfg, w) = load(&a.model)?;
    let (list, default_layers) = settings(&a, &cfg)?;
    let k_max = list.iter().map(|s| s.k).max().unwrap_or(1);
    check_shape(&[1], a.npp, a.ntg + k_max, a.reps)?;
    let lv = a.levers.levers()?;
    let cap = capacity(k_max, a.npp, a.ntg);
    let mut be = CudaBackend::new(
        open_device(a.levers.device)?,
        &cfg,
        &w,
        lv,
        cap,
        Timing::Off,
    )?;
    drop(w);
    eprintln!(
        "device: {} ({} SMs); {} setting(s), npp {} ntg {}",
        be.dev.info.name,
        be.dev.info.sm_count,
        list.len(),
        a.npp,
        a.ntg
    );
    let tracing = a.trace_dir.is_some() || a.trace.is_some();
    let latency = if tracing {
        calibrate_event_latency(&mut be, &[Timing::Launch], a.raw_event_timing)?
    } else {
        None
    };
    if let Some(c) = &latency {
        eprintln!("{}", event_latency_line(c));
    }
    if let Some(d) = &a.trace_dir {
        std::fs::create_dir_all(d).map_err(|e| EngineError::io(d, e))?;
    }
    let prompt = prompts(a.model.seed, 0, 1, a.npp, cfg.vocab).remove(0);
    let mut step0 = 0i64;
    let mut ctx = Ctx {
        a: &a,
        cfg: &cfg,
        latency: &latency,
        prompt: &prompt,
        step0: &mut step0,
    };

    let plain_reps = ctx.measure(&mut be, Mode::Plain, "plain")?;
    let plain_trace = a.trace_dir.as_ref().map(|d| d.join("plain.gst"));
    let plain = PlainReport {
        measured: RunStats::of(&plain_reps),
        traced: ctx.traced(&mut be, Mode::Plain, plain_trace.as_deref(), None)?,
    };
    let mut reports = Vec::new();
    for s in &list {
        let name = s.name(default_layers);
        let reps = ctx.measure(&mut be, Mode::Spec(s), &name)?;
        let path = match (&a.trace_dir, &a.trace) {
            (Some(d), _) => Some(d.join(format!("{name}.gst"))),
            (None, Some(p)) => Some(p.clone()),
            _ => None,
        };
        let traced = ctx.traced(&mut be, Mode::Spec(s), path.as_deref(), Some(s))?;
        reports.push(SettingReport::of(name, s, &reps, &plain.measured, traced));
    }
    print_table(&plain, &reports);
    let argmax_differs = reports
        .iter()
        .any(|r| r.settings.accept == Acceptance::Argmax && !r.md5_equals_plain);
    if argmax_differs
        && be.w_format() == WeightFormat::Bf16
        && lv.dispatch.bf16_batch1 == Bf16Batch1::Gemv
    {
        println!(
            "note: argmax speculation's tokens differ from plain decode's: with bf16 weights the batch-1 GEMV rounds differently from the verify's multi-row kernel; --dispatch bf16_batch1=mma runs one-row linears on the multi-row kernel (bit-identical rows)"
        );
    }
    write_json(
        &a.json,
        &SpecReport {
            device: be.dev.info.clone(),
            model: cfg.clone(),
            weights: a.model.weights.clone(),
            levers: lv,
            npp: a.npp,
            ntg: a.ntg,
            warmup: a.warmup,
            seed: a.model.seed,
            event_latency: latency.clone(),
            plain,
            settings: reports,
        },
    )?;
    Ok(ExitCode::SUCCESS)
}

/// What every run of one invocation shares.
struct Ctx<'a> {
    a: &'a SpecArgs,
    cfg: &'a ModelConfig,
    latency: &'a Option<LatencyCalibration>,
    prompt: &'a [i32],
    step0: &'a mut i64,
}

impl Ctx<'_> {
    /// The measured repeats (no events but the decode's pair; graphs as the levers say).
    fn measure(&mut self, be: &mut CudaBackend, mode: Mode, name: &str) -> Result<Vec<Rep>> {
        be.set_timing(Timing::Off);
        let reps = (self.a.warmup, self.a.reps);
        run_reps(be, mode, self.prompt, self.a.ntg, reps, self.step0, |r| {
            eprintln!(
                "  {name}: {:.3} ms/step, {:.1} tok/s, {:.2} tokens/step",
                r.decode_ms / r.steps.max(1) as f64,
                r.produced as f64 / (r.decode_ms * 1e-3),
                r.produced as f64 / r.steps.max(1) as f64
            )
        })
    }

    /// One launch-timed repeat written to `path` (every forward timed launch by launch).
    fn traced(
        &mut self,
        be: &mut CudaBackend,
        mode: Mode,
        path: Option<&Path>,
        s: Option<&SpecSettings>,
    ) -> Result<Option<Traced>> {
        let Some(path) = path else {
            return Ok(None);
        };
        be.set_timing(Timing::Launch);
        be.rec.sample_every = 1;
        be.rec.start_run()?;
        // The trace holds this repeat alone: its prefill is step 0, speculative step i is i.
        let (rep, records) = run_rep(be, mode, self.prompt, self.a.ntg, 0)?;
        let lv = be.levers;
        let extra = serde_json::json!({
            "mode": "spec", "speculative": s, "npp": self.a.npp, "ntg": self.a.ntg,
            "weights": self.a.model.weights, "levers": lv, "capacity": be.cap,
            "timing": Timing::Launch, "event_latency": self.latency,
        });
        let m = manifest(
            be,
            self.cfg,
            extra,
            (Timing::Launch, lv.graphs),
            self.latency,
        );
        let mut out = TraceOut::create(path, m)?;
        for r in &records {
            out.add_step(r)?;
        }
        out.finish()?;
        be.set_timing(Timing::Off);
        eprintln!("wrote {} ({} forwards)", path.display(), records.len());
        Ok(Some(Traced::of(
            path.display().to_string(),
            &rep,
            records.len(),
        )))
    }
}

fn print_table(plain: &PlainReport, rows: &[SettingReport]) {
    println!(
        "\n{:<28} {:>9} {:>17} {:>9} {:>8} {:>8}  {:<32} md5",
        "run", "step ms", "(min-max)", "tok/s", "tok/step", "speedup", "accept per position"
    );
    let m = &plain.measured;
    println!(
        "{:<28} {:>9.3} {:>8.3}-{:<8.3} {:>9.1} {:>8.2} {:>8}  {:<32} {}",
        "plain",
        m.step_ms.median,
        m.step_ms.min,
        m.step_ms.max,
        m.tok_s.median,
        m.tokens_per_step.median,
        "1.00",
        "-",
        m.md5
    );
    for r in rows {
        let m = &r.measured;
        let acc: Vec<String> = r
            .accept_conditional
            .iter()
            .map(|c| c.map_or("-".into(), |c| format!("{c:.2}")))
            .collect();
        println!(
            "{:<28} {:>9.3} {:>8.3}-{:<8.3} {:>9.1} {:>8.2} {:>8.2}  {:<32} {}{}",
            r.name,
            m.step_ms.median,
            m.step_ms.min,
            m.step_ms.max,
            m.tok_s.median,
            m.tokens_per_step.median,
            r.speedup_vs_plain,
            acc.join(","),
            m.md5,
            if r.md5_equals_plain { " (= plain)" } else { "" }
        );
    }
}
