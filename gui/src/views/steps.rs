//! Stacked bars of bucket time for every step of the run (idle on top), prefill, decode
//! and mixed steps told apart by the strip under each bar, stalls marked red. Clicking a
//! bar asks for the timeline zoomed to that step.

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Ui, Vec2};
use gapscope_analyzer::Bucket;
use gapscope_analyzer::explore::StepView;

use super::format;
use crate::loader::Loaded;
use crate::palette;

const AXIS_W: f32 = 56.0;
const PHASE_H: f32 = 6.0;

/// The hybrid engine's levers predicted from this run alone (as `gapscope diff TRACE
/// --what-if hybrid`), made the first time the section is opened.
fn levers(ui: &mut Ui, l: &Loaded) {
    let w = match l.levers() {
        Ok(w) => w,
        Err(e) => {
            ui.label(format!("no lever what-if for this trace: {e}"));
            return;
        }
    };
    let p = &w.prediction;
    ui.label(format!(
        "{} decode steps: step {} (median span), {:.0} launches per step",
        p.decode_steps,
        format::ms_label(p.step_ms),
        p.launches_per_step
    ));
    egui::Grid::new("levers").striped(true).show(ui, |ui| {
        for h in ["lever", "removes", "adds", "predicted step"] {
            ui.strong(h);
        }
        ui.end_row();
        for lv in &p.levers {
            ui.label(lv.lever.to_string());
            ui.monospace(format::ms_label(lv.removed_ms));
            ui.monospace(format::ms_label(lv.added_ms));
            ui.monospace(format::ms_label(lv.predicted_step_ms));
            ui.end_row();
        }
    });
}

