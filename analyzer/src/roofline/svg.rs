//! The roofline chart: log-log tok/s against batch, with the memory roof (weights + KV),
//! the compute roof, the combined ceiling and the measured steps.

use plotters::prelude::*;

use super::report::RooflineReport;
use crate::error::{AnalyzerError, Result};

/// Renders the report as an SVG document.
pub fn render(r: &RooflineReport) -> Result<String> {
    let err = |e: String| AnalyzerError::Invalid(format!("rendering the roofline SVG: {e}"));
    let mut out = String::new();
    let pts = |f: &dyn Fn(&super::StepFloor) -> f64| -> Vec<(f64, f64)> {
        r.floors
            .iter()
            .map(|s| (s.batch.max(1) as f64, f(s)))
            .collect()
    };
    let memory = pts(&|s| s.batch as f64 / (s.weight_floor_s + s.kv_floor_s));
    let compute = pts(&|s| s.batch as f64 / s.compute_floor_s.max(1e-12));
    let ceiling = pts(&|s| s.max_tok_per_s);
    let measured: Vec<(f64, f64)> = r
        .measured
        .iter()
        .map(|m| (m.batch.max(1) as f64, m.tok_per_s.max(1e-3)))
        .collect();
    let xs = memory.iter().chain(&measured).map(|p| p.0);
    let ys = ceiling.iter().chain(&measured).chain(&memory).map(|p| p.1);
    let (x0, x1) = xs.fold((f64::MAX, f64::MIN), |a, x| (a.0.min(x), a.1.max(x)));
    let (y0, y1) = ys.fold((f64::MAX, f64::MIN), |a, y| (a.0.min(y), a.1.max(y)));
    if !(x0.is_finite() && x1.is_finite() && y0.is_finite() && y1.is_finite()) {
        return Err(err("nothing to plot (no batches)".into()));
    }
    {
        let root = SVGBackend::with_string(&mut out, (900, 560)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| err(e.to_string()))?;
        let title = format!(
            "{} {:?} on {} (ctx {}, {:?} ceilings), M* = {:.0}",
            r.model.model_type, r.weights, r.hardware.name, r.ctx, r.ceilings, r.crossover_batch
        );
        let mut c = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(
                ((x0 / 1.5).max(0.5)..x1 * 1.5).log_scale(),
                ((y0 / 2.0).max(1e-3)..y1 * 2.0).log_scale(),
            )
            .map_err(|e| err(e.to_string()))?;
        c.configure_mesh()
            .x_desc("batch (sequences)")
            .y_desc("tokens/s")
            .draw()
            .map_err(|e| err(e.to_string()))?;
        // Wide pale roofs under a thin black floor, so the floor stays visible where it
        // coincides with one of them.
        type Line<'a> = (&'a str, &'a [(f64, f64)], RGBColor, u32);
        let series: [Line; 3] = [
            (
                "memory roof (weights + KV)",
                &memory,
                RGBColor(120, 170, 220),
                7,
            ),
            ("compute roof", &compute, RGBColor(230, 120, 120), 7),
            ("floor (max tok/s)", &ceiling, RGBColor(0, 0, 0), 2),
        ];
        for (name, data, color, width) in series {
            c.draw_series(LineSeries::new(
                data.iter().copied(),
                color.stroke_width(width),
            ))
            .map_err(|e| err(e.to_string()))?
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color));
        }
        let green = RGBColor(44, 160, 44);
        c.draw_series(measured.iter().map(|&p| Circle::new(p, 6, green.filled())))
            .map_err(|e| err(e.to_string()))?
            .label("measured decode steps")
            .legend(move |(x, y)| Circle::new((x + 10, y), 5, green.filled()));
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| err(e.to_string()))?;
        root.present().map_err(|e| err(e.to_string()))?;
    }
    Ok(out)
}
