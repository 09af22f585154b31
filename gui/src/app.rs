//! The explorer window: open documents, the selected view, the shared side panel.

use std::path::PathBuf;

use egui::{Color32, RichText, Ui};
use gapscope_analyzer::roofline::WeightFormat;
use gapscope_analyzer::session::SessionSettings;

use crate::axis::AxisMode;
use crate::doc::{Doc, DocState};
use crate::file_dialog::FileDialog;
use crate::loader;
use crate::set_loader::{self, SetResult};
use crate::settings::Settings;
use crate::views::diff::DiffState;
use crate::views::kernels::KernelsState;
use crate::views::ranks::{RanksDoc, RanksState};
use crate::views::roofline::RooflineState;
use crate::views::timeline::{self, Hit, TimelineState};
use crate::views::{self, View, format};

pub struct App {
    pub docs: Vec<Doc>,
    /// Index of the document the views show.
    pub active: usize,
    pub view: View,
    pub kernels: Vec<KernelsState>,
    pub diff: DiffState,
    pub roofline: RooflineState,
    load: SessionSettings,
    step_aligned: bool,
    pending: Vec<PathBuf>,
    dialog: FileDialog,
    /// An error that belongs to no document (bad rules file, ...).
    pub notice: Option<String>,
    /// Whether the step bars stack idle time, and where the last frame drew them.
    pub steps_show_idle: bool,
    pub steps_plot: Option<egui::Rect>,
    /// `--step K`: zoom the first trace's timeline to step K once it has loaded.
    start_step: Option<usize>,
    /// The ranks of one run, when several traces opened as one.
    pub ranks: Option<RanksDoc>,
    /// `--view` was given: the ranks of one run do not switch to the ranks view.
    view_given: bool,
    /// Where the timeline's layout is kept per kind of trace (none: not kept).
    layout_dir: Option<PathBuf>,
}

impl App {
    pub fn new(s: &Settings) -> Self {
        let (load, error) = s.session_settings();
        let mut notice = error;
        let mut roofline = RooflineState::default();
        if let Some(m) = &s.model {
            roofline.set_model(m.clone());
        }
        if let Some(p) = &s.hw_profile {
            roofline.set_profile(p.clone());
        }
        if let Some(h) = &s.hw {
            roofline.hw_id = h.clone();
        }
        roofline.ctx = s.ctx;
        roofline.tp = s.tp;
        if let Some(w) = &s.weights {
            match WeightFormat::parse(w) {
                Some(f) => roofline.weights = f,
                None => {
                    notice = Some(format!(
                        "--weights {w:?}: use bf16, fp8, q8_0, q4_0, q4_k, nvfp4 or mxfp4"
                    ))
                }
            }
        }
        Self {
            docs: Vec::new(),
            active: 0,
            view: s.view,
            kernels: Vec::new(),
            diff: DiffState::default(),
            roofline,
            load,
            step_aligned: s.step_aligned,
            pending: s.traces.clone(),
            dialog: FileDialog::default(),
            notice,
            steps_show_idle: true,
            steps_plot: None,
            start_step: s.step,
            ranks: None,
            view_given: s.view_given,
            layout_dir: s.layout_dir.clone(),
        }
    }

    /// The kept layout for a document that has just loaded.
    fn restore_layout(dir: Option<&PathBuf>, d: &mut Doc) {
        if let (Some(dir), DocState::Ready(l)) = (dir, &d.state) {
            d.timeline.layout = crate::tracks::load(dir, &l.layout_kind);
        }
    }

    /// Keeps the layouts that changed.
    fn keep_layouts(&mut self) {
        for d in &mut self.docs {
            if !d.timeline.layout_dirty {
                continue;
            }
            d.timeline.layout_dirty = false;
            if let (Some(dir), DocState::Ready(l)) = (&self.layout_dir, &d.state)
                && let Err(e) = crate::tracks::save(dir, &l.layout_kind, &d.timeline.layout)
            {
                self.notice = Some(format!("the timeline layout was not kept: {e}"));
            }
        }
    }

    /// Queues a trace to open at the next frame.
    pub fn open(&mut self, path: PathBuf) {
        self.pending.push(path);
    }

    /// Whether every document has finished loading (or failed).
    pub fn settled(&self) -> bool {
        self.pending.is_empty()
            && self.docs.iter().all(|d| match &d.state {
                DocState::Loading(_) => false,
                DocState::Ready(l) => l.kernel_table().is_some(),
                DocState::Failed(_) => true,
            })
    }

