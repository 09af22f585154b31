//! HTML tables: one writer for every table, the cells escaped by kind, and the report's
//! bucket table (the text report's cells, with each bucket's colour).

use gapscope_analyzer::Bucket;
use gapscope_analyzer::analysis::BucketRow;

use super::{escape, style};
use crate::render::{BUCKET_HEADERS, bucket_cells};

/// One table cell; its text is escaped when the table is written.
pub enum Cell {
    /// Prose, left-aligned.
    Text(String),
    /// A figure, right-aligned.
    Num(String),
    /// A name from the trace (kernel, scope, path), in monospace.
    Code(String),
    /// A bucket with its colour swatch; a name that is no bucket is shown as text.
    Bucket(String),
}

impl Cell {
    fn html(&self) -> String {
        match self {
            Self::Text(s) => format!("<td>{}</td>", escape(s)),
            Self::Num(s) => format!("<td class=\"n\">{}</td>", escape(s)),
            Self::Code(s) => format!("<td class=\"k\">{}</td>", escape(s)),
            Self::Bucket(s) => match bucket_named(s) {
                Some(b) => format!("<td>{}{}</td>", swatch(style::bucket(b)), escape(s)),
                None => format!("<td>{}</td>", escape(s)),
            },
        }
    }

    fn numeric(&self) -> bool {
        matches!(self, Self::Num(_))
    }
}

/// The bucket called `name`.
pub fn bucket_named(name: &str) -> Option<Bucket> {
    Bucket::ALL.iter().copied().find(|b| b.as_str() == name)
}

/// A colour swatch (the colour is one of ours, never from an input).
pub fn swatch(colour: &str) -> String {
    format!("<span class=\"sw\" style=\"background:{colour}\"></span>")
}

/// A table with a header row; header cells over figure columns are right-aligned like them.
/// `class` is added to the `<table>` (empty: none).
pub fn table(class: &str, head: &[&str], rows: &[Vec<Cell>]) -> String {
    table_with_total(class, head, rows, None)
}

/// [`table`] with a last row in bold (a total).
pub fn table_with_total(
    class: &str,
    head: &[&str],
    rows: &[Vec<Cell>],
    total: Option<&[Cell]>,
) -> String {
    let mut s = if class.is_empty() {
        "<table>\n<thead><tr>".to_owned()
    } else {
        format!("<table class=\"{class}\">\n<thead><tr>")
    };
    for (i, h) in head.iter().enumerate() {
        let numeric = rows
            .first()
            .and_then(|r| r.get(i))
            .is_some_and(Cell::numeric);
        s.push_str(&format!(
            "<th{}>{}</th>",
            if numeric { " class=\"n\"" } else { "" },
            escape(h)
        ));
    }
    s.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        s.push_str("<tr>");
        for c in r {
            s.push_str(&c.html());
        }
        s.push_str("</tr>\n");
    }
    if let Some(t) = total {
        s.push_str("<tr class=\"total\">");
        for c in t {
            s.push_str(&c.html());
        }
        s.push_str("</tr>\n");
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

/// Label and value lines (the headline, the ranks' summary) as a two-column table.
pub fn facts(lines: &[(String, String)]) -> String {
    let mut s = String::from("<table class=\"facts\">\n<tbody>\n");
    for (label, value) in lines {
        s.push_str(&format!(
            "<tr><th>{}</th><td>{}</td></tr>\n",
            escape(label),
            code_spans(&escape(value))
        ));
    }
    s.push_str("</tbody>\n</table>\n");
    s
}

/// Escaped text with its backtick spans (`` `name` ``, as the lever sentence quotes a
/// scope) set as `<code>`; an odd count of backticks leaves the text as it is.
pub fn code_spans(escaped: &str) -> String {
    let parts: Vec<&str> = escaped.split('`').collect();
    if parts.len() < 3 || parts.len().is_multiple_of(2) {
        return escaped.to_owned();
    }
    let mut s = String::with_capacity(escaped.len() + 16);
    for (i, p) in parts.iter().enumerate() {
        if i % 2 == 1 {
            s.push_str("<code>");
            s.push_str(p);
            s.push_str("</code>");
        } else {
            s.push_str(p);
        }
    }
    s
}

/// The bucket table: the text report's columns and cells, the bucket with its colour, the
/// top kernel in monospace.
pub fn buckets(rows: &[BucketRow], names: &crate::render::Names) -> String {
    let last = BUCKET_HEADERS.len() - 1;
    let cells: Vec<Vec<Cell>> = bucket_cells(rows, names)
        .into_iter()
        .map(|r| {
            r.into_iter()
                .enumerate()
                .map(|(i, c)| match i {
                    0 => Cell::Bucket(c),
                    i if i == last => Cell::Code(c),
                    _ => Cell::Num(c),
                })
                .collect()
        })
        .collect();
    table("buckets", &BUCKET_HEADERS, &cells)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_are_escaped_and_code_spans_pair_up() {
        let t = table(
            "",
            &["a<b", "n"],
            &[vec![Cell::Code("<script>".into()), Cell::Num("1".into())]],
        );
        assert!(t.contains("a&lt;b") && t.contains("&lt;script&gt;"), "{t}");
        assert!(!t.contains("<script>"), "{t}");
        assert!(t.contains("<th class=\"n\">n</th>"), "{t}");
        assert_eq!(code_spans("in `x` now"), "in <code>x</code> now");
        assert_eq!(code_spans("odd ` one"), "odd ` one");
        assert!(Cell::Bucket("gemv".into()).html().contains("class=\"sw\""));
    }
}
