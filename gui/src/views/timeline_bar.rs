//! The timeline's controls beside the view: the search box with next / previous, the host
//! groups' collapse in one click, hidden tracks back; and in the selection panel the launch
//! of a kernel with a jump to it and back, and the flows of a box selection.

use egui::{Color32, Ui};

use super::flows;
use super::search::Match;
use super::timeline::{Hit, TimelineState};
use crate::loader::Loaded;

/// The toolbar's timeline controls.
pub fn toolbar(ui: &mut Ui, st: &mut TimelineState, l: &Loaded) {
    let r = ui.add(
        egui::TextEdit::singleline(&mut st.search.text)
            .desired_width(180.0)
            .hint_text("search (regex): kernels, scopes, markers"),
    );
    let enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
    if r.changed() || enter {
        st.search.run(l);
    }
    let mut walk = None;
    if enter
        || ui
            .button("next")
            .on_hover_text("next match (Enter)")
            .clicked()
    {
        walk = Some(true);
    }
    if ui.button("prev").on_hover_text("previous match").clicked() {
        walk = Some(false);
    }
    if let Some(forward) = walk {
        go(st, l, forward);
    }
    match (&st.search.error, &st.search.found) {
        (Some(e), _) => {
            ui.colored_label(Color32::from_rgb(255, 120, 120), e);
        }
        (None, Some(f)) => {
            ui.label(format!("{} matches", super::format::count(f.total as u64)));
        }
        _ => {}
    }
    ui.separator();
    let collapsed = st.layout.host_collapsed(&l.tracks);
    let has_host = !l.x.lanes.host.is_empty();
    if ui
        .add_enabled(
            has_host,
            egui::Button::new(if collapsed {
                "expand host"
            } else {
                "collapse host"
            }),
        )
        .on_hover_text("collapse or expand every process's threads")
        .clicked()
    {
        st.layout.collapse_host(&l.tracks, !collapsed);
        st.layout_dirty = true;
    }
    let hidden = st.layout.hidden_count();
    if hidden > 0 && ui.button(format!("show {hidden} hidden")).clicked() {
        st.layout.show_all();
        st.layout_dirty = true;
    }
}

/// Walks to the next (or previous) match: selects it and brings it into view, keeping
/// the zoom when it fits.
pub fn go(st: &mut TimelineState, l: &Loaded, forward: bool) -> Option<Match> {
    st.search.run(l);
    let from = st.visible_ns().map_or(i64::MIN, |(a, _)| a);
    let m = st.search.step(l, from, forward)?;
    show_window(st, m.start_ns, m.end_ns);
    st.selected = Some(m.hit.clone());
    Some(m)
}

/// Centres `[a, b)` in the view, zooming out only when it does not fit.
fn show_window(st: &mut TimelineState, a: i64, b: i64) {
    let Some((t0, t1)) = st.visible_ns() else {
        return;
    };
    let w = (t1 - t0).max(1);
    if b - a > w {
        st.zoom_to_ns(a, b, 0.1);
    } else {
        let c = a + (b - a) / 2;
        st.zoom_to_ns(c - w / 2, c - w / 2 + w, 0.0);
    }
}

/// The selection panel's launch lines for the selected kernel, and the jumps.
pub fn launch_panel(ui: &mut Ui, st: &mut TimelineState, l: &Loaded) {
    if let Some(Hit::Activity(a)) = st.selected.clone() {
        match flows::launch_of(l, a) {
            Some(w) => {
                if ui
                    .button("jump to its launch")
                    .on_hover_text("show the host API call that launched it (the arrow)")
                    .clicked()
                {
                    st.flows.back = Some((Hit::Activity(a), st.u0, st.u1));
                    show_window(st, w.start_ns, w.end_ns.max(w.start_ns + 1));
                    st.selected = Some(Hit::Launch(w.index));
                }
            }
            None => {
                ui.label("no launch recorded for it (no correlated host API call)");
            }
        }
    }
    if let Some((hit, u0, u1)) = st.flows.back.clone()
        && matches!(st.selected, Some(Hit::Launch(_)))
        && ui.button("back to the kernel").clicked()
    {
        st.selected = Some(hit);
        st.u0 = u0;
        st.u1 = u1;
        st.flows.back = None;
    }
    if st.selection.is_some() {
        ui.checkbox(&mut st.flows.range, "launch arrows for the box")
            .on_hover_text(format!(
                "an arrow from each launch to its kernel, for up to {} kernels",
                flows::MAX_RANGE_FLOWS
            ));
    }
}
