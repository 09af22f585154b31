//! Two traces side by side: a waterfall from A's step time to B's by bucket, the what-ifs,
//! the structural changes, the kernels that moved, and both timelines step-aligned one
//! above the other with one shared window. Every figure is the analyzer's `DiffReport`.

use egui::{Align2, Color32, FontId, Pos2, Rect, RichText, ScrollArea, Sense, Stroke, Ui, Vec2};
use gapscope_analyzer::diff::{DEFAULT_LIST, DiffReport, diff, refusal};

use super::format;
use super::timeline::{self, TimelineState};
use crate::axis::AxisMode;
use crate::loader::Loaded;
use crate::palette;

/// Kernels listed as moved and only on one side: as many as `gapscope diff` lists.
const TOP: usize = DEFAULT_LIST;

#[derive(Default)]
pub struct DiffState {
    pub a: usize,
    pub b: usize,
    /// The report for (a, b), or why there is none.
    cache: Option<((usize, usize), Result<DiffReport, String>)>,
    pub timeline_a: TimelineState,
    pub timeline_b: TimelineState,
}

impl DiffState {
    /// The diff of documents `a` and `b` (computed once per pair).
    pub fn report(&mut self, a: &Loaded, b: &Loaded) -> &Result<DiffReport, String> {
        let key = (self.a, self.b);
        if self.cache.as_ref().is_none_or(|(k, _)| *k != key) {
            let why = refusal(&a.x.report, &b.x.report, true);
            let r = if why.is_empty() {
                Ok(diff(a.x.diff_side(), b.x.diff_side(), TOP))
            } else {
                let why: Vec<String> = why.iter().map(ToString::to_string).collect();
                Err(format!("cannot diff: {}", why.join("; ")))
            };
            self.timeline_a = TimelineState {
                mode: AxisMode::StepAligned,
                ..TimelineState::default()
            };
            self.timeline_b = TimelineState {
                mode: AxisMode::StepAligned,
                ..TimelineState::default()
            };
            self.cache = Some((key, r));
        }
        &self.cache.as_ref().expect("set above").1
    }
}

/// The diff view; `names` are the open documents' titles.
pub fn show(ui: &mut Ui, st: &mut DiffState, docs: &[(&str, Option<&Loaded>)]) {
    if docs.len() < 2 {
        ui.label("Open two traces to compare them (A: the one to explain, B: the reference).");
        return;
    }
    st.a = st.a.min(docs.len() - 1);
    st.b = st.b.min(docs.len() - 1);
    if st.a == st.b {
        st.b = if st.a == 0 { 1 } else { 0 };
    }
    ui.horizontal(|ui| {
        for (label, which) in [("A", &mut st.a), ("B", &mut st.b)] {
            egui::ComboBox::new(("diff_side", label), label)
                .selected_text(docs[*which].0)
                .show_ui(ui, |ui| {
                    for (i, (name, _)) in docs.iter().enumerate() {
                        ui.selectable_value(which, i, *name);
                    }
                });
        }
    });
    let (Some(a), Some(b)) = (docs[st.a].1, docs[st.b].1) else {
        ui.label("Waiting for both traces to load…");
        return;
    };
    let r = match st.report(a, b) {
        Ok(r) => r.clone(),
        Err(e) => {
            ui.colored_label(Color32::from_rgb(255, 120, 120), e);
            return;
        }
    };
    let h = ui.available_height();
    ui.horizontal_top(|ui| {
        ui.vertical(|ui| {
            ui.set_width((ui.available_width() * 0.5).max(300.0));
            waterfall(ui, &r, (h * 0.42).max(200.0));
        });
        ui.vertical(|ui| {
            ScrollArea::vertical()
                .id_salt("diff_tables")
                .max_height((h * 0.42).max(200.0))
                .show(ui, |ui| tables(ui, &r));
        });
    });
    ui.separator();
    // Both timelines step-aligned, one window.
    let each = ((ui.available_height() - 40.0) / 2.0).max(80.0);
    ui.label(RichText::new(format!("A: {} (step-aligned)", docs[st.a].0)).strong());
    let before = (st.timeline_a.u0, st.timeline_a.u1);
    timeline::show(ui, &mut st.timeline_a, a, "diff_a", Some(each));
    if (st.timeline_a.u0, st.timeline_a.u1) != before {
        st.timeline_b.u0 = st.timeline_a.u0;
        st.timeline_b.u1 = st.timeline_a.u1;
    }
    ui.label(RichText::new(format!("B: {} (step-aligned)", docs[st.b].0)).strong());
    let before = (st.timeline_b.u0, st.timeline_b.u1);
    timeline::show(ui, &mut st.timeline_b, b, "diff_b", Some(each));
    if (st.timeline_b.u0, st.timeline_b.u1) != before {
        st.timeline_a.u0 = st.timeline_b.u0;
        st.timeline_a.u1 = st.timeline_b.u1;
    }
}

