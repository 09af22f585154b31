//! `gapscope-engine`: the instrumented decode engine's command line.
//!
//! - `bench`: llama-batched-bench-style sweep; prints a table, writes a native trace (`-o`).
//! - `levers`: runs every lever setting and checks that the greedy md5 never changes.
//! - `selftest`: every kernel and whole-model logits against the CPU reference.
//! - `kbench`: single-kernel bandwidth and MMQ-vs-MMVQ figures.
//! - `logits`: teacher-forced logits for comparison with HF transformers.
//! - `generate`: greedy generation from a prompt (text with a tokenizer, or random ids).

use clap::builder::TypedValueParser;
use clap::{Parser, Subcommand, ValueEnum};
use gapscope_engine::bench::{self, BenchRow, BenchSettings};
use gapscope_engine::cpu::CpuBackend;
use gapscope_engine::cuda::{Capacity, CudaBackend, Device, KernelSource, Timing};
use gapscope_engine::dispatch::{DispatchPolicy, Levers};
use gapscope_engine::model::{Backend, Batch, forward};
use gapscope_engine::records::TraceOut;
use gapscope_engine::tokenizer::Tokenizer;
use gapscope_engine::{
    EngineError, ModelConfig, ModelWeights, Numerics, Result, WeightFormat, gpu_check, kbench,
};
use gapscope_traces::{GpuInfo, Manifest, Phase};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Parser)]
#[command(
    name = "gapscope-engine",
    version,
    about = "gapscope's instrumented LLM decode engine"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, ValueEnum)]
enum KvMode {
    Paged,
    Contiguous,
}

#[derive(Clone, Copy, ValueEnum)]
enum BackendKind {
    Cuda,
    Cpu,
}

#[derive(clap::Args, Clone)]
struct ModelArgs {
    /// HF model directory (config.json + safetensors); its weights are loaded.
    #[arg(long, conflicts_with = "config")]
    model: Option<PathBuf>,
    /// HF config.json: run these shapes with seeded random weights.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Use seeded random weights even when --model has safetensors.
    #[arg(long)]
    random_weights: bool,
    /// Weight format: bf16, q8_0 or q4_0 (quantized at load time).
    #[arg(long, default_value = "bf16")]
    weights: String,
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[derive(clap::Args, Clone)]
struct LeverArgs {
    /// Run decode steps eagerly instead of replaying CUDA graphs.
    #[arg(long)]
    no_graphs: bool,
    #[arg(long, value_enum, default_value = "paged")]
    kv: KvMode,
    /// Launch kernels without programmatic dependent launch (each waits for the previous one to
    /// finish before it starts).
    #[arg(long)]
    no_pdl: bool,
    /// Run RoPE and the KV append as their own kernel at decode instead of inside attention.
    #[arg(long)]
    no_fusion: bool,
    /// Kernel-dispatch overrides, `KEY=VALUE,...` on the defaults: `mmvq_max_batch` (largest
    /// batch run as GEMV/MMVQ, 8), `mmq_k_major_max_k` (8192) and `mmq_row_major_batches`
    /// (`LO:HI`, 17:47: MMQ reads row-major activations for K above the first at these
    /// batches), `mmvq_b1_k_split_min_k` (8192) and `mmvq_b1_pair_min_rows_per_k` (2: the
    /// batch-1 Q8_0 entries). Every setting gives the same bits, except `mmvq_max_batch` 0 or
    /// above 16 for bf16.
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = dispatch_parser())]
    dispatch: Option<DispatchPolicy>,
    #[arg(long, default_value_t = 0)]
    device: usize,
}

