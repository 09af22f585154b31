#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
//! The command line's hygiene (issue 37): no option that does nothing, help for every
//! argument, labelled tables, Markdown without empty labels, shell completions, the hint
//! for a truncated input, colour only on a terminal.

mod pty;

use gapscope_tests::{one_line_error, repo, run, s, stdout};

const QWEN: &str = "traces/reference/hf-qwen3-0.6b-npl1.json.gz";

#[test]
fn markdown_report_has_no_empty_bold_labels() {
    // The idle's host scopes take one line each; the text output leaves the label blank on
    // all but the first, which Markdown printed as `- ****: 5.649 ms/step ...`.
    let o = run(&["report", "-q", "--markdown", s(&repo(QWEN))]);
    assert!(o.status.success());
    let md = stdout(&o);
    assert!(!md.contains("****"), "{md}");
    let lines: Vec<&str> = md.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("- **host scopes**: "))
        .expect("a host scopes line");
    // The next scopes are items under it.
    for l in &lines[at + 1..at + 3] {
        assert!(l.starts_with("  - ") && l.contains("ms/step"), "{l}\n{md}");
    }
    assert!(lines[at + 3].starts_with("- **lever**: "), "{md}");
}

#[test]
fn top_is_refused_where_it_does_nothing() {
    let t = repo(QWEN);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    for (cmd, args) in [
        (
            "gate",
            vec![
                "gate",
                "--baseline",
                s(&t),
                "--current",
                s(&t),
                "--top",
                "3",
            ],
        ),
        (
            "roofline",
            vec![
                "roofline",
                "--model",
                "models/llama-3-8b.json",
                "--hw",
                "h200",
                "--top",
                "3",
            ],
        ),
        (
            "history add",
            vec!["history", "--db", s(&db), "add", s(&t), "--top", "3"],
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{cmd}");
        let e = one_line_error(&o);
        assert!(
            e.contains("unexpected argument '--top'") && e.contains(&format!("gapscope {cmd}")),
            "{cmd}: {e}"
        );
        let mut help = cmd.split(' ').collect::<Vec<_>>();
        help.push("--help");
        let help = stdout(&run(&help));
        assert!(
            help.contains("--rules") && !help.contains("--top"),
            "{cmd}: {help}"
        );
    }
    assert!(!db.exists(), "a refused `history add` creates nothing");
    // Where it lists names it stays.
    for cmd in ["report", "diff"] {
        assert!(
            stdout(&run(&[cmd, "--help"])).contains("--top <N>"),
            "{cmd}"
        );
    }
}

#[test]
fn history_arguments_have_help() {
    for (cmd, arg) in [
        ("add", "<TRACE>"),
        ("list", "--limit <LIMIT>"),
        ("show", "<ID>"),
        ("trend", "--bucket <BUCKET>"),
        ("trend", "--limit <LIMIT>"),
    ] {
        let help = stdout(&run(&["history", cmd, "--help"]));
        let line = help
            .lines()
            .find(|l| l.trim_start().starts_with(arg))
            .unwrap_or_else(|| panic!("{cmd}: no {arg} in {help}"));
        let said = line.trim_start()[arg.len()..].trim();
        // `[default: 20]` alone is no help.
        assert!(
            said.len() > 20 && !said.starts_with("[default"),
            "{cmd} {arg}: `{line}`"
        );
    }
}

#[test]
fn history_tables_are_labelled_and_list_has_date_and_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let db = s(&db);
    let add = run(&[
        "history",
        "--db",
        db,
        "add",
        "-q",
        s(&repo(QWEN)),
        "--label",
        "abc",
    ]);
    assert!(add.status.success(), "{}", one_line_error(&add));
    let list = stdout(&run(&["history", "--db", db, "list"]));
    let mut lines = list.lines();
    let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        head,
        [
            "id", "date", "(UTC)", "accepted", "steps", "TPOT", "ms", "busy", "%", "ms/token",
            "tok/step", "ranks", "gpu", "label", "trace"
        ],
        "{list}"
    );
    let row = lines.next().unwrap();
    let date = regex::Regex::new(r"^\s+1  \d{4}-\d\d-\d\d \d\d:\d\d  ").unwrap();
    assert!(date.is_match(row), "{list}");
    assert!(row.contains("  0: NVIDIA H200 (132 SMs)  abc  "), "{list}");
    // The GPU column starts where its header does.
    assert_eq!(row.find("0: NVIDIA"), list.find("gpu"), "{list}");

    let show = stdout(&run(&["history", "--db", db, "show", "1"]));
    let lines: Vec<&str> = show.lines().collect();
    assert!(
        lines[0].starts_with("run 1 (")
            && lines[0].contains("label abc")
            && lines[0].contains("GPU 0: NVIDIA H200")
            && lines[0].contains("16 decode steps")
            && lines[0].ends_with("hf-qwen3-0.6b-npl1.json.gz"),
        "{show}"
    );
    assert_eq!(lines[1], "buckets per decode step (the stored medians)");
    assert!(
        lines[2].starts_with("bucket ") && lines[2].contains("ms/step"),
        "{show}"
    );

    let trend = stdout(&run(&[
        "history",
        "--db",
        db,
        "trend",
        "--bucket",
        "gemm_dense",
    ]));
    let lines: Vec<&str> = trend.lines().collect();
    let head: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(head, ["id", "date", "(UTC)", "ms/step", "label"], "{trend}");
    assert!(lines[2].ends_with("  abc"), "{trend}");
}

