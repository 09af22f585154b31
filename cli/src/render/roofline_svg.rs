//! The roofline chart: log-log tok/s against batch, with the memory roof (weights + KV),
//! the compute roof, the combined ceiling and the measured steps.
//!
//! Layout: a title band across the top ([`TITLE_BAND_PX`] high), the plot on the left and
//! the legend panel on the right (from [`LEGEND_X_PX`]), so neither the legend nor any line
//! can cover the other or the title. Every plotted value lies inside the axis ranges (nothing
//! is clamped to an edge). Tick marks are placed by hand: powers of two on the batch axis,
//! powers of ten (with 2 and 5 between, on a range of under four decades) on the tok/s axis, each once.
//! Measured points carry a number that the legend panel spells out (trace, its median step
//! as × the floor with the efficiency, tok/s, batch).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use anyhow::Result;
use gapscope_analyzer::roofline::report::{BatchSource, RooflineReport};
use gapscope_analyzer::roofline::{HardwareSpec, MAX_BATCH, ModelSpec, StepFloor, step_floor};

/// Canvas size, pixels.
pub const WIDTH_PX: u32 = 960;
pub const HEIGHT_PX: u32 = 600;
/// Height of the band at the top that holds the title and nothing else.
pub const TITLE_BAND_PX: u32 = 44;
/// Left edge of the legend panel; the plot is left of it.
pub const LEGEND_X_PX: u32 = 700;

const MEMORY: RGBColor = RGBColor(120, 170, 220);
const COMPUTE: RGBColor = RGBColor(230, 120, 120);
const MEASURED: RGBColor = RGBColor(44, 160, 44);

/// Points per roof curve.
const CURVE_POINTS: usize = 48;

/// A roof: legend name, points, colour, stroke width.
type Line<'a> = (&'a str, &'a [(f64, f64)], RGBColor, u32);

