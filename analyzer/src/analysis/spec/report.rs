//! The report's speculative-decoding section, from the speculative steps.
//!
//! Definitions (the engines disagree, so the report states its own):
//! - a step's *tokens* are the tokens it produced per sequence: accepted candidates + 1
//!   (the target's own token). Their mean is the *mean acceptance length* (vLLM's and
//!   SGLang's "acceptance length");
//! - the *acceptance rate* is accepted candidates over verified candidates;
//! - acceptance at draft *position* j is the share of steps that verified at least j
//!   candidates in which the j-th was accepted (a candidate is accepted only when every
//!   one before it is);
//! - *TPOT per token* is the steps' summed period over their summed tokens: the time a user
//!   waits per token, beside the step period.
//!
//! Only decode steps whose tokens are known count: the prefill (HF's assisted prefill also
//! verifies candidates, but which of its rows are candidates the trace does not say) and the
//! last step (no later forward shows what it kept) are left out.

use serde::Serialize;

use super::{Cycle, SpecDecode, SpecEvidence, SpecMetrics, TokensSource};
use crate::analysis::prepared::Prepared;
use gapscope_traces::Phase;

/// Acceptance at one draft position.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PositionAcceptance {
    /// 1 is the first candidate.
    pub position: usize,
    /// Steps that verified a candidate at this position.
    pub steps: usize,
    /// Of those, the steps that accepted it.
    pub accepted: usize,
    pub rate: f64,
}

/// What the report says of a speculative run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecReport {
    /// How speculation was recognised, in words, and as a value.
    pub evidence: String,
    pub evidence_kind: SpecEvidence,
    /// The verifying model instance and the drafting one (`None`: no draft model).
    pub target: String,
    pub draft: Option<String>,
    pub target_forwards: usize,
    pub draft_forwards: usize,
    /// Decode steps (each one verify forward with its drafts).
    pub decode_steps: usize,
    pub draft_forwards_per_step: f64,
    /// Where tokens per step come from, in words, and as a value.
    pub tokens_from: String,
    pub tokens_source: TokensSource,
    /// Decode steps whose tokens are known (the figures below are over these).
    pub steps_with_tokens: usize,
    /// Mean tokens produced per step and sequence (the mean acceptance length).
    pub tokens_per_step: Option<f64>,
    pub acceptance_rate: Option<f64>,
    /// The most candidates one step verified (k).
    pub max_candidates: usize,
    pub per_position: Vec<PositionAcceptance>,
    /// Mean step period and TPOT per token over the steps with known tokens, ms.
    pub step_ms: Option<f64>,
    pub tpot_per_token_ms: Option<f64>,
    /// Mean kernel time per decode step: the draft's forwards, the verify forward, and the
    /// share of both spent on rejected candidates (verify rows and draft forwards in
    /// proportion to the candidates rejected), ms.
    pub draft_ms_per_step: f64,
    pub verify_ms_per_step: f64,
    pub rejected_ms_per_step: Option<f64>,
    /// The draft's, the verify's and the rejected kernel time per decode step, by bucket.
    pub by_bucket: Vec<super::SpecBucket>,
    /// Step time and tokens per second at other draft lengths and acceptance, from the
    /// measured costs (absent without steps of known tokens).
    pub what_if: Option<super::SpecWhatIf>,
    /// Per step with known tokens, what the gate judges (not serialised).
    #[serde(skip)]
    pub series: SpecSeries,
}

/// Per-step samples of a speculative run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SpecSeries {
    /// Each step's period over its tokens, ms.
    pub ms_per_token: Vec<f64>,
    /// Each step's rejected share of its candidates (steps that verified any).
    pub rejected_share: Vec<f64>,
}

