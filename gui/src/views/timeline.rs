//! The timeline: a lane per device and stream (kernels and memops coloured by bucket),
//! step boundaries, GPU-timeline markers and the host scopes per thread; zoom and pan with
//! mouse and keyboard (W/S zoom, A/D pan, as in Perfetto; F fits), hover details, click to
//! select, box selection (drag) that sums time by bucket, and the step-aligned mode.

use std::sync::Arc;

use egui::{Align2, Color32, FontId, Key, Pos2, Rect, Sense, Stroke, StrokeKind, Ui, Vec2};
use gapscope_analyzer::explore::{ActRef, BoxSums, GpuLane, StepView};
use gapscope_traces::StrId;

use super::flows::{self, Flows};
use super::format;
pub use super::hover::describe;
use super::row_paint::Mapper;
use super::search::Search;
use super::step_names::StepNames;
use super::track_paint::{self, Hits, TrackFrame};
use super::track_ui::{self, LabelDrag};
use crate::axis::{Axis, AxisMode};
use crate::loader::Loaded;
use crate::palette;
use crate::tracks::{GAP, Layout, TrackKey};

pub const RULER_H: f32 = 22.0;
pub const LABEL_W: f32 = 150.0;
/// The pinned tracks take at most this share of the lanes' height.
const PINNED_MAX: f32 = 0.6;

/// What the pointer is over, or what was clicked.
#[derive(Debug, Clone, PartialEq)]
pub enum Hit {
    Activity(ActRef),
    /// A folded run on GPU lane `lane`, items `i..j`.
    Run {
        lane: usize,
        i: usize,
        j: usize,
    },
    /// A host scope (forest node).
    Scope(u32),
    /// A marker (marker table index).
    Marker(u32),
    Step(usize),
    /// A host API call that launched GPU work (launch table row).
    Launch(u32),
    /// Steps `i..j`, each narrower than a pixel, folded into one bar.
    Steps {
        i: usize,
        j: usize,
    },
}

/// A box selection: a time range over some GPU lanes, and what it holds.
#[derive(Debug, Clone, PartialEq)]
pub struct BoxSelection {
    pub lanes: Vec<usize>,
    pub sums: BoxSums,
}

/// One document's timeline state.
#[derive(Default)]
pub struct TimelineState {
    pub mode: AxisMode,
    /// Shared, so a frame borrows it without copying its knots (two per step).
    pub axis: Option<Arc<Axis>>,
    /// Visible axis range.
    pub u0: f64,
    pub u1: f64,
    pub hovered: Option<Hit>,
    pub selected: Option<Hit>,
    /// Kernel name whose instances are highlighted (from the kernel table).
    pub highlight: Option<StrId>,
    pub selection: Option<BoxSelection>,
    pub drag_from: Option<Pos2>,
    /// Width of the lane area at the last frame, px (for keyboard zoom before a frame).
    pub last_width: f32,
    /// Where the last frame drew the lanes (for tests and the benchmark).
    pub geometry: Option<Geometry>,
    /// The tracks' layout, and whether it changed since it was last kept.
    pub layout: Layout,
    pub layout_dirty: bool,
    /// A drag begun in the labels column, and the track whose menu is open.
    pub label_drag: Option<LabelDrag>,
    pub menu_track: Option<TrackKey>,
    /// The search over names, and the launch→kernel flows asked for.
    pub search: Search,
    pub flows: Flows,
}

/// Screen geometry of the last frame.
#[derive(Debug, Clone)]
pub struct Geometry {
    /// The lanes' drawing area (right of the labels, below the ruler).
    pub lanes: Rect,
    /// GPU lane index and its row.
    pub gpu_rows: Vec<(usize, Rect)>,
    /// The steps lane as drawn: each step's (or folded run's) bar.
    pub steps: Vec<(Rect, Hit)>,
    /// Each track drawn: its key, its band (labels and lanes) and its row height.
    pub tracks: Vec<(TrackKey, Rect, f32)>,
    /// The boundary between the pinned tracks and those that scroll.
    pub pinned_bottom: f32,
    /// Launch → kernel arrows drawn.
    pub flows: usize,
}

impl TimelineState {
    pub fn reset(&mut self, l: &Loaded) {
        self.rebuild_axis(l);
        self.fit();
    }

    fn rebuild_axis(&mut self, l: &Loaded) {
        let steps: Vec<(i64, i64)> = l.x.steps.iter().map(|s| (s.start_ns, s.end_ns)).collect();
        self.axis = Some(Arc::new(Axis::new(self.mode, l.x.span_ns, &steps)));
    }

