//! Whole-model logits: the CUDA backend against the CPU reference on tiny configs, for a
//! prefill of two sequences and three decode steps, per weight format and per lever setting
//! (`lever_matrix::selftest_levers`), then under the hf-bf16 numerics.

use super::{Check, OpenDevice, TOL_BF16, TOL_Q4_MODEL, TOL_Q8_MODEL, rel_err};
use crate::Numerics;
use crate::config::ModelConfig;
use crate::cpu::CpuBackend;
use crate::cuda::{Capacity, CudaBackend, Timing};
use crate::dispatch::Levers;
use crate::error::{EngineError, Result};
use crate::lever_matrix;
use crate::model::{Backend, Batch, forward};
use crate::quant::WeightFormat;
use crate::rng;
use crate::weights::ModelWeights;
use gapscope_traces::Phase;

/// Llama, Qwen2 (q/k/v bias) and Qwen3 (q/k norms, tied embeddings), each under the engine
/// numerics and then the hf-bf16 ones.
pub(super) fn checks(seed: u64, open: OpenDevice<'_>) -> Result<Vec<Check>> {
    let mut out = Vec::new();
    for (mt, tied) in [("llama", false), ("qwen2", false), ("qwen3", true)] {
        let cfg = ModelConfig::from_json(&serde_json::json!({
            "model_type": mt, "hidden_size": 256, "intermediate_size": 512,
            "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 2,
            "head_dim": 64, "vocab_size": 1000, "rms_norm_eps": 1e-6, "tie_word_embeddings": tied
        }))
        .map_err(EngineError::Invalid)?;
        engine_numerics(&cfg, mt, seed, open, &mut out)?;
        hf_numerics(&cfg, mt, seed, open, &mut out)?;
    }
    Ok(out)
}

/// Every weight format under every selftest lever setting.
fn engine_numerics(
    cfg: &ModelConfig,
    mt: &str,
    seed: u64,
    open: OpenDevice<'_>,
    out: &mut Vec<Check>,
) -> Result<()> {
    for fmt in [WeightFormat::Bf16, WeightFormat::Q8_0, WeightFormat::Q4_0] {
        let w = ModelWeights::random(cfg, fmt, seed);
        for levers in lever_matrix::selftest_levers() {
            let name = format!(
                "model {mt} {} kv={} graphs={} mmvq_max_batch={} pdl={} fusion={}",
                fmt.name(),
                kv_name(levers),
                levers.graphs,
                levers.dispatch.mmvq_max_batch,
                levers.pdl,
                levers.fusion,
            );
            out.push(engine_check(
                cfg,
                &w,
                Run::engine(levers, 2),
                seed,
                open,
                name,
            )?);
        }
    }
    Ok(())
}

/// The hybrid model (Qwen3.5-shaped: DeltaNet and full-attention layers alternating, partial
/// RoPE, gated attention output) under the hybrid lever settings, bf16 and Q8_0.
pub(super) fn hybrid_checks(seed: u64, open: OpenDevice<'_>) -> Result<Vec<Check>> {
    let cfg = ModelConfig::from_json(&serde_json::json!({
        "model_type": "qwen3_5_text", "hidden_size": 256, "intermediate_size": 512,
        "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "vocab_size": 1000, "rms_norm_eps": 1e-6, "tie_word_embeddings": false,
        "full_attention_interval": 2, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
        "linear_key_head_dim": 64, "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4,
        "partial_rotary_factor": 0.25
    }))
    .map_err(EngineError::Invalid)?;
    let mut out = Vec::new();
    for fmt in [WeightFormat::Bf16, WeightFormat::Q8_0] {
        let w = ModelWeights::random(&cfg, fmt, seed);
        // Two sequences, and one (the batch-1 decode paths: the fused norm, the b1 GEMV).
        for (levers, seqs) in lever_matrix::selftest_hybrid_levers()
            .into_iter()
            .map(|l| (l, 2))
            .chain([
                (Levers::default(), 1),
                (
                    Levers::default().with_hybrid(crate::dispatch::HybridLevers::SLOW),
                    1,
                ),
            ])
        {
            let h = levers.hybrid;
            let name = format!(
                "model hybrid {} seqs={seqs} kv={} graphs={} state_update={} state_read={} out_proj={}",
                fmt.name(),
                kv_name(levers),
                levers.graphs,
                h.state_update.name(),
                h.state_read.name(),
                h.out_proj.name(),
            );
            out.push(engine_check(
                &cfg,
                &w,
                Run::engine(levers, seqs),
                seed,
                open,
                name,
            )?);
        }
    }
    Ok(out)
}

fn kv_name(levers: Levers) -> &'static str {
    if levers.paged_kv {
        "paged"
    } else {
        "contiguous"
    }
}

