//! Painting one timeline row: visible range by binary search, activities narrower than
//! [`MIN_PX`] folded into one bar with a count (Tracy), one mesh per row, labels only where
//! they fit. Time-to-pixel maths is f64; f32 only for the final, view-relative pixels.

use egui::{Align2, Color32, FontId, Mesh, Painter, Pos2, Rect};
use gapscope_analyzer::explore::Spans;

use crate::axis::Axis;
use crate::palette;

/// Activities narrower than this many pixels are folded into runs.
pub const MIN_PX: f64 = 3.0;
/// Labels are drawn on bars at least this wide.
pub const LABEL_MIN_PX: f64 = 36.0;

/// Size of the labels on bars, points.
pub const LABEL_FONT: f32 = 11.0;

/// Where a bar's label may draw: the bar's visible columns, over the row's whole height
/// (glyphs that reach below the baseline, as `_` does, stay whole; a bar is a pixel
/// shorter than its row on each side).
pub fn label_clip(bar: Rect, row: Rect) -> Rect {
    let x = bar.intersect(row);
    Rect::from_x_y_ranges(x.x_range(), row.y_range())
}

/// The visible window and how it maps to pixels.
#[derive(Clone, Copy)]
pub struct Mapper<'a> {
    pub axis: &'a Axis,
    /// Visible axis range.
    pub u0: f64,
    pub u1: f64,
    /// Left edge and width of the drawing area, px.
    pub left: f32,
    pub width: f32,
}

impl Mapper<'_> {
    pub fn scale(&self) -> f64 {
        self.width as f64 / (self.u1 - self.u0).max(1e-9)
    }
    /// Pixels from the left edge (f64; may lie far outside the view).
    pub fn x(&self, t: i64) -> f64 {
        (self.axis.to_u(t) - self.u0) * self.scale()
    }
    /// Absolute screen x, clamped to a little outside the view so f32 stays exact.
    pub fn sx(&self, t: i64) -> f32 {
        self.clamp_x(self.x(t))
    }
    /// A view-relative x as an absolute screen x, clamped to a little outside the view.
    pub fn clamp_x(&self, x: f64) -> f32 {
        self.left + x.clamp(-8.0, (self.width as f64).max(0.0) + 8.0) as f32
    }
    /// The instant at a view-relative pixel.
    pub fn t(&self, x: f64) -> i64 {
        self.axis.from_u(self.u0 + x / self.scale())
    }
    pub fn t0(&self) -> i64 {
        self.axis.from_u(self.u0)
    }
    pub fn t1(&self) -> i64 {
        self.axis.from_u(self.u1)
    }
}

/// Something drawn, for hover and click.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Drawn {
    /// Item `i` of the row.
    Item(usize),
    /// Items `i..j` folded into one bar.
    Run(usize, usize),
}

/// A row's data, as the painter needs it.
pub trait RowSource {
    /// The row's time columns.
    fn spans(&self) -> &Spans;
    fn color(&self, i: usize) -> Color32;
    fn label(&self, i: usize) -> String;
    /// Colour of the folded run `i..j` (its dominant kind).
    fn run_color(&self, i: usize, j: usize) -> Color32;
    /// Label of the folded run `i..j`.
    fn run_label(&self, i: usize, j: usize) -> String;
    /// Items narrower than this many pixels fold into runs ([`MIN_PX`] for GPU lanes; one
    /// pixel for steps and markers, so every step and marker wider than a pixel is drawn).
    fn min_px(&self) -> f64 {
        MIN_PX
    }
    /// Paints what item `i`'s bar carries besides its colour, into the row's mesh.
    fn decorate(&self, _i: usize, _bar: Rect, _m: &Mapper, _mesh: &mut Mesh) {}
    /// Whether the labels are new from frame to frame in their numbers only (the steps'),
    /// so they are painted from reused pieces ([`super::digit_text`]).
    fn numbered_labels(&self) -> bool {
        false
    }
    /// The longest item of `i..j`, when it can be found cheaply (the default scans up to
    /// 256 items; the explorer's rows answer from their `lod::Longest` index).
    fn longest(&self, i: usize, j: usize) -> Option<usize> {
        if j.saturating_sub(i) > 256 {
            return None;
        }
        let (s, e) = (&self.spans().start_ns, &self.spans().end_ns);
        (i..j).max_by_key(|&k| e[k] - s[k])
    }
}