/// Draws the bars; returns the step clicked, if any, and the plot's rectangle.
pub fn show(ui: &mut Ui, l: &Loaded, show_idle: &mut bool) -> (Option<usize>, Option<Rect>) {
    let dark = crate::palette::is_dark(ui.ctx());
    let steps = &l.x.steps;
    ui.horizontal_wrapped(|ui| {
        ui.label(format!(
            "{} steps · {} decode · {} prefill · {} mixed · {} stalls · steps from {}",
            steps.len(),
            l.x.report.steps.decode_steps,
            l.x.report.steps.prefill_steps,
            l.x.report.steps.mixed_steps,
            steps.iter().filter(|s| s.stall).count(),
            l.x.report.steps.source
        ));
    });
    if let Some(sp) = &l.x.report.speculative {
        ui.label(spec_line(sp));
    }
    egui::CollapsingHeader::new("engine lever what-if")
        .id_salt("lever_what_if")
        .show(ui, |ui| levers(ui, l));
    ui.horizontal(|ui| {
        legend(ui, steps);
        ui.checkbox(show_idle, "show idle")
            .on_hover_text("stack each step's GPU idle on top of its buckets");
    });
    if steps.is_empty() {
        ui.label("No steps were found in this trace: the timeline still shows every kernel.");
        return (None, None);
    }
    let idle_of = |s: &StepView| if *show_idle { s.idle_ms } else { 0.0 };
    let (rect, resp) = ui.allocate_exact_size(ui.available_size(), Sense::click());
    let p = ui.painter_at(rect);
    p.rect_filled(rect, 0.0, crate::palette::gray(dark, 18));
    let plot = Rect::from_min_max(
        Pos2::new(rect.left() + AXIS_W, rect.top() + 8.0),
        Pos2::new(rect.right() - 8.0, rect.bottom() - 22.0),
    );
    let height_of = |s: &StepView| s.stacked_ms() - s.idle_ms + idle_of(s);
    let tallest = steps.iter().map(height_of).fold(0.0, f64::max).max(1e-6);
    // Round ticks (1, 2 or 5 × 10^k ms), the axis ending on the first above the tallest bar.
    let (tick, ticks) = nice_ticks(tallest, 5);
    let max_ms = tick * ticks as f64;
    let y_of = |ms: f64| plot.bottom() - (ms / max_ms) as f32 * plot.height();
    let font = FontId::monospace(10.0);
    for k in 0..=ticks {
        let v = tick * k as f64;
        let y = y_of(v);
        p.line_segment(
            [Pos2::new(plot.left(), y), Pos2::new(plot.right(), y)],
            Stroke::new(1.0, crate::palette::gray(dark, 45)),
        );
        p.text(
            Pos2::new(plot.left() - 4.0, y),
            Align2::RIGHT_CENTER,
            ms_tick(v, tick),
            font.clone(),
            crate::palette::gray(dark, 180),
        );
    }
    let n = steps.len();
    let w = plot.width() / n as f32;
    let mut mesh = egui::Mesh::default();
    // At most one bar per pixel column: the tallest step of the column stands for it.
    let mut col_best: Vec<Option<usize>> = vec![None; plot.width().ceil().max(1.0) as usize + 1];
    for (k, s) in steps.iter().enumerate() {
        let c = ((k as f32 * w) as usize).min(col_best.len() - 1);
        if col_best[c].is_none_or(|b| height_of(&steps[b]) < height_of(s)) {
            col_best[c] = Some(k);
        }
    }
    let bar_w = w.max(1.0);
    for k in col_best.into_iter().flatten() {
        let s = &steps[k];
        let x0 = plot.left() + k as f32 * w;
        let x1 = x0 + if bar_w > 3.0 { bar_w - 1.0 } else { bar_w };
        let mut acc = 0.0;
        for (b, &ms) in s.bucket_ms.iter().enumerate() {
            if ms <= 0.0 {
                continue;
            }
            let r = Rect::from_x_y_ranges(x0..=x1, y_of(acc + ms)..=y_of(acc));
            mesh.add_colored_rect(r, palette::bucket(b as u8));
            acc += ms;
        }
        if idle_of(s) > 0.0 {
            let r = Rect::from_x_y_ranges(x0..=x1, y_of(acc + s.idle_ms)..=y_of(acc));
            mesh.add_colored_rect(
                r,
                if s.stall {
                    palette::STALL
                } else {
                    palette::IDLE
                },
            );
        }
        let strip_y = plot.bottom() + 2.0..=plot.bottom() + 2.0 + PHASE_H;
        let draft = s.draft_share();
        if draft > 0.0 {
            // A speculative step: the draft's window, then the verify's.
            let xm = x0 + (x1 - x0) * draft as f32;
            mesh.add_colored_rect(
                Rect::from_x_y_ranges(x0..=xm, strip_y.clone()),
                palette::DRAFT,
            );
            mesh.add_colored_rect(Rect::from_x_y_ranges(xm..=x1, strip_y), palette::VERIFY);
        } else {
            let strip = Rect::from_x_y_ranges(x0..=x1, strip_y);
            mesh.add_colored_rect(strip, palette::phase(s.phase));
        }
    }
    p.add(egui::Shape::mesh(mesh));
    // A label every few steps, at least 80 px apart, named as the CLI numbers them.
    let every = label_every(n, plot.width(), 80.0);
    for k in (0..n).step_by(every) {
        let x = plot.left() + (k as f32 + 0.5) * w;
        p.line_segment(
            [
                Pos2::new(x, plot.bottom() + 2.0 + PHASE_H),
                Pos2::new(x, plot.bottom() + 5.0 + PHASE_H),
            ],
            Stroke::new(1.0, crate::palette::gray(dark, 120)),
        );
        p.text(
            Pos2::new(x, rect.bottom() - 2.0),
            Align2::CENTER_BOTTOM,
            l.step_names.axis_label(k),
            font.clone(),
            crate::palette::gray(dark, 180),
        );
    }
    let at = resp
        .hover_pos()
        .filter(|q| plot.x_range().contains(q.x))
        .map(|q| (((q.x - plot.left()) / w) as usize).min(n - 1));
    let clicked = at.filter(|_| resp.clicked());
    if let (Some(k), Some(pointer)) = (at, resp.hover_pos()) {
        super::tooltip::at_pointer(
            ui,
            resp.id.with("step_tip"),
            pointer,
            &step_tooltip(&l.step_names.label(k), &steps[k]),
        );
    }
    (clicked, Some(plot))
}

fn legend(ui: &mut Ui, steps: &[StepView]) {
    ui.horizontal_wrapped(|ui| {
        for (b, bucket) in Bucket::ALL.iter().enumerate() {
            if steps.iter().any(|s| s.bucket_ms[b] > 0.0) {
                swatch(ui, palette::bucket(b as u8), bucket.as_str());
            }
        }
        swatch(ui, palette::IDLE, "idle");
        swatch(ui, palette::STALL, "stall (idle)");
        ui.separator();
        if steps.iter().any(|s| s.draft_forwards > 0) {
            swatch(ui, palette::DRAFT, "draft");
            swatch(ui, palette::VERIFY, "verify");
        }
        for ph in [
            gapscope_traces::Phase::Prefill,
            gapscope_traces::Phase::Decode,
            gapscope_traces::Phase::Mixed,
        ] {
            if steps.iter().any(|s| s.phase == ph) {
                swatch(ui, palette::phase(ph), ph.as_str());
            }
        }
    });
}

