//! The roofline: step time against batch on log-log axes with decade grid lines, the
//! weight-read, KV-read and compute floors as lines, the measured decode steps and their
//! buckets as labelled points, a batch slider, and the hardware from the built-in table or
//! a calibration profile. Figures are the analyzer's `RooflineReport`.

use std::path::PathBuf;

use egui::{Align2, Color32, FontId, Pos2, Rect, Sense, Stroke, Ui, Vec2};
use gapscope_analyzer::roofline::report::{BatchSource, RooflineReport, TraceAtBatch, roofline_of};
use gapscope_analyzer::roofline::{HardwareSpec, ModelSpec, WeightFormat, hw};

use super::format;
use crate::loader::Loaded;
use crate::palette;

const BATCHES: [u64; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

pub struct RooflineState {
    pub model_path: Option<PathBuf>,
    pub model: Option<Result<ModelSpec, String>>,
    /// Built-in hardware id, or empty for the trace's GPU.
    pub hw_id: String,
    pub profile_path: Option<PathBuf>,
    pub profile: Option<Result<HardwareSpec, String>>,
    pub weights: WeightFormat,
    pub batch: u64,
    pub ctx: u64,
    model_text: String,
    profile_text: String,
}

impl Default for RooflineState {
    fn default() -> Self {
        Self {
            model_path: None,
            model: None,
            hw_id: String::new(),
            profile_path: None,
            profile: None,
            weights: WeightFormat::Bf16,
            batch: 1,
            ctx: 4096,
            model_text: String::new(),
            profile_text: String::new(),
        }
    }
}

impl RooflineState {
    pub fn set_model(&mut self, p: PathBuf) {
        self.model = Some(ModelSpec::load(&p).map_err(|e| crate::loader::one_line(&e.to_string())));
        self.model_text = p.display().to_string();
        self.model_path = Some(p);
    }
    pub fn set_profile(&mut self, p: PathBuf) {
        self.profile =
            Some(hw::load_profile(&p).map_err(|e| crate::loader::one_line(&e.to_string())));
        self.profile_text = p.display().to_string();
        self.profile_path = Some(p);
    }

    fn hardware(&self, docs: &[&Loaded]) -> Result<HardwareSpec, String> {
        if let Some(p) = &self.profile {
            return p.clone();
        }
        if !self.hw_id.is_empty() {
            return hw::lookup(&self.hw_id).map_err(|e| e.to_string());
        }
        let gpu = docs.iter().find_map(|l| l.x.report.source.step_gpu.clone());
        match gpu {
            Some(g) => hw::lookup(&g).map_err(|e| crate::loader::one_line(&e.to_string())),
            None => Err("the traces name no GPU: choose one".into()),
        }
    }
}

pub fn show(ui: &mut Ui, st: &mut RooflineState, docs: &[&Loaded]) {
    ui.horizontal_wrapped(|ui| {
        ui.label("model config.json");
        let r = ui.add(
            egui::TextEdit::singleline(&mut st.model_text)
                .desired_width(240.0)
                .hint_text("path to a Hugging Face config.json"),
        );
        if r.lost_focus()
            && ui.input(|i| i.key_pressed(egui::Key::Enter))
            && !st.model_text.is_empty()
        {
            st.set_model(PathBuf::from(st.model_text.clone()));
        }
        egui::ComboBox::new("roofline_hw", "GPU")
            .selected_text(if st.hw_id.is_empty() {
                "from the trace"
            } else {
                st.hw_id.as_str()
            })
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut st.hw_id, String::new(), "from the trace");
                for h in hw::builtin() {
                    ui.selectable_value(
                        &mut st.hw_id,
                        h.id.clone(),
                        format!("{} ({})", h.id, h.name),
                    );
                }
            });
        ui.label("or profile");
        let r = ui.add(
            egui::TextEdit::singleline(&mut st.profile_text)
                .desired_width(160.0)
                .hint_text("gapscope-engine calibrate output"),
        );
        if r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)) {
            if st.profile_text.is_empty() {
                st.profile = None;
            } else {
                st.set_profile(PathBuf::from(st.profile_text.clone()));
            }
        }
        egui::ComboBox::new("roofline_fmt", "weights")
            .selected_text(st.weights.as_str())
            .show_ui(ui, |ui| {
                for f in ["bf16", "fp8", "q8_0", "q4_0", "q4_k", "nvfp4", "mxfp4"] {
                    if let Some(w) = WeightFormat::parse(f) {
                        ui.selectable_value(&mut st.weights, w, f);
                    }
                }
            });
        ui.label("batch");
        ui.add(egui::Slider::new(&mut st.batch, 1..=256).logarithmic(true));
        ui.label("context");
        ui.add(egui::DragValue::new(&mut st.ctx).range(0..=1_000_000));
    });
    let model = match &st.model {
        Some(Ok(m)) => m.clone(),
        Some(Err(e)) => {
            ui.colored_label(Color32::from_rgb(255, 120, 120), e);
            return;
        }
        None => {
            ui.label("The roofline needs the model's config.json: type its path above (Enter), or pass --model to gapscope-gui (models/ has some).");
            return;
        }
    };
    let hardware = match st.hardware(docs) {
        Ok(h) => h,
        Err(e) => {
            ui.colored_label(Color32::from_rgb(255, 120, 120), e);
            return;
        }
    };
    let mut batches: Vec<u64> = BATCHES.to_vec();
    if !batches.contains(&st.batch) {
        batches.push(st.batch);
        batches.sort_unstable();
    }
    let traces: Vec<TraceAtBatch> = docs
        .iter()
        .map(|l| {
            let (batch, batch_source) = BatchSource::resolve(&l.x.report, None);
            TraceAtBatch {
                report: &l.x.report,
                batch,
                batch_source,
                notes: Vec::new(),
            }
        })
        .collect();
    let r = roofline_of(&model, &hardware, st.weights, &batches, st.ctx, &traces);
    summary(ui, &r, st.batch);
    chart(ui, &r, st.batch);
}