    fn new_timeline(&self) -> TimelineState {
        TimelineState {
            mode: if self.step_aligned {
                AxisMode::StepAligned
            } else {
                AxisMode::Time
            },
            ..TimelineState::default()
        }
    }

    /// A document loading `path` alone.
    fn load_one(&self, ctx: &egui::Context, path: PathBuf) -> Doc {
        let c = ctx.clone();
        let progress = loader::spawn(path.clone(), self.load.clone(), move || c.request_repaint());
        Doc {
            path,
            state: DocState::Loading(progress),
            timeline: self.new_timeline(),
            set: None,
        }
    }

    fn start_pending(&mut self, ctx: &egui::Context) {
        let pending = std::mem::take(&mut self.pending);
        if set_loader::is_set(&pending) {
            // Several traces (or a directory) open together: as the ranks of one run when
            // they are, else one document each.
            let c = ctx.clone();
            let load = set_loader::spawn_set(pending.clone(), self.load.clone(), move || {
                c.request_repaint()
            });
            let path = match pending.as_slice() {
                [one] => one.clone(),
                _ => PathBuf::from(format!("{} traces", pending.len())),
            };
            self.docs.push(Doc {
                path,
                state: DocState::Loading(std::sync::Arc::clone(&load.progress)),
                timeline: self.new_timeline(),
                set: Some(load),
            });
            self.kernels.push(KernelsState::default());
            self.active = self.docs.len() - 1;
            return;
        }
        for path in pending {
            let doc = self.load_one(ctx, path);
            self.docs.push(doc);
            self.kernels.push(KernelsState::default());
            self.active = self.docs.len() - 1;
            if self.docs.len() == 2 {
                self.diff.a = 0;
                self.diff.b = 1;
            }
        }
    }

    /// Replaces a set's document by one per trace once the set has loaded.
    fn poll_sets(&mut self, ctx: &egui::Context) {
        let mut i = 0;
        while i < self.docs.len() {
            let Some(result) = self.docs[i].set.as_ref().and_then(|s| s.take()) else {
                i += 1;
                continue;
            };
            let paths = self.docs[i].set.take().map(|s| s.paths).unwrap_or_default();
            let new: Vec<Doc> = match result {
                SetResult::Loaded(l) => {
                    if !l.left_out.is_empty() {
                        self.notice = Some(l.left_out.join("; "));
                    }
                    if let Some(r) = l.ranks {
                        let mut state = RanksState::default();
                        if !self.view_given || self.view == View::Ranks {
                            self.view = View::Ranks;
                            // `--step K`: the ranks view zoomed to aligned step K.
                            if let Some(k) = self.start_step.take()
                                && !state.zoom_to_step(&r.lanes, k as u32)
                            {
                                self.notice = Some(format!(
                                    "--step {k}: the run has {} aligned steps",
                                    r.report.aligned_steps
                                ));
                            }
                        }
                        self.ranks = Some(RanksDoc { data: r, state });
                    }
                    l.docs
                        .into_iter()
                        .map(|(path, loaded)| {
                            let mut timeline = self.new_timeline();
                            timeline.reset(&loaded);
                            let mut d = Doc {
                                path,
                                state: DocState::Ready(Box::new(loaded)),
                                timeline,
                                set: None,
                            };
                            Self::restore_layout(self.layout_dir.as_ref(), &mut d);
                            d
                        })
                        .collect()
                }
                // Not openable as a set: each path alone, so each shows its own error.
                SetResult::OneByOne(e) => paths
                    .into_iter()
                    .map(|p| {
                        if p.is_dir() && !p.join("manifest.json").is_file() {
                            Doc {
                                path: p,
                                state: DocState::Failed(e.clone()),
                                timeline: self.new_timeline(),
                                set: None,
                            }
                        } else {
                            self.load_one(ctx, p)
                        }
                    })
                    .collect(),
            };
            let n = new.len();
            self.docs.splice(i..=i, new);
            self.kernels
                .splice(i..=i, (0..n).map(|_| KernelsState::default()));
            // `--step K` not taken by the ranks view: the first trace's timeline, as when
            // it loads alone.
            if i == 0
                && let Some(DocState::Ready(l)) = self.docs.first().map(|d| &d.state)
                && let Some(k) = self.start_step
                && let Some(s) = l.step_names.report_step(k).and_then(|k| l.x.steps.get(k))
            {
                let (a, b) = (s.start_ns, s.end_ns);
                self.start_step = None;
                self.docs[0].timeline.zoom_to_ns(a, b, 0.02);
            }
            if self.active > i {
                self.active = self.active + n - 1;
            }
            self.active = self.active.min(self.docs.len().saturating_sub(1));
            if self.docs.len() >= 2 && self.diff.a == self.diff.b {
                self.diff.a = 0;
                self.diff.b = 1;
            }
            i += n;
        }
    }

