//! Colours: one per bucket (distinguishable side by side), per phase and per scope kind.

use egui::Color32;
use gapscope_analyzer::Bucket;
use gapscope_traces::{Phase, ScopeKind};

/// Bucket colours, in [`Bucket::ALL`] order, chosen in CIELAB: neighbours differ in hue and
/// lightness (ΔE at least 25, L* at least 8 apart), any two at least 23 apart, and each
/// reads on the dark background (contrast 3.5:1 or more) and the light one (1.4:1 or more).
/// Matmul work in blues, attention orange, data movement in greens, pointwise work in
/// purples, pinks and reds, `comm` a light sky blue (it was a navy that vanished on the dark
/// background), `other` grey.
const BUCKET: [Color32; 17] = [
    Color32::from_rgb(0x00, 0x98, 0xe8), // gemv
    Color32::from_rgb(0x2d, 0xcf, 0xd3), // gemm_quant
    Color32::from_rgb(0x2d, 0x6a, 0xcb), // gemm_dense
    Color32::from_rgb(0xcf, 0xc4, 0x48), // quantize
    Color32::from_rgb(0xa4, 0x69, 0x3f), // conv
    Color32::from_rgb(0xfd, 0x8f, 0x2c), // attention
    Color32::from_rgb(0x43, 0x95, 0x43), // embed_gather
    Color32::from_rgb(0x66, 0xdb, 0xaf), // copy
    Color32::from_rgb(0x8f, 0x60, 0xc8), // norm
    Color32::from_rgb(0xff, 0x93, 0xc7), // rope
    Color32::from_rgb(0xe2, 0x6c, 0x75), // act_elementwise
    Color32::from_rgb(0xf1, 0xcc, 0x96), // moe
    Color32::from_rgb(0xcf, 0x2b, 0x35), // linear_attn_ssm
    Color32::from_rgb(0xd1, 0x96, 0xe0), // sampling
    Color32::from_rgb(0x82, 0x99, 0x52), // optimizer
    Color32::from_rgb(0x90, 0xcd, 0xfc), // comm
    Color32::from_rgb(0x96, 0x96, 0x96), // other
];

/// A run of steps each narrower than a pixel, folded into one bar.
pub const FOLDED_STEPS: Color32 = Color32::from_rgb(0x8a, 0x8a, 0x8a);
/// The roofline's floors and its measured points.
pub const FLOOR_WEIGHTS: Color32 = Color32::from_rgb(0x4c, 0x9b, 0xe8);
pub const FLOOR_KV: Color32 = Color32::from_rgb(0x3f, 0xc0, 0x6a);
pub const FLOOR_COMPUTE: Color32 = Color32::from_rgb(0xe8, 0x50, 0x50);
pub const MEASURED: Color32 = Color32::from_rgb(255, 210, 0);
/// Launch → kernel flow arrows.
pub const FLOW: Color32 = Color32::from_rgb(0xff, 0xe0, 0x40);
pub const IDLE: Color32 = Color32::from_rgb(0x3a, 0x3a, 0x3a);
pub const STALL: Color32 = Color32::from_rgb(0xff, 0x40, 0x40);
pub const SELECTION: Color32 = Color32::from_rgba_premultiplied(0x40, 0x80, 0xff, 0x30);
pub const HIGHLIGHT: Color32 = Color32::WHITE;
/// Speculative decoding: a step's draft window and its verify forward (the phase strip).
pub const DRAFT: Color32 = Color32::from_rgb(0x30, 0xa0, 0xd0);
pub const VERIFY: Color32 = Color32::from_rgb(0xd0, 0x70, 0x60);
/// Ranks: a collective's transfer (solid), its waiting part (light, hatched), the rank
/// that arrived last and sets the step, the step strip, the links across ranks.
pub const TRANSFER: Color32 = Color32::from_rgb(0x4a, 0x78, 0xe8);
pub const WAIT: Color32 = Color32::from_rgb(0x3a, 0x46, 0x66);
pub const WAIT_HATCH: Color32 = Color32::from_rgb(0x9c, 0xb4, 0xee);
pub const LATE: Color32 = Color32::from_rgb(0xff, 0x9f, 0x1c);
pub const LATE_BG: Color32 = Color32::from_rgb(0x4a, 0x32, 0x12);
pub const RANK_STEP: Color32 = Color32::from_rgb(0x40, 0xb0, 0x60);
pub const LINK: Color32 = Color32::from_rgba_premultiplied(0xb0, 0xb0, 0xb0, 0xa0);

pub fn bucket(b: u8) -> Color32 {
    BUCKET[(b as usize).min(BUCKET.len() - 1)]
}

pub fn bucket_of(b: Bucket) -> Color32 {
    bucket(b as u8)
}

pub fn phase(p: Phase) -> Color32 {
    match p {
        // Apart from every bucket colour (the steps view stacks buckets over the strip):
        // prefill near white, decode a dark teal, mixed a khaki.
        Phase::Prefill => Color32::from_rgb(0xe7, 0xe2, 0xd7),
        Phase::Decode => Color32::from_rgb(0x00, 0x7b, 0x71),
        Phase::Mixed => Color32::from_rgb(0x99, 0x8b, 0x57),
        Phase::Train => Color32::from_rgb(0x40, 0x90, 0xe0),
        Phase::Sample | Phase::Unknown => Color32::from_rgb(0x90, 0x90, 0x90),
    }
}

