//! `gapscope-gui [TRACE...]`: the explorer window, or one view rendered to PNG.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use gapscope_gui::doc::DocState;
use gapscope_gui::screenshot::Screenshot;
use gapscope_gui::settings::{self, Command};
use gapscope_gui::{App, Settings};

struct Shell {
    app: App,
    shot: Option<Screenshot>,
}

impl eframe::App for Shell {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.app.ui(ui);
        if let Some(s) = &mut self.shot {
            let settled = self.app.settled();
            let failed: Vec<String> = self
                .app
                .docs
                .iter()
                .filter_map(|d| match &d.state {
                    DocState::Failed(e) => Some(e.clone()),
                    _ => None,
                })
                .chain(self.app.notice.clone())
                .collect();
            s.frame(ui.ctx(), settled, &failed);
        }
    }
}

/// The files the explorer reads, which a screenshot may not overwrite.
fn inputs(s: &Settings) -> Vec<std::path::PathBuf> {
    let mut v = s.traces.clone();
    v.extend(
        [&s.model, &s.hw_profile, &s.knobs.rules_file]
            .into_iter()
            .flatten()
            .cloned(),
    );
    v
}

fn run(s: Settings) -> Result<(), String> {
    let inputs = inputs(&s);
    if let Some(out) = &s.screenshot {
        // Refused before a window opens, as the PNG would be when written.
        let read: Vec<&std::path::Path> = inputs.iter().map(|p| p.as_path()).collect();
        gapscope_traces::check_output(out, &read).map_err(|e| e.to_string())?;
    }
    let shot = s
        .screenshot
        .clone()
        .map(|out| Screenshot::new(out, s.size, inputs));
    let result = shot.as_ref().map(|s| s.result.clone());
    let [w, h] = s.size;
    let mut viewport = egui::ViewportBuilder::default()
        .with_title("gapscope")
        .with_inner_size([w as f32, h as f32])
        .with_drag_and_drop(true);
    if shot.is_some() {
        viewport = viewport.with_resizable(false);
    }
    let options = eframe::NativeOptions {
        viewport,
        ..Default::default()
    };
    let app = App::new(&s);
    let theme = if s.light {
        egui::Theme::Light
    } else {
        egui::Theme::Dark
    };
    eframe::run_native(
        "gapscope",
        options,
        Box::new(move |cc| {
            cc.egui_ctx.set_theme(theme);
            if shot.is_some() {
                // One logical pixel per physical pixel, so the PNG has the size asked for.
                cc.egui_ctx
                    .set_zoom_factor(1.0 / cc.egui_ctx.native_pixels_per_point().unwrap_or(1.0));
            }
            Ok(Box::new(Shell { app, shot }))
        }),
    )
    .map_err(|e| {
        format!(
            "cannot open a window: {} (no display? on a headless machine run it under xvfb-run)",
            window_error(&e.to_string())
        )
    })?;
    match result {
        Some(r) => r
            .lock()
            .ok()
            .and_then(|mut r| r.take())
            .unwrap_or_else(|| Err("the window closed before the screenshot was taken".into())),
        None => Ok(()),
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match settings::parse(&args) {
        Ok(Command::Help) => {
            print!("{}", settings::USAGE);
            ExitCode::SUCCESS
        }
        Ok(Command::Version) => {
            println!("gapscope-gui {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Ok(Command::Run(mut s)) => {
            // A screenshot shows the default layout, whatever was kept.
            if s.screenshot.is_none() {
                s.layout_dir = layout_dir();
            }
            match run(*s) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => fail(&e),
            }
        }
        Err(e) => fail(&e),
    }
}

/// Where the timeline's layouts are kept: `$GAPSCOPE_CONFIG_DIR`, else
/// `$XDG_CONFIG_HOME/gapscope`, else `~/.config/gapscope`.
#[expect(
    clippy::disallowed_methods,
    reason = "the explorer's one read of its environment: where its layouts are kept"
)]
fn layout_dir() -> Option<std::path::PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(std::path::PathBuf::from)
    };
    var("GAPSCOPE_CONFIG_DIR")
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("gapscope")))
        .or_else(|| var("HOME").map(|h| h.join(".config").join("gapscope")))
}

/// Prints an error on one line, as `gapscope` does; exit code 2 (1 is the gate's
/// regression, which the explorer never reports).
fn fail(e: &str) -> ExitCode {
    eprintln!("gapscope-gui: error: {}", e.replace('\n', " "));
    ExitCode::from(2)
}

/// A windowing error without the source location winit puts in it (`os error at
/// /root/.cargo/registry/…/linux/mod.rs:765: neither WAYLAND_DISPLAY nor … is set`): the
/// reason alone, which is what a user can act on.
fn window_error(e: &str) -> String {
    match e.find(" os error at ") {
        Some(at) => {
            let rest = &e[at + " os error at ".len()..];
            // `PATH.rs:LINE: REASON`: the reason follows the line number.
            let reason = rest
                .find(".rs:")
                .and_then(|p| rest[p + 4..].split_once(": "))
                .map_or(rest, |(_, r)| r);
            format!("{}: {reason}", e[..at].trim_end_matches(':'))
        }
        None => e.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn window_errors_drop_the_source_location() {
        let e = "winit EventLoopError: os error at /root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/winit-0.30.13/src/platform_impl/linux/mod.rs:765: neither WAYLAND_DISPLAY nor WAYLAND_SOCKET nor DISPLAY is set.";
        assert_eq!(
            super::window_error(e),
            "winit EventLoopError: neither WAYLAND_DISPLAY nor WAYLAND_SOCKET nor DISPLAY is set."
        );
        assert_eq!(super::window_error("no GL"), "no GL");
    }
}