    /// Shows the whole trace.
    pub fn fit(&mut self) {
        if let Some(a) = &self.axis {
            let (u0, u1) = a.extent();
            self.u0 = u0;
            self.u1 = u1.max(u0 + 1e-6);
        }
    }

    /// Switches between time and step-aligned axes, keeping the visible time range.
    pub fn set_mode(&mut self, mode: AxisMode, l: &Loaded) {
        if mode == self.mode && self.axis.is_some() {
            return;
        }
        let range = self.visible_ns();
        self.mode = mode;
        self.rebuild_axis(l);
        match range {
            Some((t0, t1)) => self.zoom_to_ns(t0, t1, 0.0),
            None => self.fit(),
        }
    }

    /// The visible time range, ns.
    pub fn visible_ns(&self) -> Option<(i64, i64)> {
        let a = self.axis.as_ref()?;
        Some((a.from_u(self.u0), a.from_u(self.u1)))
    }

    /// Shows `[t0, t1)` with `margin` (a fraction of the range) on each side.
    pub fn zoom_to_ns(&mut self, t0: i64, t1: i64, margin: f64) {
        let Some(a) = &self.axis else { return };
        let (u0, u1) = (a.to_u(t0), a.to_u(t1.max(t0 + 1)));
        let pad = (u1 - u0) * margin;
        self.u0 = u0 - pad;
        self.u1 = (u1 + pad).max(self.u0 + 1e-6);
    }

    /// Zooms by `factor` (> 1 zooms in) around the fraction `at` of the view.
    pub fn zoom(&mut self, factor: f64, at: f64) {
        let w = self.u1 - self.u0;
        let pivot = self.u0 + w * at.clamp(0.0, 1.0);
        // No closer than 1 ns per 1000 px in time mode.
        let min_w = match self.mode {
            AxisMode::Time => 1.0,
            AxisMode::StepAligned => 1e-7,
        };
        // No further out than four times the whole trace.
        let max_w = self.axis.as_ref().map_or(f64::MAX, |a| {
            let (e0, e1) = a.extent();
            4.0 * (e1 - e0).max(min_w)
        });
        let nw = (w / factor).clamp(min_w, max_w.max(min_w));
        self.u0 = pivot - (pivot - self.u0) * nw / w;
        self.u1 = self.u0 + nw;
    }

    /// Pans by `frac` of the view width (positive: later).
    pub fn pan(&mut self, frac: f64) {
        let d = (self.u1 - self.u0) * frac;
        self.u0 += d;
        self.u1 += d;
    }
}

/// Keyboard and mouse navigation; returns true when the view changed.
pub(crate) fn navigate(
    ui: &Ui,
    st: &mut TimelineState,
    hover_frac: Option<f64>,
    area_hovered: bool,
) -> bool {
    let typing = ui.ctx().egui_wants_keyboard_input();
    let (dt, zoom, scroll, keys) = ui.input(|i| {
        let k = |key| !typing && i.key_down(key);
        (
            i.stable_dt.min(0.1) as f64,
            i.zoom_delta() as f64,
            i.smooth_scroll_delta,
            [
                k(Key::W),
                k(Key::S),
                k(Key::A),
                k(Key::D),
                !typing && i.key_pressed(Key::F),
            ],
        )
    });
    let at = hover_frac.unwrap_or(0.5);
    let mut changed = false;
    if area_hovered && zoom != 1.0 {
        st.zoom(zoom, at);
        changed = true;
    }
    if area_hovered && scroll.x != 0.0 && st.last_width > 0.0 {
        st.pan(-(scroll.x as f64) / st.last_width as f64);
        changed = true;
    }
    // W/S: zoom ×4 per second; A/D: pan half a view per second.
    if keys[0] {
        st.zoom(4f64.powf(dt), at);
    }
    if keys[1] {
        st.zoom(4f64.powf(-dt), at);
    }
    if keys[2] {
        st.pan(-0.5 * dt * 2.0);
    }
    if keys[3] {
        st.pan(0.5 * dt * 2.0);
    }
    if keys[..4].iter().any(|&k| k) {
        ui.ctx().request_repaint();
        changed = true;
    }
    if keys[4] {
        st.fit();
        changed = true;
    }
    changed
}

