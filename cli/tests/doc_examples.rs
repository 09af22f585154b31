#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
//! The output the docs show, checked against the binary (issue 37), so an example cannot go
//! stale unnoticed.
//!
//! Checked:
//! - README.md, "What the report looks like": `gapscope report
//!   traces/reference/hf-llama3.2-1b-npl8.json.gz` and the block under it, whole. The block is
//!   what a terminal shows (it says so), so the command runs on one: a pseudo-terminal from
//!   util-linux `script`, 200 columns (`COLUMNS`), stderr elsewhere (no progress bar).
//! - docs/CLI.md, every ```sh``` block whose first line is a `$ gapscope ...` prompt (the
//!   blocks that show output; a `\` at a line's end continues the command), run from the
//!   repository's root with stdout piped. Today: `buckets --explain
//!   'nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT'`, `roofline ... --hw-profile h200.json --weights
//!   fp8 --batch 1` (`h200.json` is the bundled profile measured on the H200,
//!   `cli/tests/data/calibrate-h200.json`), and `roofline ... --trace
//!   traces/reference/hf-llama3-8b-npl1.json.gz`.
//!
//! Not checked: blocks that show no output; output shown for inputs that are not bundled
//! (the `diff --what-if` table of `slow-npl128.gst`, `join`'s counts on a re-imported copy in
//! comments, its error block, `gate` and `history` on the reader's own files); the two
//! `verdict` lines of the `tp2` traces (not a `sh` block; they elide figures with `…`).
//!
//! The comparison is exact, line by line, but for three rules: trailing whitespace is
//! ignored; a shown line `...` stands for any number of lines; a shown line ending in `...`
//! stands for a line that starts with the text before it.

mod pty;

use gapscope_tests::{gapscope, repo};

/// Whether `out` (the lines printed) is what `shown` (a doc's block) shows.
fn check(shown: &[&str], out: &[&str]) -> Result<(), String> {
    let same = |doc: &str, line: &str| {
        let (doc, line) = (doc.trim_end(), line.trim_end());
        match doc.strip_suffix("...") {
            Some(start) if !start.is_empty() => line.starts_with(start),
            _ => doc == line,
        }
    };
    let mut at = 0;
    let mut skipping = false;
    for doc in shown {
        if doc.trim() == "..." {
            skipping = true;
            continue;
        }
        let found = if skipping {
            out[at..].iter().position(|l| same(doc, l)).map(|i| at + i)
        } else {
            out.get(at).filter(|l| same(doc, l)).map(|_| at)
        };
        match found {
            Some(i) => at = i + 1,
            None => {
                return Err(format!(
                    "shown line\n  {doc}\nnot printed{}; printed:\n{}",
                    if skipping {
                        " after the lines before it".to_owned()
                    } else {
                        format!(" as line {}", at + 1)
                    },
                    out.join("\n")
                ));
            }
        }
        skipping = false;
    }
    if skipping || at == out.len() {
        Ok(())
    } else {
        Err(format!(
            "printed more than shown, from line {}:\n{}",
            at + 1,
            out[at..].join("\n")
        ))
    }
}

/// A command line's words, as `sh` splits them (spaces, single and double quotes).
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, c) if c.is_whitespace() => out.extend(word.take()),
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    assert!(quote.is_none(), "unclosed quote in `{line}`");
    out.extend(word);
    out
}

/// The ```sh``` blocks of `md` that show a command's output: (the command's words, the
/// lines shown).
fn prompted_blocks(md: &str) -> Vec<(Vec<String>, Vec<&str>)> {
    let mut blocks = Vec::new();
    let mut lines = md.lines();
    while let Some(l) = lines.next() {
        if l.trim_end() != "```sh" {
            continue;
        }
        let body: Vec<&str> = lines
            .by_ref()
            .take_while(|l| l.trim_end() != "```")
            .collect();
        let Some(first) = body.first().and_then(|l| l.strip_prefix("$ gapscope ")) else {
            continue;
        };
        let mut command = first.to_owned();
        let mut n = 1;
        while command.ends_with('\\') {
            command.pop();
            command.push(' ');
            command.push_str(body[n]);
            n += 1;
        }
        blocks.push((words(&command), body[n..].to_vec()));
    }
    blocks
}

#[test]
fn readme_report_example_is_what_a_terminal_shows() {
    let readme = std::fs::read_to_string(repo("README.md")).unwrap();
    let section = readme
        .split("## What the report looks like")
        .nth(1)
        .expect("README has the section");
    let command = section
        .split('`')
        .nth(1)
        .expect("the section opens with the command in backticks");
    let shown: Vec<&str> = section
        .split("\n```\n")
        .nth(1)
        .expect("a block under the command")
        .lines()
        .collect();
    let args: Vec<String> = words(command);
    assert_eq!(args[0], "gapscope", "{command}");
    let args: Vec<&str> = args[1..].iter().map(String::as_str).collect();
    let (out, code) = pty::in_terminal(Some(&repo("")), &args, &[("COLUMNS", "200")], true);
    assert_eq!(code, 0, "{out}");
    let out: Vec<&str> = out.lines().collect();
    if let Err(e) = check(&shown, &out) {
        panic!("README.md, `{command}`: {e}");
    }
}

#[test]
fn cli_md_examples_print_what_they_show() {
    let md = std::fs::read_to_string(repo("docs/CLI.md")).unwrap();
    let blocks = prompted_blocks(&md);
    let commands: Vec<String> = blocks.iter().map(|(w, _)| w.join(" ")).collect();
    // The three of today (see the top of this file); a new one is checked as it comes.
    assert!(blocks.len() >= 3, "{commands:#?}");
    for needle in ["buckets --explain", "--hw-profile", "--trace"] {
        assert!(commands.iter().any(|c| c.contains(needle)), "{needle}");
    }
    let root = repo("");
    for (args, shown) in &blocks {
        let args: Vec<String> = args
            .iter()
            .map(|a| match a.as_str() {
                "h200.json" => "cli/tests/data/calibrate-h200.json".to_owned(),
                _ => a.clone(),
            })
            .collect();
        for a in args
            .iter()
            .filter(|a| a.contains('/') && !a.starts_with('-'))
        {
            assert!(
                root.join(a).exists(),
                "docs/CLI.md: `gapscope {}`: {a} is not bundled (substitute a bundled file here, \
                 or show the example without a `$ ` prompt)",
                args.join(" ")
            );
        }
        let o = gapscope().current_dir(&root).args(&args).output().unwrap();
        let out = String::from_utf8(o.stdout).unwrap();
        assert!(
            o.status.success(),
            "gapscope {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr)
        );
        let out: Vec<&str> = out.lines().collect();
        if let Err(e) = check(shown, &out) {
            panic!("docs/CLI.md, `gapscope {}`: {e}", args.join(" "));
        }
    }
}

#[test]
fn the_comparison_rules() {
    let out = ["a", "b  ", "c", "dddd"];
    assert!(check(&["a", "b", "c", "dddd"], &out).is_ok());
    assert!(check(&["a", "...", "dddd"], &out).is_ok());
    assert!(check(&["...", "c", "dd..."], &out).is_ok());
    assert!(check(&["a", "..."], &out).is_ok());
    assert!(check(&["a", "c", "dddd"], &out).is_err());
    assert!(check(&["a", "b"], &out).is_err());
    assert!(check(&["...", "x"], &out).is_err());
    assert_eq!(
        words("gapscope buckets --explain 'a b' \"c\"  d"),
        ["gapscope", "buckets", "--explain", "a b", "c", "d"]
    );
}