/// The waterfall: A's step, each bucket's delta (A minus B) as a floating bar, the
/// residual (idle and overlap), B's step.
fn waterfall(ui: &mut Ui, r: &DiffReport, height: f32) {
    let dark = crate::palette::is_dark(ui.ctx());
    ui.label(
        RichText::new(format!(
            "step time A {} -> B {} (gap {:+.3} ms{})",
            format::ms_label(r.a.step_ms),
            format::ms_label(r.b.step_ms),
            r.gap_ms,
            if r.gap_is_meaningful {
                ""
            } else {
                ", below the noise floor for shares"
            }
        ))
        .strong(),
    );
    let mut bars: Vec<(String, f64, f64, Color32)> = vec![(
        "A".into(),
        0.0,
        r.a.step_ms,
        crate::palette::gray(dark, 170),
    )];
    let mut level = r.a.step_ms;
    let mut moved: Vec<_> = r
        .buckets
        .iter()
        .filter(|d| d.delta_ms.abs() > 1e-6)
        .collect();
    moved.sort_by(|x, y| y.delta_ms.abs().total_cmp(&x.delta_ms.abs()));
    // The six largest bucket deltas; the other buckets together; then what no bucket holds.
    for d in moved.iter().take(6) {
        let next = level - d.delta_ms;
        bars.push((
            d.bucket.as_str().into(),
            level,
            next,
            palette::bucket_of(d.bucket),
        ));
        level = next;
    }
    let others: f64 = moved.iter().skip(6).map(|d| d.delta_ms).sum();
    for (name, delta, color) in [
        (
            "other buckets",
            others,
            palette::bucket_of(gapscope_analyzer::Bucket::Other),
        ),
        ("idle + overlap", r.residual_ms, palette::IDLE),
    ] {
        if delta.abs() > 1e-6 {
            let next = level - delta;
            bars.push((name.into(), level, next, color));
            level = next;
        }
    }
    bars.push((
        "B".into(),
        0.0,
        r.b.step_ms,
        crate::palette::gray(dark, 170),
    ));
    let _ = level;
    let (rect, _) = ui.allocate_exact_size(Vec2::new(ui.available_width(), height), Sense::hover());
    let p = ui.painter_at(rect);
    p.rect_filled(rect, 0.0, crate::palette::gray(dark, 18));
    let plot = Rect::from_min_max(
        rect.min + Vec2::new(50.0, 10.0),
        rect.max - Vec2::new(10.0, 84.0),
    );
    let tallest = bars.iter().map(|b| b.1.max(b.2)).fold(0.0, f64::max);
    // Round ticks, as the steps view's.
    let (tick, ticks) = super::steps::nice_ticks(tallest * 1.05, 4);
    let top = tick * ticks as f64;
    let y = |v: f64| plot.bottom() - (v / top) as f32 * plot.height();
    let font = FontId::monospace(10.0);
    for k in 0..=ticks {
        let v = tick * k as f64;
        p.line_segment(
            [Pos2::new(plot.left(), y(v)), Pos2::new(plot.right(), y(v))],
            Stroke::new(1.0, crate::palette::gray(dark, 45)),
        );
        p.text(
            Pos2::new(plot.left() - 4.0, y(v)),
            Align2::RIGHT_CENTER,
            super::steps::ms_tick(v, tick)
                .trim_end_matches(" ms")
                .to_owned(),
            font.clone(),
            crate::palette::gray(dark, 170),
        );
    }
    let w = plot.width() / bars.len() as f32;
    let names: Vec<&str> = bars.iter().map(|b| b.0.as_str()).collect();
    let labels = category_labels(&names, w, CHAR_W);
    for (k, (name, from, to, c)) in bars.iter().enumerate() {
        let x0 = plot.left() + k as f32 * w + 3.0;
        let r = Rect::from_x_y_ranges(
            x0..=x0 + w - 6.0,
            y(from.max(*to))..=y(from.min(*to)).max(y(from.max(*to)) + 1.0),
        );
        p.rect_filled(r, 1.0, *c);
        let delta = if name == "A" || name == "B" {
            format!("{:.3}", to)
        } else {
            format!("{:+.3}", from - to)
        };
        p.text(
            Pos2::new(r.center().x, r.top() - 2.0),
            Align2::CENTER_BOTTOM,
            delta,
            font.clone(),
            crate::palette::gray(dark, 220),
        );
        let (text, row) = &labels[k];
        p.text(
            Pos2::new(r.center().x, plot.bottom() + 4.0 + 13.0 * *row as f32),
            Align2::CENTER_TOP,
            text,
            font.clone(),
            crate::palette::gray(dark, 200),
        );
    }
    p.text(
        Pos2::new(rect.left() + 4.0, rect.bottom() - 4.0),
        Align2::LEFT_BOTTOM,
        "ms per step; a bar going down: A spends that much more than B",
        font,
        crate::palette::gray(dark, 150),
    );
}

