//! NVML telemetry under the timeline, on the same axis and window: per pixel column the
//! minimum and maximum of the samples in it (never an average, never across a gap in the
//! sampling), and the throttle reasons as a band.

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Ui, Vec2};
use gapscope_traces::SampleTable;

use super::row_paint::Mapper;
use super::timeline::{self, LABEL_W, TimelineState};
use crate::loader::Loaded;

const SERIES_H: f32 = 64.0;

type Field = fn(&SampleTable, usize) -> f64;

const SERIES: [(&str, &str, Field); 6] = [
    ("SM clock", "MHz", |s, i| s.sm_clock_mhz[i] as f64),
    ("memory clock", "MHz", |s, i| s.mem_clock_mhz[i] as f64),
    ("power", "W", |s, i| s.power_mw[i] as f64 / 1000.0),
    ("temperature", "°C", |s, i| s.temperature_c[i] as f64),
    ("GPU utilisation", "%", |s, i| s.gpu_util_pct[i] as f64),
    ("memory utilisation", "%", |s, i| s.mem_util_pct[i] as f64),
];

/// Min/max per pixel column of `value` over the samples `idx` (time-sorted): one entry per
/// column that holds samples, `None` where the column lies in a sampling gap (more than 3×
/// the median interval between samples).
pub fn min_max_columns(
    times: &[i64],
    values: &[f64],
    m: &Mapper,
    columns: usize,
) -> Vec<Option<(f64, f64)>> {
    let mut out = vec![None; columns];
    if times.is_empty() {
        return out;
    }
    let mut gaps: Vec<i64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_unstable();
    let max_gap = gaps
        .get(gaps.len() / 2)
        .copied()
        .unwrap_or(i64::MAX / 4)
        .saturating_mul(3);
    let (t0, t1) = (m.t0(), m.t1());
    let lo = times.partition_point(|&t| t < t0).saturating_sub(1);
    let hi = (times.partition_point(|&t| t <= t1) + 1).min(times.len());
    for k in lo..hi {
        let x = m.x(times[k]);
        // A sample holds its value until the next one, unless the next is beyond a gap.
        let next = if k + 1 < times.len() && times[k + 1] - times[k] <= max_gap {
            m.x(times[k + 1])
        } else {
            x + 1.0
        };
        let (c0, c1) = (
            x.max(0.0) as usize,
            next.min(columns as f64).max(0.0) as usize,
        );
        let v = values[k];
        for slot in &mut out[c0.min(columns)..c1.max(c0.saturating_add(1)).min(columns)] {
            *slot = Some(match *slot {
                Some((a, b)) => (f64::min(a, v), f64::max(b, v)),
                None => (v, v),
            });
        }
    }
    out
}

