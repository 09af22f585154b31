//! The ranks of one run: one lane per rank on one time axis (the first rank's clock, as the
//! multi-rank analysis aligned them), each with its aligned step windows, its other kernels
//! and its collectives, each collective's waiting part hatched and lighter, its transfer
//! solid; thin lines link one collective's ends across ranks when zoomed in enough; the
//! rank that sets the step is marked. The verdict above, the per-rank table below. Zoom and
//! pan as in the timeline (W/S, A/D, F, Ctrl+wheel, Shift+wheel, right-drag).

use std::ops::Range;
use std::sync::Arc;

use egui::{Align2, Color32, FontId, Pos2, Rect, RichText, Sense, Shape, Stroke, Ui, Vec2};
use gapscope_analyzer::explore::ranks::{RankLane, RankLanes};

use super::format;
use super::ranks_text;
use super::row_paint::Mapper;
use super::timeline::{RULER_H, TimelineState, navigate, ruler};
use crate::axis::{Axis, AxisMode};
use crate::palette;
use crate::set_loader::RanksLoaded;

const LABEL_W: f32 = 210.0;
const STEP_H: f32 = 10.0;
const KERNEL_H: f32 = 12.0;
const COLL_H: f32 = 22.0;
const LANE_GAP: f32 = 14.0;
const LANE_H: f32 = STEP_H + 2.0 + KERNEL_H + 2.0 + COLL_H + LANE_GAP;

/// The ranks of one run and their view's state.
pub struct RanksDoc {
    pub data: RanksLoaded,
    pub state: RanksState,
}

/// What the pointer is over.
#[derive(Debug, Clone, PartialEq)]
pub enum RankHit {
    /// Collectives `items` of lane `lane` (one, or a fold).
    Collective {
        lane: usize,
        items: Range<usize>,
    },
    Kernel {
        lane: usize,
        items: Range<usize>,
    },
    Step {
        lane: usize,
        item: usize,
    },
}

/// Where the last frame drew one lane.
#[derive(Debug, Clone)]
pub struct LaneGeometry {
    pub rank: u32,
    /// The lane's label as drawn.
    pub label: String,
    pub steps: Rect,
    pub kernels: Rect,
    pub collectives: Rect,
}

#[derive(Default)]
pub struct RanksState {
    /// The visible range and navigation, on a time axis.
    pub tl: TimelineState,
    pub hovered: Option<RankHit>,
    /// The lanes as the last frame drew them (for tests).
    pub lanes: Vec<LaneGeometry>,
    /// Links drawn in the last frame.
    pub links_drawn: usize,
}

impl RanksState {
    fn ensure_axis(&mut self, l: &RankLanes) {
        if self.tl.axis.is_none() {
            self.tl.mode = AxisMode::Time;
            self.tl.axis = Some(Arc::new(Axis::new(AxisMode::Time, l.span_ns, &[])));
            self.tl.fit();
        }
    }

    /// Zooms to aligned step `k` (from its earliest start to its latest end over the
    /// ranks); false when there is no such step.
    pub fn zoom_to_step(&mut self, l: &RankLanes, k: u32) -> bool {
        self.ensure_axis(l);
        let windows = l.lanes.iter().filter_map(|lane| {
            let i = lane.steps.step.iter().position(|&s| s == k)?;
            Some((lane.steps.spans.start_ns[i], lane.steps.spans.end_ns[i]))
        });
        let Some((a, b)) = windows.reduce(|x, y| (x.0.min(y.0), x.1.max(y.1))) else {
            return false;
        };
        self.tl.zoom_to_ns(a, b, 0.02);
        true
    }

    /// Screen x of instant `t` in the last frame's lanes.
    pub fn x_of(&self, t: i64) -> Option<f32> {
        let a = self.tl.axis.as_ref()?;
        let r = self.lanes.first()?.collectives;
        let f = (a.to_u(t) - self.tl.u0) / (self.tl.u1 - self.tl.u0);
        Some(r.left() + f as f32 * r.width())
    }
}

/// The label of a lane: its rank, marked when it sets the step.
pub fn lane_label(l: &RankLane) -> String {
    if l.sets_step {
        format!("rank {} — sets the step", l.rank)
    } else {
        format!("rank {}", l.rank)
    }
}

