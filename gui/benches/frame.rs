//! Frame cost of the explorer on a large trace, headless (no window, no GPU): the real
//! `App` runs in an `egui::Context` pass plus tessellation, which is the UI thread's whole
//! per-frame work before the renderer uploads the vertices.
//!
//! cargo bench -p gapscope-gui --bench frame -- TRACE... [--frames N] [--size WxH] [--kernels]
//!
//! Prints, as one JSON object: the time from opening the trace to the end of the first
//! frame that draws it, the per-frame time (median, min, max, p90) at full zoom-out, at a
//! mid zoom (1/1000 of the trace) and at a deep zoom (one step), each while panning, and
//! the peak resident memory. With `--kernels`, also the kernel table's frames: as they are,
//! with the filter changed every frame, with the sort changed every frame. Given the traces
//! of several ranks of one run, also the ranks view's frames (full, mid and one step).

use std::time::Instant;

use egui::{Pos2, RawInput, Rect, Vec2};
use gapscope_analyzer::explore::SortKey;
use gapscope_gui::App;
use gapscope_gui::doc::DocState;
use gapscope_gui::settings::Settings;
use gapscope_gui::views::View;

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map_or(f64::NAN, |kib| kib / 1024.0)
}

/// One frame: the egui pass and tessellation; (ms, vertices drawn).
fn frame_v(ctx: &egui::Context, app: &mut App, size: Vec2) -> (f64, usize) {
    let input = RawInput {
        screen_rect: Some(Rect::from_min_size(Pos2::ZERO, size)),
        ..RawInput::default()
    };
    let t = Instant::now();
    let mut out = ctx.run_ui(input, |ui| app.ui(ui));
    out.textures_delta.clear();
    let prims = ctx.tessellate(out.shapes, out.pixels_per_point);
    let ms = t.elapsed().as_secs_f64() * 1e3;
    let vertices = prims
        .iter()
        .map(|p| match &p.primitive {
            egui::epaint::Primitive::Mesh(m) => m.vertices.len(),
            egui::epaint::Primitive::Callback(_) => 0,
        })
        .sum();
    (ms, vertices)
}

fn frame(ctx: &egui::Context, app: &mut App, size: Vec2) -> f64 {
    frame_v(ctx, app, size).0
}

fn stats(v: &mut [f64]) -> serde_like::Stats {
    v.sort_by(f64::total_cmp);
    let q = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    serde_like::Stats {
        median: q(0.5),
        min: v[0],
        p90: q(0.9),
        max: v[v.len() - 1],
        n: v.len(),
    }
}

mod serde_like {
    pub struct Stats {
        pub median: f64,
        pub min: f64,
        pub p90: f64,
        pub max: f64,
        pub n: usize,
    }
    impl std::fmt::Display for Stats {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(
                f,
                "{{\"median_ms\": {:.3}, \"min_ms\": {:.3}, \"p90_ms\": {:.3}, \"max_ms\": {:.3}, \"frames\": {}}}",
                self.median, self.min, self.p90, self.max, self.n
            )
        }
    }
}

