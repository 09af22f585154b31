//! The diff's waterfall: from A's step down (or up) bucket by bucket and through the
//! residual idle to B's step, one floating bar per part of the gap.

use gapscope_analyzer::diff::DiffReport;

use super::charts::legend;
use super::escape;
use super::style;
use super::svg::{HBar, hbars};
use crate::render::ms;

/// Deltas smaller than this (ms/step) are left out of the chart (the table keeps them).
const MIN_DELTA_MS: f64 = 5e-5;

fn signed(v: f64) -> String {
    if v >= 0.0 {
        format!("+{} ms", ms(v))
    } else {
        format!("−{} ms", ms(-v))
    }
}

/// The waterfall with its legend and caption.
pub fn chart(d: &DiffReport) -> String {
    let mut parts: Vec<_> = d
        .buckets
        .iter()
        .filter(|b| b.delta_ms.abs() >= MIN_DELTA_MS)
        .collect();
    parts.sort_by(|a, b| b.delta_ms.abs().total_cmp(&a.delta_ms.abs()));
    let mut bars = vec![HBar {
        label: "A step".into(),
        start: 0.0,
        end: d.a.step_ms,
        colour: style::STEP_A,
        text: format!("{} ms", ms(d.a.step_ms)),
        tip: format!("A: {} ms/step", ms(d.a.step_ms)),
    }];
    let mut level = d.a.step_ms;
    for b in &parts {
        let next = level - b.delta_ms;
        bars.push(HBar {
            label: b.bucket.as_str().to_owned(),
            start: level,
            end: next,
            colour: style::bucket(b.bucket),
            text: signed(b.delta_ms),
            tip: format!(
                "{}: A {} ms/step, B {} ms/step, A − B {}{}",
                b.bucket.as_str(),
                ms(b.a_ms_per_step),
                ms(b.b_ms_per_step),
                signed(b.delta_ms),
                b.share_of_gap_pct
                    .map(|p| format!(" ({p:.1}% of the gap)"))
                    .unwrap_or_default()
            ),
        });
        level = next;
    }
    if d.residual_ms.abs() >= MIN_DELTA_MS {
        let next = level - d.residual_ms;
        bars.push(HBar {
            label: "residual (idle)".into(),
            start: level,
            end: next,
            colour: style::IDLE,
            text: signed(d.residual_ms),
            tip: format!("residual (idle, overlap): A − B {}", signed(d.residual_ms)),
        });
    }
    bars.push(HBar {
        label: "B step".into(),
        start: 0.0,
        end: d.b.step_ms,
        colour: style::STEP_B,
        text: format!("{} ms", ms(d.b.step_ms)),
        tip: format!("B: {} ms/step", ms(d.b.step_ms)),
    });
    let buckets: Vec<_> = parts.iter().map(|b| b.bucket).collect();
    // The deltas alone, from zero: small next to the steps, they read better on their own.
    let deltas: Vec<HBar> = bars[1..bars.len() - 1]
        .iter()
        .map(|b| HBar {
            label: b.label.clone(),
            start: 0.0,
            end: b.start - b.end,
            colour: b.colour,
            text: b.text.clone(),
            tip: b.tip.clone(),
        })
        .collect();
    let mut s = format!(
        "<figure>\n{}{}<figcaption>{}</figcaption>\n</figure>\n",
        legend(&buckets, d.residual_ms.abs() >= MIN_DELTA_MS, false),
        hbars(&bars, "ms/step", true),
        escape(
            "From A's step to B's: each bar is one bucket's A − B (largest first), then the \
             residual idle. A bar going left is time A spends more than B."
        )
    );
    if !deltas.is_empty() {
        s.push_str(&format!(
            "<figure>\n{}<figcaption>{}</figcaption>\n</figure>\n",
            hbars(&deltas, "A − B, ms/step", false),
            escape("The same deltas from zero: right, A spends more than B; left, less.")
        ));
    }
    s
}
