//! Text that changes from frame to frame only in its numbers (the ruler's ticks, the steps
//! lane's "step 3 · decode"), painted from pieces that stay the same: each digit on its own
//! and the text between digits whole. egui caches a laid-out text only while it is drawn
//! frame after frame, and shaping a new string costs several microseconds however short it
//! is; panning brings new numbers every frame, so whole labels were shaped anew each frame.
//! The pieces are shaped once and reused; digits have no kerning against their neighbours,
//! so the text looks as it did laid out whole.

use std::sync::Arc;

use egui::{Align2, Color32, FontId, Galley, Painter, Pos2, Rect, Vec2};

/// `text` split where digits begin and end: each digit alone, the runs between whole.
pub fn pieces(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        let c = rest.chars().next()?;
        let n = if c.is_ascii_digit() {
            1
        } else {
            rest.find(|c: char| c.is_ascii_digit())
                .unwrap_or(rest.len())
        };
        let (head, tail) = rest.split_at(n);
        rest = tail;
        Some(head)
    })
}

/// Paints `text` anchored at `pos` as [`Painter::text`] does, from its [`pieces`]; returns
/// the rect it covers.
pub fn paint(
    painter: &Painter,
    pos: Pos2,
    anchor: Align2,
    text: &str,
    font: &FontId,
    color: Color32,
) -> Rect {
    let galleys: Vec<Arc<Galley>> = pieces(text)
        .map(|p| painter.layout_no_wrap(p.to_owned(), font.clone(), color))
        .collect();
    let size = galleys.iter().fold(Vec2::ZERO, |s, g| {
        Vec2::new(s.x + g.size().x, s.y.max(g.size().y))
    });
    let rect = anchor.anchor_size(pos, size);
    let mut x = rect.left();
    for g in galleys {
        let w = g.size().x;
        painter.galley(Pos2::new(x, rect.top()), g, color);
        x += w;
    }
    rect
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_apart_the_rest_whole() {
        let p: Vec<&str> = pieces("step 12 · decode").collect();
        assert_eq!(p, ["step ", "1", "2", " · decode"]);
        assert_eq!(pieces("3.5 ms").collect::<Vec<_>>(), ["3", ".", "5", " ms"]);
        assert_eq!(pieces("").count(), 0);
        assert_eq!(pieces("prefill").collect::<Vec<_>>(), ["prefill"]);
    }

    #[test]
    fn as_wide_as_the_text_laid_out_whole() {
        let ctx = egui::Context::default();
        let mut out = ctx.run_ui(egui::RawInput::default(), |ui| {
            let painter = ui.painter();
            let font = FontId::proportional(11.0);
            for text in ["step 12 · decode", "1.25 ms", "prefill 0"] {
                let whole = painter.layout_no_wrap(text.to_owned(), font.clone(), Color32::WHITE);
                let r = paint(
                    painter,
                    Pos2::ZERO,
                    Align2::LEFT_TOP,
                    text,
                    &font,
                    Color32::WHITE,
                );
                assert!(
                    (r.width() - whole.size().x).abs() < 0.5,
                    "{text}: {} vs {}",
                    r.width(),
                    whole.size().x
                );
                assert_eq!(r.height(), whole.size().y);
            }
        });
        out.textures_delta.clear();
    }
}
