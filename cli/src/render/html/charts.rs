//! The report's charts as inline SVG: one stacked bar per step (GPU time by bucket, the
//! idle inside the step on top), and one bar per bucket (ms/step). Each bar carries a
//! `<title>` (the browser's hover text) with its figures.

use gapscope_analyzer::Bucket;
use gapscope_analyzer::analysis::Report;
use gapscope_analyzer::explore::step_view::{StepView, views};
use gapscope_analyzer::tables::Tables;

use super::svg::{Frame, axis_y, fmt_px, svg_close, svg_open};
use super::tables::swatch;
use super::{escape, style};
use crate::render::ms;

const NB: usize = Bucket::ALL.len();
/// Above this many steps, consecutive steps share a bar (their mean).
pub const MAX_BARS: usize = 1200;

/// One bar of the step chart: a step, or the mean of consecutive steps.
struct Bar {
    /// The first step's number and the last one's, as the report numbers its steps
    /// (`report --step N`, the steps table's `report_step`): from 0, in time order.
    first: i64,
    last: i64,
    phase: &'static str,
    bucket_ms: [f64; NB],
    idle_ms: f64,
    stall: bool,
}

impl Bar {
    fn stacked(&self) -> f64 {
        self.bucket_ms.iter().sum::<f64>() + self.idle_ms
    }

    fn of(v: &[(i64, &StepView)]) -> Self {
        let n = v.len().max(1) as f64;
        let mut bucket_ms = [0.0; NB];
        for (_, s) in v {
            for (o, x) in bucket_ms.iter_mut().zip(s.bucket_ms) {
                *o += x / n;
            }
        }
        Self {
            first: v.first().map_or(0, |s| s.0),
            last: v.last().map_or(0, |s| s.0),
            phase: v.first().map_or("", |s| s.1.phase.as_str()),
            bucket_ms,
            idle_ms: v.iter().map(|s| s.1.idle_ms).sum::<f64>() / n,
            stall: v.iter().any(|s| s.1.stall),
        }
    }

    /// The hover text: which step(s), the height, then each part, largest first.
    fn title(&self) -> String {
        let head = if self.first == self.last {
            format!("{} step {}", self.phase, self.first)
        } else {
            format!("steps {} to {} (mean)", self.first, self.last)
        };
        let work: f64 = self.bucket_ms.iter().sum();
        let mut s = format!(
            "{head}: {} ms = GPU work {} ms + idle {} ms{}",
            ms(self.stacked()),
            ms(work),
            ms(self.idle_ms),
            if self.stall { " (a stall)" } else { "" }
        );
        let mut parts: Vec<(Bucket, f64)> = Bucket::ALL
            .iter()
            .map(|&b| (b, self.bucket_ms[b.index()]))
            .filter(|(_, x)| *x > 0.0)
            .collect();
        parts.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (b, x) in parts {
            s.push_str(&format!("\n{}: {} ms", b.as_str(), ms(x)));
        }
        s
    }
}

/// The report's steps (those its figures cover), one bar each, numbered as the report
/// numbers them; more than [`MAX_BARS`] steps are drawn as the means of consecutive runs of
/// steps.
fn bars(tables: &Tables) -> (Vec<Bar>, usize) {
    let all = views(tables);
    let kept: Vec<(i64, &StepView)> = tables
        .report_steps()
        .into_iter()
        .enumerate()
        .filter_map(|(n, i)| {
            let number = tables
                .steps
                .report_step
                .get(i)
                .copied()
                .filter(|&x| x >= 0)
                .unwrap_or(n as i64);
            Some((number, all.get(i)?))
        })
        .collect();
    let per_bar = kept.len().div_ceil(MAX_BARS).max(1);
    let bars = kept.chunks(per_bar).map(Bar::of).collect();
    (bars, per_bar)
}

/// The per-step stacked chart with its legend and caption; when idle is most of the
/// steps' time, a second chart of the GPU work alone (so its buckets can be read). A line
/// saying why there is none when the report covers no step.
pub fn steps(report: &Report, tables: &Tables) -> String {
    let (bars, per_bar) = bars(tables);
    if bars.is_empty() {
        return "<p class=\"sub\">No per-step chart: no steps were found.</p>\n".to_owned();
    }
    let stalls = bars.iter().any(|b| b.stall);
    let mut s = format!(
        "<figure>\n{}{}<figcaption>{}</figcaption>\n</figure>\n",
        legend(&used(report), true, stalls),
        stacked(&bars, per_bar, true),
        escape(&caption(report, bars.len(), per_bar))
    );
    let idle: f64 = bars.iter().map(|b| b.idle_ms).sum();
    let total: f64 = bars.iter().map(Bar::stacked).sum();
    if idle > 0.5 * total {
        s.push_str(&format!(
            "<figure>\n{}<figcaption>The same steps without the idle: GPU time per bucket \
             alone ({} of the bars above is idle).</figcaption>\n</figure>\n",
            stacked(&bars, per_bar, false),
            crate::render::pct(100.0 * idle / total.max(f64::MIN_POSITIVE))
        ));
    }
    s
}

