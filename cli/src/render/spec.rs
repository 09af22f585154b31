//! The report's speculative-decoding lines.

use gapscope_analyzer::analysis::spec::{
    SpecBucket, SpecEvidence, SpecPrediction, SpecReport, SpecWhatIf, TokensSource,
};
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
    match s.tokens_per_step {
        Some(t) => {
            let over = if s.tokens_source == TokensSource::Metrics {
                String::new()
            } else {
                format!(
                    " over {} of {} decode steps",
                    s.steps_with_tokens, s.decode_steps
                )
            };
            v.push((
                "tokens/step".into(),
                format!(
                    "{t:.3} per sequence (mean acceptance length){over}; from {}",
                    s.tokens_from
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
        None => v.push((
            "tokens/step".into(),
            format!("acceptance {}", s.tokens_from),
        )),
    }
    let rejected = s
        .rejected_ms_per_step
        .map(|r| format!("; on rejected candidates {} ms of the two", ms(r)))
        .unwrap_or_default();
    if let Some(w) = &s.what_if {
        v.extend(what_if_lines(w));
    }
    v.push((
        "spec work".into(),
        format!(
            "per decode step, kernel time: draft {} ms, verify {} ms{rejected}",
            ms(s.draft_ms_per_step),
            ms(s.verify_ms_per_step)
        ),
    ));
    if !s.by_bucket.is_empty() {
        v.push(("spec buckets".into(), by_bucket(s)));
    }
    v
}

/// The four buckets with the most kernel time per decode step: draft / verify / rejected ms.
fn by_bucket(s: &SpecReport) -> String {
    let mut rows: Vec<&SpecBucket> = s.by_bucket.iter().collect();
    rows.sort_by(|a, b| {
        (b.draft_ms_per_step + b.verify_ms_per_step)
            .total_cmp(&(a.draft_ms_per_step + a.verify_ms_per_step))
    });
    let cells: Vec<String> = rows
        .iter()
        .take(4)
        .map(|b| {
            let rej = b
                .rejected_ms_per_step
                .map(|r| format!(" / {}", ms(r)))
                .unwrap_or_default();
            format!(
                "{} {} / {}{rej}",
                b.bucket.as_str(),
                ms(b.draft_ms_per_step),
                ms(b.verify_ms_per_step)
            )
        })
        .collect();
    let more = rows.len().saturating_sub(4);
    format!(
        "ms per decode step, draft / verify{}: {}{}",
        if s.rejected_ms_per_step.is_some() {
            " / rejected"
        } else {
            ""
        },
        cells.join("; "),
        if more > 0 {
            format!(" (+{more} more buckets in --json)")
        } else {
            String::new()
        }
    )
}

fn prediction(p: &SpecPrediction) -> String {
    let rates: Vec<String> = p.accept.iter().map(|a| format!("{a:.2}")).collect();
    format!(
        "k={} accept {}: step {} ms, {:.3} tokens, {:.1} tok/s ({:.2}x plain); kernel time only \
         {} ms, {:.1} tok/s",
        p.k,
        rates.join(","),
        ms(p.step_ms),
        p.tokens_per_step,
        p.tokens_per_s,
        p.speedup,
        ms(p.busy_step_ms),
        p.busy_tokens_per_s
    )
}

/// The what-if: costs, the best k at the measured acceptance, break-even, asked settings.
fn what_if_lines(w: &SpecWhatIf) -> Vec<(String, String)> {
    let c = &w.costs;
    let mut v = vec![(
        "what-if".into(),
        format!(
            "a draft forward {} ms, the verify and the rest {} ms per step (plain decode about \
             {} ms, {:.1} tok/s); best k at the measured acceptance: {} ({:.1} tok/s); \
             break-even acceptance per position: {}",
            ms(c.draft_ms),
            ms(c.verify_ms),
            ms(w.plain_step_ms),
            w.plain_tokens_per_s,
            w.best_k,
            w.by_k
                .iter()
                .find(|p| p.k == w.best_k)
                .map_or(0.0, |p| p.tokens_per_s),
            w.break_even
                .iter()
                .take(4)
                .map(|(k, a)| format!("k={k} {a:.2}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    )];
    for p in &w.settings {
        v.push(("what-if at".into(), prediction(p)));
    }
    v
}
