//! `gapscope gui TRACE...`: starts the explorer, `gapscope-gui`, found next to this binary
//! or on PATH, with the arguments as given. The explorer is its own binary so that the CLI
//! stays free of windowing code (and runs on machines without a display).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

#[derive(Args)]
pub struct GuiArgs {
    /// Traces to open, then any gapscope-gui option (--view, --step-aligned, --model,
    /// --screenshot OUT.png, ...; see `gapscope-gui --help`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "TRACE|OPTION"
    )]
    pub args: Vec<String>,
}

const GUI: &str = "gapscope-gui";

/// `gapscope-gui` beside the running executable, else the first on PATH.
#[expect(
    clippy::disallowed_methods,
    reason = "a binary reads its environment (PATH)"
)]
fn find_gui() -> Option<PathBuf> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| Some(e.parent()?.join(GUI)));
    if let Some(p) = beside.filter(|p| p.is_file()) {
        return Some(p);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(GUI))
        .find(|p| p.is_file())
}

pub fn run(a: GuiArgs) -> Result<ExitCode> {
    let gui = find_gui().with_context(|| {
        format!(
            "{GUI} not found next to gapscope or on PATH: build it with `cargo build --release -p gapscope-gui` \
             (it lands beside gapscope in target/release)"
        )
    })?;
    let status = std::process::Command::new(&gui)
        .args(&a.args)
        .status()
        .with_context(|| format!("{}: cannot start", gui.display()))?;
    Ok(match status.code() {
        Some(c) => ExitCode::from(c.clamp(0, 255) as u8),
        None => ExitCode::from(2),
    })
}