/// The whole view.
pub fn show(ui: &mut Ui, doc: &mut RanksDoc) {
    let dark = crate::palette::is_dark(ui.ctx());
    let RanksDoc { data, state } = doc;
    let r = &data.report;
    let late = data.lanes.late_lane().is_some();
    ui.label(
        RichText::new(ranks_text::verdict(r))
            .size(14.0)
            .strong()
            .color(if late {
                palette::LATE
            } else {
                crate::palette::gray(dark, 220)
            }),
    );
    ui.label(ranks_text::summary(r));
    for n in &r.notes {
        ui.small(ranks_text::note(n));
    }
    ui.horizontal(|ui| {
        if ui.button("fit").on_hover_text("F").clicked() {
            state.tl.fit();
        }
        legend(ui);
    });
    let table_h = 28.0 + 20.0 * r.per_rank.len() as f32;
    let lanes_h = (RULER_H + LANE_H * data.lanes.lanes.len() as f32 + 8.0)
        .min(ui.available_height() - table_h)
        .max(RULER_H + 40.0);
    lanes(ui, data, state, lanes_h);
    ui.add_space(6.0);
    table(ui, data);
}

fn legend(ui: &mut Ui) {
    let swatch = |ui: &mut Ui, wait: bool, text: &str| {
        let (r, _) = ui.allocate_exact_size(Vec2::new(22.0, 12.0), Sense::hover());
        let mut shapes = Vec::new();
        let mut mesh = egui::Mesh::default();
        if wait {
            wait_part(&mut mesh, &mut shapes, r);
        } else {
            mesh.add_colored_rect(r, palette::TRANSFER);
        }
        ui.painter().add(Shape::mesh(mesh));
        ui.painter().extend(shapes);
        ui.label(text);
    };
    ui.separator();
    swatch(ui, true, "waiting for the last rank");
    swatch(ui, false, "transfer");
    let (r, _) = ui.allocate_exact_size(Vec2::new(12.0, 12.0), Sense::hover());
    ui.painter().rect_filled(r, 0.0, palette::LATE);
    ui.label("arrived last");
}