/// The stacked bars as SVG: each bar's buckets from the bottom, its idle on top when
/// `with_idle`. Bars are `<g class="step">` (`step-bin` for means of several steps), or
/// `work` (`work-bin`) without the idle.
fn stacked(bars: &[Bar], per_bar: usize, with_idle: bool) -> String {
    let f = Frame::new(
        1200.0,
        if with_idle { 380.0 } else { 300.0 },
        64.0,
        16.0,
        14.0,
        46.0,
    );
    let height = |b: &Bar| {
        if with_idle {
            b.stacked()
        } else {
            b.stacked() - b.idle_ms
        }
    };
    let top = bars.iter().map(height).fold(0.0, f64::max);
    let mut s = svg_open(
        &f,
        &format!(
            "{} steps, GPU time by bucket{}",
            bars.len(),
            if with_idle { " and idle" } else { "" }
        ),
    );
    let y_top = axis_y(&mut s, &f, top, "ms");
    let slot = f.plot_w() / bars.len() as f64;
    let width = if slot >= 4.0 { slot * 0.8 } else { slot };
    let scale = |x: f64| x / y_top * f.plot_h();
    let class = match (with_idle, per_bar == 1) {
        (true, true) => "step",
        (true, false) => "step-bin",
        (false, true) => "work",
        (false, false) => "work-bin",
    };
    for (i, b) in bars.iter().enumerate() {
        let x = f.left + slot * i as f64 + (slot - width) / 2.0;
        s.push_str(&format!(
            "<g class=\"{class}\" data-step=\"{}\"><title>{}</title>",
            b.first,
            escape(&b.title())
        ));
        let mut y = f.bottom();
        let idle = if b.stall { style::STALL } else { style::IDLE };
        let parts = Bucket::ALL
            .iter()
            .map(|&k| (b.bucket_ms[k.index()], style::bucket(k)))
            .chain(with_idle.then_some((b.idle_ms, idle)));
        for (v, colour) in parts {
            if v <= 0.0 {
                continue;
            }
            let h = scale(v);
            y -= h;
            s.push_str(&format!(
                "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{colour}\"/>",
                fmt_px(x),
                fmt_px(y),
                fmt_px(width),
                fmt_px(h)
            ));
        }
        s.push_str("</g>\n");
    }
    x_ticks(&mut s, &f, bars, slot);
    s.push_str(&svg_close());
    s
}

/// What the bars show.
fn caption(report: &Report, bars: usize, per_bar: usize) -> String {
    let what = match report.bucket_scope {
        gapscope_analyzer::analysis::BucketScope::TrainingIterations => "training iteration",
        gapscope_analyzer::analysis::BucketScope::AllSteps => "step",
        _ => "decode step",
    };
    let grouped = if per_bar > 1 {
        format!(" ({bars} bars: each the mean of {per_bar} consecutive steps)")
    } else {
        String::new()
    };
    format!(
        "One bar per {what}{grouped}, in time order: GPU time per bucket (concurrent kernels \
         both count), then the GPU idle between the step's first and last activity on top. \
         Hover a bar for its figures."
    )
}

/// Step numbers under the bars: about ten, at round intervals.
fn x_ticks(s: &mut String, f: &Frame, bars: &[Bar], slot: f64) {
    let every = super::svg::nice_step(bars.len() as f64 / 10.0).max(1.0) as usize;
    for (i, b) in bars.iter().enumerate() {
        if i % every != 0 {
            continue;
        }
        let x = f.left + slot * (i as f64 + 0.5);
        s.push_str(&format!(
            "<line x1=\"{x}\" y1=\"{y}\" x2=\"{x}\" y2=\"{y2}\" stroke=\"{a}\"/>\
             <text x=\"{x}\" y=\"{ty}\" text-anchor=\"middle\" font-size=\"12\" fill=\"{a}\">{n}</text>\n",
            x = fmt_px(x),
            y = fmt_px(f.bottom()),
            y2 = fmt_px(f.bottom() + 4.0),
            ty = fmt_px(f.bottom() + 18.0),
            a = style::AXIS,
            n = b.first
        ));
    }
    s.push_str(&format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" fill=\"{}\">step</text>\n",
        fmt_px(f.left + f.plot_w() / 2.0),
        fmt_px(f.height - 6.0),
        style::AXIS
    ));
}

/// The buckets with time in the report's steps, in [`Bucket::ALL`] order.
fn used(report: &Report) -> Vec<Bucket> {
    Bucket::ALL
        .iter()
        .copied()
        .filter(|b| {
            report
                .buckets
                .iter()
                .any(|r| r.bucket == *b && (r.calls > 0 || r.total_ms > 0.0))
        })
        .collect()
}

