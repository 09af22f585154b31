//! The report's speculative-decoding lines.

use gapscope_analyzer::analysis::spec::{SpecEvidence, SpecReport, TokensSource};
use gapscope_analyzer::text::{ms, pct};

/// `(key, value)` lines for a speculative run, after the step lines.
pub fn lines(s: &SpecReport, text: impl Fn(&str) -> String) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let draft = match &s.draft {
        Some(d) => format!(
            "draft {}: {} forwards, {:.2} per decode step",
            text(d),
            s.draft_forwards,
            s.draft_forwards_per_step
        ),
        None if s.evidence_kind == SpecEvidence::MarkerTokens => format!(
            "draft work between the markers; up to {} drafts per request",
            s.max_candidates
        ),
        None => "no draft model".to_owned(),
    };
    v.push((
        "speculative".into(),
        format!(
            "{}; target {}: {} forwards; {draft}",
            text(&s.evidence),
            text(&s.target),
            s.target_forwards
        ),
    ));
    match (s.tokens_source, s.tokens_per_step) {
        (TokensSource::AttentionShapes, Some(t)) => {
            v.push((
                "tokens/step".into(),
                format!(
                    "{t:.3} per sequence (mean acceptance length) over {} of {} decode steps; from {}",
                    s.steps_with_tokens, s.decode_steps, s.tokens_from
                ),
            ));
            let by_pos: Vec<String> = s
                .per_position
                .iter()
                .map(|p| format!("{}: {}", p.position, pct(100.0 * p.rate)))
                .collect();
            if let Some(rate) = s.acceptance_rate {
                v.push((
                    "acceptance".into(),
                    format!(
                        "{} of verified candidates (k up to {}); by draft position {}",
                        pct(100.0 * rate),
                        s.max_candidates,
                        by_pos.join(", ")
                    ),
                ));
            }
            if let (Some(tpot), Some(step)) = (s.tpot_per_token_ms, s.step_ms) {
                v.push((
                    "TPOT/token".into(),
                    format!(
                        "{} ms per token: a {} ms step period over {t:.3} tokens",
                        ms(tpot),
                        ms(step)
                    ),
                ));
            }
        }
        _ => v.push((
            "tokens/step".into(),
            format!("acceptance {}", s.tokens_from),
        )),
    }
    let rejected = s
        .rejected_ms_per_step
        .map(|r| format!("; on rejected candidates {} ms of the two", ms(r)))
        .unwrap_or_default();
    v.push((
        "spec work".into(),
        format!(
            "per decode step, kernel time: draft {} ms, verify {} ms{rejected}",
            ms(s.draft_ms_per_step),
            ms(s.verify_ms_per_step)
        ),
    ));
    v
}
