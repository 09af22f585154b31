//! One decode loop for both backends: `generate` and `logits` drive a `Decoder`, which the CPU
//! reference and the CUDA backend each implement once.

use crate::args::BackendKind;
use crate::env::open_device;
use gapscope_engine::cpu::CpuBackend;
use gapscope_engine::cuda::{Capacity, CudaBackend, Timing};
use gapscope_engine::dispatch::Levers;
use gapscope_engine::model::{Backend, Batch, forward};
use gapscope_engine::{ModelConfig, ModelWeights, Numerics, Result};
use gapscope_traces::Phase;

/// A backend that runs one batch at a time and reports the first sequence's results.
pub trait Decoder {
    /// Runs `batch` as step `step`. `upload_tokens` false: the batch's input tokens are the
    /// previous step's sampled tokens, which the CUDA backend already holds on the device.
    fn run_batch(
        &mut self,
        batch: &Batch,
        phase: Phase,
        step: i64,
        upload_tokens: bool,
    ) -> Result<()>;
    /// The first sequence's greedy token of the last batch.
    fn sampled(&mut self) -> Result<i32>;
    /// The logits of the last batch, `[logit_rows, vocab]`.
    fn logits(&mut self) -> Result<Vec<f32>>;
    /// Opened with `capture_hidden`: per decoder layer, the residual stream after it at the
    /// last batch's logit rows (`[logit_rows, hidden]` each); `None` otherwise.
    fn hidden(&mut self) -> Result<Option<Vec<Vec<f32>>>>;
    /// Waits for every step to complete (and their records to be taken).
    fn finish(&mut self) -> Result<()>;
}

/// The CPU reference with the config its forward needs.
pub struct Cpu<'w> {
    be: CpuBackend<'w>,
    cfg: &'w ModelConfig,
}

impl Decoder for Cpu<'_> {
    fn run_batch(&mut self, batch: &Batch, _: Phase, _: i64, _: bool) -> Result<()> {
        self.be.begin(batch)?;
        forward(&mut self.be, self.cfg, batch)
    }

    fn sampled(&mut self) -> Result<i32> {
        Ok(self.be.sampled[0])
    }

    fn logits(&mut self) -> Result<Vec<f32>> {
        Ok(self.be.logits().to_vec())
    }

    fn hidden(&mut self) -> Result<Option<Vec<Vec<f32>>>> {
        Ok(self.be.hidden().map(<[Vec<f32>]>::to_vec))
    }

    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}

impl Decoder for CudaBackend {
    fn run_batch(
        &mut self,
        batch: &Batch,
        phase: Phase,
        step: i64,
        upload_tokens: bool,
    ) -> Result<()> {
        if upload_tokens {
            self.set_tokens(&batch.tokens)?;
        }
        self.step(batch, phase, step)
    }

    fn sampled(&mut self) -> Result<i32> {
        Ok(self.read_sampled(1)?[0])
    }

    fn logits(&mut self) -> Result<Vec<f32>> {
        self.read_logits()
    }

    fn hidden(&mut self) -> Result<Option<Vec<Vec<f32>>>> {
        self.read_hidden()
    }

    fn finish(&mut self) -> Result<()> {
        self.finish_steps()
    }
}

/// What a one-sequence decoder is opened with.
pub struct Open<'w> {
    pub cfg: &'w ModelConfig,
    pub w: &'w ModelWeights,
    pub backend: BackendKind,
    /// Where activations are rounded; `None`: the engine's, left as the backend starts.
    pub numerics: Option<Numerics>,
    /// CUDA only.
    pub levers: Levers,
    pub device: usize,
    /// KV positions (CUDA: the capacity of one sequence).
    pub max_ctx: usize,
    /// Rows of the largest batch, the prefill's.
    pub max_rows: usize,
    /// Capture each layer's output (the residual stream) at the logit rows for `hidden`.
    pub capture_hidden: bool,
}

/// A decoder for one sequence on the chosen backend.
pub fn open<'w>(o: Open<'w>) -> Result<Box<dyn Decoder + 'w>> {
    Ok(match o.backend {
        BackendKind::Cpu => {
            let mut be = CpuBackend::with_numerics(o.cfg, o.w, o.numerics.unwrap_or_default());
            be.set_capture_hidden(o.capture_hidden);
            Box::new(Cpu { be, cfg: o.cfg })
        }
        BackendKind::Cuda => {
            let dev = open_device(o.device)?;
            let cap = Capacity {
                max_seqs: 1,
                max_ctx: o.max_ctx,
                max_rows: o.max_rows,
            };
            let mut be = CudaBackend::new(dev, o.cfg, o.w, o.levers, cap, Timing::Off)?;
            if let Some(n) = o.numerics {
                be.set_numerics(n)?;
            }
            be.set_capture_hidden(o.capture_hidden)?;
            Box::new(be)
        }
    })
}
