//! The self-contained HTML report: one file with its style sheet and charts inline (SVG),
//! no script, no font, no image or link outside it, so it reads the same attached to a pull
//! request, opened from a CI artifact or shown in a notebook.
//!
//! Like every renderer here it only draws: each figure and sentence comes from the typed
//! reports and the analysis tables (the headline lines are the text report's own). Every
//! string that comes from an input (paths, kernel and scope names, GPU and model names) goes
//! through [`escape`].
//!
//! - [`report_fragment`]: one trace as a `<div>` with its own scoped style sheet (a
//!   notebook's `_repr_html_`); needs only the report and its tables.
//! - [`report_page`]: the document `report --html` writes.
//! - [`diff_page`], [`diff_ranks_page`]: the documents `diff --html` writes.
//! - [`numerics_page`]: the document `numerics --html` writes.

mod charts;
mod diff;
mod headline;
mod numerics;
mod page;
mod style;
mod svg;
mod tables;
mod waterfall;

use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::analysis::ranks::RanksReport;
use gapscope_analyzer::diff::DiffReport;
use gapscope_analyzer::diff::ranks::RanksDiff;
use gapscope_analyzer::roofline::report::RooflineReport;
use gapscope_analyzer::roofline::{HardwareSpec, ModelSpec};
use gapscope_analyzer::tables::Tables;

/// The document `numerics --html` writes: the comparisons, the per-layer error chart and
/// each position's KL.
pub fn numerics_page(r: &gapscope_numerics::NumericsReport) -> String {
    numerics::page(r)
}

/// What the roofline chart is drawn from: the report `roofline_of` built, and the model and
/// GPU it was built for (the roofs are drawn as curves from them).
pub struct RooflineInput<'a> {
    pub report: &'a RooflineReport,
    pub model: &'a ModelSpec,
    pub hardware: &'a HardwareSpec,
}

/// Text made safe for HTML, in element content and in quoted attributes alike: `&`, `<`,
/// `>`, `"` and `'` as character references, control characters other than newline and tab
/// shown as `\u{..}` (as the terminal output shows them). Newlines stay: a `<pre>` block and
/// a hover title break lines at them.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32))
            }
            c => out.push(c),
        }
    }
    out
}

/// One trace's report as an HTML fragment: a `<div class="gapscope">` with a style sheet
/// scoped to it, the headline, the warnings, the idle causes, the per-step stacked chart,
/// the bucket bars and the bucket table. No `<html>` or `<body>`: for embedding (a
/// notebook's `_repr_html_`).
pub fn report_fragment(report: &Report, tables: &Tables) -> String {
    on_page(|| {
        format!(
            "<div class=\"gapscope\">\n<style>{}</style>\n{}</div>\n",
            style::CSS,
            page::trace_section(report, tables, None)
        )
    })
}

/// Runs `f` with kernel names cut as on a terminal: a page is laid out for a screen, whatever
/// the command's standard output is.
fn on_page<T>(f: impl FnOnce() -> T) -> T {
    use super::names::{NAME_CHARS, Width, with_width};
    with_width(Width::Cut(NAME_CHARS), f)
}

/// The whole document `report --html` writes: for each trace its section (as in
/// [`report_fragment`]); before them, for the ranks of one run, the ranks' verdict and
/// per-rank table; after them, when a model is given, the roofline chart with the traces'
/// decode steps placed on it.
pub fn report_page(
    traces: &[(&Report, &Tables)],
    ranks: Option<&RanksReport>,
    roofline: Option<&RooflineInput<'_>>,
) -> String {
    on_page(|| page::report(traces, ranks, roofline))
}

/// The document `diff A B --html` writes: the headline (both sides, the gap), a waterfall
/// from A's step to B's by bucket, the per-bucket attribution table, groups, idle,
/// what-ifs, structural changes and the kernels that moved.
pub fn diff_page(diff: &DiffReport) -> String {
    on_page(|| page::document("gapscope diff", &diff::body(diff)))
}

/// The document `diff --html` writes for two runs of several ranks: the rank comparison,
/// then the bucket diff of the rank that sets A's step, or why its buckets were not
/// compared (`buckets_refused`).
pub fn diff_ranks_page(
    diff: Option<&DiffReport>,
    ranks: &RanksDiff,
    buckets_refused: Option<&str>,
) -> String {
    on_page(|| {
        page::document(
            "gapscope diff",
            &diff::ranks_body(diff, ranks, buckets_refused),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_leaves_no_markup() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\"\u{1b}[31m"),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;\\u{1b}[31m"
        );
        assert_eq!(escape("plain ünïcode"), "plain ünïcode");
        assert_eq!(escape("two\nlines\r"), "two\nlines\\u{d}");
    }
}