/// Paints one row into `rect`; returns what was drawn where (for hit testing).
pub fn paint_row(
    painter: &Painter,
    rect: Rect,
    m: &Mapper,
    src: &dyn RowSource,
    hits: &mut Vec<(Rect, Drawn)>,
) {
    let spans = src.spans();
    let (start, end, end_max) = (&spans.start_ns, &spans.end_ns, &spans.end_max_ns);
    let range = spans.overlapping(m.t0(), m.t1());
    let mut mesh = Mesh::default();
    let mut labels: Vec<(Rect, String, Color32)> = Vec::new();
    let (y0, y1) = (rect.top() + 1.0, rect.bottom() - 1.0);
    let scale = m.scale();
    let min_px = src.min_px();
    let mut i = range.start;
    while i < range.end {
        let x0 = m.x(start[i]);
        let x1 = m.x(end[i]);
        if x1 - x0 >= min_px {
            let r = Rect::from_x_y_ranges(m.sx(start[i])..=m.sx(end[i]), y0..=y1);
            let c = src.color(i);
            // A hairline between neighbours where there is room for it.
            let inset = if x1 - x0 > 3.0 { 0.5 } else { 0.0 };
            mesh.add_colored_rect(r.shrink2(egui::vec2(inset, 0.0)), c);
            src.decorate(i, r.shrink2(egui::vec2(inset, 0.0)), m, &mut mesh);
            if x1 - x0 >= LABEL_MIN_PX {
                labels.push((r, src.label(i), c));
            }
            hits.push((r, Drawn::Item(i)));
            i += 1;
            continue;
        }
        // Fold (Tracy): the items starting within min_px of the run's start form one pixel
        // bucket, coloured by its dominant bucket (Perfetto's mipmap keeps one representative
        // per bucket); neighbouring buckets join the run while their colour is the same, no
        // item among them is wide, and no gap wider than min_px separates them.
        // A chunk ends before its first item at least min_px wide (a long item starting
        // right after a zero-length one must not hide in the fold), and a run ends where
        // the next item starts, so an earlier long item cannot stretch it.
        let chunk = |j: usize| -> usize {
            let limit = m.axis.from_u(m.u0 + (m.x(start[j]) + min_px) / scale);
            let k =
                (j + 1 + start[j + 1..range.end].partition_point(|&s| s < limit)).min(range.end);
            match src.longest(j + 1, k) {
                Some(w) if m.x(end[w]) - m.x(start[w]) >= min_px => w,
                _ => k,
            }
        };
        let run_end_of = |k: usize| -> f64 {
            let e = m.x(end_max[k - 1]);
            if k < range.end {
                e.min(m.x(start[k]).max(m.x(end[k - 1])))
            } else {
                e
            }
        };
        let mut k = chunk(i);
        let color = src.run_color(i, k);
        let mut j = k;
        let mut run_end = x1.max(x0).max(run_end_of(k));
        while j < range.end {
            let xs = m.x(start[j]);
            if xs > run_end + min_px || m.x(end[j]) - xs >= min_px {
                break;
            }
            k = chunk(j);
            if src.run_color(j, k) != color {
                break;
            }
            run_end = run_end.max(run_end_of(k));
            j = k;
        }
        let xa = m.clamp_x(x0);
        let xb = m.clamp_x(run_end.max(x0 + 1.0));
        let r = Rect::from_x_y_ranges(xa..=xb.max(xa + 1.0), y0..=y1);
        if j - i == 1 {
            mesh.add_colored_rect(r, src.color(i));
            src.decorate(i, r, m, &mut mesh);
            hits.push((r.expand2(egui::vec2(1.0, 0.0)), Drawn::Item(i)));
        } else {
            let c = color;
            mesh.add_colored_rect(r, c);
            // A dark tick on top tells a folded run from one long activity.
            let tick = Rect::from_x_y_ranges(r.x_range(), y0..=(y0 + 2.0).min(y1));
            mesh.add_colored_rect(tick, palette::dim(c));
            if (xb - xa) as f64 >= LABEL_MIN_PX {
                labels.push((r, src.run_label(i, j), c));
            }
            hits.push((r, Drawn::Run(i, j)));
        }
        i = j;
    }
    painter.add(egui::Shape::mesh(mesh));
    let font = FontId::proportional(LABEL_FONT);
    let numbered = src.numbered_labels();
    for (r, text, bg) in labels {
        let clip = label_clip(r, rect);
        let chars = ((clip.width() - 4.0) / 6.2).floor().max(0.0) as usize;
        if chars < 3 {
            continue;
        }
        let t = super::format::cut(&text, chars);
        let at = Pos2::new(clip.left() + 2.0, rect.center().y);
        let p = painter.with_clip_rect(clip);
        if numbered {
            super::digit_text::paint(&p, at, Align2::LEFT_CENTER, &t, &font, palette::text_on(bg));
        } else {
            p.text(
                at,
                Align2::LEFT_CENTER,
                t,
                font.clone(),
                palette::text_on(bg),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::axis::{Axis, AxisMode};

    struct Row(Spans);

    impl RowSource for Row {
        fn spans(&self) -> &Spans {
            &self.0
        }
        fn color(&self, _: usize) -> Color32 {
            Color32::RED
        }
        fn label(&self, i: usize) -> String {
            format!("item {i}")
        }
        fn run_color(&self, _: usize, _: usize) -> Color32 {
            Color32::BLUE
        }
        fn run_label(&self, i: usize, j: usize) -> String {
            format!("{} items", j - i)
        }
    }

    fn drawn(row: &Row, span: (i64, i64)) -> Vec<Drawn> {
        drawn_as(row, span)
    }

    fn drawn_as(row: &dyn RowSource, span: (i64, i64)) -> Vec<Drawn> {
        let axis = Axis::new(AxisMode::Time, span, &[]);
        let m = Mapper {
            axis: &axis,
            u0: 0.0,
            u1: (span.1 - span.0) as f64,
            left: 0.0,
            width: 1000.0,
        };
        let mut hits = Vec::new();
        let ctx = egui::Context::default();
        let mut out = ctx.run_ui(egui::RawInput::default(), |ui| {
            let rect = Rect::from_min_size(Pos2::ZERO, egui::vec2(1000.0, 20.0));
            paint_row(ui.painter(), rect, &m, row, &mut hits);
        });
        out.textures_delta.clear();
        hits.into_iter().map(|(_, d)| d).collect()
    }

    #[test]
    fn a_long_item_after_a_zero_length_one_is_drawn_on_its_own() {
        // [0, 0) then [0, 500) in a view from -100 to 900: the second is half the view.
        let row = Row(Spans::new(vec![0, 0], vec![0, 500]));
        assert_eq!(drawn(&row, (-100, 900)), [Drawn::Item(0), Drawn::Item(1)]);
    }

    struct Steps(Spans);

    impl RowSource for Steps {
        fn spans(&self) -> &Spans {
            &self.0
        }
        fn color(&self, _: usize) -> Color32 {
            Color32::GREEN
        }
        fn label(&self, i: usize) -> String {
            format!("step {i}")
        }
        fn run_color(&self, _: usize, _: usize) -> Color32 {
            Color32::GRAY
        }
        fn run_label(&self, i: usize, j: usize) -> String {
            format!("{} steps", j - i)
        }
        fn min_px(&self) -> f64 {
            1.0
        }
    }

    #[test]
    fn abutting_steps_are_each_drawn_and_only_sub_pixel_ones_fold() {
        // Over 1000 px for 1000 ns: steps of 40 px and 0.5 px alternating, each starting
        // where the last one ended (a vLLM decode: a long forward, then a short one). The
        // old steps lane jumped to the first step ending a pixel after the drawn one and
        // dropped every short step.
        let (mut start, mut end) = (Vec::new(), Vec::new());
        let mut t = 0i64;
        for k in 0..40 {
            let w = if k % 2 == 0 { 40_000 } else { 500 };
            start.push(t);
            end.push(t + w);
            t += w;
        }
        let row = Steps(Spans::new(start, end));
        let d = drawn_as(&row, (0, 1_000_000));
        let items: Vec<usize> = d
            .iter()
            .filter_map(|x| match x {
                Drawn::Item(i) => Some(*i),
                Drawn::Run(..) => None,
            })
            .collect();
        let visible = row.0.overlapping(0, 1_000_000);
        assert_eq!(items, visible.collect::<Vec<_>>(), "{d:?}");
        // Steps of 0.25 px fold, and the run says how many it holds.
        let start: Vec<i64> = (0..400).map(|i| i * 250).collect();
        let end: Vec<i64> = start.iter().map(|s| s + 250).collect();
        let row = Steps(Spans::new(start, end));
        assert_eq!(drawn_as(&row, (0, 1_000_000)), [Drawn::Run(0, 400)]);
        assert_eq!(row.run_label(0, 400), "400 steps");
    }

    #[test]
    fn labels_keep_their_underscores() {
        let ctx = egui::Context::default();
        let mut out = ctx.run_ui(egui::RawInput::default(), |_| {});
        out.textures_delta.clear();
        let g = ctx.fonts_mut(|f| {
            f.layout_no_wrap(
                "aten::_cudnn_attention_forward".into(),
                FontId::proportional(LABEL_FONT),
                Color32::WHITE,
            )
        });
        // A 14 px timeline row and its bar, a pixel shorter on each side.
        let row = Rect::from_min_size(Pos2::new(0.0, 100.0), egui::vec2(400.0, 14.0));
        let bar = row.shrink2(egui::vec2(0.0, 1.0));
        let clip = label_clip(bar, row);
        // Placed as `paint_row` places it: left-centred on the row.
        let at = Pos2::new(clip.left() + 2.0, row.center().y - g.size().y / 2.0);
        let glyphs = g.mesh_bounds.translate(at.to_vec2());
        assert!(clip.contains_rect(glyphs), "{glyphs:?} cut by {clip:?}");
        // The bar alone (the old clip) cuts the underscores off.
        assert!(!bar.contains_rect(glyphs), "{glyphs:?} within {bar:?}");
    }

    #[test]
    fn narrow_neighbours_fold_into_one_run() {
        // 100 items of 1 ns every 2 ns over 1000 px for 1000 ns: each 1 px wide.
        let start: Vec<i64> = (0..100).map(|i| i * 2).collect();
        let end: Vec<i64> = start.iter().map(|s| s + 1).collect();
        let row = Row(Spans::new(start, end));
        assert_eq!(drawn(&row, (0, 1000)), [Drawn::Run(0, 100)]);
    }
}
