//! JSON output: `{"schema_version": N, "reports": [...]}`.

use gapscope_analyzer::analysis::{REPORT_SCHEMA_VERSION, Report};

/// The reports, and the multi-rank section when the traces are ranks of one run.
pub fn run_reports(
    ranks: Option<&gapscope_analyzer::analysis::ranks::RanksReport>,
    reports: &[Report],
) -> anyhow::Result<String> {
    let Some(ranks) = ranks else {
        return self::reports(reports);
    };
    let v = serde_json::json!({
        "schema_version": REPORT_SCHEMA_VERSION,
        "ranks": ranks,
        "reports": reports,
    });
    let mut s = serde_json::to_string_pretty(&v)?;
    s.push('\n');
    Ok(s)
}

pub fn reports(reports: &[Report]) -> anyhow::Result<String> {
    let v = serde_json::json!({
        "schema_version": REPORT_SCHEMA_VERSION,
        "reports": reports,
    });
    let mut s = serde_json::to_string_pretty(&v)?;
    s.push('\n');
    Ok(s)
}
