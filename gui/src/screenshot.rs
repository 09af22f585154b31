//! `--screenshot`: once every trace has loaded and a few frames have settled, ask eframe
//! for the frame, check it has the size asked for, write it as PNG (through the same output
//! rules as every gapscope output file) and close the window.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use egui::ColorImage;

/// Frames drawn after loading before the picture is taken (layout and fonts settle).
const SETTLE_FRAMES: u32 = 4;

pub struct Screenshot {
    pub out: PathBuf,
    /// The size asked for (`--size`), in pixels.
    size: [u32; 2],
    /// The command's inputs, which the PNG may not overwrite.
    inputs: Vec<PathBuf>,
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
    pub fn new(out: PathBuf, size: [u32; 2], inputs: Vec<PathBuf>) -> Self {
        Self {
            out,
            size,
            inputs,
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
            let inputs: Vec<&Path> = self.inputs.iter().map(PathBuf::as_path).collect();
            let r = check_size(self.size, img.size)
                .map_err(|e| format!("{}: {e}", self.out.display()))
                .and_then(|()| write_png(&self.out, &inputs, &img))
                .and_then(|()| match failed.first() {
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

/// Whether a picture of `got` pixels (width, height) is the `asked` size; else what went
/// wrong, on one line. A window is smaller than asked when the screen is (`xvfb-run`'s
/// default screen is 1280x1024), larger on a scaled display.
pub fn check_size(asked: [u32; 2], got: [usize; 2]) -> Result<(), String> {
    let [aw, ah] = asked.map(|x| x as usize);
    let [gw, gh] = got;
    if [gw, gh] == [aw, ah] {
        return Ok(());
    }
    Err(format!(
        "the screenshot is {gw}x{gh} pixels, not the {aw}x{ah} asked for (is the screen \
         smaller? under xvfb-run give a larger one: -s \"-screen 0 {}x{}x24\")",
        aw.max(1920),
        ah.max(1080)
    ))
}

/// Writes an image as 8-bit RGBA PNG to `path`, which may not be one of `inputs`, a link or
/// anything but a regular file (`gapscope_traces::write_output`).
pub fn write_png(path: &Path, inputs: &[&Path], img: &ColorImage) -> Result<(), String> {
    let [w, h] = img.size;
    let mut png_bytes = Vec::new();
    let mut enc = png::Encoder::new(&mut png_bytes, w as u32, h as u32);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut data = Vec::with_capacity(w * h * 4);
    for p in &img.pixels {
        data.extend_from_slice(&p.to_srgba_unmultiplied());
    }
    enc.write_header()
        .and_then(|mut wr| {
            wr.write_image_data(&data)?;
            wr.finish()
        })
        .map_err(|e| format!("{}: cannot write PNG: {e}", path.display()))?;
    gapscope_traces::write_output(path, inputs, &png_bytes).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_screenshot_must_have_the_size_asked_for() {
        assert_eq!(check_size([1600, 900], [1600, 900]), Ok(()));
        let e = check_size([1600, 900], [1280, 900]).unwrap_err();
        assert!(
            e.contains("1280x900") && e.contains("1600x900") && e.contains("1920x1080"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        let e = check_size([4000, 900], [1920, 900]).unwrap_err();
        assert!(e.contains("4000x1080x24"), "{e}");
        // Larger than asked (a scaled display) is wrong too.
        assert!(check_size([800, 600], [1600, 1200]).is_err());
    }

    #[test]
    fn a_png_is_written_beside_its_target_and_never_over_an_input() {
        let d = tempfile::tempdir().unwrap();
        let img = ColorImage::new([64, 32], vec![egui::Color32::RED; 64 * 32]);
        let out = d.path().join("o.png");
        write_png(&out, &[], &img).unwrap();
        let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&out).unwrap()));
        let info = dec.read_info().unwrap();
        assert_eq!((info.info().width, info.info().height), (64, 32));
        let input = d.path().join("in.json");
        std::fs::write(&input, b"trace").unwrap();
        let e = write_png(&input, &[&input], &img).unwrap_err();
        assert!(e.contains("is the input"), "{e}");
        assert_eq!(std::fs::read(&input).unwrap(), b"trace");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 2);
    }
}