/// Telemetry of the steps' device under a compact timeline.
pub fn show(ui: &mut Ui, st: &mut TimelineState, l: &Loaded) {
    let dark = crate::palette::is_dark(ui.ctx());
    let s = &l.x.trace.samples;
    let device = l.x.report.steps.device.unwrap_or(0);
    let idx: Vec<usize> = {
        let mut v: Vec<usize> = (0..s.len).filter(|&i| s.device[i] == device).collect();
        v.sort_by_key(|&i| s.host_ns[i]);
        v
    };
    if idx.is_empty() {
        ui.label("This trace holds no NVML samples (record with gapscope-record to get clocks, power, temperature and throttle reasons).");
        timeline::show(ui, st, l, "telemetry_tl", None);
        return;
    }
    let tl_h = (ui.available_height() - SERIES.len() as f32 * SERIES_H - 40.0).max(160.0);
    timeline::show(ui, st, l, "telemetry_tl", Some(tl_h));
    let Some(axis) = st.axis.clone() else { return };
    let (rect, _) = ui.allocate_exact_size(
        Vec2::new(ui.available_width(), SERIES.len() as f32 * SERIES_H + 20.0),
        Sense::hover(),
    );
    let p = ui.painter_at(rect);
    p.rect_filled(rect, 0.0, crate::palette::gray(dark, 14));
    let area = Rect::from_min_max(Pos2::new(rect.left() + LABEL_W, rect.top()), rect.max);
    let m = Mapper {
        axis: &axis,
        u0: st.u0,
        u1: st.u1,
        left: area.left(),
        width: area.width(),
    };
    let times: Vec<i64> = idx.iter().map(|&i| s.host_ns[i]).collect();
    let cols = area.width().max(1.0) as usize;
    let font = FontId::proportional(11.0);
    for (k, (name, unit, f)) in SERIES.iter().enumerate() {
        let band = Rect::from_min_max(
            Pos2::new(area.left(), rect.top() + k as f32 * SERIES_H),
            Pos2::new(area.right(), rect.top() + (k + 1) as f32 * SERIES_H - 4.0),
        );
        let values: Vec<f64> = idx.iter().map(|&i| f(s, i)).collect();
        let (vmin, vmax) = values
            .iter()
            .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
        let pad = ((vmax - vmin) * 0.1).max(1.0);
        let (lo, hi) = (vmin - pad, vmax + pad);
        let y = |v: f64| band.bottom() - ((v - lo) / (hi - lo)) as f32 * band.height();
        p.text(
            Pos2::new(rect.left() + 4.0, band.center().y),
            Align2::LEFT_CENTER,
            format!("{name}\n{vmin:.0}–{vmax:.0} {unit}"),
            font.clone(),
            crate::palette::gray(dark, 200),
        );
        p.line_segment(
            [band.left_bottom(), band.right_bottom()],
            Stroke::new(1.0, crate::palette::gray(dark, 40)),
        );
        let mut mesh = egui::Mesh::default();
        let col = Color32::from_rgb(0x60, 0xc0, 0xff);
        for (c, mm) in min_max_columns(&times, &values, &m, cols)
            .into_iter()
            .enumerate()
        {
            if let Some((a, b)) = mm {
                let x = area.left() + c as f32;
                mesh.add_colored_rect(
                    Rect::from_x_y_ranges(x..=x + 1.0, y(b) - 1.0..=y(a) + 1.0),
                    col,
                );
            }
        }
        p.add(egui::Shape::mesh(mesh));
    }
    // Throttle reasons: a red band where any reason is set.
    let band = Rect::from_min_max(
        Pos2::new(area.left(), rect.bottom() - 16.0),
        Pos2::new(area.right(), rect.bottom() - 4.0),
    );
    p.text(
        Pos2::new(rect.left() + 4.0, band.center().y),
        Align2::LEFT_CENTER,
        "throttle reasons",
        font,
        crate::palette::gray(dark, 200),
    );
    let flags: Vec<f64> = idx
        .iter()
        .map(|&i| if s.throttle_reasons[i] != 0 { 1.0 } else { 0.0 })
        .collect();
    for (c, mm) in min_max_columns(&times, &flags, &m, cols)
        .into_iter()
        .enumerate()
    {
        if let Some((_, b)) = mm {
            let x = area.left() + c as f32;
            let color = if b > 0.0 {
                Color32::from_rgb(230, 60, 60)
            } else {
                crate::palette::gray(dark, 50)
            };
            p.rect_filled(
                Rect::from_x_y_ranges(x..=x + 1.0, band.y_range()),
                0.0,
                color,
            );
        }
    }
    let reasons: u64 = idx.iter().fold(0, |a, &i| a | s.throttle_reasons[i]);
    if reasons != 0 {
        let names = gapscope_analyzer::analysis::telemetry::reason_names(reasons).join(", ");
        ui.label(format!("throttle reasons seen: {names}"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axis::{Axis, AxisMode};

    #[test]
    fn columns_keep_min_and_max_and_leave_gaps_empty() {
        let axis = Axis::new(AxisMode::Time, (0, 1000), &[]);
        let times = [0, 10, 20, 30, 1000];
        let values = [1.0, 5.0, 3.0, 2.0, 9.0];
        // 10 ns per column: one sample per column, then a gap (970 ns > 3 × 10 ns).
        let m = Mapper {
            axis: &axis,
            u0: 0.0,
            u1: 1000.0,
            left: 0.0,
            width: 100.0,
        };
        let c = min_max_columns(&times, &values, &m, 100);
        assert_eq!(
            &c[..4],
            &[
                Some((1.0, 1.0)),
                Some((5.0, 5.0)),
                Some((3.0, 3.0)),
                Some((2.0, 2.0))
            ]
        );
        assert!(
            c[4..].iter().all(Option::is_none),
            "the gap is not drawn: {:?}",
            &c[4..8]
        );
        // 100 ns per column: the first four samples share column 0, as min and max (no mean).
        let m = Mapper { width: 10.0, ..m };
        let c = min_max_columns(&times, &values, &m, 10);
        assert_eq!(c[0], Some((1.0, 5.0)));
        assert!(c[1..].iter().all(Option::is_none));
    }
}
