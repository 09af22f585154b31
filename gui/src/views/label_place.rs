//! Placing chart labels off the curves: each label takes the first of a few positions
//! around its point where it covers no line, no point and no label placed before it, and
//! stays inside the chart; a label with no such place is left out (its point stays).

use egui::{Pos2, Rect, Vec2, vec2};

/// A line segment of the chart that labels must not cover.
pub type Segment = (Pos2, Pos2);

/// Where each label of `size` for the point at `at` goes, in order (earlier labels win).
pub fn place(
    labels: &[(Pos2, Vec2)],
    segments: &[Segment],
    points: &[Pos2],
    bounds: Rect,
) -> Vec<Option<Rect>> {
    let mut placed: Vec<Rect> = Vec::new();
    labels
        .iter()
        .map(|&(at, size)| {
            let gap = 6.0;
            let candidates = [
                vec2(gap, -size.y / 2.0),
                vec2(gap, -size.y - 2.0),
                vec2(gap, 2.0),
                vec2(-gap - size.x, -size.y / 2.0),
                vec2(-gap - size.x, -size.y - 2.0),
                vec2(-gap - size.x, 2.0),
                vec2(-size.x / 2.0, -size.y - gap),
                vec2(-size.x / 2.0, gap),
                vec2(gap, -2.0 * size.y - 4.0),
                vec2(gap, size.y + 4.0),
            ];
            let spot = candidates
                .iter()
                .map(|&o| Rect::from_min_size(at + o, size))
                .find(|r| {
                    bounds.contains_rect(*r)
                        && placed.iter().all(|p| !p.intersects(*r))
                        && segments.iter().all(|&(a, b)| !crosses(*r, a, b))
                        && points.iter().all(|p| !r.expand(3.0).contains(*p))
                });
            if let Some(r) = spot {
                placed.push(r);
            }
            spot
        })
        .collect()
}

/// Whether the segment `a`–`b` passes through `r` (sampled every pixel).
pub fn crosses(r: Rect, a: Pos2, b: Pos2) -> bool {
    let n = (a.distance(b).ceil() as usize).clamp(1, 10_000);
    (0..=n).any(|k| r.contains(a.lerp(b, k as f32 / n as f32)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_avoid_lines_points_and_each_other() {
        let bounds = Rect::from_min_size(Pos2::ZERO, vec2(400.0, 300.0));
        // A horizontal curve right through the first point, as a floor dash under a
        // bucket's point would be; the old labels sat on it.
        let line = (Pos2::new(0.0, 100.0), Pos2::new(400.0, 100.0));
        let at = Pos2::new(100.0, 100.0);
        let size = vec2(80.0, 12.0);
        let labels = [(at, size), (Pos2::new(104.0, 102.0), size)];
        let got = place(&labels, &[line], &[at, labels[1].0], bounds);
        let (a, b) = (got[0].unwrap(), got[1].unwrap());
        for r in [a, b] {
            assert!(!crosses(r, line.0, line.1), "{r:?} on the line");
            assert!(bounds.contains_rect(r));
        }
        assert!(!a.intersects(b), "{a:?} {b:?}");
        // The old placement: right of the point, centred on it, across the line.
        let old = Rect::from_min_size(at + vec2(5.0, -6.0), size);
        assert!(crosses(old, line.0, line.1));
    }

    #[test]
    fn a_label_with_no_room_is_left_out() {
        let bounds = Rect::from_min_size(Pos2::ZERO, vec2(50.0, 20.0));
        let got = place(
            &[(Pos2::new(25.0, 10.0), vec2(80.0, 12.0))],
            &[],
            &[],
            bounds,
        );
        assert_eq!(got, [None]);
    }
}
