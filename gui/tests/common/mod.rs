//! Helpers shared by the explorer's state tests: the real `App` in an egui_kittest harness,
//! the bundled traces. Traces with known steps come from
//! `gapscope_tests::traces::write_decode_steps`, which the CLI's tests use too.

#![allow(
    dead_code,
    clippy::unwrap_used,
    reason = "each test file uses some of the helpers; a test fails loudly on what it did not expect"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use egui::Vec2;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use gapscope_gui::App;
use gapscope_gui::settings::Settings;
use gapscope_gui::views::View;

pub const US: i64 = 1_000;

pub fn harness(traces: &[PathBuf], view: View) -> Harness<'static, App> {
    harness_with(Settings {
        traces: traces.to_vec(),
        view,
        ..Settings::default()
    })
}

/// The explorer with settings `s`, 1400x800, once every trace has loaded.
pub fn harness_with(s: Settings) -> Harness<'static, App> {
    let mut h = Harness::builder()
        .with_size(Vec2::new(1400.0, 800.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), App::new(&s));
    settle(&mut h);
    h
}

/// Steps frames until every trace has loaded or failed.
pub fn settle(h: &mut Harness<'static, App>) {
    let t0 = Instant::now();
    loop {
        h.step();
        if h.state().settled() {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "traces did not load"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    h.run_steps(3);
    // kittest checks that every widget has an accessible name only when a run settles: once
    // more with everything loaded, so the check never depends on how fast a trace loaded.
    h.run_ok();
}

pub fn reference(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../traces/reference")
        .join(name)
}

/// Whether some widget's label contains `text` (status bar and view may both show it).
pub fn shows(h: &Harness<'static, App>, text: &str) -> bool {
    h.query_all_by_label_contains(text).next().is_some()
}

pub fn visible(h: &Harness<'static, App>) -> (i64, i64) {
    h.state().docs[0].timeline.visible_ns().expect("axis built")
}
