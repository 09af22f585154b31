//! Terminal table output (the default).

use gapscope_analyzer::analysis::Report;

use super::names::{self, Names, Width};
use super::{BUCKET_HEADERS, TELEMETRY_TITLE, bucket_cells, summary, telemetry};

/// Narrowest the last (name) column is cut to when the terminal is narrow.
const MIN_NAME_WIDTH: usize = 24;

/// `rows` under `headers`, aligned: the first and last columns left, the rest right, a rule
/// under the headers; on a narrow terminal the last column is cut in the middle (not with
/// `--wide`).
pub fn grid(headers: &[&str], rows: &[Vec<String>], out: &mut String) {
    let mut w: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    // On a terminal, the last column (kernel names) gives way so lines fit its width.
    let last = w.len() - 1;
    let fixed: usize = w[..last].iter().sum::<usize>() + 2 * last;
    let width = (names::width() != Width::Whole)
        .then(super::terminal_width)
        .flatten();
    let rows: Vec<Vec<String>> = match width {
        Some(cols) if fixed + w[last] > cols => {
            let room = cols.saturating_sub(fixed).max(MIN_NAME_WIDTH);
            w[last] = w[last].min(room).max(headers[last].chars().count());
            rows.iter()
                .map(|r| {
                    let mut r = r.clone();
                    if let Some(c) = r.last_mut() {
                        *c = names::middle_cut(c, room);
                    }
                    r
                })
                .collect()
        }
        _ => rows.to_vec(),
    };
    let line = |cells: Vec<&str>, out: &mut String| {
        let last = cells.len() - 1;
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i == 0 || i == last {
                out.push_str(c);
                if i != last {
                    out.push_str(&" ".repeat(pad));
                }
            } else {
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            }
            if i != last {
                out.push_str("  ");
            }
        }
        out.push('\n');
    };
    line(headers.to_vec(), out);
    let total: usize = w.iter().sum::<usize>() + 2 * (w.len() - 1);
    out.push_str(&"-".repeat(total));
    out.push('\n');
    for r in &rows {
        line(r.iter().map(String::as_str).collect(), out);
    }
}

/// The table report; `top_kernels` adds each bucket's listed kernel names.
pub fn reports(reports: &[Report], top_kernels: bool) -> String {
    let mut out = String::new();
    for (n, r) in reports.iter().enumerate() {
        if n > 0 {
            out.push('\n');
        }
        let names = Names::of_report(r);
        let s = summary(r);
        let lw = s.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
        for (l, v) in &s {
            out.push_str(&format!("{l:<lw$}  {v}\n"));
        }
        for w in &r.warnings {
            out.push_str(&format!("{:<lw$}  {}\n", "warning", super::text(w)));
        }
        out.push('\n');
        if let Some(t) = &r.telemetry {
            let lines = telemetry(t);
            let lw = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
            out.push_str(TELEMETRY_TITLE);
            out.push('\n');
            for (l, v) in &lines {
                out.push_str(&format!("  {l:<lw$}  {v}\n"));
            }
            out.push('\n');
        }
        out.push_str(r.bucket_scope.title());
        out.push('\n');
        grid(&BUCKET_HEADERS, &bucket_cells(&r.buckets, &names), &mut out);
        if !r.prefill_buckets.is_empty() {
            out.push_str("\nbuckets per prefill step\n");
            grid(
                &BUCKET_HEADERS,
                &bucket_cells(&r.prefill_buckets, &names),
                &mut out,
            );
        }
        if let Some(g) = &r.groups {
            let (title, rows) = super::group_cells(g);
            out.push_str(&format!("\n{title}\n"));
            grid(&super::GROUP_HEADERS, &rows, &mut out);
        }
        if top_kernels {
            out.push_str("\ntop kernels per bucket (decode steps)\n");
            grid(
                &super::TOP_HEADERS,
                &super::top_cells(&r.buckets, &names),
                &mut out,
            );
        }
        if !r.other.top.is_empty() {
            out.push_str("\ntop `other` kernels (add rules with --rules FILE)\n");
            for t in &r.other.top {
                out.push_str(&format!(
                    "  {:>10} ms  {:>7} calls  {}\n",
                    super::ms(t.ms),
                    t.calls,
                    super::text(&t.name)
                ));
            }
        }
    }
    out
}
