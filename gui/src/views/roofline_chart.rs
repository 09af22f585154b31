//! The roofline chart: step time against batch on log-log axes. The y axis spans the figures
//! that matter (measured steps and buckets, the step floor, and bucket floors within a decade
//! of them); floors far below are listed under the chart, not plotted, so one near-zero
//! floor cannot squash the points. Labels sit off the curves (`label_place`).

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Ui, Vec2};
use gapscope_analyzer::Bucket;
use gapscope_analyzer::roofline::StepFloor;
use gapscope_analyzer::roofline::report::RooflineReport;

use super::label_place::{self, Segment};
use super::{format, roofline_text};
use crate::palette;

/// The decades the y axis spans (log10 of ms), and the bucket floors left off it.
#[derive(Debug, Clone, PartialEq)]
pub struct YRange {
    pub d0: f64,
    pub d1: f64,
    /// (bucket, floor ms) of the floors more than a decade under everything that matters.
    pub below: Vec<(Bucket, f64)>,
}

/// How far under the lowest figure that matters a floor may be and still be plotted.
const BELOW_DECADES: f64 = 1.0;

/// The y range of a report's chart.
pub fn y_range(r: &RooflineReport) -> Option<YRange> {
    let ok = |v: f64| v > 0.0 && v.is_finite();
    let mut core: Vec<f64> = r.floors.iter().map(|f| f.step_floor_s * 1e3).collect();
    for m in &r.measured {
        core.push(m.tpot_median_ms);
        core.extend(m.buckets.iter().map(|b| b.ms_per_step));
    }
    core.retain(|&v| ok(v));
    let lo = core.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = core.iter().copied().fold(0.0, f64::max);
    if core.is_empty() {
        return None;
    }
    let threshold = lo / 10f64.powf(BELOW_DECADES);
    let mut below = Vec::new();
    let mut lo_all = lo;
    for m in &r.measured {
        for b in &m.buckets {
            if !ok(b.floor_ms) {
                continue;
            }
            if b.floor_ms < threshold {
                below.push((b.bucket, b.floor_ms));
            } else {
                lo_all = lo_all.min(b.floor_ms);
            }
        }
    }
    let d0 = (lo_all / 1.2).log10().floor();
    let d1 = (hi * 1.2).log10().ceil().max(d0 + 1.0);
    Some(YRange { d0, d1, below })
}

