//! The numerics page (`gapscope numerics --html`): each dump against the reference as a
//! table, the relative error of the residual stream layer by layer (the identity pair's
//! floor dashed), and each comparison's KL position by position.

use gapscope_numerics::{Comparison, NumericsReport};

use super::escape;
use super::page::document;
use super::style;
use super::svg::{Frame, axis_y, fmt_px, svg_close, svg_open, x_title};
use super::tables::{Cell, table};
use crate::numerics_cmd::{short, signed_pct};

/// Line colours, one per comparison (cycled), apart in hue and lightness.
const LINES: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

fn row(c: &Comparison, name: String) -> Vec<Cell> {
    let s = &c.summary;
    vec![
        Cell::Text(name),
        Cell::Text(c.other.dtype.clone()),
        Cell::Text(c.verdict.as_str().to_owned()),
        Cell::Num(short(s.kl_mean)),
        Cell::Num(format!("{:.2}%", s.top1_agreement_pct)),
        Cell::Num(signed_pct(s.dppl_pct)),
        Cell::Text(s.dppl_ci_pct.map_or_else(
            || "one passage".to_owned(),
            |(lo, hi)| format!("{} .. {}", signed_pct(lo), signed_pct(hi)),
        )),
        Cell::Num(
            c.layers
                .as_ref()
                .and_then(|l| l.first_diverging)
                .map_or_else(|| "-".to_owned(), |n| n.to_string()),
        ),
    ]
}

/// A line per series over x = 0..n, on an axis from 0 to the largest value.
fn lines(
    label: &str,
    unit: &str,
    x_name: &str,
    series: &[(String, &'static str, bool, Vec<f64>)],
) -> String {
    let n = series.iter().map(|s| s.3.len()).max().unwrap_or(0).max(2);
    let max = series
        .iter()
        .flat_map(|s| s.3.iter().copied())
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let f = Frame::new(760.0, 300.0, 70.0, 20.0, 16.0, 44.0);
    let mut s = svg_open(&f, label);
    let top = axis_y(&mut s, &f, if max > 0.0 { max } else { 1.0 }, unit);
    let x = |i: usize| f.left + f.plot_w() * i as f64 / (n - 1) as f64;
    let every = n.div_ceil(12).max(1);
    for i in (0..n).step_by(every) {
        s.push_str(&format!(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" fill=\"{}\">{i}</text>\n",
            fmt_px(x(i)),
            fmt_px(f.bottom() + 16.0),
            style::AXIS
        ));
    }
    s.push_str(&x_title(&f, x_name, 6.0));
    for (name, colour, dashed, v) in series {
        let pts: Vec<String> = v
            .iter()
            .enumerate()
            .filter(|(_, y)| y.is_finite())
            .map(|(i, y)| {
                format!(
                    "{},{}",
                    fmt_px(x(i)),
                    fmt_px(f.bottom() - y / top * f.plot_h())
                )
            })
            .collect();
        s.push_str(&format!(
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\"{}><title>{}</title></polyline>\n",
            pts.join(" "),
            if *dashed { " stroke-dasharray=\"5 4\"" } else { "" },
            escape(name)
        ));
    }
    s + &svg_close()
}

fn legend(series: &[(String, &'static str, bool, Vec<f64>)]) -> String {
    let items: Vec<String> = series
        .iter()
        .map(|(name, colour, dashed, _)| {
            format!(
                "<span class=\"lg\"><span class=\"sw\" style=\"background:{colour}{}\"></span>{}</span>",
                if *dashed { ";opacity:.6" } else { "" },
                escape(name)
            )
        })
        .collect();
    format!("<p>{}</p>\n", items.join(" "))
}

/// The document `gapscope numerics --html` writes.
pub fn page(r: &NumericsReport) -> String {
    let d = &r.reference;
    let mut body = format!(
        "<h1>Numerics against {}</h1>\n<p>Reference: <code>{}</code> ({}, {} passage(s) × {} tokens, vocabulary {}, {} layers). \
         ACCEPT at |Δppl| ≤ {}% and top-1 ≥ {}%, MARGINAL at ≤ {}% and ≥ {}%, else REJECT.</p>\n",
        escape(&d.label()),
        escape(&d.path),
        escape(&d.dtype),
        d.passages,
        d.positions,
        d.vocab,
        d.layers,
        r.thresholds.max_dppl_pct,
        r.thresholds.min_top1_pct,
        r.thresholds.marginal_dppl_pct,
        r.thresholds.marginal_top1_pct
    );
    let mut rows = Vec::new();
    if let Some(c) = &r.identity {
        rows.push(row(
            c,
            format!("{} (identity pair: the floor)", c.other.label()),
        ));
    }
    for c in &r.comparisons {
        rows.push(row(c, c.other.label()));
    }
    body += &table(
        "",
        &[
            "dump",
            "dtype",
            "verdict",
            "KL mean",
            "top-1",
            "Δppl",
            "95% CI",
            "first diverging layer",
        ],
        &rows,
    );
    let mut layer_series = Vec::new();
    if let Some(f) = r.identity.as_ref().and_then(|c| c.layers.as_ref()) {
        layer_series.push((
            "identity pair (floor)".to_owned(),
            style::AXIS,
            true,
            f.error.clone(),
        ));
    }
    for (i, c) in r.comparisons.iter().enumerate() {
        if let Some(l) = &c.layers {
            layer_series.push((
                c.other.label(),
                LINES[i % LINES.len()],
                false,
                l.error.clone(),
            ));
        }
    }
    if layer_series.is_empty() {
        body += "<p>No per-layer chart: the dumps hold no hidden states.</p>\n";
    } else {
        body += "<h2>Residual stream, layer by layer</h2>\n<p>Relative error ‖h − h<sub>ref</sub>‖ / ‖h<sub>ref</sub>‖ after each decoder layer.</p>\n";
        body += &lines(
            "relative error by layer",
            "relative error",
            "layer",
            &layer_series,
        );
        body += &legend(&layer_series);
        let notes: Vec<String> = r
            .comparisons
            .iter()
            .filter_map(|c| {
                let l = c.layers.as_ref()?;
                let split = l.split.map_or(String::new(), |s| {
                    format!(
                        "; final error {} = baseline shift {:.0}% + compounding {:.0}%",
                        short(s.final_error),
                        s.baseline_pct,
                        s.compounding_pct
                    )
                });
                Some(format!(
                    "<li>{}: first diverging layer {}{}</li>",
                    escape(&c.other.label()),
                    l.first_diverging
                        .map_or_else(|| "none".to_owned(), |n| n.to_string()),
                    escape(&split)
                ))
            })
            .collect();
        body += &format!("<ul>{}</ul>\n", notes.join(""));
    }
    let kl_series: Vec<_> = r
        .comparisons
        .iter()
        .enumerate()
        .map(|(i, c)| {
            (
                c.other.label(),
                LINES[i % LINES.len()],
                false,
                c.positions.iter().map(|p| p.kl).collect::<Vec<f64>>(),
            )
        })
        .collect();
    body += "<h2>KL divergence, position by position</h2>\n<p>KL(reference ‖ dump) of each position's next-token distribution, nats; passages one after another.</p>\n";
    body += &lines("KL by position", "KL, nats", "position", &kl_series);
    body += &legend(&kl_series);
    document(&format!("gapscope numerics: {}", d.label()), &body)
}
