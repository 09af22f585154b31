//! The document around the sections, one trace's section, and the report page's ranks and
//! roofline sections.

use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::ranks::RanksReport;
use gapscope_analyzer::tables::Tables;

use super::tables::{Cell, facts, table};
use super::{RooflineInput, charts, escape, headline, style, tables};
use crate::render::{TELEMETRY_TITLE, ms, ranks, telemetry, text};

/// A complete document: `title`, the style sheet, and `body` inside `<main>`. The content
/// security policy forbids every script and every load from outside the page, so even a
/// string that escaped escaping could run or fetch nothing.
pub fn document(title: &str, body: &str) -> String {
    let version = env!("CARGO_PKG_VERSION");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <meta name=\"generator\" content=\"gapscope {version}\">\n\
         <title>{}</title>\n<style>html,body{{margin:0;background:#fff}}{}</style>\n\
         </head>\n<body>\n<main class=\"gapscope\">\n{body}\
         <footer>Written by gapscope {version}. Self-contained: no script, font or file \
         outside this page.</footer>\n</main>\n</body>\n</html>\n",
        escape(title),
        style::CSS
    )
}

/// The last component of a path as reports name traces.
fn file_name(path: &str) -> &str {
    path.trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()
        .filter(|n| !n.is_empty())
        .unwrap_or(path)
}

/// One trace's section: its name, headline, per-step chart, bucket bars and table, idle
/// causes, telemetry and its `other` kernels. `anchor`: the section's id on a page.
pub fn trace_section(r: &Report, t: &Tables, anchor: Option<usize>) -> String {
    let mut s = match anchor {
        Some(i) => format!("<section class=\"trace\" id=\"trace-{i}\">\n"),
        None => "<section class=\"trace\">\n".to_owned(),
    };
    let path = text(&r.source.path);
    s.push_str(&format!(
        "<h2>{}</h2>\n<p class=\"sub\">{}</p>\n",
        escape(file_name(&path)),
        escape(&path)
    ));
    s.push_str(&headline::headline(r));
    s.push_str("<h3>Time per step</h3>\n");
    s.push_str(&charts::steps(r, t));
    s.push_str(&format!("<h3>{}</h3>\n", escape(r.bucket_scope.title())));
    s.push_str(&charts::bucket_bars(r));
    let names = crate::render::Names::of_report(r);
    s.push_str(&tables::buckets(&r.buckets, &names));
    if !r.prefill_buckets.is_empty() {
        s.push_str("<h3>buckets per prefill step</h3>\n");
        s.push_str(&tables::buckets(&r.prefill_buckets, &names));
    }
    s.push_str(&headline::idle(r));
    if let Some(tel) = &r.telemetry {
        s.push_str(&format!("<h3>{}</h3>\n", escape(TELEMETRY_TITLE)));
        s.push_str(&facts(&telemetry(tel)));
    }
    if !r.other.top.is_empty() {
        s.push_str("<h3>Top <code>other</code> kernels</h3>\n");
        let rows: Vec<Vec<Cell>> = r
            .other
            .top
            .iter()
            .map(|n| {
                vec![
                    Cell::Num(ms(n.ms)),
                    Cell::Num(n.calls.to_string()),
                    Cell::Code(text(&n.name)),
                ]
            })
            .collect();
        s.push_str(&table("", &["total ms", "calls", "kernel"], &rows));
        s.push_str("<p class=\"sub\">Add rules for them with <code>--rules FILE</code>.</p>\n");
    }
    s.push_str("</section>\n");
    s
}

/// The report page: title, the list of traces, the ranks, each trace, the roofline.
pub fn report(
    traces: &[(&Report, &Tables)],
    ranks: Option<&RanksReport>,
    roofline: Option<&RooflineInput<'_>>,
) -> String {
    let mut s = String::from("<h1>gapscope report</h1>\n");
    let names: Vec<String> = traces
        .iter()
        .map(|(r, _)| file_name(&text(&r.source.path)).to_owned())
        .collect();
    let title = match names.as_slice() {
        [one] => format!("gapscope report: {one}"),
        _ => format!("gapscope report: {} traces", names.len()),
    };
    if names.len() > 1 {
        s.push_str("<nav><p>");
        for (i, n) in names.iter().enumerate() {
            s.push_str(&format!(
                "{}<a href=\"#trace-{i}\">{}</a>",
                if i > 0 { " · " } else { "" },
                escape(n)
            ));
        }
        if roofline.is_some() {
            s.push_str(" · <a href=\"#roofline\">roofline</a>");
        }
        s.push_str("</p></nav>\n");
    }
    if let Some(r) = ranks {
        s.push_str(&ranks_section(r));
    }
    for (i, (r, t)) in traces.iter().enumerate() {
        s.push_str(&trace_section(r, t, Some(i)));
    }
    if let Some(rf) = roofline {
        s.push_str(&roofline_section(rf));
    }
    document(&title, &s)
}

