//! JSON output: `{"schema_version": N, "reports": [...]}`.

use gapscope_analyzer::analysis::{REPORT_SCHEMA_VERSION, Report};

pub fn reports(reports: &[Report]) -> anyhow::Result<String> {
    let v = serde_json::json!({
        "schema_version": REPORT_SCHEMA_VERSION,
        "reports": reports,
    });
    let mut s = serde_json::to_string_pretty(&v)?;
    s.push('\n');
    Ok(s)
}