fn summary(ui: &mut Ui, r: &RooflineReport, batch: u64) {
    if let Some(f) = r.floors.iter().find(|f| f.batch == batch) {
        ui.label(format!(
            "{} on {} · batch {batch}: floor {} ({}-bound; weights {}, KV {}, compute {}) · crossover batch {:.0}",
            if r.model.model_type.is_empty() { "model" } else { &r.model.model_type },
            r.hardware.name,
            format::ms_label(f.step_floor_s * 1e3),
            f.bound,
            format::ms_label(f.weight_floor_s * 1e3),
            format::ms_label(f.kv_floor_s * 1e3),
            format::ms_label(f.compute_floor_s * 1e3),
            r.crossover_batch
        ));
    }
    for m in &r.measured {
        ui.label(format!(
            "{}: median TPOT {} at batch {} = {:.0}% of floor",
            m.trace,
            format::ms_label(m.tpot_median_ms),
            m.batch,
            m.pct_of_floor_median
        ));
    }
    for n in &r.not_placed {
        ui.label(format!("{}: not placed ({})", n.trace, n.reason));
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "immediate-mode UI: axes, ceilings, points and labels painted onto one chart"
)]
fn chart(ui: &mut Ui, r: &RooflineReport, batch: u64) {
    let (rect, _) = ui.allocate_exact_size(
        ui.available_size().max(Vec2::new(200.0, 160.0)),
        Sense::hover(),
    );
    let p = ui.painter_at(rect);
    p.rect_filled(rect, 0.0, Color32::from_gray(18));
    let plot = Rect::from_min_max(
        rect.min + Vec2::new(70.0, 14.0),
        rect.max - Vec2::new(150.0, 30.0),
    );
    // Decades covering every floor and point, in ms.
    let mut ys: Vec<f64> = r
        .floors
        .iter()
        .flat_map(|f| {
            [
                f.step_floor_s * 1e3,
                f.weight_floor_s * 1e3,
                f.kv_floor_s * 1e3,
                f.compute_floor_s * 1e3,
            ]
        })
        .collect();
    for m in &r.measured {
        ys.push(m.tpot_median_ms);
        ys.extend(m.buckets.iter().flat_map(|b| [b.ms_per_step, b.floor_ms]));
    }
    ys.retain(|v| *v > 0.0 && v.is_finite());
    let (ylo, yhi) = ys
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    if ys.is_empty() {
        return;
    }
    let (d0, d1) = (
        ylo.log10().floor(),
        yhi.log10().ceil().max(ylo.log10().floor() + 1.0),
    );
    let bmax = r.floors.iter().map(|f| f.batch).max().unwrap_or(1).max(2) as f64;
    let x = |b: f64| plot.left() + (b.log2() / bmax.log2()) as f32 * plot.width();
    let y = |v: f64| plot.bottom() - ((v.log10() - d0) / (d1 - d0)) as f32 * plot.height();
    let font = FontId::monospace(10.0);
    let grid = Color32::from_gray(50);
    let mut d = d0;
    while d <= d1 + 1e-9 {
        let v = 10f64.powf(d);
        p.line_segment(
            [Pos2::new(plot.left(), y(v)), Pos2::new(plot.right(), y(v))],
            Stroke::new(1.0, grid),
        );
        p.text(
            Pos2::new(plot.left() - 4.0, y(v)),
            Align2::RIGHT_CENTER,
            format!("{} ms", trim(v)),
            font.clone(),
            Color32::from_gray(180),
        );
        for k in 2..10 {
            let vv = v * k as f64;
            if vv.log10() < d1 {
                p.line_segment(
                    [
                        Pos2::new(plot.left(), y(vv)),
                        Pos2::new(plot.left() + 4.0, y(vv)),
                    ],
                    Stroke::new(1.0, grid),
                );
            }
        }
        d += 1.0;
    }
    let mut b = 1.0;
    while b <= bmax {
        p.line_segment(
            [Pos2::new(x(b), plot.top()), Pos2::new(x(b), plot.bottom())],
            Stroke::new(1.0, Color32::from_gray(35)),
        );
        p.text(
            Pos2::new(x(b), plot.bottom() + 3.0),
            Align2::CENTER_TOP,
            format!("{b}"),
            font.clone(),
            Color32::from_gray(180),
        );
        b *= 2.0;
    }
    p.text(
        Pos2::new(plot.center().x, rect.bottom() - 2.0),
        Align2::CENTER_BOTTOM,
        "batch (sequences per decode step)",
        font.clone(),
        Color32::from_gray(160),
    );
    let lines: [FloorLine; 4] = [
        (
            "weight-read floor",
            Color32::from_rgb(0x1f, 0x77, 0xb4),
            |f| f.weight_floor_s,
        ),
        ("KV-read floor", Color32::from_rgb(0x2c, 0xa0, 0x2c), |f| {
            f.kv_floor_s
        }),
        ("compute floor", Color32::from_rgb(0xd6, 0x27, 0x28), |f| {
            f.compute_floor_s
        }),
        ("step floor", Color32::WHITE, |f| f.step_floor_s),
    ];
    for (k, (name, c, get)) in lines.iter().enumerate() {
        let pts: Vec<Pos2> = r
            .floors
            .iter()
            .filter(|f| get(f) > 0.0)
            .map(|f| Pos2::new(x(f.batch as f64), y(get(f) * 1e3)))
            .collect();
        let width = if *name == "step floor" { 2.5 } else { 1.5 };
        p.add(egui::Shape::line(pts, Stroke::new(width, *c)));
        p.text(
            Pos2::new(plot.right() + 8.0, plot.top() + 14.0 * k as f32),
            Align2::LEFT_TOP,
            *name,
            font.clone(),
            *c,
        );
    }
    // The slider's batch.
    p.line_segment(
        [
            Pos2::new(x(batch as f64), plot.top()),
            Pos2::new(x(batch as f64), plot.bottom()),
        ],
        Stroke::new(1.0, Color32::from_rgb(255, 210, 0)),
    );
    // Measured steps and their buckets.
    for (k, m) in r.measured.iter().enumerate() {
        let at = Pos2::new(x(m.batch as f64), y(m.tpot_median_ms));
        p.circle_filled(at, 5.0, Color32::from_rgb(255, 210, 0));
        p.text(
            at + Vec2::new(8.0, -2.0 - 12.0 * k as f32),
            Align2::LEFT_BOTTOM,
            format!(
                "{} {:.0}% of floor",
                format::cut(file_name(&m.trace), 28),
                m.pct_of_floor_median
            ),
            font.clone(),
            Color32::from_rgb(255, 210, 0),
        );
        // Labels that would overlap one already placed are left out (the point stays).
        let mut placed: Vec<Rect> = Vec::new();
        for (j, bf) in m.buckets.iter().enumerate() {
            if bf.ms_per_step <= 0.0 {
                continue;
            }
            let c = palette::bucket_of(bf.bucket);
            let bx = x(m.batch as f64) + 14.0 + 10.0 * j as f32;
            let pt = Pos2::new(bx, y(bf.ms_per_step));
            p.circle_filled(pt, 3.5, c);
            if bf.floor_ms > 0.0 {
                p.line_segment(
                    [
                        Pos2::new(bx - 4.0, y(bf.floor_ms)),
                        Pos2::new(bx + 4.0, y(bf.floor_ms)),
                    ],
                    Stroke::new(1.5, c),
                );
            }
            let label = format!("{} {:.0}% of floor", bf.bucket.as_str(), bf.pct_of_floor);
            let area = Rect::from_min_size(
                pt + Vec2::new(5.0, -6.0),
                Vec2::new(label.len() as f32 * 5.6, 12.0),
            );
            if placed.iter().all(|r| !r.intersects(area)) {
                placed.push(area);
                p.text(
                    pt + Vec2::new(5.0, 0.0),
                    Align2::LEFT_CENTER,
                    label,
                    FontId::proportional(9.5),
                    c,
                );
            }
        }
    }
}

/// A floor line: its name, colour and value per batch (s).
type FloorLine = (
    &'static str,
    Color32,
    fn(&gapscope_analyzer::roofline::StepFloor) -> f64,
);

fn file_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn trim(v: f64) -> String {
    if v >= 1.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}
