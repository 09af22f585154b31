//! A trace's headline: the key figures as cards, the text report's summary lines, the
//! warnings, and why the GPU sat idle (causes, host scopes, the lever).

use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::host::HostIdleReport;
use gapscope_analyzer::analysis::steps::StepKind;

use super::escape;
use super::tables::{Cell, code_spans, facts, table, table_with_total};
use crate::render::{ms, pct, summary, text};

/// The summary's label for the implausible-steps warning.
const IMPLAUSIBLE: &str = "WARNING";

/// The cards, the warnings and the summary lines.
pub fn headline(r: &Report) -> String {
    let mut s = cards(r);
    let lines = summary(r);
    for (label, value) in lines.iter().filter(|(l, _)| l == IMPLAUSIBLE) {
        s.push_str(&format!(
            "<div class=\"warn bad\"><b>{}</b>{}</div>\n",
            escape(label),
            escape(value)
        ));
    }
    for w in &r.warnings {
        s.push_str(&format!(
            "<div class=\"warn\"><b>warning</b>{}</div>\n",
            escape(&text(w))
        ));
    }
    let rest: Vec<(String, String)> = lines
        .into_iter()
        .filter(|(l, _)| l != IMPLAUSIBLE)
        .collect();
    s.push_str(&facts(&rest));
    s
}

/// The key figures, each a card: TPOT (or the iteration time), steps, GPU busy, idle
/// inside and between the steps, the largest idle cause.
fn cards(r: &Report) -> String {
    let st = &r.steps;
    let mut c: Vec<(String, String)> = Vec::new();
    if st.kind == StepKind::TrainingIterations {
        c.push(("training iterations".into(), st.iterations.to_string()));
        if let Some(t) = &st.iteration_ms {
            c.push(("iteration median".into(), format!("{} ms", ms(t.median))));
        }
    } else {
        c.push(("decode steps".into(), st.decode_steps.to_string()));
        c.push((
            "TPOT median".into(),
            st.tpot_ms
                .as_ref()
                .map_or("n/a".to_owned(), |t| format!("{} ms", ms(t.median))),
        ));
    }
    if let Some(b) = st.decode_busy_pct {
        c.push(("GPU busy in the steps".into(), pct(b)));
    }
    if let Some(x) = st.launch_gap_ms_per_step {
        c.push(("idle inside steps".into(), format!("{} ms/step", ms(x))));
    }
    if let Some(x) = st.host_gap_ms_per_step {
        c.push(("idle between steps".into(), format!("{} ms/step", ms(x))));
    }
    if let Some(h) = &r.host_idle
        && h.inside_steps.idle_ms_per_step > 0.0
        && let Some((cause, x)) = h.inside_steps.ranked().first().copied()
        && x > 0.0
    {
        c.push((
            "top idle cause".into(),
            format!(
                "{} {}",
                cause.label(),
                pct(100.0 * x / h.inside_steps.idle_ms_per_step)
            ),
        ));
    }
    let mut s = String::from("<div class=\"cards\">\n");
    for (label, value) in c {
        s.push_str(&format!(
            "<div class=\"card\"><div class=\"l\">{}</div><div class=\"v\">{}</div></div>\n",
            escape(&label),
            escape(&value)
        ));
    }
    s.push_str("</div>\n");
    s
}

/// Why the GPU sat idle: the causes inside and between the steps, the host scopes the idle
/// inside the steps was spent in, and the lever. Empty without a host-side attribution.
pub fn idle(r: &Report) -> String {
    let Some(h) = &r.host_idle else {
        return String::new();
    };
    let mut s = String::from("<h3>Why the GPU was idle</h3>\n");
    s.push_str(&causes(h));
    if !h.top_scopes.is_empty() {
        let rows: Vec<Vec<Cell>> = h
            .top_scopes
            .iter()
            .map(|t| {
                vec![
                    Cell::Num(ms(t.ms_per_step)),
                    Cell::Num(pct(t.share_of_idle_pct)),
                    Cell::Code(text(&t.name)),
                    Cell::Text(t.kind.to_string()),
                    Cell::Code(text(
                        &t.stack
                            .iter()
                            .skip(1)
                            .take(3)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(" < "),
                    )),
                ]
            })
            .collect();
        s.push_str(&table(
            "",
            &["ms/step", "% of idle", "host scope", "kind", "inside"],
            &rows,
        ));
    }
    s.push_str(&format!(
        "<div class=\"lever\"><b>lever</b> {}</div>\n",
        code_spans(&escape(&text(&h.lever.to_string())))
    ));
    s
}

/// The idle-cause table: each cause's ms/step and share, inside and between the steps.
fn causes(h: &HostIdleReport) -> String {
    let (inside, between) = (&h.inside_steps, &h.between_steps);
    let share = |x: f64, total: f64| {
        if total > 0.0 {
            pct(100.0 * x / total)
        } else {
            "-".to_owned()
        }
    };
    let between_of = |cause| {
        between
            .ranked()
            .into_iter()
            .find(|(c, _)| *c == cause)
            .map_or(0.0, |(_, x)| x)
    };
    let rows: Vec<Vec<Cell>> = inside
        .ranked()
        .into_iter()
        .map(|(cause, x)| {
            let b = between_of(cause);
            vec![
                Cell::Text(cause.label().to_owned()),
                Cell::Num(ms(x)),
                Cell::Num(share(x, inside.idle_ms_per_step)),
                Cell::Num(ms(b)),
                Cell::Num(share(b, between.idle_ms_per_step)),
            ]
        })
        .collect();
    let total = [
        Cell::Text("all idle".into()),
        Cell::Num(ms(inside.idle_ms_per_step)),
        Cell::Num(String::new()),
        Cell::Num(ms(between.idle_ms_per_step)),
        Cell::Num(String::new()),
    ];
    let mut t = table_with_total(
        "causes",
        &[
            "cause",
            "inside steps ms/step",
            "% of inside",
            "between steps ms/step",
            "% of between",
        ],
        &rows,
        Some(&total),
    );
    t.push_str(&format!(
        "<p class=\"sub\">{} idle gaps over {} steps, {} linked to their launch; {}</p>\n",
        crate::render::count(h.gaps as u64),
        h.steps,
        pct(h.linked_pct),
        if h.scopes == 0 {
            "no host scopes in the trace".to_owned()
        } else {
            format!("{} host scopes", crate::render::count(h.scopes as u64))
        }
    ));
    t
}
