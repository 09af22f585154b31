//! Helpers the analyzer's integration tests share: runs opened the way every front end opens
//! them (the session API), and checks of imports.
#![allow(dead_code, reason = "each test binary uses some of the helpers")]

use std::path::Path;

use gapscope_analyzer::RuleSet;
use gapscope_analyzer::analysis::host::GroupBy;
use gapscope_analyzer::analysis::{AnalysisSettings, analyze};
use gapscope_analyzer::import::{ImportOptions, Imported, NoProgress, import_trace};
use gapscope_analyzer::session::{AnalyzedRun, Knobs, Run, SessionSettings, open_run};
use gapscope_traces::{ReadOptions, Trace, read_trace, write_trace};

/// An import whose untrusted times were clamped: its warnings carry each of `want`, and its
/// analysis warns of untrusted times too.
pub fn assert_untrusted_times_warned(imp: &Imported, want: &[&str]) {
    let w = imp.warnings.join("\n");
    for x in want {
        assert!(w.contains(x), "{x:?} not in {w}");
    }
    let r = analyze(imp, &RuleSet::builtin(), &AnalysisSettings::default());
    assert!(
        r.warnings.iter().any(|x| x.contains("untrusted times")),
        "{:?}",
        r.warnings
    );
}

/// The settings `knobs` describe.
pub fn settings(knobs: &Knobs) -> SessionSettings {
    SessionSettings::resolve(knobs).expect("valid knobs")
}

/// The run at `path` opened with the default knobs (what `gapscope report` does without
/// options); a missing trace fails the test.
pub fn open(path: impl AsRef<Path>) -> AnalyzedRun {
    open_with(path, &Knobs::default())
}

/// The run at `path` opened with `knobs`.
pub fn open_with(path: impl AsRef<Path>, knobs: &Knobs) -> AnalyzedRun {
    let p = path.as_ref();
    assert!(p.exists(), "{} is missing", p.display());
    open_run(Run::new(p), &settings(knobs), &NoProgress)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Markers ignored: steps from the periodic kernel sequence (`--no-markers`).
pub fn no_markers() -> Knobs {
    Knobs {
        no_markers: true,
        ..Knobs::default()
    }
}

/// The user's step pattern instead of the automatic choice (`--step-regex`).
pub fn step_regex(re: &str) -> Knobs {
    Knobs {
        step_regex: Some(re.to_owned()),
        ..Knobs::default()
    }
}

/// GPU and host time grouped by `by` too (`--by`).
pub fn group_by(by: GroupBy) -> Knobs {
    Knobs {
        group_by: Some(by),
        ..Knobs::default()
    }
}

/// `input` imported with every column, as `gapscope import` converts it.
pub fn import_all_columns(input: &Path) -> Trace {
    let opts = ImportOptions {
        kernel_columns: None,
        ..ImportOptions::default()
    };
    import_trace(input, &opts, &NoProgress)
        .unwrap_or_else(|e| panic!("{}: {e}", input.display()))
        .trace
}

/// `input` converted to a native trace at `out` (`gapscope import IN -o OUT`), read back.
pub fn convert(input: &Path, out: &Path) -> Trace {
    let t = import_all_columns(input);
    write_trace(out, &t).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    read_trace(out, &ReadOptions::default()).expect("reads back")
}
