//! The page's look: one style sheet (every rule under `.gapscope`, so a fragment embedded
//! in a notebook styles only itself), system fonts only, and a fixed colour per bucket
//! (the explorer's palette, so a bucket looks the same in both).

use gapscope_analyzer::Bucket;

/// Bucket colours in [`Bucket::ALL`] order: matmul work in blues, attention orange, data
/// movement in greens, pointwise work in purples and pinks, the recurrences red, `other`
/// grey (the explorer's `palette.rs`).
const BUCKET: [&str; 17] = [
    "#1f77b4", // gemv
    "#17becf", // gemm_quant
    "#6baed6", // gemm_dense
    "#bcbd22", // quantize
    "#8c564b", // conv
    "#ff7f0e", // attention
    "#2ca02c", // embed_gather
    "#98df8a", // copy
    "#9467bd", // norm
    "#e377c2", // rope
    "#c5b0d5", // act_elementwise
    "#ffbb78", // moe
    "#d62728", // linear_attn_ssm
    "#f7b6d2", // sampling
    "#dbdb8d", // optimizer
    "#393b79", // comm
    "#7f7f7f", // other
];

/// GPU idle inside a step (light, so the work under it stays the eye's first stop).
pub const IDLE: &str = "#d0d4da";
/// The idle of a step that stalled (far more idle than its phase's median).
pub const STALL: &str = "#f2a0a0";
/// A diff's two step bars.
pub const STEP_A: &str = "#4a5568";
pub const STEP_B: &str = "#8a94a6";
/// Axis lines, grid lines and axis text.
pub const AXIS: &str = "#57606a";
pub const GRID: &str = "#e6e8eb";

/// A bucket's colour.
pub fn bucket(b: Bucket) -> &'static str {
    BUCKET[b.index().min(BUCKET.len() - 1)]
}

/// The style sheet.
pub const CSS: &str = r#"
.gapscope{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1f2328;background:#fff;line-height:1.45;font-size:15px;max-width:1360px;margin:0 auto;padding:0 20px 32px}
.gapscope h1{font-size:26px;margin:20px 0 2px}
.gapscope h2{font-size:21px;margin:32px 0 10px;padding-bottom:4px;border-bottom:2px solid #d0d7de}
.gapscope h3{font-size:16px;margin:22px 0 6px}
.gapscope p{margin:6px 0}
.gapscope .sub{color:#59636e;font-size:13px;word-break:break-all}
.gapscope .cards{display:flex;flex-wrap:wrap;gap:12px;margin:14px 0}
.gapscope .card{border:1px solid #d0d7de;border-radius:8px;padding:8px 14px;min-width:140px;background:#f6f8fa}
.gapscope .card .v{font-size:22px;font-weight:600;font-variant-numeric:tabular-nums}
.gapscope .card .l{font-size:12px;color:#59636e;text-transform:uppercase;letter-spacing:.04em}
.gapscope table{border-collapse:collapse;margin:8px 0 12px;font-size:13.5px}
.gapscope th,.gapscope td{padding:4px 10px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top}
.gapscope thead th{background:#f6f8fa;font-weight:600;border-bottom:1px solid #d0d7de}
.gapscope .n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.gapscope .k{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px;word-break:break-all}
.gapscope table.facts th{font-weight:500;color:#59636e;white-space:nowrap;background:none}
.gapscope table.facts td{max-width:1100px}
.gapscope tr.total td{font-weight:600}
.gapscope .warn{background:#fff8c5;border:1px solid #d4a72c;border-left:6px solid #bf8700;border-radius:6px;padding:8px 12px;margin:8px 0}
.gapscope .warn.bad{background:#ffebe9;border-color:#ff8182;border-left-color:#cf222e}
.gapscope .warn b{margin-right:6px}
.gapscope .lever{background:#ddf4ff;border:1px solid #54aeff;border-left:6px solid #0969da;border-radius:6px;padding:8px 12px;margin:8px 0}
.gapscope .sw{display:inline-block;width:12px;height:12px;border-radius:2px;margin-right:6px;vertical-align:-1px;border:1px solid rgba(0,0,0,.15)}
.gapscope .legend{display:flex;flex-wrap:wrap;gap:4px 16px;font-size:13px;margin:6px 0 4px}
.gapscope figure{margin:10px 0 18px}
.gapscope figcaption{font-size:13px;color:#59636e;margin:4px 0}
.gapscope svg{max-width:100%;height:auto;display:block;background:#fff}
.gapscope code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:88%;background:#eff1f3;padding:1px 4px;border-radius:4px;word-break:break-all}
.gapscope pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12.5px;background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:10px;overflow-x:auto}
.gapscope nav a,.gapscope a{color:#0969da}
.gapscope footer{margin-top:36px;color:#59636e;font-size:12px}
"#;