/// Renders the report as an SVG document. The roofs are drawn as curves over the batch
/// range (the report's batches, the measured traces' batches and twice the crossover batch,
/// so the knee shows), from `m` and `hw`, the model and GPU the report was built from.
#[expect(
    clippy::too_many_lines,
    reason = "one plotters chart: axes, then each series and label drawn onto the same drawing area"
)]
pub fn render(r: &RooflineReport, m: &ModelSpec, hw: &HardwareSpec) -> Result<String> {
    let err = |e: String| anyhow::anyhow!("rendering the roofline SVG: {e}");
    let measured: Vec<(f64, f64)> = r
        .measured
        .iter()
        .map(|m| (m.batch.max(1) as f64, m.tok_per_s))
        .filter(|p| plottable(p.1))
        .collect();
    let (b0, b1) = bounds(
        r.floors
            .iter()
            .map(|f| f.batch.max(1) as f64)
            .chain(measured.iter().map(|p| p.0))
            .chain(
                [r.crossover_batch * 2.0]
                    .into_iter()
                    .filter(|x| plottable(*x)),
            ),
    );
    if !(b0.is_finite() && b1.is_finite()) {
        return Err(err("nothing to plot (no batches)".into()));
    }
    let b1 = b1.min(MAX_BATCH as f64).max(b0);
    let batches = curve_batches(b0, b1);
    let rank = m.per_rank(r.tp);
    let floors: Vec<StepFloor> = batches
        .iter()
        .map(|&b| step_floor(&rank, hw, r.weights, b, r.ctx))
        .collect();
    let pts = |f: &dyn Fn(&StepFloor) -> f64| -> Vec<(f64, f64)> {
        floors
            .iter()
            .map(|s| (s.batch as f64, f(s)))
            .filter(|p| plottable(p.1))
            .collect()
    };
    let memory = pts(&|s| s.batch as f64 / (s.weight_floor_s + s.kv_floor_s));
    let compute = pts(&|s| s.batch as f64 / s.compute_floor_s);
    let ceiling = pts(&|s| s.max_tok_per_s);
    let all = || {
        memory
            .iter()
            .chain(&compute)
            .chain(&ceiling)
            .chain(&measured)
    };
    let (y0, y1) = bounds(all().map(|p| p.1));
    if !(y0.is_finite() && y1.is_finite()) {
        return Err(err("nothing to plot (no finite floors)".into()));
    }
    let (x0, x1) = (b0 / 1.4, b1 * 1.4);
    let (y0, y1) = (y0 / 2.0, y1 * 2.0);
    let x_ticks = log_ticks(x0, x1, 2.0);
    let y_ticks = log_ticks(y0, y1, 10.0);

    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH_PX, HEIGHT_PX)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let (band, body) = root.split_vertically(TITLE_BAND_PX);
        let (plot, legend) = body.split_horizontally(LEGEND_X_PX);
        // A tensor-parallel chart's roofs are one rank's: the title says so.
        let tp = if r.tp > 1 {
            format!(", TP {} (one rank's floors)", r.tp)
        } else {
            String::new()
        };
        let title = format!(
            "{} {} on {} (ctx {}{tp}, {} ceilings), M* = {:.0}",
            if r.model.model_type.is_empty() {
                "decoder"
            } else {
                &r.model.model_type
            },
            r.weights,
            r.hardware.name,
            r.ctx,
            r.ceilings,
            r.crossover_batch
        );
        band.draw_text(
            &title,
            &("sans-serif", 18)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(HPos::Center, VPos::Center)),
            (WIDTH_PX as i32 / 2, TITLE_BAND_PX as i32 / 2),
        )
        .map_err(|e| err(e.to_string()))?;

        let mut c = ChartBuilder::on(&plot)
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(64)
            .build_cartesian_2d(
                (x0..x1).log_scale().with_key_points(x_ticks),
                (y0..y1).log_scale().with_key_points(y_ticks),
            )
            .map_err(|e| err(e.to_string()))?;
        c.configure_mesh()
            .x_desc("batch (sequences)")
            .y_desc("tokens/s")
            .x_label_formatter(&|x| format_tick(*x))
            .y_label_formatter(&|y| format_tick(*y))
            .draw()
            .map_err(|e| err(e.to_string()))?;
        // Wide pale roofs under a thin black floor, so the floor stays visible where it
        // coincides with one of them.
        let compute_name = format!("compute roof ({} peak)", r.compute_peak.path);
        let series: [Line; 3] = [
            ("memory roof (weights + KV)", &memory, MEMORY, 7),
            (&compute_name, &compute, COMPUTE, 7),
            ("floor (max tok/s)", &ceiling, BLACK, 2),
        ];
        for (_, data, color, width) in &series {
            c.draw_series(LineSeries::new(
                data.iter().copied(),
                color.stroke_width(*width),
            ))
            .map_err(|e| err(e.to_string()))?;
        }
        let label_font = ("sans-serif", 13).into_font().color(&BLACK);
        for (i, &p) in measured.iter().enumerate() {
            let same_batch = measured[..i].iter().filter(|q| q.0 == p.0).count() as i32;
            let mark = EmptyElement::at(p)
                + Circle::new((0, 0), 6, MEASURED.filled())
                + Text::new(
                    (i + 1).to_string(),
                    (8 + 14 * same_batch, -18),
                    label_font.clone(),
                );
            c.plotting_area()
                .draw(&mark)
                .map_err(|e| err(e.to_string()))?;
        }

        // The legend panel.
        let text = ("sans-serif", 13).into_font().color(&BLACK);
        let small = ("sans-serif", 12).into_font().color(&BLACK);
        let mut y = 24;
        for (name, _, color, width) in &series {
            legend
                .draw(&PathElement::new(
                    vec![(8, y), (36, y)],
                    color.stroke_width((*width).min(5)),
                ))
                .map_err(|e| err(e.to_string()))?;
            legend
                .draw_text(name, &text.pos(Pos::new(HPos::Left, VPos::Center)), (44, y))
                .map_err(|e| err(e.to_string()))?;
            y += 22;
        }
        if !r.measured.is_empty() {
            legend
                .draw(&Circle::new((22, y), 5, MEASURED.filled()))
                .map_err(|e| err(e.to_string()))?;
            legend
                .draw_text(
                    "measured decode steps",
                    &text.pos(Pos::new(HPos::Left, VPos::Center)),
                    (44, y),
                )
                .map_err(|e| err(e.to_string()))?;
            y += 22;
            for (i, m) in r.measured.iter().enumerate() {
                let lines = [
                    format!("{}  {}", i + 1, short_name(&m.trace, 30)),
                    format!(
                        "   {} (efficiency {})",
                        gapscope_analyzer::text::times_floor(m.tpot_median_ms, m.floor_ms),
                        super::pct1(m.pct_of_floor_median)
                    ),
                    format!(
                        "   {:.1} tok/s, batch {}{}",
                        m.tok_per_s,
                        m.batch,
                        match m.batch_source {
                            BatchSource::TraceMarkers => " (trace markers)",
                            BatchSource::Given => "",
                            BatchSource::Assumed => " (assumed)",
                        }
                    ),
                ];
                for l in lines {
                    if y > (HEIGHT_PX - TITLE_BAND_PX) as i32 - 12 {
                        break;
                    }
                    legend
                        .draw_text(&l, &small.pos(Pos::new(HPos::Left, VPos::Center)), (12, y))
                        .map_err(|e| err(e.to_string()))?;
                    y += 17;
                }
                y += 5;
            }
        }
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(out)
}

