//! Colours: one per bucket (distinguishable side by side), per phase and per scope kind.

use egui::Color32;
use gapscope_analyzer::Bucket;
use gapscope_traces::{Phase, ScopeKind};

/// Bucket colours, in [`Bucket::ALL`] order. Matmul work in blues, attention orange, data
/// movement in greens, pointwise work in purples and pinks, the recurrences red, `other`
/// grey.
const BUCKET: [Color32; 17] = [
    Color32::from_rgb(0x1f, 0x77, 0xb4), // gemv
    Color32::from_rgb(0x17, 0xbe, 0xcf), // gemm_quant
    Color32::from_rgb(0x6b, 0xae, 0xd6), // gemm_dense
    Color32::from_rgb(0xbc, 0xbd, 0x22), // quantize
    Color32::from_rgb(0x8c, 0x56, 0x4b), // conv
    Color32::from_rgb(0xff, 0x7f, 0x0e), // attention
    Color32::from_rgb(0x2c, 0xa0, 0x2c), // embed_gather
    Color32::from_rgb(0x98, 0xdf, 0x8a), // copy
    Color32::from_rgb(0x94, 0x67, 0xbd), // norm
    Color32::from_rgb(0xe3, 0x77, 0xc2), // rope
    Color32::from_rgb(0xc5, 0xb0, 0xd5), // act_elementwise
    Color32::from_rgb(0xff, 0xbb, 0x78), // moe
    Color32::from_rgb(0xd6, 0x27, 0x28), // linear_attn_ssm
    Color32::from_rgb(0xf7, 0xb6, 0xd2), // sampling
    Color32::from_rgb(0xdb, 0xdb, 0x8d), // optimizer
    Color32::from_rgb(0x39, 0x3b, 0x79), // comm
    Color32::from_rgb(0x7f, 0x7f, 0x7f), // other
];

/// A run of steps each narrower than a pixel, folded into one bar.
pub const FOLDED_STEPS: Color32 = Color32::from_rgb(0x8a, 0x8a, 0x8a);
/// Charts: the background, the roofline's floors and its measured points.
pub const CHART_BG: Color32 = Color32::from_gray(18);
pub const FLOOR_WEIGHTS: Color32 = Color32::from_rgb(0x4c, 0x9b, 0xe8);
pub const FLOOR_KV: Color32 = Color32::from_rgb(0x3f, 0xc0, 0x6a);
pub const FLOOR_COMPUTE: Color32 = Color32::from_rgb(0xe8, 0x50, 0x50);
pub const MEASURED: Color32 = Color32::from_rgb(255, 210, 0);
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
        Phase::Prefill => Color32::from_rgb(0xa0, 0x60, 0xe0),
        Phase::Decode => Color32::from_rgb(0x40, 0xb0, 0x60),
        Phase::Mixed => Color32::from_rgb(0xe0, 0xa0, 0x30),
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
