//! Every view rendered by the real binary (`--screenshot`) from bundled traces: each PNG
//! exists, has the requested size and is not blank; a size the screen cannot hold is an
//! error. It needs a display, so it is ignored
//! by `cargo test`; `.ci/run` runs it under `xvfb-run` (and fails if it did not run).
//! With GAPSCOPE_SCREENSHOT_DIR set, the PNGs are kept there (docs/images is made so).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

const W: u32 = 1400;
const H: u32 = 800;

fn repo(p: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    // Relative to the repository, as a user would type it (the current directory of a test
    // is the package's folder, so the run below starts in the repository root).
    assert!(root.join(p).exists(), "{p} is missing");
    p.to_owned()
}

/// (view, arguments) for each view, from the bundled traces that show it best.
fn cases() -> Vec<(&'static str, Vec<String>)> {
    let engine = repo("traces/reference/engine-llama3-8b-npl1.gst");
    let hybrid = repo("traces/reference/cupti-qwen3next-small-npl1.gst");
    vec![
        (
            "timeline",
            vec![hybrid.clone(), "--step".into(), "8".into()],
        ),
        ("steps", vec![engine.clone()]),
        ("kernels", vec![engine.clone()]),
        (
            "diff",
            vec![
                repo("traces/reference/hf-llama3.2-1b-npl8-stack-cudnn.json.gz"),
                repo("traces/reference/hf-llama3.2-1b-npl8-stack-math.json.gz"),
            ],
        ),
        (
            "roofline",
            vec![engine, "--model".into(), repo("models/llama-3-8b.json")],
        ),
        ("telemetry", vec![hybrid]),
        (
            "ranks",
            vec![
                repo("traces/reference/tp2/host-rank0.json.gz"),
                repo("traces/reference/tp2/host-rank1.json.gz"),
            ],
        ),
    ]
}

/// The PNG's pixels, row by row (RGBA).
fn pixels(p: &Path) -> (u32, u32, Vec<[u8; 4]>) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(p).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    let px = buf[..info.buffer_size()]
        .chunks(4)
        .map(|c| [c[0], c[1], c[2], c.get(3).copied().unwrap_or(255)])
        .collect();
    (info.width, info.height, px)
}

/// Runs of `color` along the first pixel row that holds it (the top edge of the steps
/// lane's bars, above their labels).
fn runs_on_first_row(p: &Path, color: egui::Color32) -> usize {
    let (w, h, px) = pixels(p);
    let want = [color.r(), color.g(), color.b()];
    for y in 0..h as usize {
        let row = &px[y * w as usize..(y + 1) * w as usize];
        if !row.iter().any(|c| c[..3] == want) {
            continue;
        }
        let mut runs = 0;
        let mut inside = false;
        for c in row {
            let hit = c[..3] == want;
            if hit && !inside {
                runs += 1;
            }
            inside = hit;
        }
        return runs;
    }
    0
}

/// (width, height, distinct colours, share of pixels unlike the most common colour).
fn inspect(p: &Path) -> (u32, u32, usize, f64) {
    let (width, height, px) = pixels(p);
    let mut counts = std::collections::HashMap::new();
    for p in &px {
        *counts.entry(*p).or_insert(0usize) += 1;
    }
    let top = counts.values().copied().max().unwrap_or(0);
    (
        width,
        height,
        counts.len(),
        1.0 - top as f64 / px.len().max(1) as f64,
    )
}

#[expect(
    clippy::disallowed_methods,
    reason = "a test reads its environment (GAPSCOPE_SCREENSHOT_DIR)"
)]
#[test]
#[ignore = "needs a display: .ci/run runs it under xvfb-run"]
fn every_view_renders_from_a_bundled_trace() {
    let keep = std::env::var_os("GAPSCOPE_SCREENSHOT_DIR").map(PathBuf::from);
    let tmp = tempfile::tempdir().unwrap();
    let dir = keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir).unwrap();
    for (view, args) in cases() {
        let out = dir.join(format!("{view}.png"));
        let _ = std::fs::remove_file(&out);
        let o = Command::new(env!("CARGO_BIN_EXE_gapscope-gui"))
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
            .args(&args)
            .args(["--view", view, "--screenshot"])
            .arg(&out)
            .args(["--size", &format!("{W}x{H}")])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{view}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(out.is_file(), "{view}: no PNG");
        let (w, h, colours, busy) = inspect(&out);
        assert_eq!((w, h), (W, H), "{view}: size");
        assert!(
            colours > 50 && busy > 0.05,
            "{view}: looks blank ({colours} colours, {:.1}% not background)",
            busy * 100.0
        );
    }
    // The NVTX recording at fit: every one of its 16 decode steps is a bar of its own on
    // the steps lane (issue 36: steps that start where the last ended were skipped).
    let out = tmp.path().join("steps-at-fit.png");
    let o = Command::new(env!("CARGO_BIN_EXE_gapscope-gui"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .arg(repo("traces/reference/cupti-qwen3next-small-npl1.gst"))
        .args(["--screenshot"])
        .arg(&out)
        .args(["--size", &format!("{W}x{H}")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let decode = gapscope_gui::palette::phase(gapscope_traces::Phase::Decode);
    assert_eq!(
        runs_on_first_row(&out, decode),
        16,
        "one bar per step at fit"
    );
    // A window larger than the screen comes out smaller than asked: an error, no PNG.
    let out = tmp.path().join("too-large.png");
    let o = Command::new(env!("CARGO_BIN_EXE_gapscope-gui"))
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .args(&cases()[1].1)
        .args(["--view", "steps", "--size", "8000x900", "--screenshot"])
        .arg(&out)
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("not the 8000x900 asked for"), "{e}");
    assert!(!out.exists());
}