/// The ranks view's frames (when the traces opened as ranks of one run), panning across
/// the run at three zooms: the whole run, 1/1000 of it, one step.
fn ranks_frames(ctx: &egui::Context, app: &mut App, size: Vec2, frames: usize) -> Vec<String> {
    let mut results = Vec::new();
    let ranks = app.ranks.as_ref().map(|r| {
        let l = &r.data.lanes;
        let step = l
            .lanes
            .first()
            .and_then(|l| Some(l.steps.spans.end_ns.get(1)? - l.steps.spans.start_ns.get(1)?))
            .unwrap_or(1_000_000);
        (l.span_ns, step)
    });
    if let Some(((r0, r1), rstep)) = ranks {
        // The ranks view, panning across the run at three zooms.
        let rspan = (r1 - r0).max(1);
        app.view = View::Ranks;
        frame(ctx, app, size);
        for (name, width_ns) in [
            ("ranks_full", rspan),
            ("ranks_mid", (rspan / 1000).max(1)),
            ("ranks_deep", rstep.max(1)),
        ] {
            let mut v = Vec::with_capacity(frames);
            for f in 0..frames {
                let start = if width_ns >= rspan {
                    r0
                } else {
                    r0 + ((rspan - width_ns) as f64 * f as f64 / frames as f64) as i64
                };
                if let Some(r) = &mut app.ranks {
                    r.state.tl.zoom_to_ns(start, start + width_ns, 0.0);
                }
                v.push(frame(ctx, app, size));
            }
            results.push(format!("\"{name}\": {}", stats(&mut v)));
        }
    }
    results
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut traces: Vec<String> = Vec::new();
    let mut frames = 60usize;
    let mut kernels_view = false;
    let mut size = Vec2::new(1600.0, 900.0);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--frames" => frames = it.next().and_then(|v| v.parse().ok()).expect("--frames N"),
            "--kernels" => kernels_view = true,
            "--size" => {
                let v = it.next().expect("--size WxH");
                let (w, h) = v.split_once('x').expect("--size WxH");
                size = Vec2::new(w.parse().expect("width"), h.parse().expect("height"));
            }
            p => traces.push(p.to_owned()),
        }
    }
    let Some(trace) = traces.first().cloned() else {
        eprintln!("usage: frame TRACE... [--frames N] [--size WxH]");
        std::process::exit(2);
    };
    let ctx = egui::Context::default();
    let mut settings = Settings {
        traces: traces.iter().map(Into::into).collect(),
        view: View::Timeline,
        view_given: true,
        ..Settings::default()
    };
    // The bench times traces past the default event limit (10M kernels): no limit.
    settings.knobs.max_events = Some(0);
    let t0 = Instant::now();
    let mut app = App::new(&settings);
    // Frames while loading (the progress bar), up to the first frame that draws the trace
    // (a frame polls the loader first, then draws what it found).
    let mut loading_frames = Vec::new();
    loop {
        let ms = frame(&ctx, &mut app, size);
        if matches!(
            app.docs.first().map(|d| &d.state),
            Some(DocState::Ready(_) | DocState::Failed(_))
        ) {
            break;
        }
        loading_frames.push(ms);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let first_frame_s = t0.elapsed().as_secs_f64();
    // The kernel table follows in the background.
    while !app.settled() {
        frame(&ctx, &mut app, size);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let table_s = t0.elapsed().as_secs_f64();
    let (kernels, steps, load_only_s, stages) = match &app.docs[0].state {
        DocState::Ready(l) => (
            l.x.trace.kernels.len,
            l.x.steps.len(),
            l.load_s,
            l.stages_s
                .iter()
                .map(|(n, s)| format!("\"{n}\": {s:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
        ),
        DocState::Failed(e) => panic!("{trace}: {e}"),
        DocState::Loading(_) => unreachable!("settled"),
    };
    let (span0, span1, step_ns) = match &app.docs[0].state {
        DocState::Ready(l) => (
            l.x.span_ns.0,
            l.x.span_ns.1,
            l.x.steps
                .first()
                .map_or(1_000_000, |s| s.end_ns - s.start_ns),
        ),
        _ => unreachable!(),
    };
    let span = (span1 - span0).max(1);
    let mut results = Vec::new();
    if kernels_view {
        // The kernel table: frames as they are, frames whose filter changes every time (a
        // regex over every name, then the sort), frames whose sort key changes every time.
        app.view = View::Kernels;
        let keys = [SortKey::Total, SortKey::Name, SortKey::P99, SortKey::Calls];
        for mode in ["steady", "filter", "sort"] {
            let mut v = Vec::with_capacity(frames);
            for f in 0..frames {
                let k = &mut app.kernels[0];
                match mode {
                    "filter" => k.filter = format!("v{}", f % 97),
                    "sort" => k.sort = keys[f % keys.len()],
                    _ => {}
                }
                v.push(frame(&ctx, &mut app, size));
            }
            results.push(format!("\"kernels_{mode}\": {}", stats(&mut v)));
        }
        let names = match &app.docs[0].state {
            DocState::Ready(l) => l.kernel_table().map_or(0, |t| t.rows.len()),
            _ => 0,
        };
        results.push(format!("\"kernel_names\": {names}"));
        app.view = View::Timeline;
    }
    for (name, width_ns) in [
        ("full", span),
        ("mid", (span / 1000).max(1)),
        ("deep", step_ns.max(1)),
    ] {
        let mut v = Vec::with_capacity(frames);
        let mut verts = Vec::with_capacity(frames);
        for f in 0..frames {
            // Pan across the trace so no frame repeats the one before.
            let tl = &mut app.docs[0].timeline;
            let start = if width_ns >= span {
                span0
            } else {
                span0 + ((span - width_ns) as f64 * f as f64 / frames as f64) as i64
            };
            tl.zoom_to_ns(start, start + width_ns, 0.0);
            let (ms, n) = frame_v(&ctx, &mut app, size);
            v.push(ms);
            verts.push(n);
        }
        verts.sort_unstable();
        results.push(format!(
            "\"{name}\": {}, \"{name}_vertices_median\": {}",
            stats(&mut v),
            verts[verts.len() / 2]
        ));
    }
    results.extend(ranks_frames(&ctx, &mut app, size, frames));
    let loading = if loading_frames.is_empty() {
        "null".to_owned()
    } else {
        stats(&mut loading_frames).to_string()
    };
    println!(
        "{{\"trace\": {trace:?}, \"kernels\": {kernels}, \"steps\": {steps}, \"size\": \"{}x{}\", \"load_s\": {load_only_s:.3}, \"stages_s\": {{{stages}}}, \"open_to_first_frame_s\": {first_frame_s:.3}, \"open_to_kernel_table_s\": {table_s:.3}, \"loading_frames\": {loading}, {}, \"peak_rss_mib\": {:.0}}}",
        size.x,
        size.y,
        results.join(", "),
        peak_rss_mib()
    );
}
