//! Timed runs on the CUDA backend: repeats of plain greedy decode and of a speculative
//! setting on the same prompt, each a prefill then decode steps timed with CUDA events, and
//! the step records of each repeat (for a trace).

use super::cuda::CudaSpec;
use super::report::Rep;
use super::{SpecSettings, decode, trace};
use crate::bench::run_once;
use crate::cuda::CudaBackend;
use crate::error::Result;
use crate::records::StepRecord;

/// What a run decodes.
#[derive(Debug, Clone, Copy)]
pub enum Mode<'s> {
    Plain,
    Spec(&'s SpecSettings),
}

/// One repeat of `mode` on `prompt` with steps numbered from `step0`; its step records
/// (speculative verifies with the tokens their step produced).
pub fn run_rep(
    be: &mut CudaBackend,
    mode: Mode,
    prompt: &[i32],
    ntg: usize,
    step0: i64,
) -> Result<(Rep, Vec<StepRecord>)> {
    be.rec.done.clear();
    let rep = match mode {
        Mode::Plain => {
            let (_, decode_ms, tokens) = run_once(be, &[prompt.to_vec()], ntg, step0)?;
            Rep {
                decode_ms,
                steps: ntg,
                produced: ntg,
                tokens,
                spec_steps: Vec::new(),
            }
        }
        Mode::Spec(s) => {
            let mut fw = CudaSpec::new(be)?;
            let run = decode(&mut fw, s, prompt, ntg, step0)?;
            let decode_ms = fw.decode_ms()?;
            be.finish_steps()?;
            Rep {
                decode_ms,
                steps: run.steps.len(),
                produced: run.tokens.len() - 1,
                tokens: run.first(ntg).to_vec(),
                spec_steps: run.steps,
            }
        }
    };
    let mut records = std::mem::take(&mut be.rec.done);
    trace::set_verify_tokens(&mut records, &rep.spec_steps)?;
    Ok((rep, records))
}

/// Steps a repeat numbers: the prefill and each decode step.
pub fn steps_used(rep: &Rep) -> i64 {
    1 + rep.steps as i64
}

/// `warmup` untimed then `reps` kept repeats of `mode`, steps numbered on from `*step0`;
/// `progress` hears one line per kept repeat.
pub fn run_reps(
    be: &mut CudaBackend,
    mode: Mode,
    prompt: &[i32],
    ntg: usize,
    (warmup, reps): (usize, usize),
    step0: &mut i64,
    mut progress: impl FnMut(&Rep),
) -> Result<Vec<Rep>> {
    let mut out = Vec::with_capacity(reps);
    for i in 0..warmup + reps {
        let (rep, _) = run_rep(be, mode, prompt, ntg, *step0)?;
        *step0 += steps_used(&rep);
        if i >= warmup {
            progress(&rep);
            out.push(rep);
        }
    }
    Ok(out)
}
