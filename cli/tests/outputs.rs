//! Output plumbing from the audit: export without a format, the Chrome round trip, `-` for
//! standard input and output, colour in piped logs, `--top`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use gapscope_tests::{gapscope, repo, run, s};
use std::io::Write;
use std::process::Stdio;

const HF_1B: &str = "traces/reference/hf-llama3.2-1b-npl8.json.gz";
const ENGINE_8B: &str = "traces/reference/engine-llama3-8b-npl1.gst";

fn report_json(args: &[&str]) -> serde_json::Value {
    let mut a = vec!["report", "-q", "--json"];
    a.extend_from_slice(args);
    let o = run(&a);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["reports"][0].clone()
}

#[test]
fn export_without_a_format_is_a_one_line_error() {
    // B7.
    let o = run(&["export", "-q", s(&repo(HF_1B))]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(
        e.contains("--chrome OUT.json, --parquet OUT.parquet and/or --tables DIR"),
        "{e}"
    );
}

#[test]
fn chrome_export_reads_back_with_its_gpus_markers_and_steps() {
    // B11: markers, the GPU and the prefill survive the round trip.
    let dir = tempfile::tempdir().unwrap();
    for (trace, decode, prefill) in [(HF_1B, 32, 0), (ENGINE_8B, 32, 1)] {
        let out = dir.path().join("t.chrome.json");
        let o = run(&["export", "-q", s(&repo(trace)), "--chrome", s(&out)]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let before = report_json(&[s(&repo(trace))]);
        let after = report_json(&[s(&out)]);
        for key in ["kernels", "memops", "markers", "gpus", "graph_kernels"] {
            assert_eq!(
                after["source"][key], before["source"][key],
                "{trace}: {key}"
            );
        }
        assert_eq!(after["steps"]["decode_steps"], decode, "{trace}");
        assert_eq!(after["steps"]["prefill_steps"], prefill, "{trace}");
        let notes = after["source"]["notes"].to_string();
        assert!(!notes.contains("displayTimeUnit"), "{notes}");
        let (tb, ta) = (
            before["steps"]["tpot_ms"]["median"].as_f64().unwrap(),
            after["steps"]["tpot_ms"]["median"].as_f64().unwrap(),
        );
        assert!((tb - ta).abs() < 1e-3, "{trace}: TPOT {tb} vs {ta}");
    }
}

#[test]
fn dash_is_stdout_for_chrome_and_stdin_for_report() {
    // B20: `export --chrome -` writes to stdout and `report -` reads stdin.
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["export", "-q", s(&repo(ENGINE_8B)), "--chrome", "-"]);
    assert!(o.status.success());
    assert!(o.stdout.starts_with(b"{"), "not JSON on stdout");
    let mut child = gapscope()
        .args(["report", "-q", "--json", "-"])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&o.stdout).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["reports"][0]["steps"]["decode_steps"], 32);
    assert_eq!(v["reports"][0]["source"]["path"], "- (standard input)");
    assert!(!dir.path().join("-").exists(), "a file named - was written");
    let o = run(&["export", "-q", s(&repo(ENGINE_8B)), "--parquet", "-"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn logs_have_no_colour_when_stderr_is_not_a_terminal() {
    // B17.
    let o = gapscope()
        .args(["-v", "report", s(&repo(ENGINE_8B))])
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("INFO"), "{e}");
    assert!(!e.contains('\u{1b}'), "{e:?}");
}

#[test]
fn debug_logs_name_the_decisions_and_a_bad_rust_log_is_an_error() {
    // -vv: gapscope's own debug events (the sniffed format, the step source), not those of
    // its dependencies.
    let o = gapscope()
        .args(["-vv", "report", s(&repo(ENGINE_8B))])
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{e}");
    assert!(e.contains("sniffed input format"), "{e}");
    assert!(e.contains("step source chosen"), "{e}");
    // RUST_LOG wins over -v, and a mistyped one is refused in one line, not ignored.
    let o = gapscope()
        .args(["report", "-q", s(&repo(ENGINE_8B))])
        .env("RUST_LOG", "gapscope=loud")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("invalid RUST_LOG directives"), "{e}");
}

#[test]
fn top_lists_kernels_per_bucket_in_the_table() {
    // B23: --top changes the table, not only JSON.
    let t = repo(HF_1B);
    let plain = String::from_utf8(run(&["report", "-q", s(&t)]).stdout).unwrap();
    assert!(!plain.contains("top kernels per bucket"), "{plain}");
    let top = String::from_utf8(run(&["report", "-q", "--top", "2", s(&t)]).stdout).unwrap();
    let section: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("top kernels per bucket"))
        .skip(3)
        .take_while(|l| !l.is_empty())
        .collect();
    let gemm = section
        .iter()
        .filter(|l| l.starts_with("gemm_dense"))
        .count();
    assert_eq!(gemm, 2, "{top}");
    let md = String::from_utf8(run(&["report", "-q", "--markdown", "--top", "2", s(&t)]).stdout)
        .unwrap();
    assert!(md.contains("### Top kernels per bucket"), "{md}");
}

#[test]
fn max_events_applies_to_every_command_that_imports() {
    let t = repo(ENGINE_8B);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    for cmd in [
        &["report", "-q"][..],
        &["export", "-q", "--chrome", s(&out)],
    ] {
        let mut args = cmd.to_vec();
        args.extend_from_slice(&["--max-events", "1000", s(&t)]);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{cmd:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains("holds more than 1000 events"), "{e}");
    }
    assert!(!out.exists());
    let o = run(&["report", "-q", "--max-events", "0", s(&t)]);
    assert!(o.status.success());
}

#[test]
fn explain_takes_a_mangled_name_as_reports_see_it() {
    // The CUTLASS grouped GEMM of the Qwen3-Next torch.profiler trace, as Kineto keeps it.
    let pairs = std::fs::read_to_string(repo("analyzer/src/import/names_pairs.tsv")).unwrap();
    let mangled = pairs
        .lines()
        .map(|l| l.split('\t').next().unwrap())
        .find(|n| n.starts_with("_ZN7cutlass"))
        .expect("a mangled CUTLASS name in names_pairs.tsv");
    let o = run(&["buckets", "--explain", mangled]);
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.starts_with("given:   _ZN7cutlass"), "{out}");
    assert!(
        out.contains("\nname:    void cutlass::device_kernel<"),
        "{out}"
    );
}