/// One engine-numerics run against the CPU reference, as the check `{name} logits` with the
/// weight format's tolerance.
fn engine_check(
    cfg: &ModelConfig,
    w: &ModelWeights,
    run: Run,
    seed: u64,
    open: OpenDevice<'_>,
    name: String,
) -> Result<Check> {
    let (worst, same_tokens, _) = model_run(cfg, w, run, seed, open)?;
    let tol = match w.format {
        WeightFormat::Q4_0 => TOL_Q4_MODEL,
        WeightFormat::Q8_0 => TOL_Q8_MODEL,
        WeightFormat::Bf16 => TOL_BF16,
    };
    Ok(Check {
        name: format!(
            "{name} logits{}",
            if same_tokens {
                ""
            } else {
                " (greedy tokens differ)"
            }
        ),
        rel_err: worst,
        tolerance: tol,
        pass: worst <= tol,
    })
}

/// HF numerics (bf16 weights): the GPU's hf_numerics kernels against the CPU's hf_ops, with and
/// without graphs, paged and contiguous. Same greedy tokens required; the share of
/// bit-identical logits is reported.
fn hf_numerics(
    cfg: &ModelConfig,
    mt: &str,
    seed: u64,
    open: OpenDevice<'_>,
    out: &mut Vec<Check>,
) -> Result<()> {
    let w = ModelWeights::random(cfg, WeightFormat::Bf16, seed);
    for levers in lever_matrix::selftest_hf_levers() {
        let (worst, same_tokens, exact) = model_run(
            cfg,
            &w,
            Run {
                levers,
                timing: Timing::Off,
                numerics: Numerics::HfBf16,
                seqs: 2,
            },
            seed,
            open,
        )?;
        out.push(Check {
            name: format!(
                "model {mt} bf16 numerics=hf-bf16 kv={} graphs={} logits ({:.1}% bit-identical{})",
                kv_name(levers),
                levers.graphs,
                100.0 * exact,
                if same_tokens {
                    ""
                } else {
                    ", greedy tokens differ"
                }
            ),
            rel_err: worst,
            tolerance: TOL_BF16,
            pass: worst <= TOL_BF16 && same_tokens,
        });
    }
    Ok(())
}

/// A prefill of two 5-token prompts and three decode steps on the GPU and on the CPU
/// reference with the same numerics: (worst logit rel-error, same greedy tokens, share of
/// bit-identical logits).
/// How one whole-model run is set up.
#[derive(Clone, Copy)]
struct Run {
    levers: Levers,
    timing: Timing,
    numerics: Numerics,
    /// Sequences in the batch (2; 1 runs the batch-1 decode paths).
    seqs: usize,
}

impl Run {
    /// Under the engine numerics; a setting with PDL runs untimed so programmatic dependent
    /// launch is live (launch timing turns it off).
    fn engine(levers: Levers, seqs: usize) -> Self {
        Self {
            levers,
            timing: if levers.pdl {
                Timing::Off
            } else {
                Timing::Launch
            },
            numerics: Numerics::Engine,
            seqs,
        }
    }
}

fn model_run(
    cfg: &ModelConfig,
    w: &ModelWeights,
    run: Run,
    seed: u64,
    open: OpenDevice<'_>,
) -> Result<(f64, bool, f64)> {
    let Run {
        levers,
        timing,
        numerics,
        seqs,
    } = run;
    let dev = open()?;
    let cap = Capacity {
        max_seqs: 4,
        max_ctx: 64,
        max_rows: 16,
    };
    let mut gpu = CudaBackend::new(dev, cfg, w, levers, cap, timing)?;
    gpu.set_numerics(numerics)?;
    gpu.rec.start_run()?;
    let mut cpu = CpuBackend::with_numerics(cfg, w, numerics);
    let prompts: Vec<Vec<i32>> = (0..seqs as u64)
        .map(|s| rng::tokens(seed, 11 + s, 5, cfg.vocab))
        .collect();
    let (mut same, mut total) = (0usize, 0usize);
    let mut tally = |g: &[f32], c: &[f32]| {
        same += g.iter().zip(c).filter(|(a, b)| a == b).count();
        total += c.len();
        rel_err(g, c)
    };
    let pre = Batch::prefill(&prompts);
    gpu.set_tokens(&pre.tokens)?;
    gpu.step(&pre, Phase::Prefill, 0)?;
    cpu.begin(&pre)?;
    forward(&mut cpu, cfg, &pre)?;
    let mut worst = tally(&gpu.read_logits()?, cpu.logits());
    let mut same_tokens = gpu.read_sampled(seqs)? == cpu.sampled;
    for i in 0..3 {
        let toks = cpu.sampled.clone();
        let b = Batch::decode(toks.clone(), vec![5 + i; seqs]);
        gpu.set_tokens(&toks)?;
        gpu.step(&b, Phase::Decode, 1 + i as i64)?;
        gpu.finish_steps()?;
        cpu.begin(&b)?;
        forward(&mut cpu, cfg, &b)?;
        worst = worst.max(tally(&gpu.read_logits()?, cpu.logits()));
        same_tokens &= gpu.read_sampled(seqs)? == cpu.sampled;
    }
    Ok((worst, same_tokens, same as f64 / total.max(1) as f64))
}
