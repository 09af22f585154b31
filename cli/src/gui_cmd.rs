//! `gapscope gui TRACE...`: starts the explorer, `gapscope-gui`, found next to this binary
//! or on PATH, with the arguments as given. The explorer is its own binary so that the CLI
//! stays free of windowing code (and runs on machines without a display). The defaults of
//! `--hw` and `--rules` (environment, then config file) go with the arguments that name
//! neither, as they do for every other command.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;

use crate::config::Defaults;

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

impl GuiArgs {
    /// Puts `--rules` and `--hw` from `d` before the arguments when they name neither (`--hw`
    /// neither beside `--hw-profile`), so the explorer reads a trace as the CLI does.
    pub fn take_defaults(&mut self, d: &Defaults) -> Result<()> {
        let given = |flag: &str| self.args.iter().any(|a| a == flag);
        if given("-h") || given("--help") || given("-V") || given("--version") {
            return Ok(());
        }
        let mut front = Vec::new();
        if !given("--rules") {
            let mut rules = None;
            d.fill_rules(&mut rules)?;
            if let Some(p) = rules {
                let p = p.into_os_string().into_string().map_err(|p| {
                    anyhow::anyhow!("--rules {p:?}: the explorer takes a UTF-8 path")
                })?;
                front.extend(["--rules".to_owned(), p]);
            }
        }
        if !given("--hw") && !given("--hw-profile") {
            let mut hw = None;
            d.fill_hw(&mut hw)?;
            if let Some(gpu) = hw {
                front.extend(["--hw".to_owned(), gpu]);
            }
        }
        self.args.splice(0..0, front);
        Ok(())
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ConfigFlags, Env};

    fn defaults(hw: Option<&str>, rules: Option<&std::path::Path>) -> Defaults {
        let env = Env {
            hw: hw.map(Into::into),
            rules: rules.map(|p| p.as_os_str().to_owned()),
            no_config: Some("1".into()),
            ..Env::default()
        };
        Defaults::resolve(&ConfigFlags::default(), &env).expect("defaults")
    }

    fn args(v: &[&str]) -> GuiArgs {
        GuiArgs {
            args: v.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    #[test]
    fn the_defaults_go_before_the_arguments_that_name_neither() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rules = dir.path().join("rules.toml");
        std::fs::write(&rules, "").expect("write");
        let d = defaults(Some("h200"), Some(&rules));
        let mut a = args(&["t.json", "--view", "roofline"]);
        a.take_defaults(&d).expect("defaults");
        let r = rules.to_str().expect("utf-8");
        assert_eq!(
            a.args,
            ["--rules", r, "--hw", "h200", "t.json", "--view", "roofline"]
        );
        // Given flags win; --hw-profile stands for --hw; help takes nothing.
        let mut a = args(&["t.json", "--hw", "h100-sxm", "--rules", "mine.toml"]);
        a.take_defaults(&d).expect("defaults");
        assert_eq!(
            a.args,
            ["t.json", "--hw", "h100-sxm", "--rules", "mine.toml"]
        );
        let mut a = args(&["t.json", "--hw-profile", "p.json"]);
        a.take_defaults(&d).expect("defaults");
        assert_eq!(a.args, ["--rules", r, "t.json", "--hw-profile", "p.json"]);
        let mut a = args(&["--help"]);
        a.take_defaults(&d).expect("defaults");
        assert_eq!(a.args, ["--help"]);
    }

    /// The explorer's own exit codes reach Python's `gapscope gui` as they are.
    #[test]
    fn every_exit_code_keeps_its_number() {
        for c in [0u8, 1, 2, 3, 101, 255] {
            assert_eq!(crate::exit_status(ExitCode::from(c)), c);
        }
    }

    #[test]
    fn no_defaults_leave_the_arguments_as_given_and_a_bad_one_is_an_error() {
        let mut a = args(&["t.json"]);
        a.take_defaults(&defaults(None, None)).expect("defaults");
        assert_eq!(a.args, ["t.json"]);
        let err = args(&["t.json"])
            .take_defaults(&defaults(Some("no-such-gpu"), None))
            .expect_err("an unknown GPU");
        assert!(format!("{err:#}").contains("GAPSCOPE_HW"), "{err:#}");
    }
}
