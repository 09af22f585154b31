#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
//! Defaults of `--db`, `--hw` and `--rules` from the environment and the config file, end to
//! end: flag > environment > config file > built-in default, paths in the file taken from its
//! directory, one-line errors naming the file and line, and `gapscope config`. Every command
//! runs with a home of its own and no `GAPSCOPE_*` variable, so the developer's own config
//! never takes part.

use gapscope_tests::{gapscope, one_line_error, repo, s, stderr};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const VARS: [&str; 5] = [
    "GAPSCOPE_DB",
    "GAPSCOPE_HW",
    "GAPSCOPE_RULES",
    "GAPSCOPE_CONFIG",
    "GAPSCOPE_NO_CONFIG",
];

/// A home of its own (`HOME`, no `XDG_CONFIG_HOME`), a working directory in it, and its
/// default config file's path.
struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        Home { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// Writes `~/.config/gapscope/config.toml`; its path.
    fn config(&self, body: &str) -> PathBuf {
        let p = self.path(".config/gapscope/config.toml");
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, body).unwrap();
        p
    }

    /// `gapscope ARGS` in `~/work` with `env` set and nothing else of ours.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c: Command = gapscope();
        c.current_dir(self.path("work"))
            .env("HOME", self.dir.path())
            .env_remove("XDG_CONFIG_HOME");
        for v in VARS {
            c.env_remove(v);
        }
        c.envs(env.iter().copied()).args(args).output().unwrap()
    }

    fn ok(&self, args: &[&str], env: &[(&str, &str)]) -> String {
        let o = self.run(args, env);
        assert!(o.status.success(), "{args:?} {env:?}: {}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    }

    fn json(&self, args: &[&str], env: &[(&str, &str)]) -> serde_json::Value {
        serde_json::from_str(&self.ok(args, env)).unwrap()
    }
}

/// A rules file at `p` that sends kernels named `zz_probe...` to `bucket`.
fn probe_rules(p: &Path, bucket: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let body = format!("[[rule]]\nname = \"probe\"\nregex = '^zz_probe'\nbucket = \"{bucket}\"\n");
    std::fs::write(p, body).unwrap();
}

/// The bucket `buckets --explain zz_probe` gives under `extra` options and `env`.
fn probe(h: &Home, extra: &[&str], env: &[(&str, &str)]) -> String {
    let mut args = vec!["buckets", "--json", "--explain", "zz_probe_kernel"];
    args.extend_from_slice(extra);
    h.json(&args, env)["bucket"].as_str().unwrap().to_owned()
}

#[test]
fn a_flag_beats_the_environment_which_beats_the_file_which_beats_the_default() {
    let h = Home::new();
    let (file_rules, env_rules, flag_rules) = (
        h.path("f/file.toml"),
        h.path("e/env.toml"),
        h.path("flag.toml"),
    );
    probe_rules(&file_rules, "attention");
    probe_rules(&env_rules, "norm");
    probe_rules(&flag_rules, "rope");
    let env = [("GAPSCOPE_RULES", s(&env_rules))];
    let flag = ["--rules", s(&flag_rules)];
    assert_eq!(probe(&h, &[], &[]), "other", "the built-in rules alone");
    h.config(&format!("rules = '{}'\nhw = \"h200\"\n", s(&file_rules)));
    assert_eq!(probe(&h, &[], &[]), "attention");
    assert_eq!(probe(&h, &[], &env), "norm");
    assert_eq!(probe(&h, &flag, &env), "rope");
    assert_eq!(probe(&h, &["--no-config"], &[]), "other");
    assert_eq!(probe(&h, &[], &[("GAPSCOPE_NO_CONFIG", "1")]), "other");

    // `config show` says the same, and where each value came from.
    let v = h.json(&["config", "show", "--json", "--db", "x.sqlite"], &env);
    let set = &v["settings"];
    assert_eq!(set["db"]["value"], "x.sqlite");
    assert_eq!(set["db"]["source"], "flag");
    assert_eq!(set["rules"]["value"], s(&env_rules));
    assert_eq!(set["rules"]["source"], "env");
    assert_eq!(set["rules"]["name"], "GAPSCOPE_RULES");
    assert_eq!(set["hw"]["value"], "h200");
    assert_eq!(set["hw"]["source"], "file");
    assert_eq!(set["hw"]["line"], 2);
    let v = h.json(&["config", "--json", "--no-config"], &env);
    assert_eq!(v["settings"]["hw"]["value"], serde_json::Value::Null);
    assert_eq!(v["settings"]["hw"]["source"], "default");
    assert_eq!(v["settings"]["db"]["value"], ".gapscope/history.sqlite");
    assert_eq!(v["config_file"]["chosen_by"], "--no-config");

    // The analysis commands take the default rules too: a file that sends every kernel
    // to `attention` leaves `report` one kernel bucket.
    let all = h.path("all.toml");
    std::fs::write(
        &all,
        "replace_builtin = true\n[[rule]]\nname = \"all\"\nregex = '.'\nbucket = \"attention\"\n",
    )
    .unwrap();
    let trace = repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz");
    let report = |env: &[(&str, &str)]| {
        let v = h.json(&["report", "-q", "--json", s(&trace)], env);
        let b = v["reports"][0]["buckets"].as_array().unwrap().clone();
        b.iter()
            .map(|r| r["bucket"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
    };
    assert!(report(&[]).len() > 1);
    let only = report(&[("GAPSCOPE_RULES", s(&all))]);
    assert!(only.contains(&"attention".to_owned()), "{only:?}");
    assert!(!only.contains(&"gemm_dense".to_owned()), "{only:?}");
}

#[test]
fn hw_and_db_defaults_serve_roofline_and_history() {
    let h = Home::new();
    let model = repo("models/llama-3-8b.json");
    let roof = ["roofline", "--model", s(&model), "--batch", "1"];
    // No GPU anywhere: the error says how to set one.
    let e = one_line_error(&h.run(&roof, &[]));
    assert!(e.contains("give --hw GPU or --hw-profile FILE") && e.contains("GAPSCOPE_HW"));
    h.config("hw = 'h100-sxm'\n");
    assert!(h.ok(&roof, &[]).contains("hardware  NVIDIA H100 SXM"));
    let out = h.ok(&roof, &[("GAPSCOPE_HW", "h200")]);
    assert!(out.contains("hardware  NVIDIA H200"), "{out}");
    // A profile given on the command line is the hardware; the default GPU stands aside.
    let profile = repo("cli/tests/data/calibrate-h200.json");
    let mut with_profile = roof.to_vec();
    with_profile.extend(["--hw-profile", s(&profile)]);
    assert!(h.ok(&with_profile, &[]).contains("(measured ceilings)"));
    // A default GPU gapscope does not know is an error naming where it was set.
    let e = one_line_error(&h.run(&roof, &[("GAPSCOPE_HW", "h900")]));
    assert!(
        e.contains("--hw from env GAPSCOPE_HW: unknown GPU \"h900\""),
        "{e}"
    );
    h.config("hw = 'h200'\n\n  hw2 = 1\n");
    let e = one_line_error(&h.run(&roof, &[]));
    assert!(
        e.contains("unknown field `hw2`") && e.contains("(line 3, column 3)"),
        "{e}"
    );

    // `db` in the file is taken from the file's directory, wherever the command runs.
    let cfg = h.config("db = 'runs/history.sqlite'\n");
    let db = cfg.parent().unwrap().join("runs/history.sqlite");
    let e = one_line_error(&h.run(&["history", "list"], &[]));
    assert!(
        e.contains(&format!("no history database at {}", db.display())),
        "{e}"
    );
    // The environment's is taken from the working directory, as a flag's is.
    let e = one_line_error(&h.run(&["history", "list"], &[("GAPSCOPE_DB", "mine.sqlite")]));
    assert!(e.contains("no history database at mine.sqlite"), "{e}");
    let e = one_line_error(&h.run(&["history", "list", "--db", "flag.sqlite"], &[]));
    assert!(e.contains("no history database at flag.sqlite"), "{e}");
}

#[test]
fn relative_paths_in_the_file_are_taken_from_its_directory() {
    let h = Home::new();
    let elsewhere = h.path("elsewhere");
    let cfg = elsewhere.join("conf/gapscope.toml");
    probe_rules(&elsewhere.join("conf/rules/mine.toml"), "sampling");
    std::fs::write(&cfg, "rules = \"rules/mine.toml\"\n").unwrap();
    // --config (relative to the working directory), and GAPSCOPE_CONFIG.
    assert_eq!(
        probe(&h, &["--config", "../elsewhere/conf/gapscope.toml"], &[]),
        "sampling"
    );
    assert_eq!(probe(&h, &[], &[("GAPSCOPE_CONFIG", s(&cfg))]), "sampling");
    let v = h.json(&["config", "--json"], &[("GAPSCOPE_CONFIG", s(&cfg))]);
    assert_eq!(v["config_file"]["chosen_by"], "GAPSCOPE_CONFIG");
    assert_eq!(
        v["settings"]["rules"]["value"],
        s(&elsewhere.join("conf/rules/mine.toml"))
    );
    // XDG_CONFIG_HOME, when set, is where the default file lives.
    let xdg = h.path("xdg");
    probe_rules(&xdg.join("gapscope/r.toml"), "rope");
    std::fs::write(xdg.join("gapscope/config.toml"), "rules = 'r.toml'\n").unwrap();
    assert_eq!(probe(&h, &[], &[("XDG_CONFIG_HOME", s(&xdg))]), "rope");
    // A default file whose rules file is gone: the error says where it was named.
    std::fs::remove_file(xdg.join("gapscope/r.toml")).unwrap();
    let e = one_line_error(&h.run(&["buckets"], &[("XDG_CONFIG_HOME", s(&xdg))]));
    assert!(
        e.contains(&format!(
            "--rules from file {}, line 1: {}",
            xdg.join("gapscope/config.toml").display(),
            xdg.join("gapscope/r.toml").display()
        )),
        "{e}"
    );
}

#[test]
fn bad_config_files_are_one_line_errors_naming_the_file_and_line() {
    let h = Home::new();
    for (body, want) in [
        ("db = 'a'\nrules = \"x\n", "(line 2, column"),
        (
            "hw = 'h200'\ncolour = true\n",
            "unknown field `colour`, expected one of `db`, `hw`, `rules` (line 2, column 1)",
        ),
        (
            "db = 5\n",
            "invalid type: integer `5`, expected a string (line 1, column 6)",
        ),
        ("[gate]\nmin_effect = 0.1\n", "unknown field `gate`"),
        ("\n\nhw = ''\n", "an empty value (line 3)"),
    ] {
        let cfg = h.config(body);
        for args in [&["config"][..], &["buckets"], &["history", "list"]] {
            let e = one_line_error(&h.run(args, &[]));
            assert!(
                e.starts_with(&format!(
                    "gapscope: error: {}: invalid config file: ",
                    cfg.display()
                )),
                "{body:?}: {e}"
            );
            assert!(e.contains(want), "{body:?}: {e}");
            assert!(e.trim_end().ends_with("--no-config skips it)"), "{e}");
        }
        // --no-config reads none; completions never read it.
        h.ok(&["buckets", "--no-config"], &[]);
        h.ok(&["completions", "bash"], &[]);
    }
    // A missing file at the default place is no error; a named one is.
    std::fs::remove_file(h.path(".config/gapscope/config.toml")).unwrap();
    let o = h.run(&["config"], &[]);
    assert!(o.status.success() && o.stderr.is_empty(), "{}", stderr(&o));
    let e = one_line_error(&h.run(&["config", "--config", "nope.toml"], &[]));
    assert!(
        e.contains("nope.toml: no such config file (--config)"),
        "{e}"
    );
    let e = one_line_error(&h.run(&["config"], &[("GAPSCOPE_CONFIG", "nope.toml")]));
    assert!(
        e.contains("nope.toml: no such config file (GAPSCOPE_CONFIG)"),
        "{e}"
    );
    let e = one_line_error(&h.run(&["config", "--config", "x", "--no-config"], &[]));
    assert!(e.contains("cannot be used with"), "{e}");
}

#[test]
fn config_show_prints_each_value_and_where_it_came_from() {
    let h = Home::new();
    let cfg = h.config("# defaults\nhw = \"h200\"\ndb = \"postgres://ci:hunter2@db/gapscope\"\n");
    let out = h.ok(&["config"], &[("GAPSCOPE_RULES", "r.toml")]);
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    let config_line = format!("{} (the default place)", cfg.display());
    assert_eq!(lines[0], ["config file", config_line.as_str()], "{out}");
    assert_eq!(
        lines[1],
        ["db", "postgres://ci:***@db/gapscope", "file, line 3"],
        "{out}"
    );
    assert_eq!(lines[2], ["hw", "h200", "file, line 2"], "{out}");
    assert_eq!(lines[3], ["rules", "r.toml", "env GAPSCOPE_RULES"], "{out}");
    assert_eq!(lines.len(), 4, "{out}");
    assert!(!out.contains("hunter2"));
    let out = h.ok(&["config", "show", "--hw", "b200", "--no-config"], &[]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("hw") && l.ends_with("flag --hw")),
        "{out}"
    );
    assert!(out.contains("none (--no-config)"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.starts_with("rules") && l.ends_with("default")),
        "{out}"
    );
}