#[derive(Subcommand)]
enum Cmd {
    /// Batched decode benchmark: prompt of npp tokens, prefill, ntg decode steps, per npl.
    Bench {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        levers: LeverArgs,
        /// Comma-separated numbers of parallel sequences.
        #[arg(long, default_value = "1", value_delimiter = ',')]
        npl: Vec<usize>,
        #[arg(long, default_value_t = 128)]
        npp: usize,
        #[arg(long, default_value_t = 128)]
        ntg: usize,
        #[arg(long, default_value_t = 5)]
        reps: usize,
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// Timing modes to run in turn (off, step, launch); e.g. off,launch,off,launch measures
        /// the cost of per-launch events side by side.
        #[arg(long, default_value = "launch", value_delimiter = ',')]
        timing: Vec<String>,
        /// With launch timing, time every launch of one decode step in N (the others get a
        /// step-level event pair; the trace holds the fully timed steps). 1 times every step.
        #[arg(long, default_value_t = 16)]
        timing_sample: usize,
        /// Write the native trace of the last timed mode here.
        #[arg(short, long)]
        output: Option<PathBuf>,
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
        raw_event_timing: bool,
    },
    /// Greedy generation from a prompt: prints the token ids, their md5 and, with a tokenizer,
    /// the text.
    Generate {
        #[command(flatten)]
        model: ModelArgs,
        /// Prompt text (needs --tokenizer or MODEL/tokenizer.json).
        #[arg(long)]
        prompt: Option<String>,
        #[arg(long)]
        tokenizer: Option<PathBuf>,
        /// Length of the seeded random prompt used when no text is given.
        #[arg(long, default_value_t = 16)]
        random_prompt_len: usize,
        #[arg(long, default_value_t = 32)]
        max_new: usize,
        #[arg(long, value_enum, default_value = "cuda")]
        backend: BackendKind,
        #[command(flatten)]
        levers: LeverArgs,
    },
    /// Runs every lever combination on the same prompts and checks the greedy md5 is identical.
    Levers {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long, default_value = "1,16", value_delimiter = ',')]
        npl: Vec<usize>,
        #[arg(long, default_value_t = 32)]
        npp: usize,
        #[arg(long, default_value_t = 32)]
        ntg: usize,
        /// GEMV/GEMM dispatch thresholds (`mmvq_max_batch`) to run. 0 and 256 move batch 1
        /// off its own GEMV entries and the prefill off the GEMM, which for bf16 changes the
        /// bits (the determinism goal is 4/8/16).
        #[arg(long, default_value = "0,4,8,16,256", value_delimiter = ',')]
        thresholds: Vec<usize>,
        #[arg(long)]
        json: Option<PathBuf>,
        #[arg(long, default_value_t = 0)]
        device: usize,
    },
    /// Checks every kernel and whole-model logits against the CPU reference.
    Selftest {
        /// Input seed; defaults to the clock so every run sees fresh inputs.
        #[arg(long)]
        seed: Option<u64>,
        #[arg(long)]
        json: Option<PathBuf>,
        #[arg(long, default_value_t = 0)]
        device: usize,
    },
    /// Single-kernel bandwidth against the measured copy bandwidth.
    Kbench {
        #[arg(long, default_value_t = 50)]
        reps: usize,
        #[arg(long)]
        json: Option<PathBuf>,
        #[arg(long, default_value_t = 0)]
        device: usize,
    },
    /// Teacher-forced logits over a token file ({"prompt_len": P, "tokens": [...]}): a prefill
    /// of the prompt, then one decode step per remaining token; raw f32 rows to --out.
    Logits {
        #[command(flatten)]
        model: ModelArgs,
        #[arg(long)]
        tokens: PathBuf,
        #[arg(long)]
        out: PathBuf,
        #[arg(long, value_enum, default_value = "cuda")]
        backend: BackendKind,
        #[arg(long, default_value_t = 0)]
        device: usize,
        /// Where activations are rounded: `engine` (f32 residual stream, the engine's own) or
        /// `hf-bf16` (every op output rounded to bf16 as HF transformers' bf16 eager forward
        /// does, unfused; bf16 weights only) to compare logits with HF exactly.
        #[arg(long, default_value_t = Numerics::Engine, value_parser = numerics_parser())]
        numerics: Numerics,
    },
}

fn load(m: &ModelArgs) -> Result<(ModelConfig, ModelWeights)> {
    let fmt = WeightFormat::parse(&m.weights).ok_or_else(|| {
        EngineError::invalid(format!(
            "unknown weight format {:?}; use bf16, q8_0 or q4_0",
            m.weights
        ))
    })?;
    let t = Instant::now();
    let (cfg, w) = match (&m.model, &m.config) {
        (Some(dir), _) => {
            let cfg = ModelConfig::from_path(dir)?;
            let w = if m.random_weights {
                ModelWeights::random(&cfg, fmt, m.seed)
            } else {
                ModelWeights::from_safetensors(dir, &cfg, fmt)?
            };
            (cfg, w)
        }
        (None, Some(c)) => {
            let cfg = ModelConfig::from_path(c)?;
            let w = ModelWeights::random(&cfg, fmt, m.seed);
            (cfg, w)
        }
        (None, None) => {
            return Err(EngineError::invalid(
                "give --model DIR or --config config.json",
            ));
        }
    };
    eprintln!(
        "loaded {} layers x {} hidden, {} weights ({:.2} GB of linears) in {:.1} s",
        cfg.layers,
        cfg.hidden,
        fmt.name(),
        w.linear_bytes() as f64 / 1e9,
        t.elapsed().as_secs_f64()
    );
    Ok((cfg, w))
}

