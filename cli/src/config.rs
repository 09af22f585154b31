//! Defaults for `--db`, `--hw` and `--rules`: a command-line flag, else the environment
//! (`GAPSCOPE_DB`, `GAPSCOPE_HW`, `GAPSCOPE_RULES`), else the config file, else the built-in
//! default. The config file is `--config FILE`, else `GAPSCOPE_CONFIG`, else
//! `$XDG_CONFIG_HOME/gapscope/config.toml` (`~/.config/gapscope/config.toml` when
//! `XDG_CONFIG_HOME` is unset); `--no-config` or `GAPSCOPE_NO_CONFIG=1` reads none. A missing
//! file at the default place is no error; a file named by `--config` or `GAPSCOPE_CONFIG`
//! must exist. The environment is read once, by the program's entry ([`Env::from_process`]),
//! and everything below takes it as a value.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use gapscope_analyzer::config_file::{MAX_CONFIG_BYTES, parse_toml, read_config};
use serde::Deserialize;

pub const ENV_DB: &str = "GAPSCOPE_DB";
pub const ENV_HW: &str = "GAPSCOPE_HW";
pub const ENV_RULES: &str = "GAPSCOPE_RULES";
pub const ENV_CONFIG: &str = "GAPSCOPE_CONFIG";
pub const ENV_NO_CONFIG: &str = "GAPSCOPE_NO_CONFIG";

/// The history database when nothing names one.
pub const DEFAULT_DB: &str = ".gapscope/history.sqlite";

/// The variables this module reads, as the process has them (an empty one counts as unset).
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub db: Option<OsString>,
    pub hw: Option<OsString>,
    pub rules: Option<OsString>,
    pub config: Option<OsString>,
    pub no_config: Option<OsString>,
    pub xdg_config_home: Option<OsString>,
    pub home: Option<OsString>,
}

impl Env {
    /// The process's environment.
    #[expect(
        clippy::disallowed_methods,
        reason = "the program's entry reads its environment (GAPSCOPE_*, XDG_CONFIG_HOME, HOME)"
    )]
    pub fn from_process() -> Self {
        let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
        Env {
            db: var(ENV_DB),
            hw: var(ENV_HW),
            rules: var(ENV_RULES),
            config: var(ENV_CONFIG),
            no_config: var(ENV_NO_CONFIG),
            xdg_config_home: var("XDG_CONFIG_HOME"),
            home: var("HOME"),
        }
    }
}

/// `--config FILE` and `--no-config`, global options of every command.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct ConfigFlags {
    /// Read the defaults of --db, --hw and --rules from this TOML file instead of
    /// $XDG_CONFIG_HOME/gapscope/config.toml (~/.config/gapscope/config.toml); the file must
    /// exist [env: GAPSCOPE_CONFIG].
    #[arg(long, global = true, value_name = "FILE", conflicts_with = "no_config")]
    pub config: Option<PathBuf>,
    /// Read no config file (GAPSCOPE_DB, GAPSCOPE_HW and GAPSCOPE_RULES still apply)
    /// [env: GAPSCOPE_NO_CONFIG=1].
    #[arg(long, global = true)]
    pub no_config: bool,
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// The command line (`--db`).
    Flag(&'static str),
    /// An environment variable.
    Env(&'static str),
    /// A key of the config file, on this line.
    File { path: PathBuf, line: usize },
    /// Nothing set it.
    Default,
}

impl Source {
    /// `flag`, `env`, `file` or `default`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Flag(_) => "flag",
            Source::Env(_) => "env",
            Source::File { .. } => "file",
            Source::Default => "default",
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Flag(name) => write!(f, "flag {name}"),
            Source::Env(name) => write!(f, "env {name}"),
            Source::File { path, line } => write!(f, "file {}, line {line}", path.display()),
            Source::Default => f.write_str("default"),
        }
    }
}

/// One default and where it came from; `value` is `None` when nothing sets it.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: Option<T>,
    pub source: Source,
}

impl<T> Setting<T> {
    fn unset() -> Self {
        Setting {
            value: None,
            source: Source::Default,
        }
    }
}

/// Which config file was read, and why.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigFile {
    /// None: `--no-config` or `GAPSCOPE_NO_CONFIG` said so.
    Disabled(&'static str),
    /// Named by `--config` or `GAPSCOPE_CONFIG` (read).
    Named { path: PathBuf, by: &'static str },
    /// The default place; `found` says whether a file is there.
    DefaultPlace { path: PathBuf, found: bool },
    /// The default place could not be looked at (a home this user may not search, as for a
    /// command run as another user): read as no file, and why.
    DefaultPlaceUnseen { path: PathBuf, why: String },
    /// No default place: neither `XDG_CONFIG_HOME` nor `HOME` is set.
    NoPlace,
}

impl ConfigFile {
    /// The file that was read, if one was.
    pub fn read(&self) -> Option<&Path> {
        match self {
            ConfigFile::Named { path, .. } | ConfigFile::DefaultPlace { path, found: true } => {
                Some(path)
            }
            _ => None,
        }
    }
}

/// The defaults every command starts from.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    pub file: ConfigFile,
    pub db: Setting<String>,
    pub hw: Setting<String>,
    pub rules: Setting<PathBuf>,
}

