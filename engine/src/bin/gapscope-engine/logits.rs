//! `gapscope-engine logits`: teacher-forced logits over a token file, for comparison with HF
//! transformers: a prefill of the prompt, then one decode step per remaining token. `--out`
//! ending in `.safetensors` gets a dump `gapscope numerics` compares (docs/NUMERICS.md: the
//! rows from the prompt's last token on, with their tokens, and with `--hidden` the residual
//! stream after every decoder layer); any other name raw little-endian f32 rows.

use crate::args::{BackendKind, ModelArgs, load, numerics_parser};
use crate::decoder::{self, Decoder};
use gapscope_engine::dispatch::Levers;
use gapscope_engine::model::Batch;
use gapscope_engine::{EngineError, Numerics, Result, WeightFormat};
use gapscope_traces::Phase;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct LogitsArgs {
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
    /// Also dump the hidden states: `hidden.N` `[rows, hidden]` float32, the residual stream
    /// after decoder layer N (before the final norm), at the same rows as the logits, for
    /// `gapscope numerics`' layer-by-layer comparison. Needs a `.safetensors` `--out`.
    #[arg(long)]
    hidden: bool,
}

pub fn run(a: LogitsArgs) -> Result<ExitCode> {
    // Before loading: a quantized model is refused without reading its weights.
    if a.numerics == Numerics::HfBf16
        && WeightFormat::parse(&a.model.weights) != Some(WeightFormat::Bf16)
    {
        return Err(EngineError::invalid(format!(
            "--numerics hf-bf16 reproduces HF's bf16 forward and needs --weights bf16, not {}",
            a.model.weights
        )));
    }
    let dump = a.out.extension().is_some_and(|e| e == "safetensors");
    if a.hidden && !dump {
        return Err(EngineError::invalid(format!(
            "--hidden writes hidden.N tensors into a numerics dump: --out must end in .safetensors, not {}",
            a.out.display()
        )));
    }
    let (cfg, w) = load(&a.model)?;
    let (pl, toks) = read_tokens(&a.tokens)?;
    let mut dec = decoder::open(decoder::Open {
        cfg: &cfg,
        w: &w,
        backend: a.backend,
        numerics: Some(a.numerics),
        levers: Levers::default(),
        device: a.device,
        max_ctx: toks.len() + 1,
        max_rows: pl,
        capture_hidden: a.hidden,
    })?;
    let TeacherForced {
        logits: rows,
        hidden,
    } = teacher_forced(dec.as_mut(), pl, &toks, dump)?;
    let bytes: Vec<u8> = if dump {
        // Row k is position pl - 1 + k: the prompt's last token, then every later one.
        let tokens: Vec<i64> = toks[pl - 1..].iter().map(|&t| i64::from(t)).collect();
        let backend = match a.backend {
            BackendKind::Cuda => "cuda",
            BackendKind::Cpu => "cpu",
        };
        let engine = format!("gapscope-engine {backend} ({} numerics)", a.numerics.name());
        let model = a
            .model
            .model
            .as_ref()
            .or(a.model.config.as_ref())
            .map_or_else(String::new, |p| p.display().to_string());
        gapscope_numerics::write::encode(&gapscope_numerics::write::DumpData {
            meta: &[
                ("engine", &engine),
                ("model", &model),
                ("dtype", &a.model.weights),
            ],
            passages: 1,
            tokens: &tokens,
            logits: &rows,
            vocab: cfg.vocab,
            hidden: &hidden,
            hidden_size: cfg.hidden,
            dtype: gapscope_numerics::dtype::DType::F32,
        })
    } else {
        rows.iter().flat_map(|v| v.to_le_bytes()).collect()
    };
    // One checked writer: no symbolic link, no non-regular file, nothing half-written.
    gapscope_traces::write_output(&a.out, &[], &bytes)?;
    let layers = if hidden.is_empty() {
        String::new()
    } else {
        format!(" and {} layers' hidden states", hidden.len())
    };
    println!(
        "wrote {} rows of {} logits{layers} ({} numerics) to {}",
        rows.len() / cfg.vocab,
        cfg.vocab,
        a.numerics.name(),
        a.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// What a teacher-forced run gives, row k at position pl - 1 + k.
struct TeacherForced {
    /// `[rows, vocab]`.
    logits: Vec<f32>,
    /// Per decoder layer, `[rows, hidden]`; empty unless the decoder captures hidden states.
    hidden: Vec<Vec<f32>>,
}

/// The logits after the prompt (a prefill of its `pl` tokens), then after each later token
/// (one decode step each, fed the file's token, not the sampled one); with `last`, after
/// the file's last token too (a dump has a row per token). Each step's hidden states, when
/// the decoder captures them, at the same rows.
fn teacher_forced(
    dec: &mut dyn Decoder,
    pl: usize,
    toks: &[i32],
    last: bool,
) -> Result<TeacherForced> {
    let mut out = Vec::new();
    let mut hidden: Vec<Vec<f32>> = Vec::new();
    for i in 0..toks.len() - pl + usize::from(last) {
        let (b, phase) = if i == 0 {
            (Batch::prefill(&[toks[..pl].to_vec()]), Phase::Prefill)
        } else {
            (
                Batch::decode(vec![toks[pl + i - 1]], vec![(pl + i - 1) as i32]),
                Phase::Decode,
            )
        };
        dec.run_batch(&b, phase, i as i64, true)?;
        out.extend(dec.logits()?);
        if let Some(layers) = dec.hidden()? {
            hidden.resize(layers.len(), Vec::new());
            for (all, step) in hidden.iter_mut().zip(layers) {
                all.extend(step);
            }
        }
    }
    Ok(TeacherForced {
        logits: out,
        hidden,
    })
}

/// `{"prompt_len": P, "tokens": [...]}`, with P in 1..len(tokens).
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