fn levers_of(a: &LeverArgs) -> Levers {
    Levers {
        graphs: !a.no_graphs,
        paged_kv: matches!(a.kv, KvMode::Paged),
        dispatch: a.dispatch.unwrap_or_default(),
        pdl: !a.no_pdl,
        fusion: !a.no_fusion,
    }
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

fn write_json(path: &Option<PathBuf>, v: &impl serde::Serialize) -> Result<()> {
    if let Some(p) = path {
        let text =
            serde_json::to_string_pretty(v).map_err(|e| EngineError::invalid(e.to_string()))?;
        std::fs::write(p, text).map_err(|e| EngineError::io(p, e))?;
    }
    Ok(())
}

fn manifest(be: &CudaBackend, cfg: &ModelConfig, extra: serde_json::Value) -> Manifest {
    let mut m = Manifest::new("engine");
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
    m
}

fn print_rows(mode: &str, rows: &[BenchRow]) {
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

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.cmd {
        Cmd::Bench {
            model,
            levers,
            npl,
            npp,
            ntg,
            reps,
            warmup,
            timing,
            timing_sample,
            output,
            json,
            no_copy_bw,
            prompt,
            tokenizer,
            raw_event_timing,
        } => {
            let modes: Vec<Timing> = timing
                .iter()
                .map(|s| parse_timing(s))
                .collect::<Result<_>>()?;
            check_shape(&npl, npp, ntg, reps)?;
            let (cfg, w) = load(&model)?;
            let prompt_tokens = match &prompt {
                Some(text) => Some(open_tokenizer(&model, &tokenizer)?.encode(text, cfg.vocab)?),
                None => None,
            };
            let dev = open_device(levers.device)?;
            let maxn = *npl.iter().max().unwrap_or(&1);
            let cap = Capacity {
                max_seqs: maxn,
                max_ctx: npp + ntg + 1,
                max_rows: maxn * npp,
            };
            let lv = levers_of(&levers);
            let mut be = CudaBackend::new(dev, &cfg, &w, lv, cap, modes[0])?;
            be.rec.sample_every = timing_sample.max(1);
            drop(w);
            eprintln!(
                "device: {} ({} SMs), kernels: {} of {} modules from cache",
                be.dev.info.name,
                be.dev.info.sm_count,
                be.dev.cached_modules,
                gapscope_kernels::MODULES.len()
            );
            let event_latency = bench::calibrate_event_latency(&mut be, &modes, raw_event_timing)?;
            match &event_latency {
                Some(c) => eprintln!("{}", bench::event_latency_line(c)),
                None if raw_event_timing && modes.contains(&Timing::Launch) => eprintln!(
                    "event latency: not calibrated (--raw-event-timing); per-launch times include the events' own latency"
                ),
                None => {}
            }
            let bw = if no_copy_bw {
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
                npl,
                npp,
                ntg,
                reps,
                warmup,
                seed: model.seed,
                prompt: prompt_tokens,
            };
            let mut all = Vec::new();
            let last_timed = modes.iter().rposition(|m| *m != Timing::Off);
            for (mi, &mode) in modes.iter().enumerate() {
                be.set_timing(mode);
                let mut trace = match (&output, Some(mi) == last_timed) {
                    (Some(p), true) => {
                        let extra = serde_json::json!({"levers": lv, "settings": settings, "weights": model.weights, "timing": mode, "timing_sample": timing_sample, "timed_steps_in_graphs": be.timed_in_graph(), "capacity": cap, "event_latency": event_latency});
                        let mut m = manifest(&be, &cfg, extra);
                        if mode == Timing::Launch {
                            m.notes.push(match &event_latency {
                                Some(c) => format!(
                                    "a calibrated event latency of {} ns ({} ns for a step's first launch; trimmed means of {} probes) is subtracted from each launch, half from its start and half from its end",
                                    c.mean_ns, c.first_mean_ns, c.n
                                ),
                                None => "raw event times: each launch includes the latency of its event pair (about 3 us on an H200)".into(),
                            });
                            if lv.graphs {
                                m.notes.push(if be.timed_in_graph() {
                                    "launch-timed decode steps replay their CUDA graph with an external event-record node on each side of every kernel".into()
                                } else {
                                    "launch-timed decode steps run as eager launches with stream event records (no graph, no PDL); the other decode steps replay the CUDA graph".into()
                                });
                            }
                        }
                        Some(TraceOut::create(p, m)?)
                    }
                    _ => None,
                };
                let rows = bench::run(
                    &mut be,
                    &settings,
                    bw.map(|b| b.median),
                    |recs| {
                        if let Some(t) = trace.as_mut() {
                            for r in recs {
                                t.add_step(r)?;
                            }
                        }
                        Ok(())
                    },
                    |msg| eprintln!("  {msg}"),
                )?;
                if let Some(mut t) = trace {
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
                        output
                            .as_ref()
                            .map_or(String::new(), |p| p.display().to_string()),
                        m.batches.get("kernels").copied().unwrap_or(0)
                    );
                }
                print_rows(&format!("{mode:?}").to_lowercase(), &rows);
                all.push(serde_json::json!({"timing": mode, "rows": rows}));
            }
            write_json(
                &json,
                &serde_json::json!({
                    "device": be.dev.info, "copy_bw": bw, "model": cfg, "weights": model.weights,
                    "levers": lv, "settings": settings, "event_latency": event_latency, "runs": all
                }),
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Levers {
            model,
            npl,
            npp,
            ntg,
            thresholds,
            json,
            device,
        } => {
            check_shape(&npl, npp, ntg, 1)?;
            let (cfg, w) = load(&model)?;
            let maxn = *npl.iter().max().unwrap_or(&1);
            let cap = Capacity {
                max_seqs: maxn,
                max_ctx: npp + ntg + 1,
                max_rows: maxn * npp,
            };
            let settings = BenchSettings {
                npl: npl.clone(),
                npp,
                ntg,
                reps: 1,
                warmup: 0,
                seed: model.seed,
                prompt: None,
            };
            let mut results = Vec::new();
            // PDL follows the graphs lever instead of doubling the matrix: graph replays run with
            // it, eager steps without, so any PDL effect on the output shows as a second md5.
            // Fusion is on throughout, plus four settings with it off at the default threshold;
            // then the batch-1 K-split MMVQ forced on (0) and off (max), and the contiguous-load
            // batch-1 entry forced on and off (with the split off), at the defaults.
            let ks_default = DispatchPolicy::default().mmvq_b1_k_split_min_k;
            let pr_default = DispatchPolicy::default().mmvq_b1_pair_min_rows_per_k;
            let mut matrix = Vec::new();
            for graphs in [true, false] {
                for paged in [true, false] {
                    for &thr in &thresholds {
                        matrix.push((graphs, paged, thr, true, ks_default, pr_default));
                    }
                }
            }
            for graphs in [true, false] {
                for paged in [true, false] {
                    matrix.push((
                        graphs,
                        paged,
                        DispatchPolicy::default().mmvq_max_batch,
                        false,
                        ks_default,
                        pr_default,
                    ));
                }
            }
            let thr_default = DispatchPolicy::default().mmvq_max_batch;
            for ks in [0, usize::MAX] {
                matrix.push((true, true, thr_default, true, ks, pr_default));
            }
            for pr in [0, usize::MAX] {
                matrix.push((true, true, thr_default, true, usize::MAX, pr));
            }
            for (graphs, paged, thr, fusion, ks, pr) in matrix {
                let pdl = graphs;
                let lv = Levers {
                    graphs,
                    paged_kv: paged,
                    dispatch: DispatchPolicy {
                        mmvq_max_batch: thr,
                        mmvq_b1_k_split_min_k: ks,
                        mmvq_b1_pair_min_rows_per_k: pr,
                        ..DispatchPolicy::default()
                    },
                    pdl,
                    fusion,
                };
                let dev = open_device(device)?;
                let mut be = CudaBackend::new(dev, &cfg, &w, lv, cap, Timing::Off)?;
                let rows = bench::run(&mut be, &settings, None, |_| Ok(()), |_| {})?;
                for r in rows {
                    println!(
                        "graphs={graphs:<5} pdl={pdl:<5} fusion={fusion:<5} kv={:<10} mmvq_max_batch={thr:<3} b1_k_split_min_k={:<20} b1_pair_min_rows_per_k={:<20} npl={:<4} md5={} S_TG={:.1}",
                        if paged { "paged" } else { "contiguous" },
                        ks,
                        pr,
                        r.npl,
                        r.md5,
                        r.s_tg.median
                    );
                    results.push(serde_json::json!({"graphs": graphs, "pdl": pdl, "fusion": fusion, "paged_kv": paged, "mmvq_max_batch": thr, "mmvq_b1_k_split_min_k": ks, "mmvq_b1_pair_min_rows_per_k": pr, "npl": r.npl, "md5": r.md5, "s_tg": r.s_tg.median}));
                }
            }
            let mut ok = true;
            for n in &npl {
                let md5s: std::collections::BTreeSet<&str> = results
                    .iter()
                    .filter(|r| r["npl"] == *n)
                    .filter_map(|r| r["md5"].as_str())
                    .collect();
                println!(
                    "npl {n}: {} distinct md5 over {} lever settings{}",
                    md5s.len(),
                    results.iter().filter(|r| r["npl"] == *n).count(),
                    if md5s.len() == 1 {
                        " (identical)"
                    } else {
                        " (DIFFER)"
                    }
                );
                ok &= md5s.len() == 1;
            }
            write_json(
                &json,
                &serde_json::json!({"model": cfg, "weights": model.weights, "results": results, "identical": ok}),
            )?;
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Cmd::Selftest { seed, json, device } => {
            let seed = seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
            });
            let dev = open_device(device)?;
            println!("device: {}, input seed {seed}", dev.info.name);
            let mut checks = gpu_check::op_checks(&dev, seed)?;
            drop(dev);
            checks.extend(gpu_check::model_checks(seed)?);
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
            write_json(&json, &serde_json::json!({"seed": seed, "checks": checks}))?;
            Ok(if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Cmd::Kbench { reps, json, device } => {
            let dev = open_device(device)?;
            let r = kbench::run(&dev, reps)?;
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
            write_json(&json, &r)?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Generate {
            model,
            prompt,
            tokenizer,
            random_prompt_len,
            max_new,
            backend,
            levers,
        } => {
            let tok = match (&tokenizer, model.model.as_deref().and_then(Tokenizer::find)) {
                (Some(p), _) => Some(Tokenizer::from_file(p)?),
                (None, Some(p)) => Some(Tokenizer::from_file(&p)?),
                (None, None) => None,
            };
            if prompt.is_some() && tok.is_none() {
                return Err(EngineError::invalid(
                    "--prompt needs --tokenizer FILE or a tokenizer.json in --model",
                ));
            }
            let (cfg, w) = load(&model)?;
            let prompt_ids = match (&prompt, &tok) {
                (Some(text), Some(t)) => t.encode(text, cfg.vocab)?,
                _ => {
                    gapscope_engine::rng::tokens(model.seed, 7, random_prompt_len.max(1), cfg.vocab)
                }
            };
            if prompt_ids.is_empty() {
                return Err(EngineError::invalid("the prompt encodes to no tokens"));
            }
            let out = generate(&cfg, &w, &prompt_ids, max_new.max(1), backend, &levers)?;
            println!("prompt ids    {prompt_ids:?}");
            println!("generated ids {out:?}");
            println!("md5 {}", bench::md5_hex(&out));
            if let Some(t) = &tok {
                println!("text {:?}", t.decode(&out)?);
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Logits {
            model,
            tokens,
            out,
            backend,
            device,
            numerics,
        } => {
            // Before loading: a quantized model is refused without reading its weights.
            if numerics == Numerics::HfBf16
                && WeightFormat::parse(&model.weights) != Some(WeightFormat::Bf16)
            {
                return Err(EngineError::invalid(format!(
                    "--numerics hf-bf16 reproduces HF's bf16 forward and needs --weights bf16, not {}",
                    model.weights
                )));
            }
            let (cfg, w) = load(&model)?;
            let (prompt_len, toks) = read_tokens(&tokens)?;
            let rows = logits(&cfg, &w, prompt_len, &toks, backend, device, numerics)?;
            let bytes: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
            std::fs::write(&out, bytes).map_err(|e| EngineError::io(&out, e))?;
            println!(
                "wrote {} rows of {} logits ({} numerics) to {}",
                rows.len() / cfg.vocab,
                cfg.vocab,
                numerics.name(),
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Rejects run shapes that cannot run, before any weights are loaded or a device is opened.
fn check_shape(npl: &[usize], npp: usize, ntg: usize, reps: usize) -> Result<()> {
    if npl.is_empty() || npl.contains(&0) {
        return Err(EngineError::invalid(
            "--npl needs one or more sequence counts, each at least 1",
        ));
    }
    for (name, v) in [("--npp", npp), ("--ntg", ntg), ("--reps", reps)] {
        if v == 0 {
            return Err(EngineError::invalid(format!("{name} must be at least 1")));
        }
    }
    if npp + ntg + 1 > 16 * 1024 {
        return Err(EngineError::invalid(format!(
            "--npp {npp} + --ntg {ntg} exceeds the 16384-token context the attention kernel supports"
        )));
    }
    Ok(())
}

fn open_tokenizer(model: &ModelArgs, explicit: &Option<PathBuf>) -> Result<Tokenizer> {
    match (explicit, model.model.as_deref().and_then(Tokenizer::find)) {
        (Some(p), _) => Tokenizer::from_file(p),
        (None, Some(p)) => Tokenizer::from_file(&p),
        (None, None) => Err(EngineError::invalid(
            "--prompt needs --tokenizer FILE or a tokenizer.json in --model",
        )),
    }
}

/// Greedy decoding: a prefill of the prompt, then one decode step per new token.
fn generate(
    cfg: &ModelConfig,
    w: &ModelWeights,
    prompt: &[i32],
    max_new: usize,
    backend: BackendKind,
    levers: &LeverArgs,
) -> Result<Vec<i32>> {
    let mut out = Vec::with_capacity(max_new);
    let pl = prompt.len();
    match backend {
        BackendKind::Cpu => {
            let mut be = CpuBackend::new(cfg, w);
            let b = Batch::prefill(&[prompt.to_vec()]);
            be.begin(&b)?;
            forward(&mut be, cfg, &b)?;
            out.push(be.sampled[0]);
            for i in 1..max_new {
                let b = Batch::decode(vec![out[i - 1]], vec![(pl + i - 1) as i32]);
                be.begin(&b)?;
                forward(&mut be, cfg, &b)?;
                out.push(be.sampled[0]);
            }
        }
        BackendKind::Cuda => {
            let dev = open_device(levers.device)?;
            let cap = Capacity {
                max_seqs: 1,
                max_ctx: pl + max_new + 1,
                max_rows: pl,
            };
            let mut be = CudaBackend::new(dev, cfg, w, levers_of(levers), cap, Timing::Off)?;
            let b = Batch::prefill(&[prompt.to_vec()]);
            be.set_tokens(&b.tokens)?;
            be.step(&b, Phase::Prefill, 0)?;
            out.push(be.read_sampled(1)?[0]);
            for i in 1..max_new {
                // The sampled token is already the next input on the device.
                let b = Batch::decode(vec![out[i - 1]], vec![(pl + i - 1) as i32]);
                be.step(&b, Phase::Decode, i as i64)?;
                out.push(be.read_sampled(1)?[0]);
            }
            be.finish_steps()?;
        }
    }
    Ok(out)
}

fn read_tokens(p: &Path) -> Result<(usize, Vec<i32>)> {
    let text = std::fs::read_to_string(p).map_err(|e| EngineError::io(p, e))?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| EngineError::invalid(format!("{}: {e}", p.display())))?;
    let pl = v["prompt_len"]
        .as_u64()
        .ok_or_else(|| EngineError::invalid(format!("{}: no prompt_len", p.display())))?
        as usize;
    let toks: Vec<i32> = v["tokens"]
        .as_array()
        .ok_or_else(|| EngineError::invalid(format!("{}: no tokens array", p.display())))?
        .iter()
        .map(|t| t.as_i64().map(|x| x as i32))
        .collect::<Option<_>>()
        .ok_or_else(|| EngineError::invalid(format!("{}: tokens must be integers", p.display())))?;
    if pl == 0 || pl >= toks.len() {
        return Err(EngineError::invalid(format!(
            "{}: prompt_len {pl} must be in 1..{}",
            p.display(),
            toks.len()
        )));
    }
    Ok((pl, toks))
}

fn logits(
    cfg: &ModelConfig,
    w: &ModelWeights,
    pl: usize,
    toks: &[i32],
    backend: BackendKind,
    device: usize,
    numerics: Numerics,
) -> Result<Vec<f32>> {
    let n_rows = toks.len() - pl;
    let mut out = Vec::with_capacity(n_rows * cfg.vocab);
    match backend {
        BackendKind::Cpu => {
            let mut be = CpuBackend::with_numerics(cfg, w, numerics);
            for i in 0..n_rows {
                let b = if i == 0 {
                    Batch::prefill(&[toks[..pl].to_vec()])
                } else {
                    Batch::decode(vec![toks[pl + i - 1]], vec![(pl + i - 1) as i32])
                };
                be.begin(&b)?;
                forward(&mut be, cfg, &b)?;
                out.extend_from_slice(be.logits());
            }
        }
        BackendKind::Cuda => {
            let dev = open_device(device)?;
            let cap = Capacity {
                max_seqs: 1,
                max_ctx: toks.len() + 1,
                max_rows: pl,
            };
            let mut be = CudaBackend::new(dev, cfg, w, Levers::default(), cap, Timing::Off)?;
            be.set_numerics(numerics)?;
            for i in 0..n_rows {
                let (b, phase) = if i == 0 {
                    (Batch::prefill(&[toks[..pl].to_vec()]), Phase::Prefill)
                } else {
                    (
                        Batch::decode(vec![toks[pl + i - 1]], vec![(pl + i - 1) as i32]),
                        Phase::Decode,
                    )
                };
                be.set_tokens(&b.tokens)?;
                be.step(&b, phase, i as i64)?;
                out.extend(be.read_logits()?);
            }
        }
    }
    Ok(out)
}

/// The environment variables `gapscope-engine` reads, each named once (the library reads none).
struct EnvVars;

impl EnvVars {
    /// Directory of the on-disk NVRTC cache (default: `$XDG_CACHE_HOME/gapscope/kernels`, else
    /// `$HOME/.cache/gapscope/kernels`, else the system temp directory).
    const GAPSCOPE_KERNEL_CACHE: &str = "GAPSCOPE_KERNEL_CACHE";
    /// A directory whose `{module}.cu` / `common.cuh` replace the built-in kernel sources
    /// (kernel A/B runs without a rebuild).
    const GAPSCOPE_KERNEL_DIR: &str = "GAPSCOPE_KERNEL_DIR";
    /// Base of the default kernel cache.
    const XDG_CACHE_HOME: &str = "XDG_CACHE_HOME";
    /// Base of the default kernel cache when `XDG_CACHE_HOME` is unset.
    const HOME: &str = "HOME";
}

/// The kernel sources and cache this run uses, from the environment.
#[expect(
    clippy::disallowed_methods,
    reason = "the binary reads its environment and hands the library typed settings"
)]
fn kernel_source() -> KernelSource {
    let var = |k: &str| std::env::var_os(k).map(PathBuf::from);
    KernelSource {
        dir: var(EnvVars::GAPSCOPE_KERNEL_DIR),
        cache: Some(var(EnvVars::GAPSCOPE_KERNEL_CACHE).unwrap_or_else(|| {
            KernelSource::default_cache(var(EnvVars::XDG_CACHE_HOME), var(EnvVars::HOME))
        })),
    }
}

/// Opens GPU `ordinal` with the kernel source of `kernel_source()`, naming any module read from
/// `GAPSCOPE_KERNEL_DIR`.
fn open_device(ordinal: usize) -> Result<Device> {
    let source = kernel_source();
    let dev = Device::open_with(ordinal, &source)?;
    if let Some(dir) = &source.dir {
        for m in &dev.modules_from_dir {
            eprintln!("kernels: {m} from {}", dir.display());
        }
    }
    Ok(dev)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("gapscope-engine: {e}");
            ExitCode::from(2)
        }
    }
}

/// `--numerics`: the library's names, listed in `--help`.
fn numerics_parser() -> impl TypedValueParser<Value = Numerics> {
    clap::builder::PossibleValuesParser::new(Numerics::ALL.map(Numerics::name))
        .try_map(|s| s.parse::<Numerics>())
}

/// `--dispatch KEY=VALUE,...`: the library's overrides on the default policy.
fn dispatch_parser() -> impl TypedValueParser<Value = DispatchPolicy> {
    clap::builder::StringValueParser::new().try_map(|s| s.parse::<DispatchPolicy>())
}