/// A waiting part: a light fill, hatched.
fn wait_part(mesh: &mut egui::Mesh, shapes: &mut Vec<Shape>, r: Rect) {
    mesh.add_colored_rect(r, palette::WAIT);
    if r.width() < 6.0 {
        return;
    }
    let h = r.height();
    let stroke = Stroke::new(1.0, palette::WAIT_HATCH);
    let mut x = r.left() - h;
    while x < r.right() {
        // A 45° line from (x, bottom) to (x + h, top), cut to the rectangle.
        let (mut a, mut b) = (Pos2::new(x, r.bottom()), Pos2::new(x + h, r.top()));
        if a.x < r.left() {
            a = Pos2::new(r.left(), r.bottom() - (r.left() - a.x));
        }
        if b.x > r.right() {
            b = Pos2::new(r.right(), r.top() + (b.x - r.right()));
        }
        shapes.push(Shape::line_segment([a, b], stroke));
        x += 6.0;
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "immediate-mode UI: the lanes' layout, paint and hit test share one frame's geometry"
)]
fn lanes(ui: &mut Ui, data: &RanksLoaded, st: &mut RanksState, height: f32) {
    let dark = crate::palette::is_dark(ui.ctx());
    let rl = &data.lanes;
    st.ensure_axis(rl);
    let avail = ui.available_width();
    let (outer, resp) = ui.allocate_exact_size(Vec2::new(avail, height), Sense::click_and_drag());
    let area = Rect::from_min_max(Pos2::new(outer.left() + LABEL_W, outer.top()), outer.max);
    if area.width() < 16.0 {
        return;
    }
    st.tl.last_width = area.width();
    let hover_frac = resp
        .hover_pos()
        .filter(|p| p.x >= area.left())
        .map(|p| ((p.x - area.left()) / area.width()) as f64);
    if navigate(ui, &mut st.tl, hover_frac, resp.hovered()) {
        st.hovered = None;
    }
    if resp.dragged_by(egui::PointerButton::Secondary)
        || resp.dragged_by(egui::PointerButton::Middle)
        || resp.dragged_by(egui::PointerButton::Primary)
    {
        st.tl
            .pan(-(resp.drag_delta().x as f64) / area.width().max(1.0) as f64);
    }
    let axis = Arc::clone(st.tl.axis.as_ref().expect("set above"));
    let m = Mapper {
        axis: &axis,
        u0: st.tl.u0,
        u1: st.tl.u1,
        left: area.left(),
        width: area.width(),
    };
    let (t0, t1) = (m.t0(), m.t1());
    let w = area.width() as f64;
    let painter = ui.painter_at(outer);
    painter.rect_filled(outer, 0.0, crate::palette::gray(dark, 18));
    ruler(
        &painter,
        Rect::from_min_max(area.min, Pos2::new(area.right(), area.top() + RULER_H)),
        &m,
        &[],
        &super::step_names::StepNames::default(),
    );
    let clip = painter.with_clip_rect(Rect::from_min_max(
        Pos2::new(area.left(), area.top() + RULER_H),
        area.max,
    ));
    let font = FontId::proportional(12.0);
    let small = FontId::proportional(10.0);
    let mut hits: Vec<(Rect, RankHit)> = Vec::new();
    let mut geometry = Vec::new();
    let mut mesh = egui::Mesh::default();
    let mut shapes: Vec<Shape> = Vec::new();
    let mut texts: Vec<(Pos2, String, Color32)> = Vec::new();
    let row = |y: f32, h: f32| Rect::from_x_y_ranges(area.x_range(), y..=y + h);
    let bar = |a: i64, b: i64, r: Rect| {
        let (xa, xb) = (m.sx(a), m.sx(b));
        Rect::from_x_y_ranges(xa..=xb.max(xa + 1.0), r.y_range())
    };
    for (li, lane) in rl.lanes.iter().enumerate() {
        let y = outer.top() + RULER_H + 4.0 + li as f32 * LANE_H;
        let steps_r = row(y, STEP_H);
        let kern_r = row(steps_r.bottom() + 2.0, KERNEL_H);
        let coll_r = row(kern_r.bottom() + 2.0, COLL_H);
        let lane_r = Rect::from_x_y_ranges(area.x_range(), y..=coll_r.bottom());
        // The label, marked on the late rank.
        let label = lane_label(lane);
        let label_r = Rect::from_x_y_ranges(outer.left()..=area.left() - 4.0, lane_r.y_range());
        if lane.sets_step {
            painter.rect_filled(label_r, 3.0, palette::LATE_BG);
        }
        painter.text(
            Pos2::new(outer.left() + 6.0, label_r.top() + 4.0),
            Align2::LEFT_TOP,
            &label,
            font.clone(),
            if lane.sets_step {
                palette::LATE
            } else {
                crate::palette::gray(dark, 210)
            },
        );
        let trace = std::path::Path::new(&lane.trace)
            .file_name()
            .map_or(lane.trace.clone(), |f| f.to_string_lossy().into_owned());
        painter.text(
            Pos2::new(outer.left() + 6.0, label_r.top() + 20.0),
            Align2::LEFT_TOP,
            format!("{} · GPU {}", format::cut(&trace, 24), lane.device),
            small.clone(),
            crate::palette::gray(dark, 150),
        );
        // Step windows: a shade behind the lane and a strip on top.
        for s in rl.steps_in(li, t0, t1, w) {
            let r = bar(s.start_ns, s.end_ns, steps_r);
            let shade = if s.step % 2 == 0 { 14 } else { 8 };
            mesh.add_colored_rect(
                Rect::from_x_y_ranges(r.x_range(), lane_r.y_range()),
                Color32::from_white_alpha(shade),
            );
            mesh.add_colored_rect(r.shrink2(Vec2::new(0.5, 0.0)), palette::RANK_STEP);
            if r.width() > 44.0 {
                texts.push((
                    Pos2::new(r.left().max(area.left()) + 3.0, r.center().y),
                    format!("step {}", s.step),
                    Color32::BLACK,
                ));
            }
            hits.push((
                r,
                RankHit::Step {
                    lane: li,
                    item: s.item,
                },
            ));
        }
        for k in rl.kernels_in(li, t0, t1, w) {
            let r = bar(k.start_ns, k.end_ns, kern_r);
            let c = palette::bucket(k.bucket);
            mesh.add_colored_rect(r, c);
            if k.items.len() > 1 {
                // A dark tick on top tells a fold from one long kernel.
                mesh.add_colored_rect(
                    Rect::from_x_y_ranges(r.x_range(), r.top()..=r.top() + 2.0),
                    palette::dim(c),
                );
            }
            hits.push((
                r,
                RankHit::Kernel {
                    lane: li,
                    items: k.items,
                },
            ));
        }
        for c in rl.collectives_in(li, t0, t1, w) {
            let r = bar(c.start_ns, c.end_ns, coll_r);
            let xw = m.sx(c.wait_end_ns).clamp(r.left(), r.right());
            if xw > r.left() {
                wait_part(
                    &mut mesh,
                    &mut shapes,
                    Rect::from_x_y_ranges(r.left()..=xw, r.y_range()),
                );
            }
            if r.right() > xw {
                mesh.add_colored_rect(
                    Rect::from_x_y_ranges(xw..=r.right(), r.y_range()),
                    palette::TRANSFER,
                );
            }
            let n = c.items.len() as u32;
            if c.last > 0 && 2 * c.last >= n {
                // Arrived last: a mark over the arrival (the bar's start).
                let x = r.left();
                mesh.add_colored_rect(
                    Rect::from_x_y_ranges(x..=(x + 3.0).min(r.right().max(x + 2.0)), {
                        r.top() - 3.0..=r.bottom()
                    }),
                    palette::LATE,
                );
            }
            if n > 1 {
                mesh.add_colored_rect(
                    Rect::from_x_y_ranges(r.x_range(), r.top()..=r.top() + 2.0),
                    palette::dim(palette::TRANSFER),
                );
            }
            hits.push((
                r,
                RankHit::Collective {
                    lane: li,
                    items: c.items,
                },
            ));
        }
        geometry.push(LaneGeometry {
            rank: lane.rank,
            label,
            steps: steps_r,
            kernels: kern_r,
            collectives: coll_r,
        });
    }
    // Links between one collective's ends, when readable.
    let links = rl.links_in(t0, t1, w);
    let link = Stroke::new(1.0, palette::LINK);
    for k in &links {
        for li in 1..k.end_ns.len() {
            if let (Some(a), Some(b)) = (k.end_ns[li - 1], k.end_ns[li]) {
                let (ga, gb) = (&geometry[li - 1], &geometry[li]);
                shapes.push(Shape::line_segment(
                    [
                        Pos2::new(m.sx(a), ga.collectives.bottom()),
                        Pos2::new(m.sx(b), gb.collectives.top()),
                    ],
                    link,
                ));
            }
        }
    }
    clip.add(Shape::mesh(mesh));
    clip.extend(shapes);
    for (p, t, c) in texts {
        clip.text(p, Align2::LEFT_CENTER, t, small.clone(), c);
    }
    st.links_drawn = links.len();
    st.lanes = geometry;
    let pointer = resp.hover_pos();
    st.hovered = pointer.and_then(|p| {
        hits.iter()
            .rev()
            .find(|(r, _)| r.expand2(Vec2::new(1.0, 0.0)).contains(p))
            .map(|(_, h)| h.clone())
    });
    if resp.double_clicked()
        && let Some(RankHit::Step { lane, item }) = &st.hovered
    {
        let sp = &rl.lanes[*lane].steps.spans;
        st.tl.zoom_to_ns(sp.start_ns[*item], sp.end_ns[*item], 0.02);
    }
    if let Some(h) = &st.hovered {
        let text = describe(data, h, t0, t1, w);
        resp.on_hover_ui_at_pointer(|ui| {
            ui.set_max_width(460.0);
            ui.label(text);
        });
    }
}