/// A floor line: its name, colour and value per batch (s).
type FloorLine = (&'static str, Color32, fn(&StepFloor) -> f64);

#[expect(
    clippy::too_many_lines,
    reason = "immediate-mode UI: axes, ceilings, points and labels painted onto one chart"
)]
pub fn chart(ui: &mut Ui, r: &RooflineReport, batch: u64) {
    let dark = crate::palette::is_dark(ui.ctx());
    let Some(yr) = y_range(r) else { return };
    if !yr.below.is_empty() {
        let list: Vec<String> = yr
            .below
            .iter()
            .map(|(b, ms)| format!("{} {}", b.as_str(), format::dur_ns(*ms * 1e6)))
            .collect();
        ui.label(format!(
            "floors too far under the chart to plot: {}",
            list.join(", ")
        ));
    }
    let (rect, _) = ui.allocate_exact_size(
        ui.available_size().max(Vec2::new(200.0, 160.0)),
        Sense::hover(),
    );
    let p = ui.painter_at(rect);
    p.rect_filled(rect, 0.0, palette::gray(dark, 18));
    let plot = Rect::from_min_max(
        rect.min + Vec2::new(70.0, 14.0),
        rect.max - Vec2::new(150.0, 30.0),
    );
    let in_plot = p.with_clip_rect(plot.expand(1.0));
    let (d0, d1) = (yr.d0, yr.d1);
    let bmax = r.floors.iter().map(|f| f.batch).max().unwrap_or(1).max(2) as f64;
    let x = |b: f64| plot.left() + (b.log2() / bmax.log2()) as f32 * plot.width();
    let y = |v: f64| plot.bottom() - ((v.log10() - d0) / (d1 - d0)) as f32 * plot.height();
    let font = FontId::monospace(10.0);
    let grid = crate::palette::gray(dark, 50);
    let axis_text = crate::palette::gray(dark, 180);
    let mut d = d0;
    while d <= d1 + 1e-9 {
        let v = 10f64.powf(d);
        p.line_segment(
            [Pos2::new(plot.left(), y(v)), Pos2::new(plot.right(), y(v))],
            Stroke::new(1.0, grid),
        );
        p.text(
            Pos2::new(plot.left() - 4.0, y(v)),
            Align2::RIGHT_CENTER,
            format!("{} ms", trim(v)),
            font.clone(),
            axis_text,
        );
        for k in 2..10 {
            let vv = v * k as f64;
            if vv.log10() < d1 {
                p.line_segment(
                    [
                        Pos2::new(plot.left(), y(vv)),
                        Pos2::new(plot.left() + 4.0, y(vv)),
                    ],
                    Stroke::new(1.0, grid),
                );
            }
        }
        d += 1.0;
    }
    let mut b = 1.0;
    while b <= bmax {
        p.line_segment(
            [Pos2::new(x(b), plot.top()), Pos2::new(x(b), plot.bottom())],
            Stroke::new(1.0, crate::palette::gray(dark, 35)),
        );
        p.text(
            Pos2::new(x(b), plot.bottom() + 3.0),
            Align2::CENTER_TOP,
            format!("{b}"),
            font.clone(),
            axis_text,
        );
        b *= 2.0;
    }
    p.text(
        Pos2::new(plot.center().x, rect.bottom() - 2.0),
        Align2::CENTER_BOTTOM,
        "batch (sequences per decode step)",
        font.clone(),
        crate::palette::gray(dark, 160),
    );
    let lines: [FloorLine; 4] = [
        ("weight-read floor", palette::FLOOR_WEIGHTS, |f| {
            f.weight_floor_s
        }),
        ("KV-read floor", palette::FLOOR_KV, |f| f.kv_floor_s),
        ("compute floor", palette::FLOOR_COMPUTE, |f| {
            f.compute_floor_s
        }),
        ("step floor", palette::gray(dark, 255), |f| f.step_floor_s),
    ];
    let mut segments: Vec<Segment> = Vec::new();
    for (k, (name, c, get)) in lines.iter().enumerate() {
        let pts: Vec<Pos2> = r
            .floors
            .iter()
            .filter(|f| get(f) > 0.0)
            .map(|f| Pos2::new(x(f.batch as f64), y(get(f) * 1e3)))
            .collect();
        segments.extend(pts.windows(2).map(|w| (w[0], w[1])));
        let width = if *name == "step floor" { 2.5 } else { 1.5 };
        in_plot.add(egui::Shape::line(pts, Stroke::new(width, *c)));
        p.text(
            Pos2::new(plot.right() + 8.0, plot.top() + 14.0 * k as f32),
            Align2::LEFT_TOP,
            *name,
            font.clone(),
            *c,
        );
    }
    // The slider's batch.
    let bx = x(batch as f64);
    p.line_segment(
        [Pos2::new(bx, plot.top()), Pos2::new(bx, plot.bottom())],
        Stroke::new(1.0, palette::MEASURED),
    );
    segments.push((Pos2::new(bx, plot.top()), Pos2::new(bx, plot.bottom())));
    // Measured steps and their buckets: points and dashes first, then the labels around
    // them where they cover nothing.
    let small = FontId::proportional(10.0);
    let mut labels: Vec<(Pos2, String, Color32, FontId)> = Vec::new();
    let mut points: Vec<Pos2> = Vec::new();
    for m in &r.measured {
        let at = Pos2::new(x(m.batch as f64), y(m.tpot_median_ms));
        in_plot.circle_filled(at, 5.0, palette::MEASURED);
        points.push(at);
        labels.push((
            at,
            format!(
                "{} {}",
                format::cut(file_name(&m.trace), 28),
                roofline_text::times_floor(m.tpot_median_ms, m.floor_ms)
            ),
            palette::MEASURED,
            font.clone(),
        ));
        for (j, bf) in m.buckets.iter().enumerate() {
            if bf.ms_per_step <= 0.0 {
                continue;
            }
            let c = palette::bucket_of(bf.bucket);
            let bx = x(m.batch as f64) + 14.0 + 10.0 * j as f32;
            let pt = Pos2::new(bx, y(bf.ms_per_step));
            in_plot.circle_filled(pt, 3.5, c);
            points.push(pt);
            if bf.floor_ms > 0.0 && !yr.below.iter().any(|(b, _)| *b == bf.bucket) {
                let (a, b) = (
                    Pos2::new(bx - 4.0, y(bf.floor_ms)),
                    Pos2::new(bx + 4.0, y(bf.floor_ms)),
                );
                in_plot.line_segment([a, b], Stroke::new(1.5, c));
                segments.push((a, b));
            }
            labels.push((
                pt,
                roofline_text::bucket_label(bf.bucket.as_str(), bf.ms_per_step, bf.floor_ms),
                c,
                small.clone(),
            ));
        }
    }
    let sized: Vec<(Pos2, Vec2)> = labels
        .iter()
        .map(|(at, text, _, f)| {
            let g = ui.fonts_mut(|fs| fs.layout_no_wrap(text.clone(), f.clone(), Color32::WHITE));
            (*at, g.size())
        })
        .collect();
    let spots = label_place::place(&sized, &segments, &points, plot);
    for ((_, text, c, f), spot) in labels.into_iter().zip(spots) {
        if let Some(r) = spot {
            p.text(r.left_top(), Align2::LEFT_TOP, text, f, c);
        }
    }
}

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn trim(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}
