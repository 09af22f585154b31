//! Markdown output, for CI step summaries and notes.

use gapscope_analyzer::analysis::Report;

use super::{
    BUCKET_HEADERS, TELEMETRY_TITLE, bucket_cells, md_code, md_text, summary, telemetry, text,
};

/// Column alignment in a Markdown table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

impl Align {
    /// The report's layout: the first and last column left (names), the rest right (figures).
    pub fn edges_left(n: usize) -> Vec<Align> {
        (0..n)
            .map(|i| {
                if i == 0 || i + 1 == n {
                    Align::Left
                } else {
                    Align::Right
                }
            })
            .collect()
    }

    /// The first `left` columns left (names), the rest right (figures).
    pub fn names_then_figures(left: usize, n: usize) -> Vec<Align> {
        (0..n)
            .map(|i| if i < left { Align::Left } else { Align::Right })
            .collect()
    }
}

/// One table cell; [`table`] escapes it according to its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// A label or a figure: control characters, `\`, `|` and backticks escaped, nothing else.
    Text(String),
    /// Prose from a trace or the analyzer, escaped as [`md_text`].
    Prose(String),
    /// A name as inline code ([`md_code`]); an empty name stays an empty cell.
    Code(String),
}

impl Cell {
    fn render(&self) -> String {
        match self {
            Cell::Text(s) => {
                let mut out = String::with_capacity(s.len());
                for c in text(s).chars() {
                    if matches!(c, '\\' | '|' | '`') {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out
            }
            Cell::Prose(s) => md_text(s),
            Cell::Code(s) if s.is_empty() => String::new(),
            Cell::Code(s) => md_code(s),
        }
    }
}

/// Plain cells (labels and figures) as [`Cell::Text`].
pub fn text_row(cells: Vec<String>) -> Vec<Cell> {
    cells.into_iter().map(Cell::Text).collect()
}

/// The one Markdown table writer: headers, one alignment per column, and rows of cells,
/// each escaped by its kind.
pub fn table(headers: &[&str], align: &[Align], rows: &[Vec<Cell>]) -> String {
    let head: Vec<String> = headers
        .iter()
        .map(|h| Cell::Text((*h).to_owned()).render())
        .collect();
    let mut out = format!("| {} |\n", head.join(" | "));
    let rule: Vec<&str> = (0..headers.len())
        .map(|i| match align.get(i) {
            Some(Align::Right) => "---:",
            _ => "---",
        })
        .collect();
    out.push_str(&format!("| {} |\n", rule.join(" | ")));
    for r in rows {
        let cells: Vec<String> = r.iter().map(Cell::render).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

/// The Markdown report; `top_kernels` adds each bucket's listed kernel names.
pub fn reports(reports: &[Report], top_kernels: bool) -> String {
    let mut out = String::new();
    for r in reports {
        let names = super::Names::of_report(r);
        out.push_str(&format!(
            "## gapscope report: {}\n\n",
            md_code(&r.source.path)
        ));
        out.push_str(&facts(&summary(r)));
        for w in &r.warnings {
            out.push_str(&format!("- **warning**: {}\n", md_text(w)));
        }
        if let Some(t) = &r.telemetry {
            out.push_str(&format!("\n### {TELEMETRY_TITLE}\n\n"));
            out.push_str(&facts(&telemetry(t)));
        }
        let title = r.bucket_scope.title();
        out.push_str(&format!(
            "\n### {}{}\n\n",
            title[..1].to_uppercase(),
            &title[1..]
        ));
        report_table(&BUCKET_HEADERS, md_cells(&r.buckets, &names), &mut out);
        if !r.prefill_buckets.is_empty() {
            out.push_str("\n### Buckets per prefill step\n\n");
            report_table(
                &BUCKET_HEADERS,
                md_cells(&r.prefill_buckets, &names),
                &mut out,
            );
        }
        if let Some(g) = &r.groups {
            let (title, rows) = super::group_cells(g);
            let rows = rows.into_iter().map(|r| code_at(r, 4)).collect();
            out.push_str(&format!("\n### {}\n\n", md_text(&title)));
            report_table(&super::GROUP_HEADERS, rows, &mut out);
        }
        if top_kernels {
            out.push_str("\n### Top kernels per bucket\n\n");
            let rows = super::top_cells(&r.buckets, &names)
                .into_iter()
                .map(|r| code_at(r, super::TOP_HEADERS.len() - 1))
                .collect();
            report_table(&super::TOP_HEADERS, rows, &mut out);
        }
        if !r.other.top.is_empty() {
            out.push_str("\n### Top `other` kernels\n\n");
            let rows = r
                .other
                .top
                .iter()
                .map(|t| {
                    vec![
                        Cell::Code(t.name.clone()),
                        Cell::Text(super::ms(t.ms)),
                        Cell::Text(t.calls.to_string()),
                    ]
                })
                .collect();
            report_table(&["kernel", "ms", "calls"], rows, &mut out);
        }
        out.push('\n');
    }
    out
}

/// (label, value) lines as a list, `- **label**: value`. A line without a label goes on the
/// item above it (the text output leaves its label column blank there), as a nested item.
pub fn facts(lines: &[(String, String)]) -> String {
    let mut out = String::new();
    for (l, v) in lines {
        if l.is_empty() {
            out.push_str(&format!("  - {}\n", md_text(v)));
        } else {
            out.push_str(&format!("- **{l}**: {}\n", md_text(v)));
        }
    }
    out
}

/// A report table, laid out by [`Align::edges_left`].
fn report_table(headers: &[&str], rows: Vec<Vec<Cell>>, out: &mut String) {
    out.push_str(&table(headers, &Align::edges_left(headers.len()), &rows));
}

/// Plain cells with column `i` as inline code.
fn code_at(cells: Vec<String>, i: usize) -> Vec<Cell> {
    cells
        .into_iter()
        .enumerate()
        .map(|(j, c)| if j == i { Cell::Code(c) } else { Cell::Text(c) })
        .collect()
}

/// The bucket cells with the kernel-name column (the last) as inline code.
fn md_cells(
    rows: &[gapscope_analyzer::analysis::BucketRow],
    names: &super::Names,
) -> Vec<Vec<Cell>> {
    bucket_cells(rows, names)
        .into_iter()
        .map(|c| {
            let last = c.len().saturating_sub(1);
            code_at(c, last)
        })
        .collect()
}

/// The multi-rank section in Markdown.
pub fn ranks(r: &gapscope_analyzer::analysis::ranks::RanksReport) -> String {
    use super::ranks::{RANK_HEADERS, rank_cells, summary};
    let mut out = String::from("## gapscope run: ranks\n\n");
    out.push_str(&facts(&summary(r)));
    out.push('\n');
    let rows: Vec<Vec<Cell>> = rank_cells(r)
        .into_iter()
        .map(|mut c| {
            let trace = c.pop().unwrap_or_default();
            let mut row = text_row(c);
            row.push(Cell::Code(trace));
            row
        })
        .collect();
    let mut align = vec![Align::Right; RANK_HEADERS.len()];
    align[0] = Align::Left;
    align[RANK_HEADERS.len() - 1] = Align::Left;
    out.push_str(&table(&RANK_HEADERS, &align, &rows));
    out.push('\n');
    out
}
