//! What the labels column does to the layout: a click collapses or expands a track, a drag
//! moves it before another of its level, a drag on its lower edge resizes its rows, and a
//! right-click opens its menu (pin, hide, collapse, move, taller, shorter).

use egui::{Pos2, Response, Stroke, Ui};

use super::timeline::TimelineState;
use super::track_paint::Hits;
use crate::tracks::{Track, TrackKey};

/// How close to a track's lower edge a drag resizes it, px.
const EDGE_PX: f32 = 3.0;

/// A drag begun in the labels column.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LabelDrag {
    /// Moving a track: which, and where the pointer went down.
    Move(TrackKey),
    /// Resizing a track's rows: which, the pointer's first y, the row height then, and
    /// how many rows it shows.
    Resize {
        key: TrackKey,
        y0: f32,
        h0: f32,
        rows: usize,
    },
}

/// The track drawn under `p`, with its band and row height.
fn under(hits: &Hits, p: Pos2) -> Option<(TrackKey, egui::Rect, f32)> {
    hits.tracks.iter().copied().find(|(_, r, _)| r.contains(p))
}

/// Handles the labels column's pointer; `label_right` is the column's right edge.
pub fn handle(
    ui: &Ui,
    resp: &Response,
    st: &mut TimelineState,
    tracks: &[Track],
    hits: &Hits,
    label_right: f32,
) {
    let in_labels = |p: Pos2| p.x < label_right;
    let origin = ui.input(|i| i.pointer.press_origin());
    if resp.drag_started_by(egui::PointerButton::Primary)
        && let Some(o) = origin.filter(|&o| in_labels(o))
        && let Some((key, band, row_h)) = under(hits, o)
    {
        st.label_drag = Some(if band.bottom() - o.y <= EDGE_PX {
            LabelDrag::Resize {
                key,
                y0: o.y,
                h0: row_h,
                rows: (band.height() / row_h).round().max(1.0) as usize,
            }
        } else {
            LabelDrag::Move(key)
        });
    }
    let pointer = resp.interact_pointer_pos().or(resp.hover_pos());
    match (st.label_drag, pointer) {
        (Some(LabelDrag::Resize { key, y0, h0, rows }), Some(p)) => {
            st.layout.set_row_h(key, h0 + (p.y - y0) / rows as f32);
            st.layout_dirty = true;
        }
        (Some(LabelDrag::Move(_)), Some(p)) => {
            if let Some((_, band, _)) = under(hits, p) {
                ui.painter().line_segment(
                    [band.left_top(), band.right_top()],
                    Stroke::new(2.0, crate::palette::MEASURED),
                );
            }
        }
        _ => {}
    }
    if resp.drag_stopped() {
        if let (Some(LabelDrag::Move(key)), Some(p)) = (st.label_drag, pointer)
            && let Some((target, _, _)) = under(hits, p)
        {
            // Onto a thread of another group: before that thread's process.
            let target = if target.parent() != key.parent() {
                target.parent().unwrap_or(target)
            } else {
                target
            };
            st.layout.move_before(tracks, key, target);
            st.layout_dirty = true;
        }
        st.label_drag = None;
    }
    if resp.clicked()
        && let Some(p) = resp.interact_pointer_pos().filter(|&p| in_labels(p))
        && let Some((key, _, _)) = under(hits, p)
        && tracks.iter().any(|t| t.key == key && t.collapsible())
    {
        st.layout.toggle_collapsed(key);
        st.layout_dirty = true;
    }
    if resp.secondary_clicked() {
        st.menu_track = resp
            .interact_pointer_pos()
            .filter(|&p| in_labels(p))
            .and_then(|p| under(hits, p))
            .map(|t| t.0);
    }
    if let Some(key) = st.menu_track {
        resp.context_menu(|ui| menu(ui, st, tracks, key));
    }
}

fn menu(ui: &mut Ui, st: &mut TimelineState, tracks: &[Track], key: TrackKey) {
    let p = st.layout.prefs(key);
    let mut changed = true;
    let collapsible = tracks.iter().any(|t| t.key == key && t.collapsible());
    if key.parent().is_none()
        && ui
            .button(if p.pinned { "unpin" } else { "pin to the top" })
            .clicked()
    {
        st.layout.set_pinned(key, !p.pinned);
    } else if collapsible
        && ui
            .button(if p.collapsed { "expand" } else { "collapse" })
            .clicked()
    {
        st.layout.toggle_collapsed(key);
    } else if ui.button("hide").clicked() {
        st.layout.set_hidden(key, true);
    } else if ui.button("move up").clicked() {
        st.layout.nudge(tracks, key, -1);
    } else if ui.button("move down").clicked() {
        st.layout.nudge(tracks, key, 1);
    } else if ui.button("taller").clicked() {
        st.layout.set_row_h(key, p.row_h * 1.5);
    } else if ui.button("shorter").clicked() {
        st.layout.set_row_h(key, p.row_h / 1.5);
    } else if st.layout.hidden_count() > 0
        && ui
            .button(format!("show {} hidden", st.layout.hidden_count()))
            .clicked()
    {
        st.layout.show_all();
    } else {
        changed = false;
    }
    if changed {
        st.layout_dirty = true;
        st.menu_track = None;
        ui.close();
    }
}
