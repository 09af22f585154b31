//! Automatic step detection (markers ignored) on the bundled reference traces agrees with
//! their markers (the engine's prefill is a prefill, not the first decode step).

mod common;

use std::path::Path;

use common::{no_markers, open, open_with};
use gapscope_analyzer::analysis::StepReport;
use gapscope_analyzer::analysis::stats::Summary;
use gapscope_analyzer::analysis::steps::StepSource;
use gapscope_analyzer::export::chrome::write_chrome;
use gapscope_analyzer::session::Knobs;
use gapscope_tests::repo;

const ENGINE_8B: &str = "traces/reference/engine-llama3-8b-npl1.gst";

/// The steps of `trace`, found by its markers or, with `markers` false, without them.
fn steps(trace: &Path, markers: bool) -> StepReport {
    let run = if markers {
        open(trace)
    } else {
        open_with(trace, &no_markers())
    };
    run.report.steps
}

fn tpot(s: &StepReport) -> Summary {
    s.tpot_ms.unwrap_or_else(|| panic!("no TPOT: {}", s.source))
}

/// Automatic steps match the marker-based ones: counts, and TPOT median/p99/max within 2%.
fn agrees_with_markers(trace: &Path, decode: usize, prefill: usize) {
    let marked = steps(trace, true);
    let auto = steps(trace, false);
    let what = trace.display();
    assert!(
        matches!(marked.source, StepSource::Markers { .. }),
        "{what}: {}",
        marked.source
    );
    assert!(auto.source.is_periodic(), "{what}: {}", auto.source);
    for s in [&marked, &auto] {
        assert_eq!(s.decode_steps, decode, "{what}: {}", s.source);
        assert_eq!(s.prefill_steps, prefill, "{what}: {}", s.source);
    }
    let (m, a) = (tpot(&marked), tpot(&auto));
    for (stat, m, a) in [
        ("median", m.median, a.median),
        ("p99", m.p99, a.p99),
        ("max", m.max, a.max),
    ] {
        assert!(
            (a - m).abs() <= 0.02 * m,
            "{what}: TPOT {stat} {a} ms without markers, {m} ms with"
        );
    }
}

#[test]
fn engine_prefill_is_a_prefill_without_markers() {
    let trace = repo(ENGINE_8B);
    agrees_with_markers(&trace, 32, 1);
    let auto = steps(&trace, false);
    assert_eq!(auto.prefill_steps, 1);
    assert!(
        matches!(auto.source, StepSource::Periodic { prefills: 1, .. }),
        "{}",
        auto.source
    );
    // The prefill is the first step and about as long as the marked one (8.196 ms).
    let prefill = auto.prefill_ms.expect("prefill_ms").max;
    assert!((prefill - 8.196).abs() < 0.1, "prefill {prefill} ms");
}

#[test]
fn chrome_export_of_the_engine_trace_finds_the_prefill_without_markers() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("engine.chrome.json");
    // What `gapscope export --chrome` writes: every column, the built-in rules.
    let settings = common::settings(&Knobs {
        all_columns: true,
        ..Knobs::default()
    });
    let input = repo(ENGINE_8B);
    let trace = common::import_all_columns(&input);
    write_chrome(&trace, &settings.rules, &out, &[input.as_path()]).expect("writes");
    let auto = steps(&out, false);
    assert_eq!(auto.decode_steps, 32, "{}", auto.source);
    assert_eq!(auto.prefill_steps, 1, "{}", auto.source);
    let max = tpot(&auto).max;
    assert!((max - 5.696).abs() <= 0.02 * 5.696, "TPOT max {max}");
}

#[test]
fn hf_traces_keep_their_decode_steps_and_no_prefill_without_markers() {
    for (t, n) in [
        ("traces/reference/hf-llama3-8b-npl1.json.gz", 32),
        ("traces/reference/hf-llama3.2-1b-npl8.json.gz", 32),
        ("traces/reference/hf-qwen3-0.6b-npl1.json.gz", 16),
    ] {
        agrees_with_markers(&repo(t), n, 0);
    }
}