#[test]
fn a_truncated_input_points_at_allow_truncated() {
    const HINT: &str = " (--allow-truncated loads what it holds)";
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(repo(QWEN)).unwrap();
    let cut = dir.path().join("cut.json.gz");
    std::fs::write(&cut, &full[..full.len() / 2]).unwrap();
    let (t, whole) = (s(&cut), repo(QWEN));
    let out = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let (chrome, gst, db) = (out("x.json"), out("x.gst"), out("h.sqlite"));
    let commands: Vec<Vec<&str>> = vec![
        vec!["report", "-q", t],
        vec!["diff", "-q", t, s(&whole)],
        vec!["gate", "-q", "--baseline", s(&whole), "--current", t],
        vec!["export", "-q", t, "--chrome", &chrome],
        vec!["import", "-q", t, "-o", &gst],
        vec!["history", "--db", &db, "add", "-q", t],
        vec![
            "roofline",
            "-q",
            "--model",
            "../models/llama-3-8b.json",
            "--hw",
            "h200",
            "--trace",
            t,
        ],
    ];
    for args in &commands {
        let e = one_line_error(&run(args));
        assert!(
            e.trim_end().ends_with(HINT) && e.contains("cut.json.gz: gzip stream is truncated"),
            "{args:?}: {e}"
        );
    }
    // Standard input too, named `-`.
    let o = gapscope_tests::gapscope()
        .args(["report", "-q", "-"])
        .stdin(std::fs::File::open(&cut).unwrap())
        .output()
        .unwrap();
    let e = one_line_error(&o);
    assert!(
        e.starts_with("gapscope: error: -: ") && e.trim_end().ends_with(HINT),
        "{e}"
    );
    // Given the option, a file cut before its first event still fails, without the hint;
    // `join` has no such option.
    let tiny = dir.path().join("tiny.json.gz");
    std::fs::write(&tiny, &full[..300]).unwrap();
    let e = one_line_error(&run(&["report", "-q", "--allow-truncated", s(&tiny)]));
    assert!(
        e.contains("truncated") && !e.contains("--allow-truncated"),
        "{e}"
    );
    let engine = repo("traces/reference/engine-llama3-8b-npl1.gst");
    let e = one_line_error(&run(&["join", "-q", s(&engine), t, "-o", &gst]));
    assert!(
        e.contains("truncated") && !e.contains("--allow-truncated"),
        "{e}"
    );
    // An input that is whole but broken gets no hint.
    let mut bad = full.clone();
    let n = bad.len();
    bad[n - 5] ^= 0xff; // the gzip trailer's length
    let broken = dir.path().join("broken.json.gz");
    std::fs::write(&broken, &bad).unwrap();
    let e = one_line_error(&run(&["report", "-q", s(&broken)]));
    assert!(!e.contains("--allow-truncated"), "{e}");
}

