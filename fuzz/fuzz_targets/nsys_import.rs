//! Any bytes as an nsys SQLite export: errors are fine, panics are not. Seed the corpus with
//! the fixtures in analyzer/tests/data/nsys so mutations start from valid databases.
#![no_main]

use gapscope_analyzer::RuleSet;
use gapscope_analyzer::analysis::{AnalysisSettings, analyze};
use gapscope_analyzer::import::nsys::import_nsys;
use gapscope_analyzer::import::{Imported, InputFormat, NoProgress};
use libfuzzer_sys::fuzz_target;

/// Compiled once: rule compilation would otherwise dominate each iteration.
static RULES: std::sync::LazyLock<RuleSet> = std::sync::LazyLock::new(RuleSet::builtin);

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    let path = dir.path().join("export.sqlite");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(trace) = import_nsys(&path, &NoProgress) {
        let imported = Imported {
            trace,
            format: InputFormat::NsysSqlite,
            warnings: Vec::new(),
            defects: Vec::new(),
        };
        let _ = analyze(&imported, &RULES, &AnalysisSettings::default());
    }
});
