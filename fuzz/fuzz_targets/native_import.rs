//! Any bytes as one file of a native `.gst` trace: the input's first byte picks which file
//! of the golden v1 trace (traces/tests/golden/v1.gst) it replaces, the rest is that file's
//! new content, and the other files stay valid. The trace is read whole and with the
//! analysis's kernel-column projection, then analysed when it loads. Errors and flagged
//! truncated loads are fine; a panic, abort, hang or sanitizer report is a bug.
#![no_main]

use gapscope_analyzer::RuleSet;
use gapscope_analyzer::analysis::{AnalysisSettings, analyze};
use gapscope_analyzer::import::{ImportOptions, NoProgress, import_trace};
use gapscope_traces::KERNEL_ANALYSIS_COLUMNS;
use libfuzzer_sys::fuzz_target;

macro_rules! golden {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!("../../traces/tests/golden/v1.gst/", $name)) as &[u8],
        )
    };
}

/// The golden trace's files; the selector byte indexes this list.
const FILES: [(&str, &[u8]); 7] = [
    golden!("manifest.json"),
    golden!("strings.arrows"),
    golden!("kernels.arrows"),
    golden!("memops.arrows"),
    golden!("launches.arrows"),
    golden!("markers.arrows"),
    golden!("samples.arrows"),
];

/// Compiled once: rule compilation would otherwise dominate each iteration.
static RULES: std::sync::LazyLock<RuleSet> = std::sync::LazyLock::new(RuleSet::builtin);

fuzz_target!(|data: &[u8]| {
    let Some((&which, content)) = data.split_first() else {
        return;
    };
    let replaced = which as usize % FILES.len();
    let Ok(tmp) = tempfile::tempdir() else { return };
    let dir = tmp.path().join("t.gst");
    if std::fs::create_dir(&dir).is_err() {
        return;
    }
    for (i, (name, bytes)) in FILES.iter().enumerate() {
        let bytes = if i == replaced { content } else { bytes };
        if std::fs::write(dir.join(name), bytes).is_err() {
            return;
        }
    }
    // What `gapscope report` loads of a native trace.
    let projected = Some(
        KERNEL_ANALYSIS_COLUMNS
            .iter()
            .map(|s| s.to_string())
            .collect(),
    );
    for kernel_columns in [None, projected] {
        let opts = ImportOptions {
            kernel_columns,
            ..Default::default()
        };
        if let Ok(imported) = import_trace(&dir, &opts, &NoProgress) {
            let _ = analyze(&imported, &RULES, &AnalysisSettings::default());
        }
    }
});
