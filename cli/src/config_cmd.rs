//! `gapscope config [show]`: the defaults of `--db`, `--hw` and `--rules` every command
//! starts from, and where each came from (flag, env, file or default), with the config
//! file that was read.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use serde_json::json;

use crate::config::{ConfigFile, Defaults, Setting, Source};

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: Option<ConfigCommand>,
    #[command(flatten)]
    pub show: ShowArgs,
}

#[derive(Subcommand)]
pub enum ConfigCommand {
    /// The effective defaults and where each came from (what `gapscope config` prints).
    Show(ShowArgs),
}

/// The options a command would be given, to see what they override.
#[derive(Args, Clone, Default)]
pub struct ShowArgs {
    /// As a command given --db DB sees it.
    #[arg(long, value_name = "DB")]
    pub db: Option<String>,
    /// As a command given --hw GPU sees it.
    #[arg(long = "hw", value_name = "GPU")]
    pub hardware: Option<String>,
    /// As a command given --rules FILE sees it.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
    /// JSON output (with schema_version).
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: ConfigArgs, d: &Defaults, g: &crate::Global) -> Result<ExitCode> {
    let a = match a.command {
        Some(ConfigCommand::Show(s)) => s,
        None => a.show,
    };
    let flag = |v: Option<String>, name: &'static str, default: &Setting<String>| match v {
        Some(v) => Setting {
            value: Some(v),
            source: Source::Flag(name),
        },
        None => default.clone(),
    };
    let db = flag(a.db, "--db", &d.db);
    let db = Setting {
        // A password in a URL is never shown.
        value: db.value.map(|v| gapscope_history::redacted(&v)),
        ..db
    };
    let hw = flag(a.hardware, "--hw", &d.hw);
    let rules = flag(
        a.rules.map(|p| p.display().to_string()),
        "--rules",
        &Setting {
            value: d.rules.value.as_ref().map(|p| p.display().to_string()),
            source: d.rules.source.clone(),
        },
    );
    let rows = [("db", &db), ("hw", &hw), ("rules", &rules)];
    let out = if a.json {
        let (path, how) = file_json(&d.file);
        let mut settings = serde_json::Map::new();
        for (k, s) in rows {
            settings.insert(k.to_owned(), setting_json(s));
        }
        serde_json::to_string_pretty(&json!({
            "schema_version": 1,
            "config_file": {"path": path, "read": d.file.read().is_some(), "chosen_by": how},
            "settings": settings,
        }))? + "\n"
    } else {
        let mut lines = vec![("config file".to_owned(), file_text(&d.file), String::new())];
        for (k, s) in rows {
            let value = s.value.clone().unwrap_or_else(|| {
                match k {
                    "hw" => "not set (roofline needs --hw or --hw-profile)",
                    _ => "not set (the built-in rules alone)",
                }
                .to_owned()
            });
            // The file is named on the first line.
            let from = match &s.source {
                Source::File { line, .. } => format!("file, line {line}"),
                other => other.to_string(),
            };
            lines.push((k.to_owned(), value, from));
        }
        let w = lines
            .iter()
            .skip(1)
            .map(|l| l.1.chars().count())
            .max()
            .unwrap_or(0);
        lines
            .iter()
            .map(|(k, v, src)| {
                if src.is_empty() {
                    format!("{k:<11}  {v}\n")
                } else {
                    format!("{k:<11}  {v:<w$}  {src}\n")
                }
            })
            .collect()
    };
    g.write(&out)?;
    Ok(ExitCode::SUCCESS)
}

/// The config file line: the path and why, or why there is none.
fn file_text(f: &ConfigFile) -> String {
    match f {
        ConfigFile::Disabled(by) => format!("none ({by})"),
        ConfigFile::Named { path, by } => format!("{} ({by})", path.display()),
        ConfigFile::DefaultPlace { path, found: true } => {
            format!("{} (the default place)", path.display())
        }
        ConfigFile::DefaultPlace { path, found: false } => {
            format!("none ({} does not exist)", path.display())
        }
        ConfigFile::DefaultPlaceUnseen { path, why } => {
            format!("none (cannot look at {}: {why})", path.display())
        }
        ConfigFile::NoPlace => "none (neither XDG_CONFIG_HOME nor HOME is set)".to_owned(),
    }
}

/// The config file's path (null when none applies) and what chose it.
fn file_json(f: &ConfigFile) -> (Option<String>, &'static str) {
    match f {
        ConfigFile::Disabled(by) => (None, by),
        ConfigFile::Named { path, by } => (Some(path.display().to_string()), by),
        ConfigFile::DefaultPlace { path, .. } | ConfigFile::DefaultPlaceUnseen { path, .. } => {
            (Some(path.display().to_string()), "default")
        }
        ConfigFile::NoPlace => (None, "default"),
    }
}

fn setting_json(s: &Setting<String>) -> serde_json::Value {
    let (name, file, line) = match &s.source {
        Source::Flag(n) | Source::Env(n) => (Some(*n), None, None),
        Source::File { path, line } => (None, Some(path.display().to_string()), Some(*line)),
        Source::Default => (None, None, None),
    };
    let mut v = json!({"value": s.value, "source": s.source.kind()});
    if let Some(n) = name {
        v["name"] = json!(n);
    }
    if let Some(f) = file {
        v["file"] = json!(f);
        v["line"] = json!(line);
    }
    v
}