/// The ranks of one run: the verdict, the summary lines and the per-rank table.
fn ranks_section(r: &RanksReport) -> String {
    let mut s = String::from("<section class=\"ranks\">\n<h2>Ranks of one run</h2>\n");
    s.push_str(&format!(
        "<div class=\"lever\"><b>verdict</b> {}</div>\n",
        tables::code_spans(&escape(&ranks::verdict(r)))
    ));
    let lines: Vec<(String, String)> = ranks::summary(r)
        .into_iter()
        .filter(|(l, _)| l != "verdict")
        .collect();
    s.push_str(&facts(&lines));
    s.push_str(
        "<h3>Per rank</h3>\n<p class=\"sub\">Medians over the aligned steps, ms (working % = \
         busy without communication wait).</p>\n",
    );
    let last = ranks::RANK_HEADERS.len() - 1;
    let rows: Vec<Vec<Cell>> = ranks::rank_cells(r)
        .into_iter()
        .map(|row| {
            row.into_iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == last {
                        Cell::Code(c)
                    } else {
                        Cell::Num(c)
                    }
                })
                .collect()
        })
        .collect();
    s.push_str(&table("", &ranks::RANK_HEADERS, &rows));
    s.push_str("</section>\n");
    s
}

/// The roofline chart (the `roofline --svg` drawing) and the measured steps against it.
fn roofline_section(rf: &RooflineInput<'_>) -> String {
    let r = rf.report;
    let mut s = String::from("<section class=\"roofline\" id=\"roofline\">\n<h2>Roofline</h2>\n");
    match crate::render::roofline_svg::render(r, rf.model, rf.hardware) {
        // plotters escapes the text it draws; the XML prolog has no place inside HTML.
        Ok(svg) => {
            let at = svg.find("<svg").unwrap_or(0);
            s.push_str(&format!("<figure>\n{}\n", &svg[at..]));
            s.push_str(&format!(
                "<figcaption>Tokens per second against batch, log-log: the floors of {} on {} \
                 ({} weights, context {} tokens{}), and each trace's decode steps (green, \
                 numbered as below).</figcaption>\n</figure>\n",
                escape(&text(if r.model.model_type.is_empty() {
                    "the model"
                } else {
                    &r.model.model_type
                })),
                escape(&text(&r.hardware.name)),
                r.weights,
                r.ctx,
                if r.tp > 1 {
                    format!(", one rank of tensor parallel {}", r.tp)
                } else {
                    String::new()
                }
            ));
        }
        Err(e) => s.push_str(&format!(
            "<div class=\"warn\"><b>roofline</b>not drawn: {}</div>\n",
            escape(&text(&e.to_string()))
        )),
    }
    let rows: Vec<Vec<Cell>> = r
        .measured
        .iter()
        .enumerate()
        .map(|(i, m)| {
            vec![
                Cell::Num((i + 1).to_string()),
                Cell::Code(text(&m.trace)),
                Cell::Num(m.batch.to_string()),
                Cell::Num(m.decode_steps.to_string()),
                Cell::Num(format!("{:.3}", m.tpot_median_ms)),
                Cell::Num(format!("{:.1}", m.tok_per_s)),
                Cell::Num(format!("{:.4}", m.floor_ms)),
                Cell::Num(crate::render::x_floor(m.tpot_median_ms, m.floor_ms)),
                Cell::Num(crate::render::pct1(m.pct_of_floor_median)),
                Cell::Text(text(&m.notes.join("; "))),
            ]
        })
        .collect();
    if !rows.is_empty() {
        s.push_str(&table(
            "",
            &[
                "#",
                "trace",
                "batch",
                "decode steps",
                "TPOT median ms",
                "tok/s",
                "floor ms",
                "× floor",
                "efficiency",
                "notes",
            ],
            &rows,
        ));
    }
    for n in &r.not_placed {
        s.push_str(&format!(
            "<p class=\"sub\">{}: not placed: {}</p>\n",
            escape(&text(&n.trace)),
            escape(&text(&n.reason))
        ));
    }
    s.push_str("</section>\n");
    s
}