/// Draws the time ruler in `rect` (step-aligned: labelled by `steps`).
pub fn ruler(
    painter: &egui::Painter,
    rect: Rect,
    m: &Mapper,
    steps: &[StepView],
    names: &StepNames,
) {
    let dark = crate::palette::is_dark(painter.ctx());
    painter.rect_filled(rect, 0.0, crate::palette::gray(dark, 30));
    let font = FontId::monospace(10.0);
    let col = crate::palette::gray(dark, 190);
    // A tick at `x` on the bottom edge, labelled at the top.
    let tick = |x: f32, label: String| {
        painter.line_segment(
            [
                Pos2::new(x, rect.bottom() - 6.0),
                Pos2::new(x, rect.bottom()),
            ],
            Stroke::new(1.0, col),
        );
        super::digit_text::paint(
            painter,
            Pos2::new(x + 2.0, rect.top() + 2.0),
            Align2::LEFT_TOP,
            &label,
            &font,
            col,
        );
    };
    match m.axis.mode {
        AxisMode::Time => {
            let (t0, t1) = (m.t0(), m.t1());
            let span = t1.saturating_sub(t0).max(1) as f64;
            let target = span * 110.0 / m.width.max(1.0) as f64;
            let mag = 10f64.powf(target.log10().floor());
            let step = [1.0, 2.0, 5.0, 10.0]
                .iter()
                .map(|f| f * mag)
                .find(|&s| s >= target)
                .unwrap_or(10.0 * mag)
                .max(1.0);
            let origin = m.axis.origin_ns();
            let first = ((t0.saturating_sub(origin) as f64 / step).ceil() * step) as i64;
            let first = first.saturating_add(origin);
            let mut t = first;
            let mut n = 0;
            while t <= t1 && n < 200 {
                tick(
                    m.sx(t),
                    format::tick_ns(t.saturating_sub(origin) as f64, step),
                );
                t = t.saturating_add(step as i64);
                n += 1;
            }
        }
        AxisMode::StepAligned => {
            let px_per_step = m.scale();
            // Labels ("step 12") at least 64 px apart.
            let every = ((64.0 / px_per_step).ceil() as usize).max(1);
            let first = (m.u0.max(0.0) / (1.0 + crate::axis::STEP_GAP_UNITS)) as usize;
            for (k, s) in steps.iter().enumerate().skip(first.saturating_sub(1)) {
                let x = m.sx(s.start_ns);
                if x > rect.right() {
                    break;
                }
                if k % every == 0 {
                    tick(x, names.ruler_label(k));
                }
            }
        }
    }
}

