//! `--screenshot`: once every trace has loaded and a few frames have settled, ask eframe
//! for the frame, write it as PNG and close the window.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use egui::ColorImage;

/// Frames drawn after loading before the picture is taken (layout and fonts settle).
const SETTLE_FRAMES: u32 = 4;

pub struct Screenshot {
    pub out: PathBuf,
    frames: u32,
    requested: bool,
    image: Arc<Mutex<Option<Arc<ColorImage>>>>,
    /// The outcome, read by `main` after the window closes.
    pub result: Arc<Mutex<Option<Result<(), String>>>>,
    started: std::time::Instant,
}

/// Longest wait for the traces to load, s.
const MAX_WAIT_S: u64 = 300;

impl Screenshot {
    pub fn new(out: PathBuf) -> Self {
        Self {
            out,
            frames: 0,
            requested: false,
            image: Arc::default(),
            result: Arc::default(),
            started: std::time::Instant::now(),
        }
    }

    /// Call once per frame after the UI is drawn; `settled`: all traces are in; `failed`:
    /// the errors of traces that did not load (the picture is still taken, showing them,
    /// and the run then fails).
    pub fn frame(&mut self, ctx: &egui::Context, settled: bool, failed: &[String]) {
        ctx.request_repaint();
        if self.started.elapsed().as_secs() > MAX_WAIT_S {
            self.finish(
                ctx,
                Err(format!("the traces did not load within {MAX_WAIT_S} s")),
            );
            return;
        }
        if !settled {
            return;
        }
        self.frames += 1;
        if self.frames < SETTLE_FRAMES {
            return;
        }
        if !self.requested {
            self.requested = true;
            let slot = Arc::clone(&self.image);
            let c = ctx.clone();
            ctx.request_screenshot(move |img| {
                if let Ok(mut s) = slot.lock() {
                    *s = Some(img);
                }
                c.request_repaint();
            });
            return;
        }
        let img = self.image.lock().ok().and_then(|mut s| s.take());
        if let Some(img) = img {
            let r = write_png(&self.out, &img).and_then(|()| match failed.first() {
                Some(e) => Err(e.clone()),
                None => Ok(()),
            });
            self.finish(ctx, r);
        }
    }

    fn finish(&mut self, ctx: &egui::Context, r: Result<(), String>) {
        if let Ok(mut s) = self.result.lock() {
            s.get_or_insert(r);
        }
        ctx.send_viewport_cmd(egui::ViewportCommand::Close);
    }
}

/// Writes an image as 8-bit RGBA PNG.
pub fn write_png(path: &Path, img: &ColorImage) -> Result<(), String> {
    let [w, h] = img.size;
    let file = std::fs::File::create(path)
        .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w as u32, h as u32);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut data = Vec::with_capacity(w * h * 4);
    for p in &img.pixels {
        data.extend_from_slice(&p.to_srgba_unmultiplied());
    }
    enc.write_header()
        .and_then(|mut wr| wr.write_image_data(&data))
        .map_err(|e| format!("{}: cannot write PNG: {e}", path.display()))
}
