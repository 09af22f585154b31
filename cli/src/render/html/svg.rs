//! SVG pieces the charts share: the frame (canvas and plot area), axes with round ticks,
//! and a chart of horizontal bars (floating ones make the diff's waterfall).

use super::{escape, style};

/// A canvas and the plot area inside its margins, pixels.
pub struct Frame {
    pub width: f64,
    pub height: f64,
    pub left: f64,
    pub right: f64,
    pub top: f64,
    pub bottom_margin: f64,
}

impl Frame {
    pub fn new(width: f64, height: f64, left: f64, right: f64, top: f64, bottom: f64) -> Self {
        Self {
            width,
            height,
            left,
            right,
            top,
            bottom_margin: bottom,
        }
    }

    pub fn plot_w(&self) -> f64 {
        (self.width - self.left - self.right).max(1.0)
    }

    pub fn plot_h(&self) -> f64 {
        (self.height - self.top - self.bottom_margin).max(1.0)
    }

    /// The plot area's lower edge.
    pub fn bottom(&self) -> f64 {
        self.height - self.bottom_margin
    }
}

/// A coordinate with at most one decimal.
pub fn fmt_px(v: f64) -> String {
    let r = (v * 10.0).round() / 10.0;
    if r == r.trunc() {
        format!("{}", r as i64)
    } else {
        format!("{r:.1}")
    }
}

/// The opening tag of an inline SVG chart; `label` is its accessible name.
pub fn svg_open(f: &Frame, label: &str) -> String {
    format!(
        "<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\" aria-label=\"{}\" \
         font-family=\"system-ui,-apple-system,Segoe UI,Roboto,Helvetica,Arial,sans-serif\">\n",
        escape(label),
        w = fmt_px(f.width),
        h = fmt_px(f.height),
    )
}

/// The horizontal axis' title, centred under the plot, its baseline `above` pixels over the
/// canvas' lower edge.
pub fn x_title(f: &Frame, title: &str, above: f64) -> String {
    format!(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"12\" fill=\"{}\">{}</text>\n",
        fmt_px(f.left + f.plot_w() / 2.0),
        fmt_px(f.height - above),
        style::AXIS,
        escape(title)
    )
}

pub fn svg_close() -> String {
    "</svg>\n".to_owned()
}

/// A round step (1, 2 or 5 times a power of ten) near `raw`; 1 for a value that is not
/// positive and finite.
pub fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    let m = raw / p;
    let k = if m <= 1.0 {
        1.0
    } else if m <= 2.0 {
        2.0
    } else if m <= 5.0 {
        5.0
    } else {
        10.0
    };
    k * p
}

/// A tick label: the value with the decimals its step needs.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = (0..9)
        .find(|&d| {
            let x = step * 10f64.powi(d);
            (x - x.round()).abs() < 1e-6
        })
        .unwrap_or(9) as usize;
    format!("{v:.decimals$}")
}

/// The vertical axis from 0 to `max` (rounded up to a tick): grid lines, labels and the
/// unit. Returns the axis top.
pub fn axis_y(s: &mut String, f: &Frame, max: f64, unit: &str) -> f64 {
    let step = nice_step(max / 5.0);
    let top = ((max / step).ceil() * step).max(step);
    let mut v = 0.0;
    while v <= top + step / 2.0 {
        let y = f.bottom() - v / top * f.plot_h();
        s.push_str(&format!(
            "<line x1=\"{l}\" y1=\"{y}\" x2=\"{r}\" y2=\"{y}\" stroke=\"{g}\"/>\
             <text x=\"{tx}\" y=\"{ty}\" text-anchor=\"end\" font-size=\"12\" fill=\"{a}\">{t}</text>\n",
            l = fmt_px(f.left),
            r = fmt_px(f.left + f.plot_w()),
            y = fmt_px(y),
            tx = fmt_px(f.left - 6.0),
            ty = fmt_px(y + 4.0),
            g = style::GRID,
            a = style::AXIS,
            t = tick_label(v, step)
        ));
        v += step;
    }
    s.push_str(&format!(
        "<line x1=\"{l}\" y1=\"{t}\" x2=\"{l}\" y2=\"{b}\" stroke=\"{a}\"/>\
         <line x1=\"{l}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"{a}\"/>\
         <text x=\"14\" y=\"{my}\" text-anchor=\"middle\" font-size=\"12\" fill=\"{a}\" \
         transform=\"rotate(-90 14 {my})\">{unit}</text>\n",
        l = fmt_px(f.left),
        r = fmt_px(f.left + f.plot_w()),
        t = fmt_px(f.top),
        b = fmt_px(f.bottom()),
        my = fmt_px(f.top + f.plot_h() / 2.0),
        a = style::AXIS,
        unit = escape(unit)
    ));
    top
}