/// Width of a character of the waterfall's 10-point monospace labels, px (a little over
/// the glyphs' advance, so neighbours keep a gap).
const CHAR_W: f32 = 6.5;

/// Each category label of a waterfall with bars `w` px apart, and its row under the axis:
/// labels that would run into their neighbour alternate between two rows, and a label
/// still wider than two bars is cut.
pub fn category_labels(names: &[&str], w: f32, char_w: f32) -> Vec<(String, usize)> {
    let fits = |n: &str| n.chars().count() as f32 * char_w <= w - 4.0;
    let stagger = names.iter().any(|n| !fits(n));
    names
        .iter()
        .enumerate()
        .map(|(k, n)| {
            let room = if stagger { 2.0 * w - 8.0 } else { w - 4.0 };
            let chars = ((room / char_w).floor().max(1.0)) as usize;
            (format::cut(n, chars), if stagger { k % 2 } else { 0 })
        })
        .collect()
}

fn tables(ui: &mut Ui, r: &DiffReport) {
    ui.strong("what if A's lever took B's time");
    egui::Grid::new("whatif").striped(true).show(ui, |ui| {
        ui.label("lever");
        ui.label("A as B");
        ui.label("gain");
        ui.label("without");
        ui.end_row();
        // The levers that gain, best first, as `gapscope diff` lists them; a gain is how
        // much shorter A's step gets (positive: faster).
        for w in r.gaining().into_iter().take(8) {
            ui.label(&w.lever);
            ui.monospace(format::ms_label(w.as_b_ms));
            ui.monospace(format!("{:.3} ms", w.gain_as_b_ms));
            ui.monospace(format::ms_label(w.without_ms));
            ui.end_row();
        }
    });
    ui.separator();
    let s = &r.structural;
    ui.strong("structural changes");
    ui.label(format!(
        "kernels/step A {:.1} · B {:.1} · extra copies/step {:+.1} · extra gathers/step {:+.1} · graph replays: {}",
        s.a_kernels_per_step, s.b_kernels_per_step, s.extra_copies_per_step, s.extra_gathers_per_step, s.graph_replays
    ));
    for (label, list, total) in [
        ("only in A", &s.only_in_a, s.only_in_a_total),
        ("only in B", &s.only_in_b, s.only_in_b_total),
    ] {
        if total > 0 {
            ui.label(format!("{label} ({total}):"));
            for (n, c) in list.iter().take(6) {
                ui.monospace(format!("  {:.1}/step  {}", c, format::cut(n, 70)));
            }
        }
    }
    ui.separator();
    ui.strong("kernels that moved (ms/step)");
    egui::Grid::new("moved").striped(true).show(ui, |ui| {
        ui.label("kernel");
        ui.label("bucket");
        ui.label("A");
        ui.label("B");
        ui.label("delta");
        ui.end_row();
        for k in &r.top_moved {
            ui.label(format::cut(&k.name, 48)).on_hover_text(&k.name);
            ui.colored_label(palette::bucket_of(k.bucket), k.bucket.as_str());
            ui.monospace(format!("{:.4}", k.a_ms_per_step));
            ui.monospace(format!("{:.4}", k.b_ms_per_step));
            ui.monospace(format!("{:+.4}", k.delta_ms));
            ui.end_row();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waterfall_labels_do_not_overlap() {
        let names = [
            "A",
            "act_elementwise",
            "embed_gather",
            "attention",
            "other buckets",
            "idle + overlap",
            "B",
        ];
        let w = 80.0;
        let got = category_labels(&names, w, CHAR_W);
        // Each label's extent, centred on its bar; two on one row must not meet.
        let span = |k: usize| {
            let half = got[k].0.chars().count() as f32 * CHAR_W / 2.0;
            let c = (k as f32 + 0.5) * w;
            (c - half, c + half)
        };
        for a in 0..names.len() {
            for b in a + 1..names.len() {
                if got[a].1 == got[b].1 {
                    let ((_, ra), (lb, _)) = (span(a), span(b));
                    assert!(ra < lb, "{:?} and {:?} overlap", got[a], got[b]);
                }
            }
        }
        // The old labels were cut at w / 6 characters and centred on one row:
        // "act_elementwise" (15 × 6.5 px) ran into its neighbours.
        assert!(15.0 * CHAR_W > w);
        assert!(got.iter().any(|(_, row)| *row == 1));
    }
}
