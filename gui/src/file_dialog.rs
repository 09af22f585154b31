//! A small file chooser drawn with egui (no GTK or portal dependency): a path field, the
//! current folder's entries (folders first; native `.gst` folders open as traces), and
//! the trace extensions highlighted.

use std::path::{Path, PathBuf};

use egui::{Color32, RichText, ScrollArea};

/// The parent-folder button and the mark after a folder's name: text every default font
/// draws (the folder emoji came out as a box).
pub const PARENT: &str = ".. (up)";
pub const DIR_SUFFIX: &str = "/";

pub struct FileDialog {
    pub open: bool,
    pub dir: PathBuf,
    pub path_text: String,
    entries: Vec<(String, bool)>,
    listed: Option<PathBuf>,
    error: Option<String>,
}

impl Default for FileDialog {
    fn default() -> Self {
        let dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        Self {
            open: false,
            path_text: String::new(),
            dir,
            entries: Vec::new(),
            listed: None,
            error: None,
        }
    }
}

/// Whether a path looks like something the importers read.
pub fn is_trace(name: &str) -> bool {
    [".gst", ".json", ".json.gz", ".sqlite", ".db"]
        .iter()
        .any(|e| name.ends_with(e))
}

impl FileDialog {
    fn list(&mut self) {
        if self.listed.as_deref() == Some(self.dir.as_path()) {
            return;
        }
        self.listed = Some(self.dir.clone());
        self.entries.clear();
        match std::fs::read_dir(&self.dir) {
            Ok(rd) => {
                for e in rd.flatten().take(10_000) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let is_dir = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
                    self.entries.push((name, is_dir));
                }
                self.entries
                    .sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                self.error = None;
            }
            Err(e) => self.error = Some(format!("{}: {e}", self.dir.display())),
        }
    }

    /// Draws the dialog when open; returns a path the user chose.
    pub fn show(&mut self, ctx: &egui::Context) -> Option<PathBuf> {
        if !self.open {
            return None;
        }
        self.list();
        let mut chosen = None;
        let mut open = self.open;
        egui::Window::new("Open a trace")
            .open(&mut open)
            .default_size([560.0, 420.0])
            .show(ctx, |ui| {
                ui.horizontal(|ui| {
                    if ui.button(PARENT).on_hover_text("parent folder").clicked()
                        && let Some(p) = self.dir.parent()
                    {
                        self.dir = p.to_path_buf();
                    }
                    ui.label(self.dir.display().to_string());
                });
                ui.horizontal(|ui| {
                    let r = ui.add(
                        egui::TextEdit::singleline(&mut self.path_text)
                            .desired_width(420.0)
                            .hint_text("or type a path"),
                    );
                    let enter = r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter));
                    if (ui.button("Open").clicked() || enter) && !self.path_text.is_empty() {
                        let p = PathBuf::from(self.path_text.trim());
                        chosen = Some(if p.is_absolute() { p } else { self.dir.join(p) });
                    }
                });
                if let Some(e) = &self.error {
                    ui.colored_label(Color32::from_rgb(255, 120, 120), e);
                }
                ScrollArea::vertical()
                    .auto_shrink([false, false])
                    .show(ui, |ui| {
                        let mut go = None;
                        for (name, is_dir) in &self.entries {
                            let trace = is_trace(name);
                            let text = if *is_dir && !trace {
                                format!("{name}{DIR_SUFFIX}")
                            } else {
                                name.clone()
                            };
                            let rt = if trace {
                                RichText::new(text)
                                    .strong()
                                    .color(Color32::from_rgb(140, 200, 255))
                            } else {
                                RichText::new(text)
                            };
                            let r = ui.selectable_label(false, rt);
                            if r.double_clicked() || (r.clicked() && trace) {
                                go = Some((self.dir.join(name), *is_dir && !trace));
                            }
                        }
                        match go {
                            Some((p, true)) => self.dir = p,
                            Some((p, false)) => chosen = Some(p),
                            None => {}
                        }
                    });
            });
        self.open = open && chosen.is_none();
        chosen
    }
}

/// `dir` when it exists, else its nearest existing parent.
pub fn existing(dir: &Path) -> PathBuf {
    let mut d = dir.to_path_buf();
    while !d.exists() {
        match d.parent() {
            Some(p) => d = p.to_path_buf(),
            None => return PathBuf::from("/"),
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dialog_draws_no_glyph_as_a_box() {
        let ctx = egui::Context::default();
        let mut out = ctx.run_ui(egui::RawInput::default(), |_| {});
        out.textures_delta.clear();
        let font = egui::FontId::proportional(14.0);
        let has = |s: &str| ctx.fonts_mut(|f| f.has_glyphs(&font, s));
        assert!(has(PARENT) && has(DIR_SUFFIX));
        // The folder emoji the dialog drew before is not in the default fonts.
        assert!(!has("📁"));
    }
}
