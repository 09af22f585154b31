//! Helpers the analyzer's integration tests share.

use gapscope_analyzer::RuleSet;
use gapscope_analyzer::analysis::{AnalysisSettings, analyze};
use gapscope_analyzer::import::Imported;

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