pub fn scope(k: ScopeKind) -> Color32 {
    match k {
        ScopeKind::Op => Color32::from_rgb(0x4e, 0x79, 0xa7),
        ScopeKind::Module => Color32::from_rgb(0x59, 0xa1, 0x4f),
        ScopeKind::Python => Color32::from_rgb(0x76, 0x6a, 0x5c),
        ScopeKind::Annotation => Color32::from_rgb(0xb0, 0x7a, 0xa1),
        ScopeKind::Other => Color32::from_rgb(0x79, 0x70, 0x6e),
    }
}

/// A grey for the current theme: `g` as on the dark theme (backgrounds near 18, text near
/// 190), mirrored on the light one.
pub fn gray(dark: bool, g: u8) -> Color32 {
    if dark {
        Color32::from_gray(g)
    } else {
        Color32::from_gray(255 - g)
    }
}

/// Whether the painter's context draws the dark theme.
pub fn is_dark(ctx: &egui::Context) -> bool {
    ctx.global_style().visuals.dark_mode
}

/// The step boundaries drawn across the lanes: a faint line of the text's polarity, white
/// on the dark theme, black on the light one (a white one vanished there).
pub fn step_line(dark: bool) -> Color32 {
    if dark {
        Color32::from_rgba_unmultiplied(255, 255, 255, 28)
    } else {
        Color32::from_rgba_unmultiplied(0, 0, 0, 40)
    }
}

/// Dimmed version of a colour (for what a highlight does not cover).
pub fn dim(c: Color32) -> Color32 {
    Color32::from_rgb(c.r() / 3, c.g() / 3, c.b() / 3)
}

/// Black or white text, whichever reads on `bg`.
pub fn text_on(bg: Color32) -> Color32 {
    let l = 0.299 * bg.r() as f32 + 0.587 * bg.g() as f32 + 0.114 * bg.b() as f32;
    if l > 140.0 {
        Color32::BLACK
    } else {
        Color32::WHITE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lin(c: u8) -> f64 {
        let c = c as f64 / 255.0;
        if c <= 0.04045 {
            c / 12.92
        } else {
            ((c + 0.055) / 1.055).powf(2.4)
        }
    }

    fn luminance(c: Color32) -> f64 {
        0.2126 * lin(c.r()) + 0.7152 * lin(c.g()) + 0.0722 * lin(c.b())
    }

    fn contrast(a: Color32, b: Color32) -> f64 {
        let (x, y) = (luminance(a), luminance(b));
        (x.max(y) + 0.05) / (x.min(y) + 0.05)
    }

    fn lab(c: Color32) -> [f64; 3] {
        let (r, g, b) = (lin(c.r()), lin(c.g()), lin(c.b()));
        let x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047;
        let y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
        let z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883;
        let f = |t: f64| {
            if t > 0.008856 {
                t.cbrt()
            } else {
                7.787 * t + 16.0 / 116.0
            }
        };
        [
            116.0 * f(y) - 16.0,
            500.0 * (f(x) - f(y)),
            200.0 * (f(y) - f(z)),
        ]
    }

    fn delta_e(a: Color32, b: Color32) -> f64 {
        let (p, q) = (lab(a), lab(b));
        ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2) + (p[2] - q[2]).powi(2)).sqrt()
    }

    #[test]
    fn every_bucket_colour_reads_on_both_themes_and_neighbours_differ() {
        let (dark, light) = (gray(true, 18), gray(false, 5));
        for (k, &c) in BUCKET.iter().enumerate() {
            let b = Bucket::ALL[k].as_str();
            // The old comm navy had 1.8:1 on the dark background.
            assert!(
                contrast(c, dark) >= 3.5,
                "{b} on dark: {:.2}",
                contrast(c, dark)
            );
            assert!(
                contrast(c, light) >= 1.4,
                "{b} on light: {:.2}",
                contrast(c, light)
            );
        }
        for w in 0..BUCKET.len() - 1 {
            let (a, b) = (BUCKET[w], BUCKET[w + 1]);
            let dl = (lab(a)[0] - lab(b)[0]).abs();
            assert!(
                delta_e(a, b) >= 25.0 && dl >= 8.0,
                "{} and {}: ΔE {:.0}, ΔL {dl:.0}",
                Bucket::ALL[w].as_str(),
                Bucket::ALL[w + 1].as_str(),
                delta_e(a, b)
            );
        }
        for (i, &a) in BUCKET.iter().enumerate() {
            for (j, &b) in BUCKET.iter().enumerate().skip(i + 1) {
                assert!(delta_e(a, b) >= 22.0, "{i} {j}");
            }
        }
        // The phase strip under the bars: no bucket looks like a phase (norm and
        // act_elementwise were the prefill's purple, embed_gather and copy the decode's green).
        for ph in [Phase::Prefill, Phase::Decode] {
            for (k, &c) in BUCKET.iter().enumerate() {
                let d = delta_e(phase(ph), c);
                assert!(
                    d >= 25.0,
                    "{:?} and {}: {d:.0}",
                    ph,
                    Bucket::ALL[k].as_str()
                );
            }
        }
    }
}