pub fn swatch(ui: &mut Ui, c: Color32, label: &str) {
    let (r, _) = ui.allocate_exact_size(Vec2::splat(10.0), Sense::hover());
    ui.painter().rect_filled(r, 2.0, c);
    ui.label(label);
}

/// The speculative run in one line: roles, tokens per step and acceptance.
fn spec_line(sp: &gapscope_analyzer::analysis::spec::SpecReport) -> String {
    let tokens = sp.tokens_per_step.map_or_else(
        || "acceptance unknown".to_owned(),
        |t| {
            format!(
                "{t:.2} tokens/step, {:.0}% of candidates accepted, {} per token",
                100.0 * sp.acceptance_rate.unwrap_or(0.0),
                format::ms_label(sp.tpot_per_token_ms.unwrap_or(0.0))
            )
        },
    );
    format!(
        "speculative: {} verify forwards, {} draft forwards ({:.1} per step); {tokens}",
        sp.target_forwards, sp.draft_forwards, sp.draft_forwards_per_step
    )
}

fn step_tooltip(name: &str, s: &StepView) -> String {
    let spec = if s.draft_forwards > 0 || s.tokens > 0 {
        format!(
            "\n{} draft forwards ({:.0}% of the step) · {} tokens",
            s.draft_forwards,
            100.0 * s.draft_share(),
            s.tokens
        )
    } else {
        String::new()
    };
    let mut t = format!(
        "{name}{}\n{} active · {} busy · {} idle (largest gap {})",
        if s.stall { " · STALL" } else { "" },
        format::ms_label(s.active_ms),
        format::ms_label(s.busy_ms),
        format::ms_label(s.idle_ms),
        format::ms_label(s.max_gap_ms)
    ) + &spec;
    let mut rows: Vec<(usize, f64)> = s
        .bucket_ms
        .iter()
        .copied()
        .enumerate()
        .filter(|r| r.1 > 0.0)
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    for (b, ms) in rows {
        t += &format!("\n{:<16} {}", Bucket::ALL[b].as_str(), format::ms_label(ms));
    }
    t + "\nclick: show it in the timeline"
}

/// Round ticks for an axis from 0 over `max`: a step of 1, 2 or 5 × 10^k and how many of
/// them reach `max` (at most `most`, at least 1).
pub fn nice_ticks(max: f64, most: usize) -> (f64, usize) {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / most.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|f| f * mag)
        .find(|&s| s * most as f64 >= max * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag);
    let n = ((max / step) - 1e-9).ceil().max(1.0) as usize;
    (step, n)
}

/// A tick's value in ms with as many decimals as the tick step needs.
pub fn ms_tick(v: f64, step: f64) -> String {
    let decimals = (-step.log10().floor()).max(0.0) as usize;
    format!("{v:.decimals$} ms")
}

/// Label every how many steps (1, 2 or 5 × 10^k) so labels of `n` steps over `width` px
/// stand at least `min_px` apart.
pub fn label_every(n: usize, width: f32, min_px: f32) -> usize {
    let per = width / n.max(1) as f32;
    let want = (min_px / per.max(1e-3)).ceil().max(1.0) as usize;
    let mut mag = 1usize;
    loop {
        for f in [1, 2, 5] {
            if f * mag >= want {
                return f * mag;
            }
        }
        mag = mag.saturating_mul(10);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn y_ticks_fall_on_round_values() {
        // The old axis divided the tallest bar by four: 0.37, 0.74, 1.11 ms.
        let (step, n) = nice_ticks(1.4833, 5);
        assert_eq!((step, n), (0.5, 3));
        let (step, n) = nice_ticks(92.7, 5);
        assert_eq!((step, n), (20.0, 5));
        let (step, n) = nice_ticks(0.04, 5);
        assert!((step - 0.01).abs() < 1e-12 && n == 4, "{step} {n}");
        assert_eq!(nice_ticks(0.0, 5), (0.2, 5));
        assert_eq!(ms_tick(1.5, 0.5), "1.5 ms");
        assert_eq!(ms_tick(40.0, 20.0), "40 ms");
    }

    #[test]
    fn x_labels_come_every_few_steps() {
        // 16 steps over 1600 px: every step; 512 over 1200: every 50th (not just the ends).
        assert_eq!(label_every(16, 1600.0, 80.0), 1);
        assert_eq!(label_every(16, 1200.0, 80.0), 2);
        assert_eq!(label_every(512, 1200.0, 80.0), 50);
        assert_eq!(label_every(1, 100.0, 80.0), 1);
    }
}
