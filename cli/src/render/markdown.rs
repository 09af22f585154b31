//! Markdown output, for CI step summaries and notes.

use gapscope_analyzer::analysis::Report;

use super::{BUCKET_HEADERS, TELEMETRY_TITLE, bucket_cells, md_code, md_text, summary, telemetry};

/// A table whose cells are already Markdown-safe (numbers, or escaped text).
fn table(headers: &[&str], rows: &[Vec<String>], out: &mut String) {
    out.push_str(&format!("| {} |\n", headers.join(" | ")));
    let align: Vec<&str> = (0..headers.len())
        .map(|i| {
            if i == 0 || i == headers.len() - 1 {
                "---"
            } else {
                "---:"
            }
        })
        .collect();
    out.push_str(&format!("| {} |\n", align.join(" | ")));
    for r in rows {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
}

/// The Markdown report; `top_kernels` adds each bucket's listed kernel names.
pub fn reports(reports: &[Report], top_kernels: bool) -> String {
    let mut out = String::new();
    for r in reports {
        out.push_str(&format!(
            "## gapscope report: {}\n\n",
            md_code(&r.source.path)
        ));
        for (l, v) in summary(r) {
            out.push_str(&format!("- **{l}**: {}\n", md_text(&v)));
        }
        for w in &r.warnings {
            out.push_str(&format!("- **warning**: {}\n", md_text(w)));
        }
        if let Some(t) = &r.telemetry {
            out.push_str(&format!("\n### {TELEMETRY_TITLE}\n\n"));
            for (l, v) in telemetry(t) {
                out.push_str(&format!("- **{l}**: {}\n", md_text(&v)));
            }
        }
        let title = r.bucket_scope.title();
        out.push_str(&format!(
            "\n### {}{}\n\n",
            title[..1].to_uppercase(),
            &title[1..]
        ));
        table(&BUCKET_HEADERS, &md_cells(&r.buckets), &mut out);
        if !r.prefill_buckets.is_empty() {
            out.push_str("\n### Buckets per prefill step\n\n");
            table(&BUCKET_HEADERS, &md_cells(&r.prefill_buckets), &mut out);
        }
        if let Some(g) = &r.groups {
            let (title, mut rows) = super::group_cells(g);
            for row in &mut rows {
                row[4] = md_code(&row[4]);
            }
            out.push_str(&format!("\n### {}\n\n", md_text(&title)));
            table(&super::GROUP_HEADERS, &rows, &mut out);
        }
        if top_kernels {
            out.push_str("\n### Top kernels per bucket\n\n");
            let mut rows = super::top_cells(&r.buckets);
            for row in &mut rows {
                row[1] = md_code(&row[1]);
            }
            table(&super::TOP_HEADERS, &rows, &mut out);
        }
        if !r.other.top.is_empty() {
            out.push_str("\n### Top `other` kernels\n\n");
            let rows: Vec<Vec<String>> = r
                .other
                .top
                .iter()
                .map(|t| vec![md_code(&t.name), super::ms(t.ms), t.calls.to_string()])
                .collect();
            table(&["kernel", "ms", "calls"], &rows, &mut out);
        }
        out.push('\n');
    }
    out
}

/// The bucket cells with the kernel-name column as inline code.
fn md_cells(rows: &[gapscope_analyzer::analysis::BucketRow]) -> Vec<Vec<String>> {
    let mut cells = bucket_cells(rows);
    for c in &mut cells {
        if let Some(last) = c.last_mut()
            && !last.is_empty()
        {
            *last = md_code(last);
        }
    }
    cells
}
