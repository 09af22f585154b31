//! The CPU reference backend's speculative forwards, and plain greedy decode to check them
//! against.

use super::trace::{ForwardKind, ForwardMarker};
use super::{Proposal, SpecForwards};
use crate::config::ModelConfig;
use crate::cpu::CpuBackend;
use crate::error::Result;
use crate::model::{Backend, Batch, forward};
use crate::weights::ModelWeights;

/// The CPU backend with the configs of its full and draft forwards; `log` holds the marker
/// of every forward it ran, in order.
pub struct CpuSpec<'w> {
    be: CpuBackend<'w>,
    cfg: ModelConfig,
    pub log: Vec<ForwardMarker>,
}

impl<'w> CpuSpec<'w> {
    pub fn new(cfg: &ModelConfig, w: &'w ModelWeights) -> Self {
        Self {
            be: CpuBackend::new(cfg, w),
            cfg: cfg.clone(),
            log: Vec::new(),
        }
    }

    /// One forward of `batch` through the first `layers` layers; its greedy tokens.
    fn run(&mut self, batch: &Batch, layers: usize, m: ForwardMarker) -> Result<Vec<i32>> {
        let mut cfg = self.cfg.clone();
        cfg.layers = layers;
        self.be.begin(batch)?;
        forward(&mut self.be, &cfg, batch)?;
        self.log.push(m);
        Ok(self.be.sampled.clone())
    }
}

impl SpecForwards for CpuSpec<'_> {
    fn prefill(&mut self, prompt: &[i32], step: i64) -> Result<i32> {
        self.be.reset();
        let b = Batch::prefill(&[prompt.to_vec()]);
        let m = ForwardKind::Prefill.at(step, prompt.len());
        Ok(self.run(&b, self.cfg.layers, m)?[0])
    }

    fn step(
        &mut self,
        token: i32,
        pos: usize,
        k: usize,
        draft_layers: usize,
        step: i64,
    ) -> Result<Proposal> {
        let mut rows = vec![token];
        for j in 0..k {
            let b = Batch::decode(vec![rows[j]], vec![(pos + j) as i32]);
            let c = self.run(&b, draft_layers, ForwardKind::Draft.at(step, 1))?[0];
            rows.push(c);
        }
        let b = Batch {
            tokens: rows.clone(),
            seq: vec![0; k + 1],
            pos: (pos..=pos + k).map(|p| p as i32).collect(),
            out_rows: None,
        };
        let verify = self.run(&b, self.cfg.layers, ForwardKind::Verify.at(step, k + 1))?;
        Ok(Proposal {
            candidates: rows[1..].to_vec(),
            verify,
        })
    }

    fn accept(&mut self, _: usize) {}
}

/// Plain greedy decode on the CPU: a prefill, then `ntg` one-token steps; `ntg + 1` tokens.
pub fn greedy(cfg: &ModelConfig, w: &ModelWeights, prompt: &[i32], ntg: usize) -> Result<Vec<i32>> {
    let mut be = CpuBackend::new(cfg, w);
    let b = Batch::prefill(&[prompt.to_vec()]);
    be.begin(&b)?;
    forward(&mut be, cfg, &b)?;
    let mut out = vec![be.sampled[0]];
    for i in 0..ntg {
        let b = Batch::decode(vec![out[i]], vec![(prompt.len() + i) as i32]);
        be.begin(&b)?;
        forward(&mut be, cfg, &b)?;
        out.push(be.sampled[0]);
    }
    Ok(out)
}