impl SpecReport {
    /// The section for the decode steps of `spec`; `None` for a plain run.
    pub fn of(
        spec: &SpecDecode,
        p: &Prepared,
        device: Option<u32>,
        metrics: Option<&SpecMetrics>,
    ) -> Option<Self> {
        let trace = p.trace;
        let evidence = spec.evidence?;
        let per_step = metrics.and_then(|m| per_step_tokens(spec, m));
        let tokens_source = if per_step.is_some() {
            TokensSource::MetricsPerStep
        } else {
            spec.tokens_source
        };
        let cycles: &[Cycle] = per_step.as_deref().unwrap_or(&spec.cycles);
        let decode: Vec<usize> = (0..cycles.len())
            .filter(|&i| cycles[i].phase == Phase::Decode)
            .collect();
        let known: Vec<usize> = decode
            .iter()
            .copied()
            .filter(|&i| cycles[i].tokens.is_some() && i + 1 < cycles.len())
            .collect();
        let mean =
            |v: &mut dyn Iterator<Item = f64>, n: usize| (n > 0).then(|| v.sum::<f64>() / n as f64);
        let tokens: i64 = known.iter().filter_map(|&i| cycles[i].tokens).sum();
        let proposed: i64 = known.iter().filter_map(|&i| cycles[i].candidates()).sum();
        let accepted: i64 = known.iter().filter_map(|&i| cycles[i].accepted()).sum();
        let period = |i: usize| (cycles[i + 1].gpu_start_ns - cycles[i].gpu_start_ns) as f64 / 1e6;
        let periods: f64 = known.iter().map(|&i| period(i)).sum();
        let max_candidates = decode
            .iter()
            .filter_map(|&i| cycles[i].candidates())
            .max()
            .unwrap_or(0)
            .max(0) as usize;
        let per_position = (1..=max_candidates)
            .map(|j| {
                let have: Vec<&Cycle> = known
                    .iter()
                    .map(|&i| &cycles[i])
                    .filter(|c| c.candidates().unwrap_or(0) >= j as i64)
                    .collect();
                let acc = have
                    .iter()
                    .filter(|c| c.accepted().unwrap_or(0) >= j as i64)
                    .count();
                PositionAcceptance {
                    position: j,
                    steps: have.len(),
                    accepted: acc,
                    rate: if have.is_empty() {
                        0.0
                    } else {
                        acc as f64 / have.len() as f64
                    },
                }
            })
            .collect();
        let rejected = |c: &Cycle| -> Option<f64> {
            let (rows, cand, acc) = (c.rows?, c.candidates()?, c.accepted()?);
            let rej = (cand - acc).max(0) as f64;
            let verify = c.verify_ns as f64 * rej / rows.max(1) as f64;
            let draft = if cand > 0 {
                c.draft_ns as f64 * rej / cand as f64
            } else {
                0.0
            };
            Some((verify + draft) / 1e6)
        };
        let name = |key: super::ModelKey| key.render(trace);
        let mut out = Self {
            evidence: evidence.describe().to_owned(),
            evidence_kind: evidence,
            target: name(spec.target),
            draft: spec.draft.map(name),
            target_forwards: spec.target_forwards,
            draft_forwards: spec.draft_forwards,
            decode_steps: decode.len(),
            draft_forwards_per_step: mean(
                &mut decode.iter().map(|&i| f64::from(cycles[i].draft_forwards)),
                decode.len(),
            )
            .unwrap_or(0.0),
            tokens_from: match tokens_source {
                TokensSource::AttentionShapes => {
                    "the KV length the target's attention sees, from one verify forward to the next (record_shapes)"
                }
                TokensSource::Unknown if evidence == SpecEvidence::ForwardDepths => {
                    "unknown: the trace does not show them (pass the engine's per-step log with --spec-metrics)"
                }
                TokensSource::Unknown => {
                    "unknown: the trace has no input shapes (record with record_shapes=True)"
                }
                TokensSource::MetricsPerStep => {
                    "the engine's per-step acceptance log (--spec-metrics), matched to the steps in order"
                }
                TokensSource::EngineMarkers => "the engine's verify markers (tokens produced)",
                TokensSource::Metrics => "the engine's acceptance counters (--spec-metrics)",
                TokensSource::NotInMarkers => {
                    "unknown: the step markers give the tokens scheduled, not those accepted"
                }
            }
            .to_owned(),
            tokens_source,
            steps_with_tokens: known.len(),
            tokens_per_step: (!known.is_empty()).then(|| tokens as f64 / known.len() as f64),
            acceptance_rate: (proposed > 0).then(|| accepted as f64 / proposed as f64),
            max_candidates,
            per_position,
            step_ms: (!known.is_empty()).then(|| periods / known.len() as f64),
            tpot_per_token_ms: (tokens > 0).then(|| periods / tokens as f64),
            draft_ms_per_step: mean(
                &mut decode.iter().map(|&i| cycles[i].draft_ns as f64 / 1e6),
                decode.len(),
            )
            .unwrap_or(0.0),
            verify_ms_per_step: mean(
                &mut decode.iter().map(|&i| cycles[i].verify_ns as f64 / 1e6),
                decode.len(),
            )
            .unwrap_or(0.0),
            rejected_ms_per_step: mean(
                &mut known.iter().filter_map(|&i| rejected(&cycles[i])),
                known.len(),
            ),
            by_bucket: device.map_or_else(Vec::new, |d| {
                super::by_bucket::split(p, d, cycles, spec.kernel_roles.as_deref())
            }),
            what_if: None,
            series: SpecSeries {
                ms_per_token: known
                    .iter()
                    .filter_map(|&i| Some(period(i) / cycles[i].tokens? as f64))
                    .collect(),
                rejected_share: known
                    .iter()
                    .filter_map(|&i| {
                        let (c, a) = (cycles[i].candidates()?, cycles[i].accepted()?);
                        (c > 0).then(|| (c - a).max(0) as f64 / c as f64)
                    })
                    .collect(),
            },
        };
        let unknown = matches!(
            tokens_source,
            TokensSource::Unknown | TokensSource::NotInMarkers
        );
        match metrics {
            Some(m) if unknown => out.take_metrics(cycles, &decode, m),
            _ => out.what_if = super::SpecCosts::measure(cycles, &out).map(|c| c.what_if(&[])),
        }
        Some(out)
    }
}

