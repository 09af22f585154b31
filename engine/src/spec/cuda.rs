//! The CUDA backend's speculative forwards. Drafts chain on the device (each draft's argmax
//! already writes its token as the next input); the candidates collect in a small device
//! buffer that becomes the verify's input, so a step synchronizes once, to read the verify's
//! tokens. Drafts run through `CudaBackend::step_as` with fewer layers (their own CUDA graphs).

use super::trace::{ForwardKind, ForwardMarker};
use super::{Proposal, SpecForwards};
use crate::bench::Span;
use crate::cuda::{Capacity, CudaBackend, DevBuf, StepSpec};
use crate::error::{EngineError, Result};
use crate::model::Batch;

/// The capacity a speculative run needs: the verify's `k + 1` rows each take a logits row and
/// per-row attention scratch, which the backend sizes by sequences; KV positions reach
/// `npp + ntg + k`.
pub fn capacity(k_max: usize, npp: usize, ntg: usize) -> Capacity {
    Capacity {
        max_seqs: k_max + 1,
        max_ctx: npp + ntg + k_max + 1,
        max_rows: npp.max(k_max + 1),
    }
}

/// A speculative run's forwards on `be`.
pub struct CudaSpec<'b> {
    be: &'b mut CudaBackend,
    /// `[t, c1..ck]` of the current step, on the device.
    rows: DevBuf,
    /// Where the pending token sits in the backend's sampled tokens (0 after a prefill, the
    /// accepted count after a verify).
    pending: usize,
    /// Started when the prefill's token is read: the decode's time.
    span: Span,
}

impl<'b> CudaSpec<'b> {
    pub fn new(be: &'b mut CudaBackend) -> Result<Self> {
        let rows = DevBuf::alloc(be.cap.max_seqs * 4)?;
        let span = Span::new(&be.dev)?;
        Ok(Self {
            be,
            rows,
            pending: 0,
            span,
        })
    }

    /// GPU time since the prefill's token was read (waits for the stream).
    pub fn decode_ms(&self) -> Result<f64> {
        self.span.stop_ms(&self.be.dev)
    }

    fn issue(&mut self, batch: &Batch, m: ForwardMarker, layers: usize) -> Result<()> {
        self.be.step_as(
            batch,
            StepSpec {
                phase: m.phase,
                step: m.step,
                marker: m.marker,
                layers,
            },
        )
    }
}

impl SpecForwards for CudaSpec<'_> {
    fn prefill(&mut self, prompt: &[i32], step: i64) -> Result<i32> {
        self.be.reset();
        let b = Batch::prefill(&[prompt.to_vec()]);
        self.be.set_tokens(&b.tokens)?;
        let layers = self.be.cfg.layers;
        self.issue(&b, ForwardKind::Prefill.at(step, prompt.len()), layers)?;
        self.pending = 0;
        let t = self.be.read_sampled(1)?[0];
        self.span.start(&self.be.dev)?;
        Ok(t)
    }

    fn step(
        &mut self,
        token: i32,
        pos: usize,
        k: usize,
        draft_layers: usize,
        step: i64,
    ) -> Result<Proposal> {
        if k + 1 > self.be.cap.max_seqs {
            return Err(EngineError::invalid(format!(
                "k={k} needs a capacity of {} rows; the backend has {}",
                k + 1,
                self.be.cap.max_seqs
            )));
        }
        // The pending token (`token`, already on the device) is the first draft's input and
        // the verify's first row.
        let src = self.be.sampled_ptr() + 4 * self.pending as u64;
        let dev = &self.be.dev;
        dev.memcpy_dtod(self.be.tokens_ptr(), src, 4)?;
        dev.memcpy_dtod(self.rows.ptr, src, 4)?;
        for j in 0..k {
            let b = Batch::decode(vec![token], vec![(pos + j) as i32]);
            self.issue(&b, ForwardKind::Draft.at(step, 1), draft_layers)?;
            let (dst, sampled) = (self.rows.at((j + 1) * 4), self.be.sampled_ptr());
            self.be.dev.memcpy_dtod(dst, sampled, 4)?;
        }
        self.be
            .dev
            .memcpy_dtod(self.be.tokens_ptr(), self.rows.ptr, (k + 1) * 4)?;
        // Host token ids are not read by the CUDA backend (the device buffer is the input).
        let b = Batch {
            tokens: vec![token; k + 1],
            seq: vec![0; k + 1],
            pos: (pos..=pos + k).map(|p| p as i32).collect(),
            out_rows: None,
        };
        let layers = self.be.cfg.layers;
        self.issue(&b, ForwardKind::Verify.at(step, k + 1), layers)?;
        let verify = self.be.read_sampled(k + 1)?;
        let rows: Vec<i32> = self.rows.read(k + 1, &self.be.dev.stream)?;
        if rows[0] != token {
            return Err(EngineError::invalid(format!(
                "the device's pending token {} is not the run's {token}",
                rows[0]
            )));
        }
        Ok(Proposal {
            candidates: rows[1..].to_vec(),
            verify,
        })
    }

    fn accept(&mut self, accepted: usize) {
        self.pending = accepted;
    }
}
