//! Hover text in an opaque box at the pointer, shown at once (egui's tooltips fade in, and
//! while they do the bars show through them).

use egui::{Color32, Frame, Id, Order, Pos2, Ui, vec2};

/// Shows `text` next to `pointer` over everything else.
pub fn at_pointer(ui: &Ui, id: Id, pointer: Pos2, text: &str) {
    let fill = opaque(ui.visuals().window_fill);
    egui::Area::new(id)
        .order(Order::Tooltip)
        .fixed_pos(pointer + vec2(14.0, 14.0))
        .fade_in(false)
        .interactable(false)
        .constrain(true)
        .show(ui.ctx(), |ui| {
            Frame::popup(ui.style()).fill(fill).show(ui, |ui| {
                ui.set_max_width(440.0);
                ui.label(text);
            });
        });
}

/// `c` with full alpha.
pub fn opaque(c: Color32) -> Color32 {
    Color32::from_rgb(c.r(), c.g(), c.b())
}
