//! The bucket table (from the report) and the kernel table (every distinct name): sortable
//! by any column, filtered by regex and bucket, rows virtualised so 100k names stay fast.
//! Selecting a kernel highlights its instances in the timeline.

use egui::{Color32, RichText, ScrollArea, TextEdit, Ui};
use gapscope_analyzer::Bucket;
use gapscope_analyzer::explore::{KernelTable, SortKey, TableQuery};
use gapscope_traces::StrId;
use regex::RegexBuilder;

use super::format;
use crate::loader::Loaded;
use crate::palette;

const ROW_H: f32 = 18.0;

#[derive(Default)]
pub struct KernelsState {
    pub filter: String,
    pub bucket: Option<Bucket>,
    pub sort: SortKey,
    pub ascending: bool,
    /// Row indices shown, for the query they were computed with.
    shown: Option<(QueryKey, Vec<u32>)>,
    pub regex_error: Option<String>,
    /// Selected row (kernel table row index).
    pub selected: Option<u32>,
}

type QueryKey = (String, Option<Bucket>, SortKey, bool, usize);

impl KernelsState {
    /// The rows passing the filter, in order (recomputed only when the query changes).
    pub fn rows(&mut self, table: &KernelTable) -> &[u32] {
        let key: QueryKey = (
            self.filter.clone(),
            self.bucket,
            self.sort,
            self.ascending,
            table.rows.len(),
        );
        if self.shown.as_ref().is_none_or(|(k, _)| *k != key) {
            let regex = if self.filter.is_empty() {
                self.regex_error = None;
                None
            } else {
                match RegexBuilder::new(&self.filter)
                    .case_insensitive(true)
                    .size_limit(1 << 20)
                    .build()
                {
                    Ok(r) => {
                        self.regex_error = None;
                        Some(r)
                    }
                    Err(e) => {
                        self.regex_error = Some(crate::loader::one_line(&e.to_string()));
                        None
                    }
                }
            };
            let q = TableQuery {
                regex,
                bucket: self.bucket,
                sort: self.sort,
                ascending: self.ascending,
            };
            let rows = if self.regex_error.is_some() {
                Vec::new()
            } else {
                table.select(&q)
            };
            self.shown = Some((key, rows));
        }
        &self.shown.as_ref().expect("set above").1
    }
}

/// Draws both tables; returns the kernel name to highlight when the selection changed
/// (`Some(None)` clears it).
#[expect(
    clippy::too_many_lines,
    reason = "immediate-mode UI: the filter bar, the header, the rows and their input handling of one table"
)]
pub fn show(ui: &mut Ui, st: &mut KernelsState, l: &Loaded) -> Option<Option<StrId>> {
    let mut changed = None;
    ui.heading(l.x.report.bucket_scope.title());
    bucket_table(ui, st, l);
    ui.separator();
    ui.horizontal(|ui| {
        ui.label("filter (regex)");
        ui.add(
            TextEdit::singleline(&mut st.filter)
                .id_salt("kernel_filter")
                .desired_width(260.0)
                .hint_text("e.g. gemv|gemm"),
        );
        egui::ComboBox::new("kernel_bucket", "bucket")
            .selected_text(st.bucket.map_or("all buckets", |b| b.as_str()))
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut st.bucket, None, "all buckets");
                for b in Bucket::ALL {
                    ui.selectable_value(&mut st.bucket, Some(b), b.as_str());
                }
            });
        if ui.button("clear").clicked() {
            st.filter.clear();
            st.bucket = None;
        }
    });
    let Some(table) = l.kernel_table() else {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("building the kernel table…");
        });
        return changed;
    };
    let total = table.rows.len();
    let rows = st.rows(table).to_vec();
    ui.horizontal(|ui| {
        ui.label(format!(
            "{} of {} kernel and memop names (whole trace, all devices)",
            format::count(rows.len() as u64),
            format::count(total as u64)
        ));
        if let Some(e) = &st.regex_error {
            ui.colored_label(Color32::from_rgb(255, 120, 120), e);
        }
    });
    let cols: [(&str, SortKey, f32); 8] = [
        ("name", SortKey::Name, 0.0),
        ("bucket", SortKey::Bucket, 110.0),
        ("calls", SortKey::Calls, 80.0),
        ("total", SortKey::Total, 90.0),
        ("mean", SortKey::Mean, 80.0),
        ("p50", SortKey::P50, 80.0),
        ("p99", SortKey::P99, 80.0),
        ("share", SortKey::Share, 60.0),
    ];
    let fixed: f32 = cols.iter().map(|c| c.2).sum();
    // The columns' item spacing and the scroll bar come off the name column.
    let spacing = ui.spacing().item_spacing.x * cols.len() as f32;
    let name_w = (ui.available_width() - fixed - spacing - 18.0).max(160.0);
    ui.horizontal(|ui| {
        for (title, key, w) in cols {
            let w = if w == 0.0 { name_w } else { w };
            let arrow = if st.sort == key {
                if st.ascending { " ^" } else { " v" }
            } else {
                ""
            };
            let b = ui.add_sized(
                [w, ROW_H],
                egui::Button::new(RichText::new(format!("{title}{arrow}")).strong()).frame(false),
            );
            if b.clicked() {
                if st.sort == key {
                    st.ascending = !st.ascending;
                } else {
                    st.sort = key;
                    st.ascending = key == SortKey::Name || key == SortKey::Bucket;
                }
            }
        }
    });
    ScrollArea::vertical()
        .id_salt("kernel_rows")
        .auto_shrink([false, false])
        .show_rows(ui, ROW_H, rows.len(), |ui, range| {
            for &ri in &rows[range] {
                let r = &table.rows[ri as usize];
                let selected = st.selected == Some(ri);
                let resp = ui.horizontal(|ui| {
                    let name = if r.memop {
                        format!("{} (memop)", r.name)
                    } else {
                        r.name.clone()
                    };
                    let chars = (name_w / 6.5) as usize;
                    let n = ui
                        .allocate_ui_with_layout(
                            egui::Vec2::new(name_w, ROW_H),
                            egui::Layout::left_to_right(egui::Align::Center),
                            |ui| {
                                ui.set_min_width(name_w);
                                ui.add(egui::Button::selectable(
                                    selected,
                                    format::cut(&name, chars),
                                ))
                            },
                        )
                        .inner;
                    cell(
                        ui,
                        110.0,
                        RichText::new(r.bucket.as_str()).color(palette::bucket_of(r.bucket)),
                    );
                    cell(ui, 80.0, RichText::new(format::count(r.calls)).monospace());
                    cell(
                        ui,
                        90.0,
                        RichText::new(format::dur_ns(r.total_ns as f64)).monospace(),
                    );
                    cell(
                        ui,
                        80.0,
                        RichText::new(format::dur_ns(r.mean_ns)).monospace(),
                    );
                    cell(
                        ui,
                        80.0,
                        RichText::new(format::dur_ns(r.p50_ns)).monospace(),
                    );
                    cell(
                        ui,
                        80.0,
                        RichText::new(format::dur_ns(r.p99_ns)).monospace(),
                    );
                    cell(
                        ui,
                        60.0,
                        RichText::new(format!("{:.1}%", r.share_pct)).monospace(),
                    );
                    n.on_hover_text(&r.name)
                });
                if resp.inner.clicked() {
                    if selected {
                        st.selected = None;
                        changed = Some(None);
                    } else {
                        st.selected = Some(ri);
                        changed = Some(Some(r.name_id));
                    }
                }
            }
        });
    changed
}

