//! Any bytes, plain or gzipped, through the Kineto importer and the analysis: errors are
//! fine, panics are not.
#![no_main]

use gapscope_analyzer::RuleSet;
use gapscope_analyzer::analysis::{AnalysisSettings, analyze};
use gapscope_analyzer::import::{ImportOptions, NoProgress, import_trace};
use libfuzzer_sys::fuzz_target;

/// Compiled once: rule compilation would otherwise dominate each iteration.
static RULES: std::sync::LazyLock<RuleSet> = std::sync::LazyLock::new(RuleSet::builtin);

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join("trace.json");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    for allow_truncated in [false, true] {
        let opts = ImportOptions {
            allow_truncated,
            ..Default::default()
        };
        if let Ok(imported) = import_trace(&path, &opts, &NoProgress) {
            let _ = analyze(&imported, &RULES, &AnalysisSettings::default());
        }
    }
});
