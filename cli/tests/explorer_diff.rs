//! The explorer's diff is `gapscope diff --json`: both front ends open runs through the same
//! session, and the diff reads every name's time from the tables, not the report's top
//! lists (whose length is a display setting). The pair here has five kernels in one bucket,
//! ranked in opposite orders: a diff made from the top three per bucket would list two
//! names as only in A, two as only in B, and miss the moves of four.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::Path;
use std::process::Command;

use gapscope_gui::Settings;
use gapscope_gui::loader::{Progress, load_blocking};
use gapscope_gui::views::diff::DiffState;
use gapscope_tests::traces::write_decode_steps;

const US: i64 = 1_000;

/// Eight decode steps, each running `kernels` (name, duration) back to back with 5 us
/// between them and 45 us between steps.
fn write(path: &Path, kernels: &[(&str, i64)]) {
    write_decode_steps(path, &[kernels; 8], 5 * US, 45 * US);
}

#[test]
fn the_explorer_diff_equals_the_cli_diff_with_five_names_in_a_bucket() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.gst"), dir.path().join("b.gst"));
    let names = [
        "gemv_bf16_q",
        "gemv_bf16_k",
        "gemv_bf16_v",
        "gemv_bf16_o",
        "gemv_bf16_up",
    ];
    let ranked = |durs: [i64; 5]| -> Vec<(&str, i64)> {
        names.iter().copied().zip(durs.map(|d| d * US)).collect()
    };
    write(&a, &ranked([50, 40, 30, 20, 10]));
    write(&b, &ranked([11, 21, 31, 41, 51]));

    let out = Command::new(env!("CARGO_BIN_EXE_gapscope"))
        .args(["diff", "--json", "-q"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cli_text = String::from_utf8(out.stdout).unwrap();
    let cli: serde_json::Value = serde_json::from_str(&cli_text).unwrap();

    // The explorer's own path: its settings, its loader, its diff view's state.
    let (settings, error) = Settings::default().session_settings();
    assert_eq!(error, None);
    let load = |p: &Path| load_blocking(p, &settings, &Progress::default()).unwrap();
    let (la, lb) = (load(&a), load(&b));
    // The premise: each report lists three of the bucket's five names.
    let listed = |l: &gapscope_gui::loader::Loaded| {
        l.x.report
            .buckets
            .iter()
            .map(|r| r.top.len())
            .max()
            .unwrap_or(0)
    };
    assert_eq!((listed(&la), listed(&lb)), (3, 3));
    let mut state = DiffState::default();
    let gui = state.report(&la, &lb).as_ref().expect("diffable").clone();
    // Byte for byte, as `diff --json` writes it (parsing would round the last digit).
    let gui_text = serde_json::to_string_pretty(&gui).unwrap() + "\n";
    assert_eq!(
        gui_text, cli_text,
        "the explorer's diff differs from `gapscope diff --json`"
    );
    let s = &cli["structural"];
    assert_eq!(s["only_in_a_total"], 0, "{s}");
    assert_eq!(s["only_in_b_total"], 0, "{s}");
    let moved = cli["top_moved"].as_array().unwrap();
    assert_eq!(moved.len(), 5, "{moved:?}");
    // gemv_bf16_q: 50 us in A, 11 us in B.
    let q = moved.iter().find(|k| k["name"] == "gemv_bf16_q").unwrap();
    assert!(
        (q["delta_ms"].as_f64().unwrap() - 0.039).abs() < 1e-12,
        "{q}"
    );
}

/// The explorer's lever what-if is `gapscope diff SLOW --what-if hybrid --json`, byte for
/// byte, on the bundled hybrid engine trace; on a trace without the engine's op columns it
/// says why there is none.
#[test]
fn the_explorer_lever_what_if_equals_the_cli() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let slow = root.join("traces/reference/engine-qwen3.5-4l-q8_0-npl8-levers/slow-npl8.gst");
    let out = Command::new(env!("CARGO_BIN_EXE_gapscope"))
        .args(["diff", "--json", "-q", "--what-if", "hybrid"])
        .arg(&slow)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (settings, _) = Settings::default().session_settings();
    let l = load_blocking(&slow, &settings, &Progress::default()).unwrap();
    let w = l.levers().as_ref().expect("a what-if");
    assert!(!w.prediction.levers.is_empty());
    let gui = serde_json::to_string_pretty(w).unwrap() + "\n";
    assert_eq!(gui, String::from_utf8(out.stdout).unwrap());

    let hf = root.join("traces/reference/hf-qwen3-0.6b-npl1.json.gz");
    let l = load_blocking(&hf, &settings, &Progress::default()).unwrap();
    assert!(l.levers().is_err());
}