/// The config file's keys. Any other key is an error, with its line.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileKeys {
    db: Option<toml::Spanned<String>>,
    hw: Option<toml::Spanned<String>>,
    rules: Option<toml::Spanned<String>>,
}

impl Defaults {
    /// The defaults `flags` and `env` give. Errors are one line naming the file (and the
    /// line) or the variable.
    pub fn resolve(flags: &ConfigFlags, env: &Env) -> Result<Self> {
        let file = config_file(flags, env)?;
        let (mut db, mut hw, mut rules) = (Setting::unset(), Setting::unset(), Setting::unset());
        if let Some(path) = file.read() {
            // Where the file came from, when the error line would not say it.
            let why = match &file {
                ConfigFile::DefaultPlace { .. } => {
                    " (the default config file; --no-config skips it)"
                }
                ConfigFile::Named { by: ENV_CONFIG, .. } => " (named by GAPSCOPE_CONFIG)",
                _ => "",
            };
            let text = read_config(path, "config file", MAX_CONFIG_BYTES)
                .map_err(|e| anyhow::anyhow!("{e}{why}"))?;
            let keys: FileKeys =
                parse_toml(path, &text, "config file").map_err(|e| anyhow::anyhow!("{e}{why}"))?;
            let dir = path.parent().unwrap_or(Path::new("."));
            let at = |v: &toml::Spanned<String>| -> Result<(String, Source)> {
                let line = line_of(&text, v.span().start);
                if v.get_ref().is_empty() {
                    anyhow::bail!(
                        "{}: invalid config file: an empty value (line {line}){why}",
                        path.display()
                    );
                }
                Ok((
                    v.get_ref().clone(),
                    Source::File {
                        path: path.to_owned(),
                        line,
                    },
                ))
            };
            if let Some(v) = &keys.db {
                let (v, source) = at(v)?;
                db = Setting {
                    value: Some(resolve_db(dir, v)),
                    source,
                };
            }
            if let Some(v) = &keys.hw {
                let (v, source) = at(v)?;
                hw = Setting {
                    value: Some(v),
                    source,
                };
            }
            if let Some(v) = &keys.rules {
                let (v, source) = at(v)?;
                rules = Setting {
                    value: Some(dir.join(v)),
                    source,
                };
            }
        }
        if let Some(v) = &env.db {
            db = Setting {
                value: Some(utf8(v, ENV_DB)?),
                source: Source::Env(ENV_DB),
            };
        }
        if let Some(v) = &env.hw {
            hw = Setting {
                value: Some(utf8(v, ENV_HW)?),
                source: Source::Env(ENV_HW),
            };
        }
        if let Some(v) = &env.rules {
            rules = Setting {
                value: Some(PathBuf::from(v)),
                source: Source::Env(ENV_RULES),
            };
        }
        if db.value.is_none() {
            db.value = Some(DEFAULT_DB.to_owned());
        }
        Ok(Defaults {
            file,
            db,
            hw,
            rules,
        })
    }

    /// `--rules`: the flag's file, else the default one (which must exist: its error says
    /// where it was named).
    pub fn fill_rules(&self, flag: &mut Option<PathBuf>) -> Result<()> {
        let (None, Some(p)) = (&flag, &self.rules.value) else {
            return Ok(());
        };
        std::fs::metadata(p)
            .map_err(|e| gapscope_analyzer::AnalyzerError::io(p, e))
            .with_context(|| format!("--rules from {}", self.rules.source))?;
        tracing::info!("--rules {} from {}", p.display(), self.rules.source);
        *flag = Some(p.clone());
        Ok(())
    }

    /// `--hw`: the flag's GPU, else the default one (which must be a GPU gapscope knows: its
    /// error says where it was named).
    pub fn fill_hw(&self, flag: &mut Option<String>) -> Result<()> {
        let (None, Some(gpu)) = (&flag, &self.hw.value) else {
            return Ok(());
        };
        gapscope_analyzer::roofline::hw::lookup(gpu)
            .with_context(|| format!("--hw from {}", self.hw.source))?;
        tracing::info!("--hw {gpu} from {}", self.hw.source);
        *flag = Some(gpu.clone());
        Ok(())
    }

