//! `gapscope-engine`: the instrumented decode engine's command line.
//!
//! - `bench`: llama-batched-bench-style sweep; prints a table, writes a native trace (`-o`).
//! - `levers`: runs every lever setting and checks that the greedy md5 never changes.
//! - `selftest`: every kernel and whole-model logits against the CPU reference.
//! - `kbench`: single-kernel bandwidth and MMQ-vs-MMVQ figures.
//! - `calibrate`: the GPU's measured ceilings, as a `gapscope roofline --hw-profile` file.
//! - `logits`: teacher-forced logits for comparison with HF transformers.
//! - `generate`: greedy generation from a prompt (text with a tokenizer, or random ids).
//! - `spec`: self-speculative decoding settings beside plain decode; a table, JSON, traces.
//!
//! Errors print as one line, `gapscope-engine: error: ...` with their causes, and exit 2; a
//! check that fails (`levers`, `selftest`) exits 1.

mod args;
mod bench;
mod calibrate;
mod decoder;
mod env;
mod generate;
mod kbench;
mod levers;
mod logits;
mod selftest;
mod spec;
mod sweep;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

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

#[derive(Subcommand)]
enum Cmd {
    /// Batched decode benchmark: prompt of npp tokens, prefill, ntg decode steps, per npl.
    Bench(bench::BenchArgs),
    /// Greedy generation from a prompt: prints the token ids, their md5 and, with a tokenizer,
    /// the text.
    Generate(generate::GenerateArgs),
    /// Runs every lever combination on the same prompts and checks the greedy md5 is identical.
    Levers(levers::LeversArgs),
    /// Checks every kernel and whole-model logits against the CPU reference.
    Selftest(selftest::SelftestArgs),
    /// Single-kernel bandwidth against the measured copy bandwidth.
    Kbench(kbench::KbenchArgs),
    /// Measures the GPU's ceilings (copy bandwidth, cuBLAS bf16 and int8 GEMM throughput) and
    /// writes the profile `gapscope roofline --hw-profile FILE` reads.
    Calibrate(calibrate::CalibrateArgs),
    /// Teacher-forced logits over a token file ({"prompt_len": P, "tokens": [...]}): a prefill
    /// of the prompt, then one decode step per remaining token; raw f32 rows to --out.
    Logits(logits::LogitsArgs),
    /// Self-speculative decoding (the model's first layers draft k tokens, the whole model
    /// verifies them) on one sequence, setting by setting, beside plain greedy decode.
    Spec(spec::SpecArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().cmd {
        Cmd::Bench(a) => bench::run(a),
        Cmd::Generate(a) => generate::run(a),
        Cmd::Levers(a) => levers::run(a),
        Cmd::Selftest(a) => selftest::run(a),
        Cmd::Kbench(a) => kbench::run(a),
        Cmd::Calibrate(a) => calibrate::run(a),
        Cmd::Logits(a) => logits::run(a),
        Cmd::Spec(a) => spec::run(a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("gapscope-engine: error: {}", error_line(&e));
            ExitCode::from(2)
        }
    }
}

/// The error and its causes on one line (each cause once: many messages already quote their
/// source).
fn error_line(e: &(dyn std::error::Error + 'static)) -> String {
    let mut msg = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let c_msg = c.to_string();
        if !msg.contains(&c_msg) {
            msg.push_str(": ");
            msg.push_str(&c_msg);
        }
        cause = c.source();
    }
    msg.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::error_line;
    use gapscope_engine::EngineError;

    #[test]
    fn an_error_is_one_line_with_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = EngineError::io("/x/config.json", io);
        assert_eq!(error_line(&e), "/x/config.json: no such file");
        let e = EngineError::invalid("two\nlines");
        assert_eq!(error_line(&e), "two lines");
    }
}