/// One horizontal bar from `start` to `end` (in the axis unit), with its label on the
/// left, `text` after its end and `tip` as hover text.
pub struct HBar {
    pub label: String,
    pub start: f64,
    pub end: f64,
    pub colour: &'static str,
    pub text: String,
    pub tip: String,
}

const ROW: f64 = 26.0;
const LABEL_W: f64 = 170.0;

/// Horizontal bars, one per row, on a common axis (which starts at 0, or below when a bar
/// does); with `connect`, a dashed line joins each bar's end to the next bar's start (a
/// waterfall).
pub fn hbars(bars: &[HBar], unit: &str, connect: bool) -> String {
    let lo = bars
        .iter()
        .flat_map(|b| [b.start, b.end])
        .fold(0.0, f64::min);
    let hi = bars
        .iter()
        .flat_map(|b| [b.start, b.end])
        .fold(0.0, f64::max);
    let step = nice_step((hi - lo) / 8.0);
    let (lo, hi) = (
        (lo / step).floor() * step,
        ((hi / step).ceil() * step).max(step),
    );
    let height = 12.0 + ROW * bars.len() as f64 + 40.0;
    let f = Frame::new(1200.0, height, LABEL_W, 90.0, 12.0, 40.0);
    let x = |v: f64| f.left + (v - lo) / (hi - lo) * f.plot_w();
    let mut s = svg_open(&f, &format!("bars, {unit}"));
    let mut v = lo;
    while v <= hi + step / 2.0 {
        s.push_str(&format!(
            "<line x1=\"{x}\" y1=\"{t}\" x2=\"{x}\" y2=\"{b}\" stroke=\"{g}\"/>\
             <text x=\"{x}\" y=\"{ty}\" text-anchor=\"middle\" font-size=\"12\" fill=\"{a}\">{l}</text>\n",
            x = fmt_px(x(v)),
            t = fmt_px(f.top),
            b = fmt_px(f.bottom()),
            ty = fmt_px(f.bottom() + 16.0),
            g = if v == 0.0 { style::AXIS } else { style::GRID },
            a = style::AXIS,
            l = tick_label(v, step)
        ));
        v += step;
    }
    s.push_str(&x_title(&f, unit, 4.0));
    for (i, b) in bars.iter().enumerate() {
        let y = f.top + ROW * i as f64;
        let (x0, x1) = (x(b.start.min(b.end)), x(b.start.max(b.end)));
        s.push_str(&format!(
            "<g class=\"bar\"><title>{tip}</title>\
             <text x=\"{lx}\" y=\"{ty}\" text-anchor=\"end\" font-size=\"13\" fill=\"#1f2328\">{label}</text>\
             <rect x=\"{x0}\" y=\"{ry}\" width=\"{w}\" height=\"18\" fill=\"{c}\" rx=\"2\"/>\
             <text x=\"{vx}\" y=\"{ty}\" font-size=\"12\" fill=\"{a}\">{text}</text></g>\n",
            tip = escape(&b.tip),
            lx = fmt_px(f.left - 8.0),
            ty = fmt_px(y + 17.0),
            label = escape(&b.label),
            x0 = fmt_px(x0),
            ry = fmt_px(y + 4.0),
            w = fmt_px((x1 - x0).max(1.0)),
            c = b.colour,
            vx = fmt_px(x1 + 6.0),
            a = style::AXIS,
            text = escape(&b.text)
        ));
        if connect && i + 1 < bars.len() {
            s.push_str(&format!(
                "<line x1=\"{x}\" y1=\"{y0}\" x2=\"{x}\" y2=\"{y1}\" stroke=\"{a}\" stroke-dasharray=\"3 3\"/>\n",
                x = fmt_px(x(b.end)),
                y0 = fmt_px(y + 22.0),
                y1 = fmt_px(y + ROW + 4.0),
                a = style::AXIS
            ));
        }
    }
    s.push_str(&svg_close());
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_are_round() {
        assert_eq!(nice_step(0.37), 0.5);
        assert_eq!(nice_step(12.0), 20.0);
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(f64::NAN), 1.0);
        assert_eq!(tick_label(0.25, 0.05), "0.25");
        assert_eq!(tick_label(20.0, 10.0), "20");
        assert_eq!(fmt_px(3.04), "3");
        assert_eq!(fmt_px(3.06), "3.1");
    }
}
