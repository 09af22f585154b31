#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
//! Kernel names as the commands print them (issue 37): whole when piped or with `--wide`;
//! on a terminal cut in the middle to 80 characters, keeping the tail, and never two
//! different names alike. On the bundled cuDNN and math SDPA traces of one model, whose
//! diff lists two cuBLAS GEMV kernels that differ only in the middle of their 457 characters.

mod pty;

use gapscope_tests::{json, repo, run, s, stdout};

const CUDNN: &str = "traces/reference/hf-llama3.2-1b-npl8-stack-cudnn.json.gz";
const MATH: &str = "traces/reference/hf-llama3.2-1b-npl8-stack-math.json.gz";
const HF_1B: &str = "traces/reference/hf-llama3.2-1b-npl8.json.gz";

/// The diff's kernel names, whole, from its JSON: only in A, only in B, and moved.
fn diff_names() -> (Vec<String>, Vec<String>) {
    let v = json(&["diff", "-q", "--json", s(&repo(CUDNN)), s(&repo(MATH))]);
    let st = &v["structural"];
    let only: Vec<String> = ["only_in_a", "only_in_b"]
        .iter()
        .flat_map(|k| st[k].as_array().unwrap().iter())
        .map(|p| p[0].as_str().unwrap().to_owned())
        .collect();
    let moved = v["top_moved"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap().to_owned())
        .collect();
    (only, moved)
}

/// The names of the `only in A` and `only in B` lists of a text diff.
fn only_in_lines(out: &str) -> Vec<String> {
    out.lines()
        .skip_while(|l| !l.starts_with("only in A"))
        .take_while(|l| !l.is_empty())
        .filter(|l| !l.starts_with("only in"))
        .map(|l| l.split_once("/step  ").unwrap().1.to_owned())
        .collect()
}

fn all_distinct(v: &[String]) -> bool {
    let mut u = v.to_vec();
    u.sort();
    u.dedup();
    u.len() == v.len()
}

#[test]
fn piped_output_has_whole_names() {
    let (only, moved) = diff_names();
    assert!(only.iter().any(|n| n.chars().count() > 400), "{only:?}");
    let out = stdout(&run(&["diff", "-q", s(&repo(CUDNN)), s(&repo(MATH))]));
    assert_eq!(only_in_lines(&out), only, "{out}");
    for n in &moved {
        assert!(out.contains(&format!("] {n}\n")), "{n}\n{out}");
    }
    // The Markdown diff too.
    let md = stdout(&run(&[
        "diff",
        "-q",
        "--markdown",
        s(&repo(CUDNN)),
        s(&repo(MATH)),
    ]));
    for n in &only {
        assert!(md.contains(&format!("`{n}`")), "{n}");
    }
    // The report's top kernel column and --top section.
    let t = repo(HF_1B);
    let v = json(&["report", "-q", "--json", "--top", "3", s(&t)]);
    let out = stdout(&run(&["report", "-q", "--top", "3", s(&t)]));
    for b in v["reports"][0]["buckets"].as_array().unwrap() {
        for k in b["top"].as_array().unwrap() {
            let n = k["name"].as_str().unwrap();
            assert!(out.contains(&format!("  {n}\n")), "{n}\n{out}");
        }
    }
    assert!(!out.contains('…'), "{out}");
}

#[test]
fn a_terminal_gets_names_cut_in_the_middle_and_never_alike() {
    let (only, moved) = diff_names();
    let (a, b) = (repo(CUDNN), repo(MATH));
    let args = ["diff", "-q", s(&a), s(&b)];
    let (out, code) = pty::in_terminal(None, &args, &[("COLUMNS", "300")], true);
    assert_eq!(code, 0, "{out}");
    let shown = only_in_lines(&out);
    assert_eq!(shown.len(), only.len(), "{out}");
    // Before: cut at 80 keeping the head, the two GEMV kernels (and two elementwise ones)
    // printed the same text.
    assert!(all_distinct(&shown), "{shown:#?}");
    for (s, n) in shown.iter().zip(&only) {
        let (len, whole) = (s.chars().count(), n.chars().count());
        if whole <= 80 {
            assert_eq!(s, n);
            continue;
        }
        assert!(len <= 80 && s.contains('…'), "{s}");
        // The tail is kept: the last characters are the name's.
        let tail: String = n.chars().skip(whole - 12).collect();
        assert!(s.ends_with(&tail), "{s}\n{n}");
        let head: String = n.chars().take(12).collect();
        assert!(s.starts_with(&head), "{s}\n{n}");
    }
    // The two GEMV kernels show where they differ.
    let gemv: Vec<&String> = shown
        .iter()
        .filter(|s| s.starts_with("std::enable_if"))
        .collect();
    assert_eq!(gemv.len(), 2, "{shown:#?}");
    assert!(
        gemv.iter().any(|s| s.contains("7, false")) && gemv.iter().any(|s| s.contains("5, false")),
        "{gemv:#?}"
    );
    // One name prints the same wherever it appears in the output: a moved kernel that is
    // also only in B reads as it does there.
    for (s, n) in shown.iter().zip(&only) {
        if moved.contains(n) {
            assert!(out.contains(&format!("] {s}\n")), "{s}\n{out}");
        }
    }
    // --wide: whole names on the terminal too.
    let wide = [&args[..], &["--wide"]].concat();
    let (out, _) = pty::in_terminal(None, &wide, &[("COLUMNS", "300")], true);
    assert_eq!(only_in_lines(&out), only);
}

#[test]
fn the_report_table_on_a_terminal_keeps_tails_and_fits() {
    let t = repo(HF_1B);
    let args = ["report", "-q", "--top", "3", s(&t)];
    let (out, _) = pty::in_terminal(None, &args, &[("COLUMNS", "300")], true);
    let top: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("top kernels per bucket"))
        .skip(3)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(top.len() > 10, "{out}");
    let names: Vec<String> = top
        .iter()
        .map(|l| l.split_whitespace().skip(4).collect::<Vec<_>>().join(" "))
        .collect();
    assert!(all_distinct(&names), "{names:#?}");
    for n in &names {
        assert!(n.chars().count() <= 80, "{n}");
    }
    // A narrow terminal cuts the name column to fit, in the middle; --wide does not.
    let (out, _) = pty::in_terminal(None, &args, &[("COLUMNS", "110")], true);
    let copy: Vec<&str> = out.lines().filter(|l| l.starts_with("copy ")).collect();
    assert_eq!(copy.len(), 4, "{out}");
    for l in copy {
        assert!(l.chars().count() <= 110 && l.contains('…'), "{l}");
        assert!(l.ends_with(")"), "{l}");
    }
    let wide = [&args[..], &["--wide"]].concat();
    let (out, _) = pty::in_terminal(None, &wide, &[("COLUMNS", "110")], true);
    assert!(out.lines().any(|l| l.chars().count() > 300), "{out}");
}
