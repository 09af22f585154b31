//! Markdown output, for CI step summaries and notes.

use gapscope_analyzer::analysis::Report;

use super::{BUCKET_HEADERS, TELEMETRY_TITLE, bucket_cells, summary, telemetry};

fn table(headers: &[&str], rows: &[Vec<String>], out: &mut String) {
    let esc = |s: &str| s.replace('|', "\\|");
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
        let cells: Vec<String> = r.iter().map(|c| esc(c)).collect();
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
}

pub fn reports(reports: &[Report]) -> String {
    let mut out = String::new();
    for r in reports {
        out.push_str(&format!("## gapscope report: `{}`\n\n", r.source.path));
        for (l, v) in summary(r) {
            out.push_str(&format!("- **{l}**: {}\n", v.replace('|', "\\|")));
        }
        for w in &r.warnings {
            out.push_str(&format!("- **warning**: {w}\n"));
        }
        if let Some(t) = &r.telemetry {
            out.push_str(&format!("\n### {TELEMETRY_TITLE}\n\n"));
            for (l, v) in telemetry(t) {
                out.push_str(&format!("- **{l}**: {}\n", v.replace('|', "\\|")));
            }
        }
        out.push_str("\n### Buckets per decode step\n\n");
        table(&BUCKET_HEADERS, &bucket_cells(&r.buckets), &mut out);
        if !r.prefill_buckets.is_empty() {
            out.push_str("\n### Buckets per prefill step\n\n");
            table(&BUCKET_HEADERS, &bucket_cells(&r.prefill_buckets), &mut out);
        }
        if !r.other.top.is_empty() {
            out.push_str("\n### Top `other` kernels\n\n");
            let rows: Vec<Vec<String>> = r
                .other
                .top
                .iter()
                .map(|t| {
                    vec![
                        format!("`{}`", t.name),
                        super::ms(t.ms),
                        t.calls.to_string(),
                    ]
                })
                .collect();
            table(&["kernel", "ms", "calls"], &rows, &mut out);
        }
        out.push('\n');
    }
    out
}
