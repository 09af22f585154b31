//! The JSON a `spec` run writes: per setting, the step time, tokens/s and tokens per step
//! (median and spread over repeats), the acceptance measured per position, the md5 of the
//! tokens, and plain greedy decode of the same model and shape beside it.

use super::{SpecSettings, SpecStep};
use crate::bench::md5_hex;
use crate::config::ModelConfig;
use crate::cuda::{DeviceInfo, LatencyCalibration};
use crate::dispatch::Levers;
use gapscope_traces::stats::Summary;

/// One repeat of a run: its decode time (CUDA events from after the prefill to the last
/// step's end), steps and tokens.
#[derive(Debug, Clone, PartialEq)]
pub struct Rep {
    pub decode_ms: f64,
    /// Decode steps: one per token plain, one per draft-and-verify speculative.
    pub steps: usize,
    /// Tokens the steps produced (a speculative run's last step may pass `ntg`).
    pub produced: usize,
    /// The first `ntg + 1` tokens (the prefill's, then the steps').
    pub tokens: Vec<i32>,
    /// Speculative runs: their steps.
    pub spec_steps: Vec<SpecStep>,
}

/// Step time, throughput and tokens over the repeats of one run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RunStats {
    pub reps: usize,
    /// Decode time per step: the TPOT for plain decode, a draft-and-verify cycle speculative.
    pub step_ms: Summary,
    pub tok_s: Summary,
    pub tokens_per_step: Summary,
    /// Steps in each repeat.
    pub steps: Vec<usize>,
    /// md5 of the first ntg + 1 tokens (as `bench` hashes them for npl 1).
    pub md5: String,
    pub md5_stable: bool,
}

impl RunStats {
    pub fn of(reps: &[Rep]) -> Self {
        let step_ms: Vec<f64> = reps
            .iter()
            .map(|r| r.decode_ms / r.steps.max(1) as f64)
            .collect();
        let tok_s: Vec<f64> = reps
            .iter()
            .map(|r| r.produced as f64 / (r.decode_ms * 1e-3))
            .collect();
        let tps: Vec<f64> = reps
            .iter()
            .map(|r| r.produced as f64 / r.steps.max(1) as f64)
            .collect();
        let md5s: Vec<String> = reps.iter().map(|r| md5_hex(&r.tokens)).collect();
        Self {
            reps: reps.len(),
            step_ms: Summary::of(&step_ms),
            tok_s: Summary::of(&tok_s),
            tokens_per_step: Summary::of(&tps),
            steps: reps.iter().map(|r| r.steps).collect(),
            md5_stable: md5s.windows(2).all(|w| w[0] == w[1]),
            md5: md5s.into_iter().next().unwrap_or_default(),
        }
    }
}

/// The one launch-timed repeat a trace was written from.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Traced {
    pub path: String,
    /// Its step time and throughput (per-launch events make it slower than the measured
    /// repeats).
    pub step_ms: f64,
    pub tok_s: f64,
    /// Step records written (each forward is one).
    pub forwards: usize,
}

impl Traced {
    pub fn of(path: String, rep: &Rep, forwards: usize) -> Self {
        Self {
            path,
            step_ms: rep.decode_ms / rep.steps.max(1) as f64,
            tok_s: rep.produced as f64 / (rep.decode_ms * 1e-3),
            forwards,
        }
    }
}

/// Plain greedy decode, the baseline.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlainReport {
    pub measured: RunStats,
    pub traced: Option<Traced>,
}

/// One speculative setting.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SettingReport {
    pub name: String,
    pub settings: SpecSettings,
    pub measured: RunStats,
    /// Per candidate position j: the share of steps that accepted at least j candidates.
    pub accept_rate: Vec<f64>,
    /// Per position: the share of steps that reached it that accepted it (what a synthetic
    /// profile sets); null where never reached.
    pub accept_conditional: Vec<Option<f64>>,
    /// The first ntg + 1 tokens equal plain greedy decode's (expected with argmax acceptance
    /// when the verify's kernels give the bits of one-row decode).
    pub md5_equals_plain: bool,
    /// Median tokens/s over plain decode's median.
    pub speedup_vs_plain: f64,
    pub traced: Option<Traced>,
}

impl SettingReport {
    pub fn of(
        name: String,
        settings: &SpecSettings,
        reps: &[Rep],
        plain: &RunStats,
        traced: Option<Traced>,
    ) -> Self {
        let measured = RunStats::of(reps);
        let steps: Vec<SpecStep> = reps.iter().flat_map(|r| r.spec_steps.clone()).collect();
        let (accept_rate, accept_conditional) =
            super::run::acceptance_by_position(&steps, settings.k);
        Self {
            name,
            settings: settings.clone(),
            md5_equals_plain: measured.md5 == plain.md5,
            speedup_vs_plain: measured.tok_s.median / plain.tok_s.median,
            measured,
            accept_rate,
            accept_conditional,
            traced,
        }
    }
}

/// What `gapscope-engine spec --json` writes.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SpecReport {
    pub device: DeviceInfo,
    pub model: ModelConfig,
    pub weights: String,
    pub levers: Levers,
    pub npp: usize,
    pub ntg: usize,
    pub warmup: usize,
    pub seed: u64,
    pub event_latency: Option<LatencyCalibration>,
    pub plain: PlainReport,
    pub settings: Vec<SettingReport>,
}
