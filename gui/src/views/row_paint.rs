//! Painting one timeline row: visible range by binary search, activities narrower than
//! [`MIN_PX`] folded into one bar with a count (Tracy), one mesh per row, labels only where
//! they fit. Time-to-pixel maths is f64; f32 only for the final, view-relative pixels.

use egui::{Align2, Color32, FontId, Mesh, Painter, Pos2, Rect};

use crate::axis::Axis;
use crate::palette;

/// Activities narrower than this many pixels are folded into runs.
pub const MIN_PX: f64 = 3.0;
/// Labels are drawn on bars at least this wide.
pub const LABEL_MIN_PX: f64 = 36.0;

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
        self.left + self.x(t).clamp(-8.0, self.width as f64 + 8.0) as f32
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
    fn start(&self) -> &[i64];
    fn end(&self) -> &[i64];
    fn end_max(&self) -> &[i64];
    fn color(&self, i: usize) -> Color32;
    fn label(&self, i: usize) -> String;
    /// Colour of the folded run `i..j` (its dominant kind).
    fn run_color(&self, i: usize, j: usize) -> Color32;
    /// Label of the folded run `i..j`.
    fn run_label(&self, i: usize, j: usize) -> String;
}

/// Paints one row into `rect`; returns what was drawn where (for hit testing).
pub fn paint_row(
    painter: &Painter,
    rect: Rect,
    m: &Mapper,
    src: &dyn RowSource,
    hits: &mut Vec<(Rect, Drawn)>,
) {
    let (start, end, end_max) = (src.start(), src.end(), src.end_max());
    let range = gapscope_analyzer::explore::lanes::overlapping(start, end_max, m.t0(), m.t1());
    let mut mesh = Mesh::default();
    let mut labels: Vec<(Rect, String, Color32)> = Vec::new();
    let (y0, y1) = (rect.top() + 1.0, rect.bottom() - 1.0);
    let scale = m.scale();
    let mut i = range.start;
    while i < range.end {
        let x0 = m.x(start[i]);
        let x1 = m.x(end[i]);
        if x1 - x0 >= MIN_PX {
            let r = Rect::from_x_y_ranges(m.sx(start[i])..=m.sx(end[i]), y0..=y1);
            let c = src.color(i);
            mesh.add_colored_rect(r.shrink2(egui::vec2(0.5, 0.0)), c);
            if x1 - x0 >= LABEL_MIN_PX {
                labels.push((r, src.label(i), c));
            }
            hits.push((r, Drawn::Item(i)));
            i += 1;
            continue;
        }
        // Fold (Tracy): the items starting within MIN_PX of the run's start form one pixel
        // bucket, coloured by its dominant bucket (Perfetto's mipmap keeps one representative
        // per bucket); neighbouring buckets join the run while their colour is the same, no
        // item among them is wide, and no gap wider than MIN_PX separates them.
        let chunk = |j: usize| -> usize {
            let limit = m.axis.from_u(m.u0 + (m.x(start[j]) + MIN_PX) / scale);
            (j + 1 + start[j + 1..range.end].partition_point(|&s| s < limit)).min(range.end)
        };
        let mut k = chunk(i);
        let color = src.run_color(i, k);
        let mut j = k;
        let mut run_end = x1.max(x0).max(m.x(end_max[k - 1]));
        while j < range.end {
            let xs = m.x(start[j]);
            if xs > run_end + MIN_PX || m.x(end[j]) - xs >= MIN_PX {
                break;
            }
            k = chunk(j);
            if src.run_color(j, k) != color {
                break;
            }
            run_end = run_end.max(m.x(end_max[k - 1]));
            j = k;
        }
        let xa = m.left + x0.clamp(-8.0, m.width as f64 + 8.0) as f32;
        let xb = m.left + run_end.max(x0 + 1.0).clamp(-8.0, m.width as f64 + 8.0) as f32;
        let r = Rect::from_x_y_ranges(xa..=xb.max(xa + 1.0), y0..=y1);
        if j - i == 1 {
            mesh.add_colored_rect(r, src.color(i));
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
    let font = FontId::proportional(11.0);
    for (r, text, bg) in labels {
        let visible = r.intersect(rect);
        let chars = ((visible.width() - 4.0) / 6.2).floor().max(0.0) as usize;
        if chars < 3 {
            continue;
        }
        let t = super::format::fit(&text, chars);
        painter.with_clip_rect(visible).text(
            Pos2::new(visible.left() + 2.0, visible.center().y),
            Align2::LEFT_CENTER,
            t,
            font.clone(),
            palette::text_on(bg),
        );
    }
}