/// The colour legend: the buckets given, then idle (and stalls) when asked.
pub fn legend(buckets: &[Bucket], idle: bool, stalls: bool) -> String {
    let mut s = String::from("<div class=\"legend\">");
    for b in buckets {
        s.push_str(&format!(
            "<span>{}{}</span>",
            swatch(style::bucket(*b)),
            b.as_str()
        ));
    }
    if idle {
        s.push_str(&format!("<span>{}idle</span>", swatch(style::IDLE)));
    }
    if stalls {
        s.push_str(&format!(
            "<span>{}idle of a stalled step</span>",
            swatch(style::STALL)
        ));
    }
    s.push_str("</div>\n");
    s
}

/// Horizontal bars: ms/step per bucket (the median the bucket table shows), largest first,
/// then the idle inside and between the steps for scale.
pub fn bucket_bars(report: &Report) -> String {
    let mut rows: Vec<(String, f64, &str, String)> = report
        .buckets
        .iter()
        .filter_map(|b| {
            let m = b.ms_per_step?.median;
            (m > 0.0).then(|| {
                let tip = format!(
                    "{}: median {} ms/step (p10 {}, p90 {}), {} of the GPU's busy time",
                    b.bucket.as_str(),
                    ms(m),
                    b.ms_per_step.map_or(String::new(), |x| ms(x.p10)),
                    b.ms_per_step.map_or(String::new(), |x| ms(x.p90)),
                    crate::render::pct(b.share_of_busy_pct)
                );
                (
                    b.bucket.as_str().to_owned(),
                    m,
                    style::bucket(b.bucket),
                    tip,
                )
            })
        })
        .collect();
    rows.sort_by(|a, b| b.1.total_cmp(&a.1));
    let st = &report.steps;
    for (name, v) in [
        ("idle inside steps", st.launch_gap_ms_per_step),
        ("idle between steps", st.host_gap_ms_per_step),
    ] {
        if let Some(v) = v.filter(|v| *v > 0.0) {
            let tip = format!("{name}: {} ms/step (mean)", ms(v));
            rows.push((name.to_owned(), v, style::IDLE, tip));
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    let bars: Vec<super::svg::HBar> = rows
        .into_iter()
        .map(|(label, value, colour, tip)| super::svg::HBar {
            label,
            start: 0.0,
            end: value,
            colour,
            text: ms(value),
            tip,
        })
        .collect();
    format!(
        "<figure>\n{}<figcaption>ms per step by bucket (median over the steps), and the GPU's \
         idle per step (mean) for scale.</figcaption>\n</figure>\n",
        super::svg::hbars(&bars, "ms/step", false)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_analyzer::tables::StepBuckets;
    use gapscope_analyzer::tables::steps::{Cell, StepRow};

    /// `n` report steps of 1 ms GPU work (gemv) in a 3 ms window.
    fn tables(n: usize) -> Tables {
        let mut t = Tables {
            step_buckets: StepBuckets::with_steps(n),
            ..Tables::default()
        };
        let mut cells = [Cell::default(); NB];
        cells[Bucket::Gemv.index()] = Cell {
            ns: 1_000_000,
            calls: 1,
            ..Cell::default()
        };
        for i in 0..n {
            let start = i as i64 * 4_000_000;
            t.steps.push(StepRow {
                step: i as u32,
                in_report: 1,
                gpu_start_ns: start,
                gpu_end_ns: start + 3_000_000,
                gpu_first_ns: start,
                gpu_last_ns: start + 3_000_000,
                busy_ns: 1_000_000,
                ..StepRow::default()
            });
            t.step_buckets.push_step(0, i as u32, &cells);
        }
        t
    }

    #[test]
    fn one_bar_per_step_up_to_the_limit_then_means() {
        let (b, per) = bars(&tables(40));
        assert_eq!((b.len(), per), (40, 1));
        assert!((b[7].bucket_ms[Bucket::Gemv.index()] - 1.0).abs() < 1e-9);
        assert!((b[7].idle_ms - 2.0).abs() < 1e-9);
        let svg = stacked(&b, per, true);
        assert_eq!(svg.matches("<g class=\"step\" ").count(), 40);
        assert!(svg.contains("unknown step 7: 3.000 ms = GPU work 1.000 ms + idle 2.000 ms"));

        let (b, per) = bars(&tables(3000));
        assert_eq!((b.len(), per), (1000, 3));
        assert_eq!((b[1].first, b[1].last), (3, 5));
        let svg = stacked(&b, per, false);
        assert_eq!(svg.matches("<g class=\"work-bin\" ").count(), 1000);
        assert!(svg.contains("steps 3 to 5 (mean)"));
        assert!(bars(&Tables::default()).0.is_empty());
    }

    #[test]
    fn bars_carry_the_reports_step_numbers_not_the_runs_positions() {
        // A prefill outside the report, then the report's steps 0 and 1.
        let mut t = tables(3);
        t.steps.in_report[0] = 0;
        t.steps.report_step = vec![-1, 0, 1];
        let (b, _) = bars(&t);
        assert_eq!(b.iter().map(|b| b.first).collect::<Vec<_>>(), [0, 1]);
        let svg = stacked(&b, 1, true);
        assert!(svg.contains("data-step=\"0\""), "{svg}");
        assert!(!svg.contains("data-step=\"2\""));
        assert!(svg.contains("unknown step 1: "));
    }
}
