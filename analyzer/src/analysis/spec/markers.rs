//! Speculative decoding told by an engine's step markers: vLLM V1 names each step with the
//! tokens it schedules (`execute_context_0(0)_generation_1(5)`: one request, five tokens, so
//! four drafts), and runs its proposer (a draft model, EAGLE or MTP head) after the step's
//! marker closes. Each decode step then runs from the previous step's end to its own
//! marker's end: the proposer's work for it comes first, as in HF's cycle. Tokens produced
//! are not in the markers, so acceptance stays unknown.

use gapscope_traces::{Phase, StrId};

use super::{Cycle, ModelKey, SpecDecode, SpecEvidence, TokensSource};
use crate::analysis::prepared::Prepared;
use crate::analysis::steps::Step;

/// One marker step: its window, requests, scheduled tokens and name.
pub struct Marked {
    pub step: Step,
    pub batch: u32,
    pub tokens: u64,
    pub name: StrId,
    /// The engine's step number, -1 when none.
    pub number: i64,
}

/// gapscope-engine's speculative mode names each forward's marker.
pub const ENGINE_DRAFT: &str = "spec_draft";
pub const ENGINE_VERIFY: &str = "spec_verify";

/// gapscope-engine's speculative steps: the `spec_draft` markers since the previous
/// `spec_verify`, then that `spec_verify` (whose tokens column holds the tokens the step
/// produced), as one step; other markers (the prefill) stay steps of their own. Returns the
/// speculative run and, per new step, the marker that closes it. `None` without
/// `spec_verify` markers.
pub fn engine_cycles(
    p: &Prepared,
    device: u32,
    marks: &[Marked],
) -> Option<(SpecDecode, Vec<usize>)> {
    let s = &p.trace.strings;
    let is = |m: &Marked, name: &str| s.get(m.name) == name;
    let verify = marks.iter().find(|m| is(m, ENGINE_VERIFY))?;
    let draft = marks
        .iter()
        .find(|m| is(m, ENGINE_DRAFT))
        .map(|m| ModelKey::Named(m.name));
    let busy = |m: &Marked| kernel_ns(p, device, m.step.gpu_start_ns, m.step.gpu_end_ns);
    let mut cycles: Vec<Cycle> = Vec::new();
    let mut closes = Vec::new();
    let mut pending: Vec<&Marked> = Vec::new();
    for (i, m) in marks.iter().enumerate() {
        if is(m, ENGINE_DRAFT) {
            pending.push(m);
            continue;
        }
        let verifies = is(m, ENGINE_VERIFY);
        if !verifies {
            // Drafts not closed by a verify (a cut trace) stay out of every step.
            pending.clear();
            cycles.push(Cycle {
                phase: m.step.phase,
                gpu_start_ns: m.step.gpu_start_ns,
                gpu_end_ns: m.step.gpu_end_ns,
                verify_start_ns: m.step.gpu_start_ns,
                draft_forwards: 0,
                draft_ns: 0,
                verify_ns: busy(m),
                batch: m.batch,
                rows: None,
                tokens: None,
            });
            closes.push(i);
            continue;
        }
        let batch = m.batch.max(1);
        let start = pending
            .first()
            .map_or(m.step.gpu_start_ns, |d| d.step.gpu_start_ns);
        cycles.push(Cycle {
            phase: Phase::Decode,
            gpu_start_ns: start,
            gpu_end_ns: m.step.gpu_end_ns,
            verify_start_ns: m.step.gpu_start_ns,
            draft_forwards: pending.len() as u32,
            draft_ns: pending.iter().map(|d| busy(d)).sum(),
            verify_ns: busy(m),
            batch: m.batch,
            rows: Some(pending.len() as i64 + 1),
            tokens: (m.tokens > 0).then(|| (m.tokens / u64::from(batch)) as i64),
        });
        closes.push(i);
        pending.clear();
    }
    for i in 1..cycles.len() {
        let next = cycles[i].gpu_start_ns;
        if cycles[i - 1].gpu_end_ns <= next {
            cycles[i - 1].gpu_end_ns = next;
        }
    }
    let verifies = cycles.iter().filter(|c| c.rows.is_some()).count();
    let drafts = cycles.iter().map(|c| c.draft_forwards as usize).sum();
    Some((
        SpecDecode {
            evidence: Some(SpecEvidence::EngineMarkers),
            tokens_source: TokensSource::EngineMarkers,
            target: ModelKey::Named(verify.name),
            draft,
            target_forwards: verifies,
            draft_forwards: drafts,
            cycles,
            kernel_roles: None,
        },
        closes,
    ))
}

/// The speculative cycles when every decode step schedules more tokens than requests;
/// `None` otherwise. `steps` are sorted by start and do not overlap.
pub fn detect(p: &Prepared, device: u32, steps: &[Marked]) -> Option<SpecDecode> {
    let decode: Vec<&Marked> = steps
        .iter()
        .filter(|m| m.step.phase == Phase::Decode)
        .collect();
    if decode.is_empty()
        || !decode
            .iter()
            .all(|m| m.batch > 0 && m.tokens > u64::from(m.batch))
    {
        return None;
    }
    let busy = |from: i64, to: i64| kernel_ns(p, device, from, to);
    let mut cycles = Vec::with_capacity(steps.len());
    for (i, m) in steps.iter().enumerate() {
        let s = m.step;
        let start = match i {
            0 => s.gpu_start_ns,
            _ if s.phase == Phase::Decode => steps[i - 1].step.gpu_end_ns.min(s.gpu_start_ns),
            _ => s.gpu_start_ns,
        };
        let rows = (s.phase == Phase::Decode)
            .then(|| i64::try_from(m.tokens / u64::from(m.batch.max(1))).unwrap_or(0));
        cycles.push(Cycle {
            phase: s.phase,
            gpu_start_ns: start,
            gpu_end_ns: s.gpu_end_ns,
            verify_start_ns: s.gpu_start_ns,
            draft_forwards: 0,
            draft_ns: busy(start, s.gpu_start_ns),
            verify_ns: busy(s.gpu_start_ns, s.gpu_end_ns),
            batch: m.batch,
            rows,
            tokens: None,
        });
    }
    Some(SpecDecode {
        evidence: Some(SpecEvidence::MarkerTokens),
        tokens_source: TokensSource::NotInMarkers,
        target: ModelKey::Named(decode[0].name),
        draft: None,
        target_forwards: decode.len(),
        draft_forwards: 0,
        cycles,
        kernel_roles: None,
    })
}

/// Kernel time on `device` of the kernels that start in `[from, to)`.
fn kernel_ns(p: &Prepared, device: u32, from: i64, to: i64) -> i64 {
    let k = &p.trace.kernels;
    let on = p.kernels_on(device);
    let at = on.partition_point(|&i| k.gpu_start_ns[i as usize] < from);
    on[at..]
        .iter()
        .map(|&i| i as usize)
        .take_while(|&i| k.gpu_start_ns[i] < to)
        .map(|i| (k.gpu_end_ns[i] - k.gpu_start_ns[i]).max(0))
        .sum()
}