fn cell(ui: &mut Ui, w: f32, t: RichText) {
    ui.add_sized([w, ROW_H], egui::Label::new(t));
}

#[derive(Clone, Copy, PartialEq)]
enum BucketSort {
    Total,
    Calls,
    Share,
}

fn bucket_table(ui: &mut Ui, st: &mut KernelsState, l: &Loaded) {
    let id = ui.scope_id().with("bucket_sort");
    let mut sort: u8 = ui.data(|d| d.get_temp(id)).unwrap_or(0);
    let by = match sort {
        1 => BucketSort::Calls,
        2 => BucketSort::Share,
        _ => BucketSort::Total,
    };
    let mut rows: Vec<&gapscope_analyzer::analysis::BucketRow> =
        l.x.report.buckets.iter().collect();
    match by {
        BucketSort::Total | BucketSort::Share => {
            rows.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms))
        }
        BucketSort::Calls => rows.sort_by_key(|r| std::cmp::Reverse(r.calls)),
    }
    egui::Grid::new("bucket_table")
        .striped(true)
        .num_columns(7)
        .show(ui, |ui| {
            ui.strong("bucket");
            for (k, t) in ["total v", "calls v", "share v"].iter().enumerate() {
                if ui
                    .add(egui::Button::new(RichText::new(*t).strong()).frame(false))
                    .clicked()
                {
                    sort = k as u8;
                }
            }
            ui.strong("mean ms/step");
            ui.strong("p50 ms/step");
            ui.strong("p99 ms/step");
            ui.end_row();
            for r in rows {
                let resp = ui.add(egui::Button::selectable(
                    st.bucket == Some(r.bucket),
                    RichText::new(r.bucket.as_str()).color(palette::bucket_of(r.bucket)),
                ));
                if resp
                    .on_hover_text("filter the kernel table to this bucket")
                    .clicked()
                {
                    st.bucket = if st.bucket == Some(r.bucket) {
                        None
                    } else {
                        Some(r.bucket)
                    };
                }
                ui.monospace(format::ms_label(r.total_ms));
                ui.monospace(format::count(r.calls));
                ui.monospace(format!("{:.1}%", r.share_of_busy_pct));
                let s = r.ms_per_step;
                ui.monospace(s.map_or("–".into(), |s| format!("{:.4}", s.mean)));
                ui.monospace(s.map_or("–".into(), |s| format!("{:.4}", s.median)));
                ui.monospace(s.map_or("–".into(), |s| format!("{:.4}", s.p99)));
                ui.end_row();
            }
        });
    ui.data_mut(|d| d.insert_temp(id, sort));
}
