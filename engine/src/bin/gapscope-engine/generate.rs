//! `gapscope-engine generate`: greedy generation from a prompt (text with a tokenizer, or
//! seeded random ids); prints the ids, their md5 and, with a tokenizer, the text.

use crate::args::{BackendKind, LeverArgs, ModelArgs, find_tokenizer, load, no_tokenizer};
use crate::decoder::{self, Decoder};
use gapscope_engine::bench::md5_hex;
use gapscope_engine::model::Batch;
use gapscope_engine::{EngineError, Result};
use gapscope_traces::Phase;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct GenerateArgs {
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
}

pub fn run(a: GenerateArgs) -> Result<ExitCode> {
    let tok = find_tokenizer(&a.model, &a.tokenizer)?;
    if a.prompt.is_some() && tok.is_none() {
        return Err(no_tokenizer());
    }
    let (cfg, w) = load(&a.model)?;
    let prompt_ids = match (&a.prompt, &tok) {
        (Some(text), Some(t)) => t.encode(text, cfg.vocab)?,
        _ => gapscope_engine::rng::tokens(a.model.seed, 7, a.random_prompt_len.max(1), cfg.vocab),
    };
    if prompt_ids.is_empty() {
        return Err(EngineError::invalid("the prompt encodes to no tokens"));
    }
    let max_new = a.max_new.max(1);
    let mut dec = decoder::open(decoder::Open {
        cfg: &cfg,
        w: &w,
        backend: a.backend,
        numerics: None,
        levers: a.levers.levers()?,
        device: a.levers.device,
        max_ctx: prompt_ids.len() + max_new + 1,
        max_rows: prompt_ids.len(),
        capture_hidden: false,
    })?;
    let out = greedy(dec.as_mut(), &prompt_ids, max_new)?;
    println!("prompt ids    {prompt_ids:?}");
    println!("generated ids {out:?}");
    println!("md5 {}", md5_hex(&out));
    if let Some(t) = &tok {
        println!("text {:?}", t.decode(&out)?);
    }
    Ok(ExitCode::SUCCESS)
}

/// Greedy decoding: a prefill of the prompt, then one decode step per new token.
fn greedy(dec: &mut dyn Decoder, prompt: &[i32], max_new: usize) -> Result<Vec<i32>> {
    let mut out = Vec::with_capacity(max_new);
    let pl = prompt.len();
    dec.run_batch(&Batch::prefill(&[prompt.to_vec()]), Phase::Prefill, 0, true)?;
    out.push(dec.sampled()?);
    for i in 1..max_new {
        // The sampled token is already the next input on the device.
        let b = Batch::decode(vec![out[i - 1]], vec![(pl + i - 1) as i32]);
        dec.run_batch(&b, Phase::Decode, i as i64, false)?;
        out.push(dec.sampled()?);
    }
    dec.finish()?;
    Ok(out)
}