/// The decode cycles with the tokens an engine's per-step log gives (accepted + 1, in
/// order), when the trace does not show them and the log has one line per decode step.
fn per_step_tokens(spec: &SpecDecode, m: &SpecMetrics) -> Option<Vec<Cycle>> {
    let accepted = m.per_step_accepted.as_ref()?;
    if !matches!(
        spec.tokens_source,
        TokensSource::Unknown | TokensSource::NotInMarkers
    ) {
        return None;
    }
    let decode: Vec<usize> = (0..spec.cycles.len())
        .filter(|&i| spec.cycles[i].phase == Phase::Decode)
        .collect();
    if decode.len() != accepted.len() {
        return None;
    }
    let mut cycles = spec.cycles.clone();
    for (&i, &a) in decode.iter().zip(accepted) {
        let c = &mut cycles[i];
        // A step cannot accept more candidates than it verified.
        if c.candidates().is_some_and(|k| i64::from(a) > k) {
            return None;
        }
        c.tokens = Some(i64::from(a) + 1);
    }
    Some(cycles)
}

impl SpecReport {
    /// When the trace does not show each step's tokens but the engine's counters give them on
    /// average: acceptance from the counters, times from the trace's steps (the rest of the
    /// section, from the steps, stays).
    fn take_metrics(&mut self, cycles: &[Cycle], decode: &[usize], m: &SpecMetrics) {
        let timed: Vec<usize> = decode
            .iter()
            .copied()
            .filter(|&i| i + 1 < cycles.len())
            .collect();
        let period = |i: usize| (cycles[i + 1].gpu_start_ns - cycles[i].gpu_start_ns) as f64 / 1e6;
        let step_ms = (!timed.is_empty())
            .then(|| timed.iter().map(|&i| period(i)).sum::<f64>() / timed.len() as f64);
        if decode.iter().all(|&i| cycles[i].candidates().is_none()) {
            self.max_candidates = m.per_position.len();
        }
        self.per_position = m
            .per_position
            .iter()
            .enumerate()
            .map(|(j, &rate)| PositionAcceptance {
                position: j + 1,
                steps: m.drafts.map_or(0, |d| d.round() as usize),
                accepted: m.drafts.map_or(0, |d| (d * rate).round() as usize),
                rate,
            })
            .collect();
        self.tokens_from = format!(
            "the engine's acceptance counters ({}), on average over the run",
            m.format.describe()
        );
        self.tokens_source = TokensSource::Metrics;
        self.steps_with_tokens = timed.len();
        self.tokens_per_step = Some(m.acceptance_length);
        self.acceptance_rate = m.acceptance_rate();
        self.step_ms = step_ms;
        self.tpot_per_token_ms = step_ms.map(|s| s / m.acceptance_length);
        self.what_if = super::SpecCosts::measure_all(cycles, self).map(|c| c.what_if(&[]));
    }
}
