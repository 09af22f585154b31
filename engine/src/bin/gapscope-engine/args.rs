//! Flags several subcommands share (the model, the levers) and what turns them into the
//! library's typed settings.

use clap::ValueEnum;
use clap::builder::TypedValueParser;
use gapscope_engine::dispatch::{
    DispatchPolicy, HybridLevers, Levers, OutProjLayout, StateRead, StateUpdate,
};
use gapscope_engine::tokenizer::Tokenizer;
use gapscope_engine::{EngineError, ModelConfig, ModelWeights, Numerics, Result, WeightFormat};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Clone, Copy, ValueEnum)]
pub enum KvMode {
    Paged,
    Contiguous,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum BackendKind {
    Cuda,
    Cpu,
}

#[derive(clap::Args, Clone)]
pub struct ModelArgs {
    /// HF model directory (config.json + safetensors); its weights are loaded.
    #[arg(long, conflicts_with = "config")]
    pub model: Option<PathBuf>,
    /// HF config.json: run these shapes with seeded random weights.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Use seeded random weights even when --model has safetensors.
    #[arg(long)]
    pub random_weights: bool,
    /// Weight format: bf16, q8_0 or q4_0 (quantized at load time).
    #[arg(long, default_value = "bf16")]
    pub weights: String,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

#[derive(clap::Args, Clone)]
pub struct LeverArgs {
    /// Run decode steps eagerly instead of replaying CUDA graphs.
    #[arg(long)]
    pub no_graphs: bool,
    #[arg(long, value_enum, default_value = "paged")]
    pub kv: KvMode,
    /// Launch kernels without programmatic dependent launch (each waits for the previous one to
    /// finish before it starts).
    #[arg(long)]
    pub no_pdl: bool,
    /// Run RoPE and the KV append as their own kernel at decode instead of inside attention.
    #[arg(long)]
    pub no_fusion: bool,
    /// Kernel-dispatch overrides, `KEY=VALUE,...` on the defaults: `mmvq_max_batch` (largest
    /// batch run as GEMV/MMVQ, 8), `mmq_k_major_max_k` (8192) and `mmq_row_major_batches`
    /// (`LO:HI`, 17:47: MMQ reads row-major activations for K above the first at these
    /// batches), `mmvq_b1_k_split_min_k` (8192) and `mmvq_b1_pair_min_rows_per_k` (2: the
    /// batch-1 Q8_0 entries), `attention_shape` (`KW:SPLITS`, pins decode attention's key
    /// lanes and splits; default: chosen per batch), `bf16_batch1` (`gemv`, or `mma`: one-row
    /// bf16 linears on the multi-row kernel, batch-invariant bits). Every setting gives the
    /// same bits, except `mmvq_max_batch` 0 or above 16 for bf16, an `attention_shape` with
    /// other splits, and `bf16_batch1`.
    #[arg(long, value_name = "KEY=VALUE,...", value_parser = dispatch_parser())]
    pub dispatch: Option<DispatchPolicy>,
    /// Hybrid models: how a DeltaNet layer writes its new recurrent state: in place in the
    /// cache slot, or to scratch and back with a D2D copy (the slow path).
    #[arg(long, default_value = "inplace", value_parser = lever_parser::<StateUpdate>(StateUpdate::NAMES))]
    pub state_update: StateUpdate,
    /// Hybrid models: how the recurrence reads each sequence's state: through the sequence
    /// ids, or from a gather into scratch first (the slow path).
    #[arg(long, default_value = "fused_ids", value_parser = lever_parser::<StateRead>(StateRead::NAMES))]
    pub state_read: StateRead,
    /// Hybrid models: the DeltaNet output projection's activation layout: 2d (one linear over
    /// the batch) or 3d (a batch-1 GEMV per sequence, the slow path).
    #[arg(long, default_value = "2d", value_parser = lever_parser::<OutProjLayout>(OutProjLayout::NAMES))]
    pub out_proj: OutProjLayout,
    #[arg(long, default_value_t = 0)]
    pub device: usize,
}

impl LeverArgs {
    /// The library's levers; GAPSCOPE_ATTENTION_SHAPE pins the attention shape unless
    /// `--dispatch attention_shape=...` does.
    pub fn levers(&self) -> Result<Levers> {
        let mut dispatch = self.dispatch.unwrap_or_default();
        if dispatch.attention_shape.is_none()
            && let Some(v) = crate::env::attention_shape_override()
        {
            dispatch
                .apply(&v)
                .map_err(|e| EngineError::invalid(format!("GAPSCOPE_ATTENTION_SHAPE: {e}")))?;
        }
        Ok(Levers {
            graphs: !self.no_graphs,
            paged_kv: matches!(self.kv, KvMode::Paged),
            dispatch,
            pdl: !self.no_pdl,
            fusion: !self.no_fusion,
            hybrid: HybridLevers {
                state_update: self.state_update,
                state_read: self.state_read,
                out_proj: self.out_proj,
            },
        })
    }
}

/// `--numerics`: the library's names, listed in `--help`.
pub fn numerics_parser() -> impl TypedValueParser<Value = Numerics> {
    clap::builder::PossibleValuesParser::new(Numerics::ALL.map(Numerics::name))
        .try_map(|s| s.parse::<Numerics>())
}

/// A hybrid lever's names (listed in `--help`), parsed by the library.
fn lever_parser<T>(names: &'static [&'static str]) -> impl TypedValueParser<Value = T>
where
    T: std::str::FromStr<Err = String> + Clone + Send + Sync + 'static,
{
    clap::builder::PossibleValuesParser::new(names.iter().copied()).try_map(|s| s.parse::<T>())
}

/// `--dispatch KEY=VALUE,...`: the library's overrides on the default policy.
fn dispatch_parser() -> impl TypedValueParser<Value = DispatchPolicy> {
    clap::builder::StringValueParser::new().try_map(|s| s.parse::<DispatchPolicy>())
}

/// Loads the model `m` names (its weights, or seeded random ones) and says so on stderr.
pub fn load(m: &ModelArgs) -> Result<(ModelConfig, ModelWeights)> {
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

/// The tokenizer `--tokenizer` names, else the model directory's `tokenizer.json`.
pub fn find_tokenizer(model: &ModelArgs, explicit: &Option<PathBuf>) -> Result<Option<Tokenizer>> {
    match (explicit, model.model.as_deref().and_then(Tokenizer::find)) {
        (Some(p), _) => Tokenizer::from_file(p).map(Some),
        (None, Some(p)) => Tokenizer::from_file(&p).map(Some),
        (None, None) => Ok(None),
    }
}

/// The error for a `--prompt` with no tokenizer to read it.
pub fn no_tokenizer() -> EngineError {
    EngineError::invalid("--prompt needs --tokenizer FILE or a tokenizer.json in --model")
}

/// Writes `v` as pretty JSON to `path`, when given.
pub fn write_json(path: &Option<PathBuf>, v: &impl serde::Serialize) -> Result<()> {
    if let Some(p) = path {
        let text =
            serde_json::to_string_pretty(v).map_err(|e| EngineError::invalid(e.to_string()))?;
        gapscope_traces::write_output(p, &[], text.as_bytes())?;
    }
    Ok(())
}

/// Rejects run shapes that cannot run, before any weights are loaded or a device is opened.
pub fn check_shape(npl: &[usize], npp: usize, ntg: usize, reps: usize) -> Result<()> {
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