/// The hover text for a hit.
pub fn describe(data: &RanksLoaded, h: &RankHit, t0: i64, t1: i64, w: f64) -> String {
    let rl = &data.lanes;
    match h {
        RankHit::Collective { lane, items } => {
            if items.len() == 1 {
                rl.collective_detail(*lane, items.start)
                    .map(|d| ranks_text::collective(&d))
                    .unwrap_or_default()
            } else {
                rl.collectives_in(*lane, t0, t1, w)
                    .into_iter()
                    .find(|c| c.items == *items)
                    .map(|c| ranks_text::folded(rl.lanes[*lane].rank, &c))
                    .unwrap_or_default()
            }
        }
        RankHit::Kernel { lane, items } => {
            let k = &rl.lanes[*lane].kernels;
            let longest = k.row.longest(items.start, items.end);
            let x = data.runs.get(*lane);
            let name = x
                .and_then(|x| {
                    let i = k.kernel[longest] as usize;
                    let n = *x.trace.kernels.name.get(i)?;
                    Some(gapscope_analyzer::text::short(x.trace.strings.get(n)))
                })
                .unwrap_or_default();
            let dur = k.row.spans.end_ns[longest] - k.row.spans.start_ns[longest];
            let bucket = gapscope_analyzer::Bucket::ALL
                .get(k.bucket[longest] as usize)
                .map_or("other", |b| b.as_str());
            if items.len() == 1 {
                format!("{name}\nbucket {bucket} · {}", format::dur_ns(dur as f64))
            } else {
                format!(
                    "{} kernels folded (zoom in to see them)\nlongest: {name} ({bucket}, {})",
                    format::count(items.len() as u64),
                    format::dur_ns(dur as f64)
                )
            }
        }
        RankHit::Step { lane, item } => {
            let l = &rl.lanes[*lane];
            let st = &data.tables.steps;
            let i = l.steps.row[*item] as usize;
            let ms = |ns: i64| format::ms_label(ns as f64 / 1e6);
            format!(
                "rank {} · step {} · {}\ncompute {} · transfer {} · wait {} · idle {}\n{} collectives, arrived last at {}\ndouble-click to zoom to it",
                l.rank,
                st.step[i],
                ms(st.gpu_end_ns[i] - st.gpu_start_ns[i]),
                ms(st.compute_ns[i]),
                ms(st.transfer_ns[i]),
                ms(st.wait_ns[i]),
                ms(st.idle_ns[i]),
                st.collectives[i],
                st.last[i]
            )
        }
    }
}

