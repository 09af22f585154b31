//! Painting one track of the timeline (steps, a device's markers, a GPU lane, a process
//! header, a host thread) where the layout placed it, with its label and what the pointer
//! can hit.

use egui::{Align2, Color32, FontId, Painter, Pos2, Rect, Shape, Stroke};
use gapscope_analyzer::explore::HostRow;

use super::lane_rows::{GpuRow, ScopeRowSrc, StepRowSrc};
use super::row_paint::{Drawn, Mapper, paint_row};
use super::search::Found;
use super::timeline::Hit;
use crate::loader::Loaded;
use crate::lod::Longest;
use crate::tracks::{Placed, Track, TrackBody, TrackKey};

/// Everything drawn this frame that the pointer can hit.
#[derive(Default)]
pub struct Hits {
    pub items: Vec<(Rect, Hit)>,
    /// (GPU lane index, its row rect).
    pub gpu_rows: Vec<(usize, Rect)>,
    /// The steps lane's bars.
    pub steps: Vec<(Rect, Hit)>,
    /// Each drawn track: its key, the whole row band (labels and lanes) and its row height.
    pub tracks: Vec<(TrackKey, Rect, f32)>,
}

/// What every track of one frame shares.
pub struct TrackFrame<'a> {
    pub l: &'a Loaded,
    pub m: &'a Mapper<'a>,
    /// Left edge of the labels, and the lanes' horizontal extent.
    pub left: f32,
    pub lane_left: f32,
    pub lane_right: f32,
    pub dark: bool,
    pub highlight: Option<gapscope_traces::StrId>,
    pub found: Option<&'a Found>,
}

impl TrackFrame<'_> {
    fn row(&self, y: f32, h: f32) -> Rect {
        Rect::from_min_max(
            Pos2::new(self.lane_left, y),
            Pos2::new(self.lane_right, y + h),
        )
    }
}

/// The label of a track.
pub fn label(l: &Loaded, t: &Track) -> String {
    match t.body {
        TrackBody::Steps => format!("steps ({})", l.x.steps.len()),
        TrackBody::Markers(i) => format!("GPU {} markers", l.x.lanes.markers[i].device),
        TrackBody::Gpu(i) => l.x.lanes.gpu[i].label(),
        TrackBody::Process { pid, threads } => {
            let t = if threads == 1 { "thread" } else { "threads" };
            if pid == 0 {
                format!("host ({threads} {t})")
            } else {
                format!("process {pid} ({threads} {t})")
            }
        }
        TrackBody::Thread(i) => format!("thread {}", l.x.lanes.host[i].tid),
    }
}