/// The timeline of one loaded trace in the available space. `force_mode` fixes the axis
/// (the diff view's step-aligned pair); `id` keeps widget ids apart when two are shown.
#[expect(
    clippy::too_many_lines,
    reason = "immediate-mode UI: layout, scroll, paint, hit test and box selection share one frame's geometry (axis and lods are apart in axis.rs and lod.rs)"
)]
pub fn show(ui: &mut Ui, st: &mut TimelineState, l: &Loaded, id: &str, max_height: Option<f32>) {
    let dark = crate::palette::is_dark(ui.ctx());
    if st.axis.is_none() {
        st.reset(l);
    }
    let avail = ui.available_size();
    let height = max_height.unwrap_or(avail.y).max(RULER_H + 40.0);
    let (outer, resp) = ui.allocate_exact_size(Vec2::new(avail.x, height), Sense::click_and_drag());
    let lane_area = Rect::from_min_max(Pos2::new(outer.left() + LABEL_W, outer.top()), outer.max);
    if lane_area.width() < 16.0 {
        ui.painter().text(
            outer.left_top(),
            egui::Align2::LEFT_TOP,
            "(too narrow for the timeline)",
            FontId::proportional(11.0),
            Color32::GRAY,
        );
        return;
    }
    st.last_width = lane_area.width();
    let hover_frac = resp
        .hover_pos()
        .filter(|p| p.x >= lane_area.left())
        .map(|p| ((p.x - lane_area.left()) / lane_area.width()) as f64);
    if navigate(ui, st, hover_frac, resp.hovered()) {
        st.hovered = None;
    }
    let axis = Arc::clone(st.axis.as_ref().expect("set above"));
    let m = Mapper {
        axis: &axis,
        u0: st.u0,
        u1: st.u1,
        left: lane_area.left(),
        width: lane_area.width(),
    };
    let painter = ui.painter_at(outer);
    painter.rect_filled(outer, 0.0, crate::palette::gray(dark, 18));
    let ruler_rect = Rect::from_min_max(
        lane_area.min,
        Pos2::new(lane_area.right(), lane_area.top() + RULER_H),
    );
    ruler(&painter, ruler_rect, &m, &l.x.steps, &l.step_names);
    let body = Rect::from_min_max(Pos2::new(outer.left(), outer.top() + RULER_H), outer.max);
    let lanes_painter = painter.with_clip_rect(body);
    let label_painter = lanes_painter.with_clip_rect(Rect::from_min_max(
        body.min,
        Pos2::new(lane_area.left(), body.bottom()),
    ));
    let lane_clip = lanes_painter.with_clip_rect(Rect::from_min_max(
        Pos2::new(lane_area.left(), body.top()),
        body.max,
    ));
    let mut hits = Hits::default();
    // The tracks: those pinned at the top (steps, markers and GPU lanes unless moved), then
    // the others, which scroll (the wheel; zoom is Ctrl+wheel, pan Shift+wheel).
    let (pinned, scrolled) = st.layout.place(&l.tracks);
    let region_h = |v: &[crate::tracks::Placed]| v.last().map_or(0.0, |p| p.y + p.height() + GAP);
    let pinned_h = region_h(&pinned).min(body.height() * PINNED_MAX);
    let scroll_area = Rect::from_min_max(Pos2::new(body.left(), body.top() + pinned_h), body.max);
    let scroll_id = ui.scope_id().with(("timeline_scroll", id));
    let mut scroll_y: f32 = ui.data(|d| d.get_temp(scroll_id)).unwrap_or(0.0);
    if resp.hovered() {
        scroll_y -= ui.input(|i| {
            if i.modifiers.ctrl || i.modifiers.command {
                0.0
            } else {
                i.smooth_scroll_delta.y
            }
        });
    }
    scroll_y = scroll_y.clamp(0.0, (region_h(&scrolled) - scroll_area.height()).max(0.0));
    ui.data_mut(|d| d.insert_temp(scroll_id, scroll_y));
    let frame = TrackFrame {
        l,
        m: &m,
        left: outer.left(),
        lane_left: lane_area.left(),
        lane_right: lane_area.right(),
        dark,
        highlight: st.highlight,
        found: st.search.found.as_ref(),
    };
    let pinned_rect = Rect::from_min_max(body.min, Pos2::new(body.right(), scroll_area.top()));
    for (region, list, top) in [
        (pinned_rect, &pinned, body.top()),
        (scroll_area, &scrolled, scroll_area.top() - scroll_y),
    ] {
        let lanes = lanes_painter.with_clip_rect(Rect::from_min_max(
            Pos2::new(lane_area.left(), region.top()),
            region.max,
        ));
        let labels = label_painter.with_clip_rect(Rect::from_min_max(
            region.min,
            Pos2::new(lane_area.left(), region.bottom()),
        ));
        for p in list.iter() {
            let t = &l.tracks[p.track];
            let collapsed = st.layout.prefs(t.key).collapsed;
            track_paint::paint(
                &frame,
                t,
                p,
                top + p.y,
                collapsed,
                &lanes,
                &labels,
                &mut hits,
            );
        }
    }
    if pinned_h > 0.0 && !scrolled.is_empty() {
        lanes_painter.line_segment(
            [scroll_area.left_top(), scroll_area.right_top()],
            Stroke::new(1.0, track_paint::separator(dark)),
        );
    }
    // Step boundaries across the lanes, where steps are wide enough to tell apart.
    if l.x.steps.len() as f64 * 6.0
        < lane_area.width() as f64 * (m.axis.extent().1 - m.axis.extent().0) / (st.u1 - st.u0)
    {
        let stroke = Stroke::new(1.0, palette::step_line(dark));
        let (t0, t1) = (m.t0(), m.t1());
        let first = l.x.steps.partition_point(|s| s.end_ns < t0);
        for s in l.x.steps[first..].iter().take_while(|s| s.start_ns <= t1) {
            let x = m.sx(s.start_ns);
            lane_clip.line_segment(
                [Pos2::new(x, body.top()), Pos2::new(x, body.bottom())],
                stroke,
            );
        }
    }

    st.geometry = Some(Geometry {
        lanes: Rect::from_min_max(Pos2::new(lane_area.left(), body.top()), body.max),
        gpu_rows: hits.gpu_rows.clone(),
        steps: hits.steps.clone(),
        tracks: hits.tracks.clone(),
        pinned_bottom: scroll_area.top(),
        flows: 0,
    });
    track_ui::handle(ui, &resp, st, &l.tracks, &hits, lane_area.left());
    // Pointer: hover, click, box selection (primary drag), pan (secondary drag).
    let pointer = resp.hover_pos();
    st.hovered = pointer.and_then(|p| {
        hits.steps
            .iter()
            .chain(&hits.items)
            .find(|(r, _)| r.contains(p))
            .map(|(_, h)| h.clone())
    });
    let in_lanes = resp
        .interact_pointer_pos()
        .is_some_and(|p| p.x >= lane_area.left());
    if resp.clicked() && in_lanes {
        st.selected = st.hovered.clone();
        // Double-click a step (or a folded run of steps) to zoom to it.
        let range = match &st.selected {
            Some(Hit::Step(k)) => Some((*k, *k + 1)),
            Some(Hit::Steps { i, j }) => Some((*i, *j)),
            _ => None,
        };
        if let Some((i, j)) = range
            && resp.double_clicked()
            && let (Some(a), Some(b)) = (l.x.steps.get(i), l.x.steps.get(j.saturating_sub(1)))
        {
            {
                st.zoom_to_ns(a.start_ns, b.end_ns, 0.02);
            }
        }
    }
    if resp.drag_started_by(egui::PointerButton::Primary) {
        // Where the button went down (the drag is only recognised after some movement); a
        // drag in the labels column moves or resizes a track instead.
        st.drag_from = ui
            .input(|i| i.pointer.press_origin())
            .filter(|o| o.x >= lane_area.left());
    }
    if resp.dragged_by(egui::PointerButton::Secondary)
        || resp.dragged_by(egui::PointerButton::Middle)
    {
        let dx = resp.drag_delta().x as f64;
        st.pan(-dx / lane_area.width().max(1.0) as f64);
    }
    if let (Some(a), Some(b)) = (st.drag_from, resp.interact_pointer_pos()) {
        let r = Rect::from_two_pos(a, b).intersect(Rect::from_min_max(
            Pos2::new(lane_area.left(), body.top()),
            body.max,
        ));
        painter.rect_filled(r, 0.0, palette::SELECTION);
        painter.rect_stroke(
            r,
            0.0,
            Stroke::new(1.0, Color32::from_rgb(0x40, 0x80, 0xff)),
            StrokeKind::Inside,
        );
        if resp.drag_stopped() {
            st.drag_from = None;
            let lanes: Vec<usize> = hits
                .gpu_rows
                .iter()
                .filter(|(_, rr)| rr.top() < r.bottom() && rr.bottom() > r.top())
                .map(|&(i, _)| i)
                .collect();
            let t0 = m.t((r.left() - lane_area.left()) as f64);
            let t1 = m.t((r.right() - lane_area.left()) as f64);
            st.selection = select_box(l, lanes, t0, t1);
        }
    }
    if let Some(sel) = &st.selection {
        let (a, b) = (m.sx(sel.sums.t0_ns), m.sx(sel.sums.t1_ns));
        lane_clip.rect_stroke(
            Rect::from_x_y_ranges(a..=b.max(a + 1.0), body.y_range()),
            0.0,
            Stroke::new(1.0, Color32::from_rgb(0x40, 0x80, 0xff)),
            StrokeKind::Inside,
        );
    }
    let x_of = |t: i64| m.sx(t);
    let n = flows::paint(&lane_clip, l, st, &x_of, lane_area.left());
    if let Some(g) = &mut st.geometry {
        g.flows = n;
    }
    if ui.input(|i| i.key_pressed(Key::Escape)) {
        st.selection = None;
        st.selected = None;
    }
    if let (Some(h), Some(p)) = (&st.hovered, pointer) {
        super::tooltip::at_pointer(ui, resp.id.with("hover"), p, &describe(l, h));
    }
}

/// The box selection over `lanes` from `t0` to `t1`, or none when it holds no lane.
pub fn select_box(l: &Loaded, lanes: Vec<usize>, t0: i64, t1: i64) -> Option<BoxSelection> {
    if lanes.is_empty() || t0 == t1 {
        return None;
    }
    let refs: Vec<&GpuLane> = lanes.iter().filter_map(|&i| l.x.lanes.gpu.get(i)).collect();
    Some(BoxSelection {
        sums: BoxSums::of(&refs, t0, t1),
        lanes,
    })
}