    /// `--db`: the flag's database, else the default one.
    pub fn fill_db(&self, flag: &mut Option<String>) {
        if flag.is_none() {
            let db = self
                .db
                .value
                .clone()
                .unwrap_or_else(|| DEFAULT_DB.to_owned());
            if self.db.source != Source::Default {
                tracing::info!(
                    "--db {} from {}",
                    gapscope_history::redacted(&db),
                    self.db.source
                );
            }
            *flag = Some(db);
        }
    }
}

/// The config file `flags` and `env` choose; an error when a named one is missing.
fn config_file(flags: &ConfigFlags, env: &Env) -> Result<ConfigFile> {
    let named = |path: PathBuf, by: &'static str| -> Result<ConfigFile> {
        let path = std::path::absolute(&path).unwrap_or(path);
        match std::fs::metadata(&path) {
            Ok(_) => Ok(ConfigFile::Named { path, by }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                anyhow::bail!("{}: no such config file ({by})", path.display())
            }
            Err(e) => Err(anyhow::anyhow!("{}: {e} ({by})", path.display())),
        }
    };
    if flags.no_config {
        return Ok(ConfigFile::Disabled("--no-config"));
    }
    if let Some(p) = &flags.config {
        return named(p.clone(), "--config");
    }
    if let Some(v) = &env.no_config {
        match v.to_str().map(str::to_ascii_lowercase).as_deref() {
            Some("1" | "true" | "yes") => return Ok(ConfigFile::Disabled(ENV_NO_CONFIG)),
            Some("0" | "false" | "no") => {}
            _ => anyhow::bail!(
                "{ENV_NO_CONFIG}={}: use 1 (read no config file) or 0",
                v.to_string_lossy()
            ),
        }
    }
    if let Some(p) = &env.config {
        return named(PathBuf::from(p), ENV_CONFIG);
    }
    // XDG: a relative XDG_CONFIG_HOME is invalid and ignored.
    let base = match (&env.xdg_config_home, &env.home) {
        (Some(x), _) if Path::new(x).is_absolute() => PathBuf::from(x),
        (_, Some(h)) => Path::new(h).join(".config"),
        _ => return Ok(ConfigFile::NoPlace),
    };
    let path = base.join("gapscope").join("config.toml");
    Ok(match std::fs::metadata(&path) {
        Ok(_) => ConfigFile::DefaultPlace { path, found: true },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            ConfigFile::DefaultPlace { path, found: false }
        }
        // Whether a file is there cannot be known; a file that is there but cannot be read
        // is an error (from the read).
        Err(e) => {
            tracing::info!("no config file read: {}: {e}", path.display());
            ConfigFile::DefaultPlaceUnseen {
                path,
                why: e.to_string(),
            }
        }
    })
}

