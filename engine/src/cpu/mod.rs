//! The CPU f32 reference backend: the same forward pass as the CUDA backend, op by op, on
//! tiny configs in CI and as the oracle for GPU tests.

pub mod gated_delta;
pub mod hf_ops;
pub(crate) mod hybrid;
mod numerics_ops;
pub mod ops;

use crate::Numerics;
use crate::config::ModelConfig;
use crate::error::{EngineError, Result};
use crate::model::{Act, Backend, Batch, Linear, Norm, OutMode};
use crate::quant::round_bf16;
use crate::weights::ModelWeights;
use half::bf16;
use hybrid::StateCache;
use numerics_ops::CpuOps;
use std::collections::HashMap;

pub struct CpuBackend<'w> {
    cfg: ModelConfig,
    w: &'w ModelWeights,
    inv_freq: Vec<f32>,
    /// The numerics-dependent ops, picked by `with_numerics`.
    ops: CpuOps,
    batch: Option<Batch>,
    acts: HashMap<Act, Vec<f32>>,
    /// Per layer, per sequence: K and V rows by position (bf16 values).
    k: Vec<HashMap<i32, Vec<f32>>>,
    v: Vec<HashMap<i32, Vec<f32>>>,
    /// Gated DeltaNet layers' conv and recurrent states, per sequence.
    states: StateCache,
    /// Greedy tokens of the last forward.
    pub sampled: Vec<i32>,
    /// With hidden-state capture on: per layer of the last forward, the residual stream `X`
    /// after the layer at its logit rows, `[logit_rows, hidden]` each. `None`: off.
    hidden: Option<Vec<Vec<f32>>>,
}

impl<'w> CpuBackend<'w> {
    pub fn new(cfg: &ModelConfig, w: &'w ModelWeights) -> Self {
        Self::with_numerics(cfg, w, Numerics::Engine)
    }

    /// A backend that rounds activations as `numerics` says (the GPU's `hf-bf16` oracle).
    pub fn with_numerics(cfg: &ModelConfig, w: &'w ModelWeights, numerics: Numerics) -> Self {
        Self {
            cfg: cfg.clone(),
            w,
            inv_freq: cfg.inv_freq(),
            ops: CpuOps::of(numerics),
            batch: None,
            acts: HashMap::new(),
            k: vec![HashMap::new(); cfg.layers],
            v: vec![HashMap::new(); cfg.layers],
            states: StateCache::new(cfg.layers),
            sampled: Vec::new(),
            hidden: None,
        }
    }

    /// Turns hidden-state capture on or off for the forwards that follow.
    pub fn set_capture_hidden(&mut self, on: bool) {
        self.hidden = on.then(Vec::new);
    }

    /// With capture on: per layer of the last forward, the residual stream after it at the
    /// logit rows (`[logit_rows, hidden]` each, rows in `Logits`' order); `None` when off.
    pub fn hidden(&self) -> Option<&[Vec<f32>]> {
        self.hidden.as_deref()
    }

    /// Logits of the last forward, `[logit_rows, vocab]`.
    pub fn logits(&self) -> &[f32] {
        self.acts.get(&Act::Logits).map_or(&[], Vec::as_slice)
    }

    pub fn reset(&mut self) {
        for l in 0..self.cfg.layers {
            self.k[l].clear();
            self.v[l].clear();
        }
        self.states.clear();
    }

    fn act(&self, a: Act) -> Result<&Vec<f32>> {
        self.acts
            .get(&a)
            .ok_or_else(|| EngineError::invalid(format!("activation {a:?} read before written")))
    }

    fn batch(&self) -> Result<&Batch> {
        self.batch
            .as_ref()
            .ok_or_else(|| EngineError::invalid("op before begin()"))
    }
}