    /// The whole window.
    pub fn ui(&mut self, ui: &mut Ui) {
        let ctx = ui.ctx().clone();
        self.start_pending(&ctx);
        self.poll_sets(&ctx);
        let mut loading = false;
        for (i, d) in self.docs.iter_mut().enumerate() {
            let done = d.poll();
            if done {
                Self::restore_layout(self.layout_dir.as_ref(), d);
            }
            if done
                && i == 0
                && let (Some(k), DocState::Ready(l)) = (self.start_step.take(), &d.state)
            {
                // `--step K`: step K as the CLI numbers it (the report's steps from 0).
                match l.step_names.report_step(k).and_then(|k| l.x.steps.get(k)) {
                    Some(s) => d.timeline.zoom_to_ns(s.start_ns, s.end_ns, 0.02),
                    None => {
                        self.notice = Some(format!(
                            "--step {k}: the report numbers {} steps (0 to {})",
                            l.step_names.report_len(),
                            l.step_names.report_len().saturating_sub(1)
                        ))
                    }
                }
            }
            loading |= matches!(d.state, DocState::Loading(_));
        }
        loading |= !self.settled();
        if loading {
            ctx.request_repaint_after(std::time::Duration::from_millis(100));
        }
        let dropped: Vec<PathBuf> = ctx.input(|i| {
            i.raw
                .dropped_files
                .iter()
                .map(|f| f.path().to_path_buf())
                .collect()
        });
        for p in dropped {
            self.open(p);
        }
        if let Some(p) = self.dialog.show(&ctx) {
            self.open(p);
        }
        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar(ui));
        egui::Panel::bottom("status").show(ui, |ui| self.status(ui));
        if self.view == View::Timeline && self.docs.get(self.active).and_then(Doc::loaded).is_some()
        {
            egui::Panel::right("details")
                .default_size(320.0)
                .show(ui, |ui| self.details(ui));
        }
        egui::CentralPanel::default_margins().show(ui, |ui| self.central(ui));
        self.keep_layouts();
        let hovering_files = ctx.input(|i| !i.raw.hovered_files.is_empty());
        if hovering_files {
            let r = ctx.content_rect();
            ctx.layer_painter(egui::LayerId::new(
                egui::Order::Foreground,
                egui::Id::unique("drop"),
            ))
            .rect_filled(r, 0.0, Color32::from_black_alpha(160));
        }
    }

    fn toolbar(&mut self, ui: &mut Ui) {
        ui.horizontal_wrapped(|ui| {
            if ui.button("Open…").clicked() {
                self.dialog.open = true;
            }
            ui.separator();
            let mut close = None;
            for (i, d) in self.docs.iter().enumerate() {
                let mut title = d.title();
                if matches!(d.state, DocState::Loading(_)) {
                    title += " (loading)";
                } else if matches!(d.state, DocState::Failed(_)) {
                    title += " (failed)";
                }
                if ui
                    .selectable_label(i == self.active, title)
                    .on_hover_text(d.path.display().to_string())
                    .clicked()
                {
                    self.active = i;
                }
                if ui.small_button("×").on_hover_text("close").clicked() {
                    close = Some(i);
                }
            }
            if let Some(i) = close {
                self.docs.remove(i);
                self.kernels.remove(i);
                if i < self.active {
                    self.active -= 1;
                }
                self.active = self.active.min(self.docs.len().saturating_sub(1));
                self.diff = DiffState::default();
            }
            ui.separator();
            let dark = crate::palette::is_dark(ui.ctx());
            if ui
                .small_button(if dark { "light" } else { "dark" })
                .on_hover_text("switch the theme")
                .clicked()
            {
                ui.ctx().set_theme(if dark {
                    egui::Theme::Light
                } else {
                    egui::Theme::Dark
                });
            }
            ui.separator();
            for v in View::ALL {
                if ui.selectable_label(self.view == v, v.name()).clicked() {
                    self.view = v;
                }
            }
            if self.view == View::Timeline
                && let Some(d) = self.docs.get_mut(self.active)
                && let DocState::Ready(l) = &d.state
            {
                ui.separator();
                let mut aligned = d.timeline.mode == AxisMode::StepAligned;
                let has_steps = !l.x.steps.is_empty();
                if ui
                    .add_enabled(has_steps, egui::Checkbox::new(&mut aligned, "step-aligned"))
                    .on_hover_text(
                        "every step the same width, so the same kernel lines up from step to step",
                    )
                    .changed()
                {
                    d.timeline.set_mode(
                        if aligned {
                            AxisMode::StepAligned
                        } else {
                            AxisMode::Time
                        },
                        l,
                    );
                }
                if ui.button("fit").on_hover_text("F").clicked() {
                    d.timeline.fit();
                }
                ui.separator();
                views::timeline_bar::toolbar(ui, &mut d.timeline, l);
            }
        });
    }

    fn status(&self, ui: &mut Ui) {
        ui.horizontal(|ui| {
            if let Some(n) = &self.notice {
                ui.colored_label(Color32::from_rgb(255, 120, 120), n);
            }
            let Some(d) = self.docs.get(self.active) else {
                ui.label(
                    "Open a trace: Open…, drop a file here, or pass paths on the command line.",
                );
                return;
            };
            match &d.state {
                DocState::Loading(_) => {
                    ui.label(format!("loading {}", d.path.display()));
                }
                DocState::Failed(e) => {
                    ui.colored_label(Color32::from_rgb(255, 120, 120), e);
                }
                DocState::Ready(l) => {
                    let r = &l.x.report;
                    let tpot = r
                        .steps
                        .tpot_ms
                        .map(|t| format!(" · TPOT median {:.3} ms", t.median))
                        .unwrap_or_default();
                    let busy = r
                        .steps
                        .decode_busy_pct
                        .map(|b| format!(" · GPU busy {b:.1}% in decode"))
                        .unwrap_or_default();
                    ui.label(format!(
                        "{} · {} kernels · {} memops · {} steps{tpot}{busy} · loaded in {:.2} s",
                        r.source.format,
                        format::count(r.source.kernels as u64),
                        format::count(r.source.memops as u64),
                        l.x.steps.len(),
                        l.load_s
                    ));
                    if !r.warnings.is_empty() {
                        ui.colored_label(
                            Color32::from_rgb(255, 200, 80),
                            format!("{} warnings", r.warnings.len()),
                        )
                        .on_hover_text(r.warnings.join("\n"));
                    }
                }
            }
        });
    }

    fn details(&mut self, ui: &mut Ui) {
        let Some(d) = self.docs.get_mut(self.active) else {
            return;
        };
        let DocState::Ready(l) = &d.state else { return };
        let st = &mut d.timeline;
        egui::ScrollArea::vertical().show(ui, |ui| {
            ui.heading("selection");
            match &st.selected {
                Some(h) => {
                    ui.label(timeline::describe(l, h));
                    if let Hit::Step(k) = h
                        && ui.button("zoom to this step").clicked()
                    {
                        let s = &l.x.steps[*k];
                        st.zoom_to_ns(s.start_ns, s.end_ns, 0.02);
                    }
                    views::timeline_bar::launch_panel(ui, st, l);
                }
                None => {
                    ui.label("Click a kernel, scope or step; drag to select a box.");
                }
            }
            if let Some(sel) = &st.selection {
                ui.separator();
                ui.heading("box selection");
                ui.label(format!(
                    "{} over {} lanes · {} activities · {} of GPU time",
                    format::dur_ns(sel.sums.t1_ns.saturating_sub(sel.sums.t0_ns) as f64),
                    sel.lanes.len(),
                    format::count(sel.sums.activities),
                    format::dur_ns(sel.sums.total_ns as f64)
                ));
                egui::Grid::new("box_sums").striped(true).show(ui, |ui| {
                    ui.strong("bucket");
                    ui.strong("time");
                    ui.strong("share");
                    ui.strong("calls");
                    ui.end_row();
                    for (b, ns, calls) in sel.sums.rows() {
                        ui.colored_label(crate::palette::bucket_of(b), b.as_str());
                        ui.monospace(format::dur_ns(ns as f64));
                        ui.monospace(format!("{:.1}%", ns as f64 / sel.sums.total_ns.max(1) as f64 * 100.0));
                        ui.monospace(format::count(calls));
                        ui.end_row();
                    }
                });
            }
            let r = &l.x.report;
            if let Some(h) = &r.host_idle {
                ui.separator();
                ui.heading("why the GPU sat idle");
                for (label, row) in [("inside steps", &h.inside_steps), ("between steps", &h.between_steps)] {
                    ui.label(format!(
                        "{label}: {:.3} ms/step · launch {:.3} · host compute {:.3} · sync {:.3} · GPU wait {:.3} · unexplained {:.3}",
                        row.idle_ms_per_step,
                        row.launch_ms_per_step,
                        row.host_compute_ms_per_step,
                        row.sync_ms_per_step,
                        row.gpu_wait_ms_per_step,
                        row.unexplained_ms_per_step
                    ));
                }
                for sc in h.top_scopes.iter().take(5) {
                    ui.monospace(format!("{:.3} ms/step {:>5.1}%  {}", sc.ms_per_step, sc.share_of_idle_pct, format::cut(&sc.name, 40)));
                }
                ui.label(RichText::new(format!("lever: {}", h.lever)).strong());
            }
            if !r.warnings.is_empty() {
                ui.separator();
                ui.heading("warnings");
                for w in &r.warnings {
                    ui.colored_label(Color32::from_rgb(255, 200, 80), w);
                }
            }
        });
    }

    fn central(&mut self, ui: &mut Ui) {
        let Some(d) = self.docs.get(self.active) else {
            ui.centered_and_justified(|ui| {
                ui.label(
                    RichText::new(
                        "gapscope: open a trace (Open…, drop a file, or gapscope-gui TRACE)",
                    )
                    .size(18.0),
                );
            });
            return;
        };
        match &d.state {
            DocState::Loading(p) => {
                let (frac, what) = p.status();
                ui.label(format!("{}: {what}…", d.path.display()));
                match frac {
                    Some(f) => ui.add(egui::ProgressBar::new(f).show_percentage()),
                    None => ui.add(egui::ProgressBar::new(1.0).animate(true)),
                };
                return;
            }
            DocState::Failed(e) => {
                ui.colored_label(
                    Color32::from_rgb(255, 120, 120),
                    RichText::new(e).size(15.0),
                );
                return;
            }
            DocState::Ready(_) => {}
        }
        match self.view {
            View::Timeline => {
                let d = &mut self.docs[self.active];
                if let DocState::Ready(l) = &d.state {
                    timeline::show(ui, &mut d.timeline, l, "main", None);
                }
            }
            View::Steps => {
                let d = &mut self.docs[self.active];
                let (clicked, plot) = match &d.state {
                    DocState::Ready(l) => views::steps::show(ui, l, &mut self.steps_show_idle),
                    _ => (None, None),
                };
                self.steps_plot = plot;
                if let DocState::Ready(l) = &d.state
                    && let Some(k) = clicked
                {
                    let s = &l.x.steps[k];
                    d.timeline.zoom_to_ns(s.start_ns, s.end_ns, 0.02);
                    d.timeline.selected = Some(Hit::Step(k));
                    self.view = View::Timeline;
                }
            }
            View::Kernels => {
                let d = &mut self.docs[self.active];
                if let DocState::Ready(l) = &d.state
                    && let Some(h) = views::kernels::show(ui, &mut self.kernels[self.active], l)
                {
                    d.timeline.highlight = h;
                }
            }
            View::Diff => {
                let titles: Vec<String> = self.docs.iter().map(Doc::title).collect();
                let docs: Vec<(&str, Option<&loader::Loaded>)> = self
                    .docs
                    .iter()
                    .zip(&titles)
                    .map(|(d, t)| (t.as_str(), d.loaded()))
                    .collect();
                views::diff::show(ui, &mut self.diff, &docs);
            }
            View::Roofline => {
                let docs: Vec<&loader::Loaded> = self.docs.iter().filter_map(Doc::loaded).collect();
                views::roofline::show(ui, &mut self.roofline, &docs);
            }
            View::Telemetry => {
                let d = &mut self.docs[self.active];
                if let DocState::Ready(l) = &d.state {
                    views::telemetry::show(ui, &mut d.timeline, l);
                }
            }
            View::Ranks => match &mut self.ranks {
                Some(r) => views::ranks::show(ui, r),
                None => {
                    ui.label(
                        "The ranks view shows several ranks of one run: open their traces together \
                         (gapscope-gui rank0.json.gz rank1.json.gz, or a directory of them).",
                    );
                }
            },
        }
    }
}

impl eframe::App for App {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        App::ui(self, ui);
    }
}