/// The per-rank table: medians over the aligned steps.
fn table(ui: &mut Ui, data: &RanksLoaded) {
    let r = &data.report;
    let late = |rank: u32| {
        data.lanes
            .lanes
            .iter()
            .any(|l| l.rank == rank && l.sets_step)
    };
    ui.label("per rank, medians over the aligned steps, ms (working % = busy without waiting)");
    egui::Grid::new("ranks_table")
        .striped(true)
        .min_col_width(56.0)
        .show(ui, |ui| {
            for h in [
                "rank",
                "step ms",
                "compute",
                "transfer",
                "wait",
                "longest wait",
                "idle",
                "busy %",
                "working %",
                "last %",
            ] {
                ui.strong(h);
            }
            ui.end_row();
            use gapscope_analyzer::text::ms;
            for p in &r.per_rank {
                if late(p.rank) {
                    ui.colored_label(palette::LATE, format!("{} (sets the step)", p.rank));
                } else {
                    ui.label(p.rank.to_string());
                }
                for v in [
                    p.step_ms,
                    p.compute_ms,
                    p.transfer_ms,
                    p.wait_ms,
                    p.longest_wait_ms,
                    p.idle_ms,
                ] {
                    ui.monospace(ms(v));
                }
                ui.monospace(format!("{:.1}", p.busy_pct));
                // Not finite when the paired kernels are not the same collectives.
                let or_na = |v: f64, digits: usize| {
                    if v.is_finite() {
                        format!("{v:.digits$}")
                    } else {
                        "n/a".to_owned()
                    }
                };
                ui.monospace(or_na(p.working_pct, 1));
                ui.monospace(or_na(100.0 * p.late_share, 0));
                ui.end_row();
            }
        });
}
