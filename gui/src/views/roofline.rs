//! The roofline: step time against batch on log-log axes with decade grid lines, the
//! weight-read, KV-read and compute floors as lines, the measured decode steps and their
//! buckets as labelled points, a batch slider, and the hardware from the built-in table or
//! a calibration profile. Figures are the analyzer's `RooflineReport`.

use std::path::PathBuf;

use egui::{Color32, Ui};
use gapscope_analyzer::roofline::report::{
    BatchSource, ContextChoice, RooflineReport, TpChoice, TraceAtBatch, roofline_at,
};
use gapscope_analyzer::roofline::{HardwareSpec, MAX_TP, ModelSpec, WeightFormat, hw};

use super::{format, roofline_chart, roofline_text};
use crate::loader::Loaded;

/// The context the floors are taken at when neither the user nor the trace says.
pub const DEFAULT_CTX: u64 = 4096;

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
    /// The context asked for (`--ctx`, or set in the view); `None`: the trace's own, else
    /// [`DEFAULT_CTX`], said to be assumed.
    pub ctx: Option<u64>,
    /// The tensor-parallel degree asked for (`--tp`, or set in the view); `None`: the
    /// trace's rank count, else 1, said to be assumed.
    pub tp: Option<u64>,
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
            ctx: None,
            tp: None,
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
        let label = ui.label("batch").id;
        ui.add(egui::Slider::new(&mut st.batch, 1..=256).logarithmic(true))
            .labelled_by(label);
        let label = ui.label("context").id;
        let mut ctx = st.ctx.unwrap_or(DEFAULT_CTX);
        if ui
            .add(egui::DragValue::new(&mut ctx).range(0..=1_000_000))
            .labelled_by(label)
            .on_hover_text("tokens in the KV cache per sequence; the trace's own when it says")
            .changed()
        {
            st.ctx = Some(ctx);
        }
        if st.ctx.is_some() && ui.small_button("from the trace").clicked() {
            st.ctx = None;
        }
        let label = ui.label("TP").id;
        let mut tp = st.tp.unwrap_or(1);
        if ui
            .add(egui::DragValue::new(&mut tp).range(1..=MAX_TP))
            .labelled_by(label)
            .on_hover_text(
                "tensor-parallel degree: the floors are one rank's (1/N of the linear weights and of the KV cache, at least one KV head); the trace's rank count when it says",
            )
            .changed()
        {
            st.tp = Some(tp);
        }
        if st.tp.is_some() && ui.small_button("from the trace's ranks").clicked() {
            st.tp = None;
        }
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
    let choice = ContextChoice::new(st.ctx, DEFAULT_CTX);
    let r = roofline_at(
        &model,
        &hardware,
        st.weights,
        &batches,
        choice,
        TpChoice::new(st.tp),
        &traces,
    );
    summary(ui, &r, st.batch);
    roofline_chart::chart(ui, &r, st.batch);
}

fn summary(ui: &mut Ui, r: &RooflineReport, batch: u64) {
    if let Some(f) = r.floors.iter().find(|f| f.batch == batch) {
        ui.label(format!(
            "{} on {} · batch {batch} · {} · {}: floor {} ({}-bound; weights {}, KV {}, compute {}) · crossover batch {:.0}",
            if r.model.model_type.is_empty() { "model" } else { &r.model.model_type },
            r.hardware.name,
            roofline_text::context_label(r.ctx, r.ctx_source),
            roofline_text::tp_label(r.tp, r.tp_source, r.kv_heads_per_rank, r.model.kv_heads),
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
            "{}: {} at batch {} · {}",
            m.trace,
            roofline_text::floor_headline(m.tpot_median_ms, m.floor_ms, m.pct_of_floor_median),
            m.batch,
            roofline_text::context_label(m.ctx, m.ctx_source)
        ));
    }
    for n in &r.not_placed {
        ui.label(format!("{}: not placed ({})", n.trace, n.reason));
    }
}