/// Paints track `t` placed at `p` with its top at `top`; `lanes` and `labels` are clipped
/// to the track's region.
#[expect(
    clippy::too_many_arguments,
    reason = "one track: the frame, the track and its place, and the two painters of its region"
)]
pub fn paint(
    f: &TrackFrame,
    t: &Track,
    p: &Placed,
    top: f32,
    collapsed: bool,
    lanes: &Painter,
    labels: &Painter,
    hits: &mut Hits,
) {
    let l = f.l;
    let band = Rect::from_min_max(
        Pos2::new(f.left, top),
        Pos2::new(f.lane_right, top + p.height()),
    );
    if !band.intersects(lanes.clip_rect().union(labels.clip_rect())) {
        return;
    }
    hits.tracks.push((t.key, band, p.row_h));
    let text_col = crate::palette::gray(f.dark, 200);
    // The label, with a triangle where the track collapses.
    let first = Rect::from_min_max(
        Pos2::new(f.left, top),
        Pos2::new(f.lane_left, top + p.row_h),
    );
    let mut x = f.left + 4.0;
    if t.collapsible() {
        let c = Pos2::new(x + 4.0, first.center().y);
        let tri = if collapsed {
            vec![
                c + egui::vec2(-3.0, -4.0),
                c + egui::vec2(3.0, 0.0),
                c + egui::vec2(-3.0, 4.0),
            ]
        } else {
            vec![
                c + egui::vec2(-4.0, -2.0),
                c + egui::vec2(4.0, -2.0),
                c + egui::vec2(0.0, 3.0),
            ]
        };
        labels.add(Shape::convex_polygon(tri, text_col, Stroke::NONE));
        x += 11.0;
    }
    if matches!(t.key, TrackKey::Thread(..)) {
        x += 8.0;
    }
    let font = FontId::proportional(11.0);
    labels.text(
        Pos2::new(x, first.center().y),
        Align2::LEFT_CENTER,
        label(l, t),
        font,
        text_col,
    );
    match t.body {
        TrackBody::Steps => {
            let rr = f.row(top, p.row_h);
            let mut drawn = Vec::new();
            paint_row(lanes, rr, f.m, &StepRowSrc { l }, &mut drawn);
            for (rect, d) in drawn {
                hits.steps.push((
                    rect,
                    match d {
                        Drawn::Item(k) => Hit::Step(k),
                        Drawn::Run(i, j) => Hit::Steps { i, j },
                    },
                ));
            }
        }
        TrackBody::Gpu(li) => {
            let lane = &l.x.lanes.gpu[li];
            let rr = f.row(top, p.row_h);
            let src = GpuRow {
                l,
                lane,
                lod: &l.lods[li],
                highlight: f.highlight,
                found: f.found.and_then(|s| s.gpu.get(li)).map(Vec::as_slice),
            };
            let mut drawn = Vec::new();
            paint_row(lanes, rr, f.m, &src, &mut drawn);
            for (rect, d) in drawn {
                hits.items.push((
                    rect,
                    match d {
                        Drawn::Item(i) => Hit::Activity(lane.act[i]),
                        Drawn::Run(i, j) => Hit::Run { lane: li, i, j },
                    },
                ));
            }
            hits.gpu_rows.push((li, rr));
        }
        TrackBody::Markers(mi) => {
            let rows = &l.x.lanes.markers[mi].rows;
            let found = f.found.and_then(|s| s.markers.get(mi));
            scope_rows(
                f,
                rows,
                l.marker_longest.get(mi),
                found,
                true,
                top,
                p,
                lanes,
                hits,
            );
        }
        TrackBody::Thread(hi) => {
            let rows = &l.x.lanes.host[hi].rows;
            let found = f.found.and_then(|s| s.host.get(hi));
            scope_rows(
                f,
                rows,
                l.host_longest.get(hi),
                found,
                false,
                top,
                p,
                lanes,
                hits,
            );
        }
        TrackBody::Process { .. } => {
            let rr = f.row(top, p.row_h);
            lanes.rect_filled(rr, 0.0, crate::palette::gray(f.dark, 26));
        }
    }
}

/// The rows of a marker lane or a host thread, as many as the layout shows.
#[expect(
    clippy::too_many_arguments,
    reason = "one track's rows: the frame, the rows with their indices, and where they go"
)]
fn scope_rows(
    f: &TrackFrame,
    rows: &[HostRow],
    longest: Option<&Vec<Longest>>,
    found: Option<&Vec<Vec<u32>>>,
    markers: bool,
    top: f32,
    p: &Placed,
    lanes: &Painter,
    hits: &mut Hits,
) {
    let clip = lanes.clip_rect();
    for (r_i, r) in rows.iter().enumerate().take(p.rows) {
        let rr = f.row(top + r_i as f32 * p.row_h, p.row_h);
        if rr.bottom() < clip.top() || rr.top() > clip.bottom() {
            continue;
        }
        let src = ScopeRowSrc {
            l: f.l,
            row: r,
            markers,
            longest: longest.and_then(|v| v.get(r_i)),
            found: found.and_then(|v| v.get(r_i)).map(Vec::as_slice),
        };
        let mut drawn = Vec::new();
        paint_row(lanes, rr, f.m, &src, &mut drawn);
        for (rect, d) in drawn {
            if let Drawn::Item(i) = d {
                let id = r.id[i];
                hits.items.push((
                    rect,
                    if markers {
                        Hit::Marker(id)
                    } else {
                        Hit::Scope(id)
                    },
                ));
            }
        }
    }
}

/// A dimmer colour for a region's separator.
pub fn separator(dark: bool) -> Color32 {
    crate::palette::gray(dark, 70)
}