#[test]
fn no_progress_bar_before_an_input_that_cannot_be_opened() {
    // On a terminal: the bar shows once the input is open and has a size, so a missing
    // file gets its error line alone.
    let (seen, code) = pty::in_terminal(None, &["report", "missing.json"], &[], false);
    assert_eq!(code, 2, "{seen}");
    assert_eq!(
        seen, "gapscope: error: missing.json: No such file or directory (os error 2)\n",
        "{seen:?}"
    );
    // A truncated one shows its bar while it reads, and the error line starts clean.
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(repo(QWEN)).unwrap();
    let cut = dir.path().join("cut.json.gz");
    std::fs::write(&cut, &full[..full.len() / 2]).unwrap();
    let (seen, code) = pty::in_terminal(None, &["report", s(&cut)], &[], false);
    assert_eq!(code, 2, "{seen}");
    let last = seen.lines().last().unwrap();
    let error = last.rsplit('\r').next().unwrap();
    let error = error.strip_prefix("\u{1b}[2K").unwrap_or(error);
    assert!(error.starts_with("gapscope: error: "), "{seen:?}");
}

#[test]
fn completions_for_every_shell() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = run(&["completions", shell]);
        assert!(o.status.success(), "{shell}");
        let script = stdout(&o);
        for word in ["report", "diff", "gate", "history", "allow-truncated"] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
    }
    // The bash script completes a subcommand when bash loads it.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("gapscope.bash");
    std::fs::write(&file, stdout(&run(&["completions", "bash"]))).unwrap();
    let o = std::process::Command::new("bash")
        .arg("-c")
        .arg(
            r#"source "$1"; COMP_WORDS=(gapscope rep); COMP_CWORD=1; _gapscope gapscope rep gapscope; printf '%s\n' "${COMPREPLY[@]}""#,
        )
        .arg("bash")
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(stdout(&o), "report\n", "{}", gapscope_tests::stderr(&o));
    let e = one_line_error(&run(&["completions", "tcsh"]));
    assert!(e.contains("invalid value 'tcsh'"), "{e}");
}

#[test]
fn gate_verdicts_in_colour_on_a_terminal_only() {
    use gapscope_tests::traces::{save, stretched};
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.gst");
    let o = run(&["import", "-q", s(&repo(QWEN)), "-o", s(&base)]);
    assert!(o.status.success());
    let t = gapscope_traces::read_trace(&base, &Default::default()).unwrap();
    let slow = save(dir.path(), "slow.gst", &stretched(&t, 1.5));
    const ESC: char = '\u{1b}';
    for (cur, word, code, sgr) in [(&base, "pass", 0, "32"), (&slow, "REGRESSION", 1, "1;31")] {
        let args = ["gate", "-q", "--baseline", s(&base), "--current", s(cur)];
        // Piped: plain words.
        let o = run(&args);
        assert_eq!(o.status.code(), Some(code));
        let out = stdout(&o);
        assert!(out.starts_with(&format!("gate: {word}\n")), "{out}");
        assert!(!out.contains(ESC), "{out:?}");
        // On a terminal: the verdict and each judgement's word in colour, nothing else.
        let (seen, c) = pty::in_terminal(None, &args, &[], true);
        assert_eq!(c, code, "{seen}");
        let painted = format!("{ESC}[{sgr}m{word}{ESC}[0m");
        assert!(seen.starts_with(&format!("gate: {painted}\n")), "{seen:?}");
        assert!(
            seen.lines()
                .any(|l| l.starts_with("TPOT ") && l.contains(&painted)),
            "{seen:?}"
        );
        assert_eq!(
            seen.replace(&painted, word)
                .replace(&format!("{ESC}[32mpass{ESC}[0m"), "pass"),
            out,
            "{seen:?}"
        );
        // NO_COLOR: none.
        let (seen, _) = pty::in_terminal(None, &args, &[("NO_COLOR", "1")], true);
        assert_eq!(seen, out);
        // Markdown and JSON never.
        for fmt in ["--markdown", "--json"] {
            let mut a = args.to_vec();
            a.push(fmt);
            let (seen, _) = pty::in_terminal(None, &a, &[], true);
            assert!(!seen.contains(ESC), "{fmt}: {seen:?}");
        }
    }
}

/// Issue 37: `diff` says its figures are means (`report`'s are medians), on its header.
#[test]
fn diff_says_its_step_figures_are_means() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gapscope"))
        .args([
            "diff",
            "-q",
            "../traces/reference/hf-llama3.2-1b-npl8-stack-cudnn.json.gz",
            "../traces/reference/hf-llama3.2-1b-npl8-stack-math.json.gz",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("gapscope runs");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("16 decode steps, mean 135.5"), "{text}");
    assert!(
        text.contains("diff figures are means over the decode steps"),
        "{text}"
    );
}