impl Backend for CpuBackend<'_> {
    fn begin(&mut self, batch: &Batch) -> Result<()> {
        for &t in &batch.tokens {
            if t < 0 || t as usize >= self.cfg.vocab {
                return Err(EngineError::invalid(format!(
                    "token id {t} is outside the vocabulary of {}",
                    self.cfg.vocab
                )));
            }
        }
        self.batch = Some(batch.clone());
        if let Some(h) = self.hidden.as_mut() {
            h.clear();
        }
        Ok(())
    }

    fn embed(&mut self, rows: usize) -> Result<()> {
        let h = self.cfg.hidden;
        let mut x = vec![0f32; rows * h];
        for (r, &t) in self.batch()?.tokens.iter().enumerate().take(rows) {
            let src = &self.w.embed[t as usize * h..(t as usize + 1) * h];
            for (o, &b) in x[r * h..(r + 1) * h].iter_mut().zip(src) {
                *o = bf16::from_bits(b).to_f32();
            }
        }
        self.acts.insert(Act::X, x);
        Ok(())
    }

    fn rms_norm(&mut self, src: Act, norm: Norm, dst: Act, rows: usize) -> Result<()> {
        let w = match norm {
            Norm::Attn(l) => &self.w.layers[l].attn_norm,
            Norm::Ffn(l) => &self.w.layers[l].ffn_norm,
            Norm::Final => &self.w.final_norm,
        };
        let h = self.cfg.hidden;
        let x = &self.act(src)?[..rows * h];
        let y = (self.ops.rms_norm)(x, w, h, self.cfg.rms_eps);
        self.acts.insert(dst, y);
        Ok(())
    }

    fn linear(
        &mut self,
        which: Linear,
        src: Act,
        dst: Act,
        rows: usize,
        mode: OutMode,
    ) -> Result<()> {
        let (m, bias) = match which {
            Linear::Qkv(l) => (&self.w.layers[l].wqkv, self.w.layers[l].bqkv.as_ref()),
            Linear::InProj(l) => (&self.w.layers[l].wqkv, None),
            Linear::Gate(l) => (
                self.w.layers[l]
                    .w_gate
                    .as_ref()
                    .ok_or_else(|| EngineError::invalid("gate_proj on a model without one"))?,
                None,
            ),
            Linear::O(l) | Linear::OutProj(l) => (&self.w.layers[l].wo, None),
            Linear::GateUp(l) => (&self.w.layers[l].w_gate_up, None),
            Linear::Down(l) => (&self.w.layers[l].w_down, None),
            Linear::LmHead => (&self.w.lm_head, None),
        };
        let x = &self.act(src)?[..rows * m.cols()];
        let mut y = ops::linear(m, x, rows);
        let numerics = self.ops;
        match mode {
            OutMode::Store => {
                if let Some(b) = bias {
                    for row in y.chunks_exact_mut(m.rows()) {
                        for (v, bv) in row.iter_mut().zip(b) {
                            *v += bv;
                        }
                    }
                }
                (numerics.store)(&mut y);
                self.acts.insert(dst, y);
            }
            OutMode::Accumulate => {
                let d = self
                    .acts
                    .get_mut(&dst)
                    .ok_or_else(|| EngineError::invalid("accumulate into an unwritten buffer"))?;
                (numerics.accumulate)(d, &y);
            }
            OutMode::Swiglu => {
                y = (numerics.swiglu)(&y);
                self.acts.insert(dst, y);
            }
        }
        Ok(())
    }

    fn head_norm(&mut self, layer: usize, rows: usize) -> Result<()> {
        let (nq, nkv, hd) = (self.cfg.heads, self.cfg.kv_heads, self.cfg.head_dim);
        let lw = &self.w.layers[layer];
        let (Some(qw), Some(kw)) = (lw.q_norm.as_ref(), lw.k_norm.as_ref()) else {
            return Err(EngineError::invalid(
                "head_norm on a model without q/k norms",
            ));
        };
        let eps = self.cfg.rms_eps;
        let stride = self.cfg.qkv_dim();
        let norm = self.ops.head_norm;
        let qkv = self
            .acts
            .get_mut(&Act::Qkv)
            .ok_or_else(|| EngineError::invalid("head_norm before qkv"))?;
        for r in 0..rows {
            for h in 0..nq + nkv {
                let w = if h < nq { qw } else { kw };
                norm(
                    &mut qkv[r * stride + h * hd..r * stride + (h + 1) * hd],
                    w,
                    eps,
                );
            }
        }
        Ok(())
    }

    fn rope_kv_append(&mut self, layer: usize, rows: usize) -> Result<()> {
        let (nq, nkv, hd) = (self.cfg.heads, self.cfg.kv_heads, self.cfg.head_dim);
        let stride = self.cfg.qkv_dim();
        let rope = self.ops.rope;
        let batch = self
            .batch
            .clone()
            .ok_or_else(|| EngineError::invalid("op before begin()"))?;
        let qkv = self
            .acts
            .get_mut(&Act::Qkv)
            .ok_or_else(|| EngineError::invalid("rope before qkv"))?;
        for r in 0..rows {
            let (seq, pos) = (batch.seq[r], batch.pos[r]);
            let row = &mut qkv[r * stride..(r + 1) * stride];
            let rot = self.cfg.rope_dim;
            for h in 0..nq + nkv {
                rope(&mut row[h * hd..h * hd + rot], &self.inv_freq, pos);
            }
            let kv_dim = nkv * hd;
            let krow: Vec<f32> = row[nq * hd..nq * hd + kv_dim]
                .iter()
                .map(|&x| round_bf16(x))
                .collect();
            let vrow: Vec<f32> = row[nq * hd + kv_dim..]
                .iter()
                .map(|&x| round_bf16(x))
                .collect();
            for (cache, new) in [(&mut self.k[layer], krow), (&mut self.v[layer], vrow)] {
                let c = cache.entry(seq).or_default();
                let need = (pos as usize + 1) * kv_dim;
                if c.len() < need {
                    c.resize(need, 0.0);
                }
                c[pos as usize * kv_dim..need].copy_from_slice(&new);
            }
        }
        Ok(())
    }

    fn attention(&mut self, layer: usize, rows: usize) -> Result<()> {
        let (nq, nkv, hd) = (self.cfg.heads, self.cfg.kv_heads, self.cfg.head_dim);
        let stride = self.cfg.qkv_dim();
        let batch = self.batch()?;
        let qkv = self.act(Act::Qkv)?;
        let hf = self.ops.hf_attention;
        let mut out = vec![0f32; rows * nq * hd];
        for r in 0..rows {
            let (seq, pos) = (batch.seq[r], batch.pos[r]);
            let empty = Vec::new();
            let k = self.k[layer].get(&seq).unwrap_or(&empty);
            let v = self.v[layer].get(&seq).unwrap_or(&empty);
            let len = pos as usize + 1;
            if k.len() < len * nkv * hd {
                return Err(EngineError::invalid(format!(
                    "sequence {seq} has no cached KV for position {pos}"
                )));
            }
            let o = ops::attention_row(
                &qkv[r * stride..r * stride + nq * hd],
                k,
                v,
                len,
                nq,
                nkv,
                hd,
                hf,
            );
            out[r * nq * hd..(r + 1) * nq * hd].copy_from_slice(&o);
        }
        self.acts.insert(Act::Attn, out);
        Ok(())
    }

    fn attn_gate(&mut self, _layer: usize, rows: usize) -> Result<()> {
        self.attn_gate_impl(rows)
    }

    fn conv_step(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.conv_step_impl(layer, rows)
    }

    fn delta_rule(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.delta_rule_impl(layer, rows)
    }

    fn gated_norm(&mut self, layer: usize, rows: usize) -> Result<()> {
        self.gated_norm_impl(layer, rows)
    }

    fn gather_last(&mut self, n: usize) -> Result<()> {
        let h = self.cfg.hidden;
        let rows = self
            .batch()?
            .out_rows
            .clone()
            .ok_or_else(|| EngineError::invalid("gather_last on a decode batch"))?;
        let x = self.act(Act::X)?;
        let mut out = Vec::with_capacity(n * h);
        for &r in rows.iter().take(n) {
            out.extend_from_slice(&x[r as usize * h..(r as usize + 1) * h]);
        }
        self.acts.insert(Act::XLast, out);
        Ok(())
    }

    fn argmax(&mut self, rows: usize) -> Result<()> {
        let v = self.cfg.vocab;
        let logits = self.act(Act::Logits)?;
        self.sampled = (0..rows)
            .map(|r| ops::argmax(&logits[r * v..(r + 1) * v]))
            .collect();
        Ok(())
    }

    fn layer_output(&mut self, layer: usize, rows: usize) -> Result<()> {
        if self.hidden.is_none() {
            return Ok(());
        }
        let h = self.cfg.hidden;
        let x = self.act(Act::X)?;
        let picked: Vec<f32> = match &self.batch()?.out_rows {
            Some(out) => out
                .iter()
                .flat_map(|&r| &x[r as usize * h..(r as usize + 1) * h])
                .copied()
                .collect(),
            None => x[..rows * h].to_vec(),
        };
        let captured = self.hidden.get_or_insert_with(Vec::new);
        if captured.len() != layer {
            return Err(EngineError::invalid(format!(
                "hidden state of layer {layer} captured after {} layers",
                captured.len()
            )));
        }
        captured.push(picked);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::model::forward;
    use crate::quant::WeightFormat;

    fn tiny(model_type: &str) -> ModelConfig {
        ModelConfig::from_json(&serde_json::json!({
            "model_type": model_type, "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "vocab_size": 97, "rms_norm_eps": 1e-6, "tie_word_embeddings": true
        }))
        .unwrap()
    }

    /// A Qwen3.5-shaped hybrid: layers linear, linear, full; 2 key and 4 value heads of 32; a
    /// quarter of each 64-wide attention head rotated; the attention output gated.
    pub(crate) fn tiny_hybrid() -> ModelConfig {
        ModelConfig::from_json(&serde_json::json!({
            "model_type": "qwen3_5_text", "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "vocab_size": 97, "rms_norm_eps": 1e-6, "tie_word_embeddings": true,
            "full_attention_interval": 3, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
            "linear_key_head_dim": 32, "linear_value_head_dim": 32, "linear_conv_kernel_dim": 4,
            "partial_rotary_factor": 0.25
        }))
        .unwrap()
    }

    /// A prefill of the prompt's first two tokens, then one decode step per remaining token.
    fn decode_incrementally(be: &mut CpuBackend, cfg: &ModelConfig, prompt: &[i32]) {
        let b = Batch::prefill(&[prompt[..2].to_vec()]);
        be.begin(&b).unwrap();
        forward(be, cfg, &b).unwrap();
        for (i, &t) in prompt.iter().enumerate().skip(2) {
            let b = Batch::decode(vec![t], vec![i as i32]);
            be.begin(&b).unwrap();
            forward(be, cfg, &b).unwrap();
        }
    }

    /// Decoding token by token must give the same logits as a prefill over the same tokens:
    /// the KV cache, positions and causal attention agree.
    #[test]
    fn incremental_decode_matches_prefill() {
        for mt in ["llama", "qwen2", "qwen3"] {
            let cfg = tiny(mt);
            let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 5);
            let prompt = vec![3, 17, 42, 8, 90];
            let mut full = CpuBackend::new(&cfg, &w);
            let b = Batch::prefill(std::slice::from_ref(&prompt));
            full.begin(&b).unwrap();
            forward(&mut full, &cfg, &b).unwrap();
            let want = full.logits().to_vec();

            let mut inc = CpuBackend::new(&cfg, &w);
            decode_incrementally(&mut inc, &cfg, &prompt);
            let got = inc.logits();
            let scale = want.iter().fold(0f32, |a, v| a.max(v.abs()));
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-4 * scale.max(1.0), "{mt}: {a} vs {b}");
            }
        }
    }

    /// The hybrid model, decoded token by token, gives the prefill's logits: the conv and
    /// recurrent states carry exactly what the prefill's in-order pass carries.
    #[test]
    fn hybrid_incremental_decode_matches_prefill() {
        let cfg = tiny_hybrid();
        for format in [WeightFormat::Bf16, WeightFormat::Q8_0] {
            let w = ModelWeights::random(&cfg, format, 5);
            let prompt = vec![3, 17, 42, 8, 90, 11];
            let mut full = CpuBackend::new(&cfg, &w);
            let b = Batch::prefill(std::slice::from_ref(&prompt));
            full.begin(&b).unwrap();
            forward(&mut full, &cfg, &b).unwrap();
            let mut inc = CpuBackend::new(&cfg, &w);
            decode_incrementally(&mut inc, &cfg, &prompt);
            assert_eq!(inc.logits(), full.logits(), "{format:?}");
        }
    }

    /// A sequence that starts again at position 0 starts from zero states, whatever its slot
    /// held; and two sequences in one batch keep their own states.
    #[test]
    fn hybrid_states_restart_at_position_zero_and_stay_per_sequence() {
        let cfg = tiny_hybrid();
        let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 7);
        let run = |be: &mut CpuBackend, prompts: &[Vec<i32>]| {
            let b = Batch::prefill(prompts);
            be.begin(&b).unwrap();
            forward(be, &cfg, &b).unwrap();
            be.logits().to_vec()
        };
        let (p, q) = (vec![5, 6, 7], vec![40, 41, 42, 43]);
        let mut fresh = CpuBackend::new(&cfg, &w);
        let want_q = run(&mut fresh, std::slice::from_ref(&q));
        let mut reused = CpuBackend::new(&cfg, &w);
        run(&mut reused, std::slice::from_ref(&p));
        assert_eq!(run(&mut reused, std::slice::from_ref(&q)), want_q);
        let mut both = CpuBackend::new(&cfg, &w);
        let got = run(&mut both, &[p.clone(), q.clone()]);
        let mut one = CpuBackend::new(&cfg, &w);
        let want_p = run(&mut one, std::slice::from_ref(&p));
        let v = cfg.vocab;
        assert_eq!(&got[..v], &want_p[..]);
        assert_eq!(&got[v..], &want_q[..]);
    }

    /// The hf-bf16 numerics name what they do not cover instead of running it.
    #[test]
    fn hybrid_refuses_hf_numerics() {
        let cfg = tiny_hybrid();
        let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 1);
        let mut be = CpuBackend::with_numerics(&cfg, &w, Numerics::HfBf16);
        let b = Batch::prefill(&[vec![1, 2]]);
        be.begin(&b).unwrap();
        let err = forward(&mut be, &cfg, &b).unwrap_err().to_string();
        assert!(err.contains("DeltaNet"), "{err}");
    }

    /// Sequences in one batch do not see each other: batch of two equals two singles.
    #[test]
    fn batched_sequences_are_independent() {
        let cfg = tiny("llama");
        let w = ModelWeights::random(&cfg, WeightFormat::Q8_0, 9);
        let prompts = vec![vec![1, 2, 3], vec![50, 60, 70]];
        let mut both = CpuBackend::new(&cfg, &w);
        let b = Batch::prefill(&prompts);
        both.begin(&b).unwrap();
        forward(&mut both, &cfg, &b).unwrap();
        let v = cfg.vocab;
        for (s, p) in prompts.iter().enumerate() {
            let mut one = CpuBackend::new(&cfg, &w);
            let b = Batch::prefill(std::slice::from_ref(p));
            one.begin(&b).unwrap();
            forward(&mut one, &cfg, &b).unwrap();
            assert_eq!(one.logits(), &both.logits()[s * v..(s + 1) * v]);
        }
    }

    /// HF numerics: token-by-token decode gives the prefill's logits bit for bit (every row's
    /// roundings are its own), every activation and logit is a bf16 value, and the logits
    /// stay close to the engine numerics' without being the same.
    #[test]
    fn hf_numerics_decode_matches_prefill_bitwise() {
        for mt in ["llama", "qwen2", "qwen3"] {
            let cfg = tiny(mt);
            let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 5);
            let prompt = vec![3, 17, 42, 8, 90];
            let run = |numerics| {
                let mut be = CpuBackend::with_numerics(&cfg, &w, numerics);
                let b = Batch::prefill(std::slice::from_ref(&prompt));
                be.begin(&b).unwrap();
                forward(&mut be, &cfg, &b).unwrap();
                (be.logits().to_vec(), be.act(Act::X).unwrap().clone())
            };
            let (want, x) = run(Numerics::HfBf16);
            assert!(x.iter().chain(&want).all(|&v| round_bf16(v) == v), "{mt}");
            let (engine, _) = run(Numerics::Engine);
            let scale = engine.iter().fold(0f32, |a, v| a.max(v.abs()));
            let diff = want
                .iter()
                .zip(&engine)
                .fold(0f32, |a, (p, q)| a.max((p - q).abs()));
            assert!(diff > 0.0 && diff < 0.05 * scale, "{mt}: {diff} of {scale}");

            let mut inc = CpuBackend::with_numerics(&cfg, &w, Numerics::HfBf16);
            decode_incrementally(&mut inc, &cfg, &prompt);
            assert_eq!(inc.logits(), &want[..], "{mt}");
        }
    }

    /// Hidden-state capture: off by default (`None`); on, one `[logit_rows, hidden]` state per
    /// layer, a prefill's at its out rows in order (two sequences: each its single run's),
    /// and a token-by-token decode's last step at the prefill's last row.
    #[test]
    fn hidden_capture_takes_each_layers_logit_rows() {
        for cfg in [tiny("llama"), tiny_hybrid()] {
            let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 3);
            let h = cfg.hidden;
            let prefill = |prompts: &[Vec<i32>], capture: bool| {
                let mut be = CpuBackend::new(&cfg, &w);
                be.set_capture_hidden(capture);
                let b = Batch::prefill(prompts);
                be.begin(&b).unwrap();
                forward(&mut be, &cfg, &b).unwrap();
                be.hidden().map(<[Vec<f32>]>::to_vec)
            };
            let (p, q) = (vec![3, 17, 42, 8, 90], vec![40, 41, 42]);
            assert!(prefill(std::slice::from_ref(&p), false).is_none());
            let one = prefill(std::slice::from_ref(&p), true).unwrap();
            assert_eq!(one.len(), cfg.layers);
            assert!(one.iter().all(|l| l.len() == h));
            assert_ne!(one[0], one[1]);
            let other = prefill(std::slice::from_ref(&q), true).unwrap();
            let both = prefill(&[p.clone(), q.clone()], true).unwrap();
            for l in 0..cfg.layers {
                assert_eq!(both[l][..h], one[l][..], "layer {l}");
                assert_eq!(both[l][h..], other[l][..], "layer {l}");
            }
            let mut inc = CpuBackend::new(&cfg, &w);
            inc.set_capture_hidden(true);
            decode_incrementally(&mut inc, &cfg, &p);
            let got = inc.hidden().unwrap();
            assert_eq!(got.len(), cfg.layers);
            for (l, (a, b)) in got.iter().zip(&one).enumerate() {
                let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
                for (x, y) in a.iter().zip(b) {
                    assert!(
                        (x - y).abs() <= 1e-4 * scale.max(1.0),
                        "layer {l}: {x} vs {y}"
                    );
                }
            }
        }
    }

    #[test]
    fn out_of_vocab_token_is_an_error() {
        let cfg = tiny("llama");
        let w = ModelWeights::random(&cfg, WeightFormat::Bf16, 1);
        let mut be = CpuBackend::new(&cfg, &w);
        let err = be.begin(&Batch::decode(vec![97], vec![0])).unwrap_err();
        assert!(err.to_string().contains("97"));
    }
}