/// A file `db` is taken relative to the config file's directory; URLs (`postgres://`,
/// `sqlite://`) and SQLite's in-memory names (refused later, as on the command line) are
/// kept as written.
fn resolve_db(dir: &Path, db: String) -> String {
    let url = db.split_once("://").is_some_and(|(scheme, _)| {
        scheme.starts_with(|c: char| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
    });
    let memory = db == ":memory:" || db.eq_ignore_ascii_case("sqlite::memory:");
    if url || memory {
        db
    } else {
        dir.join(db).to_string_lossy().into_owned()
    }
}

fn utf8(v: &OsString, name: &str) -> Result<String> {
    v.to_str()
        .map(str::to_owned)
        .with_context(|| format!("{name} is not valid UTF-8"))
}

/// 1-based line of byte offset `at` in `text`.
fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A home with `~/.config/gapscope/config.toml` holding `body`.
    fn home_with(body: &str) -> (tempfile::TempDir, Env) {
        let home = tempfile::tempdir().unwrap();
        let dir = home.path().join(".config/gapscope");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), body).unwrap();
        let env = Env {
            home: Some(home.path().into()),
            ..Env::default()
        };
        (home, env)
    }

    fn resolve(env: &Env) -> Result<Defaults> {
        Defaults::resolve(&ConfigFlags::default(), env)
    }

    #[test]
    fn env_beats_the_file_which_beats_the_default() {
        let (home, mut env) = home_with("hw = \"h200\"\nrules = \"r.toml\"\n");
        let file = home.path().join(".config/gapscope/config.toml");
        let d = resolve(&env).unwrap();
        assert_eq!(d.hw.value.as_deref(), Some("h200"));
        assert_eq!(
            d.hw.source,
            Source::File {
                path: file.clone(),
                line: 1
            }
        );
        assert_eq!(d.db.value.as_deref(), Some(DEFAULT_DB));
        assert_eq!(d.db.source, Source::Default);
        env.hw = Some("b200".into());
        env.db = Some("postgres://u:secret@h/db".into());
        let d = resolve(&env).unwrap();
        assert_eq!(d.hw.value.as_deref(), Some("b200"));
        assert_eq!(d.hw.source, Source::Env(ENV_HW));
        assert_eq!(d.db.source, Source::Env(ENV_DB));
        // The file still gives what the environment does not.
        assert_eq!(
            d.rules.source,
            Source::File {
                path: file,
                line: 2
            }
        );
        // A flag beats them all.
        let mut flag = Some("h100-sxm".to_owned());
        d.fill_hw(&mut flag).unwrap();
        assert_eq!(flag.as_deref(), Some("h100-sxm"));
        let mut none = None;
        d.fill_hw(&mut none).unwrap();
        assert_eq!(none.as_deref(), Some("b200"));
    }

    #[test]
    fn file_paths_are_taken_from_the_files_directory() {
        let (home, env) = home_with("rules = \"sub/r.toml\"\ndb = \"runs/h.sqlite\"\n");
        let dir = home.path().join(".config/gapscope");
        let d = resolve(&env).unwrap();
        assert_eq!(d.rules.value, Some(dir.join("sub/r.toml")));
        assert_eq!(
            d.db.value,
            Some(dir.join("runs/h.sqlite").to_string_lossy().into_owned())
        );
        for url in [
            "postgres://ci@db/gapscope",
            "sqlite://x.db?mode=rwc",
            ":memory:",
        ] {
            assert_eq!(resolve_db(&dir, url.to_owned()), url);
        }
        assert_eq!(
            resolve_db(&dir, "/abs/h.sqlite".to_owned()),
            "/abs/h.sqlite"
        );
        // The environment's relative paths stay relative (to the working directory).
        let env = Env {
            rules: Some("mine.toml".into()),
            ..env
        };
        assert_eq!(resolve(&env).unwrap().rules.value, Some("mine.toml".into()));
    }

    #[test]
    fn which_file_is_read() {
        let (home, mut env) = home_with("hw = \"h200\"\n");
        // A relative XDG_CONFIG_HOME is not a base directory (XDG): HOME's is used.
        env.xdg_config_home = Some("rel".into());
        let d = resolve(&env).unwrap();
        assert!(matches!(
            d.file,
            ConfigFile::DefaultPlace { found: true, .. }
        ));
        // An absolute one is, and a missing file there is no error.
        env.xdg_config_home = Some(home.path().join("xdg").into());
        let d = resolve(&env).unwrap();
        assert_eq!(
            d.file,
            ConfigFile::DefaultPlace {
                path: home.path().join("xdg/gapscope/config.toml"),
                found: false
            }
        );
        assert_eq!(d.hw.value, None);
        env.xdg_config_home = None;
        for (v, read) in [("1", false), ("TRUE", false), ("0", true), ("no", true)] {
            env.no_config = Some(v.into());
            assert_eq!(resolve(&env).unwrap().file.read().is_some(), read, "{v}");
        }
        env.no_config = Some("maybe".into());
        let e = resolve(&env).unwrap_err().to_string();
        assert!(e.contains("GAPSCOPE_NO_CONFIG=maybe"), "{e}");
        env.no_config = None;
        env.config = Some(home.path().join("none.toml").into());
        let e = resolve(&env).unwrap_err().to_string();
        assert!(e.contains("no such config file (GAPSCOPE_CONFIG)"), "{e}");
        // --no-config beats GAPSCOPE_CONFIG.
        let flags = ConfigFlags {
            config: None,
            no_config: true,
        };
        let d = Defaults::resolve(&flags, &env).unwrap();
        assert_eq!(d.file, ConfigFile::Disabled("--no-config"));
        let env = Env::default();
        assert_eq!(resolve(&env).unwrap().file, ConfigFile::NoPlace);
        // A default place that cannot be looked at (here `.config` is a file; a home this
        // user may not search is the same) is no file, and no error.
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(".config"), "").unwrap();
        let env = Env {
            home: Some(home.path().into()),
            ..Env::default()
        };
        let d = resolve(&env).unwrap();
        assert!(
            matches!(&d.file, ConfigFile::DefaultPlaceUnseen { path, .. }
                if path.ends_with(".config/gapscope/config.toml")),
            "{:?}",
            d.file
        );
        assert_eq!(d.file.read(), None);
    }

    #[test]
    fn bad_values_name_the_file_and_line() {
        let (_home, env) = home_with("hw = \"h200\"\n\nrules = \"\"\n");
        let e = resolve(&env).unwrap_err().to_string();
        assert!(
            e.contains("config.toml: invalid config file: an empty value (line 3)"),
            "{e}"
        );
        assert!(
            e.ends_with("(the default config file; --no-config skips it)"),
            "{e}"
        );
        let (_home, env) = home_with("hw = \"h900\"\n");
        let d = resolve(&env).unwrap();
        let e = format!("{:#}", d.fill_hw(&mut None).unwrap_err());
        assert!(
            e.starts_with("--hw from file ") && e.contains("line 1: unknown GPU"),
            "{e}"
        );
    }
}