/// Integer batches from `lo` to `hi`, geometrically spaced, each once.
fn curve_batches(lo: f64, hi: f64) -> Vec<u64> {
    let (lo, hi) = (lo.max(1.0), hi.max(1.0));
    let mut v: Vec<u64> = (0..CURVE_POINTS)
        .map(|i| {
            let t = i as f64 / (CURVE_POINTS - 1) as f64;
            (lo * (hi / lo).powf(t)).round() as u64
        })
        .collect();
    v.dedup();
    v
}

fn plottable(v: f64) -> bool {
    v.is_finite() && v > 0.0
}

fn bounds(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::INFINITY, f64::NEG_INFINITY), |a, x| {
        (a.0.min(x), a.1.max(x))
    })
}

/// Tick values for a log axis over `lo..=hi`: powers of `base`, every other one when there
/// are more than 12; on a range of fewer than four powers of ten, 1-2-5 steps. Each value
/// once, ascending.
fn log_ticks(lo: f64, hi: f64, base: f64) -> Vec<f64> {
    let powers = |step: f64| -> Vec<f64> {
        let mut v = Vec::new();
        let mut t = step.powf((lo.ln() / step.ln()).ceil());
        while t <= hi && v.len() < 64 {
            v.push(t);
            t *= step;
        }
        v
    };
    let mut ticks = powers(base);
    if ticks.len() > 12 {
        ticks = powers(base * base);
    }
    if ticks.len() < 4 && base == 10.0 {
        let mut v = Vec::new();
        let mut decade = 10f64.powf(lo.log10().floor());
        while decade <= hi && v.len() < 64 {
            for m in [1.0, 2.0, 5.0] {
                let t = decade * m;
                if (lo..=hi).contains(&t) {
                    v.push(t);
                }
            }
            decade *= 10.0;
        }
        ticks = v;
    }
    ticks
}

/// `512`, `2k`, `1.5M`: integers below 10,000, SI suffixes above, no trailing `.0`.
fn format_tick(v: f64) -> String {
    let (x, unit) = match v.abs() {
        a if a >= 1e12 => (v / 1e12, "T"),
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e4 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let s = if (x - x.round()).abs() < 1e-9 {
        format!("{}", x.round() as i64)
    } else if x.abs() >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    };
    format!("{s}{unit}")
}

/// The file name of `path`, cut in the middle to at most `max` characters.
fn short_name(path: &str, max: usize) -> String {
    let name = path.rsplit(['/', '\\']).next().unwrap_or(path);
    let chars: Vec<char> = name.chars().collect();
    if chars.len() <= max {
        return name.to_owned();
    }
    let keep = max.saturating_sub(1) / 2;
    let head: String = chars[..keep].iter().collect();
    let tail: String = chars[chars.len() - keep..].iter().collect();
    format!("{head}…{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_unique_and_inside_the_range() {
        for (lo, hi, base) in [
            (0.6, 410.0, 2.0),
            (0.625, 1.6, 2.0),
            (5.0, 2e5, 10.0),
            (150.0, 700.0, 10.0),
            (0.5, 3e6, 2.0),
        ] {
            let t = log_ticks(lo, hi, base);
            assert!(!t.is_empty(), "{lo}..{hi}");
            assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
            assert!(t.iter().all(|x| (lo..=hi).contains(x)), "{t:?}");
            assert!(t.len() <= 12, "{t:?}");
            let labels: Vec<String> = t.iter().map(|x| format_tick(*x)).collect();
            let mut dedup = labels.clone();
            dedup.dedup();
            assert_eq!(labels, dedup);
        }
        assert_eq!(log_ticks(150.0, 700.0, 10.0), vec![200.0, 500.0]);
        assert_eq!(
            log_ticks(150.0, 1.2e5, 10.0),
            vec![200.0, 500.0, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5]
        );
        assert_eq!(log_ticks(0.5, 2e6, 10.0).len(), 7);
        assert_eq!(
            curve_batches(1.0, 4.0),
            vec![1, 2, 3, 4],
            "integer batches, each once"
        );
        let c = curve_batches(1.0, 1e6);
        assert!(c.windows(2).all(|w| w[0] < w[1]) && c.len() > 40, "{c:?}");
        assert_eq!((c[0], c[c.len() - 1]), (1, 1_000_000));
        assert_eq!(format_tick(10.0), "10");
        assert_eq!(format_tick(65536.0), "65.5k");
        assert_eq!(format_tick(20000.0), "20k");
        assert_eq!(
            short_name("/a/b/hf-llama3-8b-npl1.json.gz", 30),
            "hf-llama3-8b-npl1.json.gz"
        );
        assert_eq!(short_name("abcdefghij", 5).chars().count(), 5);
    }
}
