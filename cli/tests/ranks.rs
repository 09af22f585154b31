//! Several ranks of one run on the command line: `report`, `diff` and `gate` on the bundled
//! TP=2 captures (`traces/reference/tp2/`), directories and the `--ranks`/`--separate` choice.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::{Path, PathBuf};

use gapscope_tests::{repo, run, s};

fn tp2(name: &str) -> PathBuf {
    repo(&format!("traces/reference/tp2/{name}"))
}

fn json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// A directory holding copies of the two ranks of `mode`.
fn run_dir(root: &Path, mode: &str) -> PathBuf {
    let d = root.join(mode);
    std::fs::create_dir_all(&d).unwrap();
    for r in 0..2 {
        let n = format!("{mode}-rank{r}.json.gz");
        std::fs::copy(tp2(&n), d.join(&n)).unwrap();
    }
    d
}

#[test]
fn two_rank_files_are_one_run_with_a_verdict() {
    let (a, b) = (tp2("host-rank1.json.gz"), tp2("host-rank0.json.gz"));
    let v = json(&["report", "-q", "--json", s(&a), s(&b)]);
    let r = &v["ranks"];
    assert_eq!(r["verdict"]["kind"], "straggler");
    assert_eq!(r["verdict"]["rank"], 1);
    assert_eq!(r["verdict"]["late_by"]["by"], "host");
    assert_eq!(r["verdict"]["late_by"]["scope"], "planted_host_stall");
    assert_eq!(r["ranks"][0]["source"], "distributed");
    assert_eq!(v["reports"].as_array().unwrap().len(), 2);
    // The ranks section splits communication; the rank reports do not repeat the caveat.
    assert!(v["reports"][0].get("communication").is_none());
    let o = run(&["report", "-q", s(&a), s(&b)]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("rank 1 sets the step"), "{t}");
    assert!(t.contains("working %"), "{t}");
}

#[test]
fn one_rank_alone_says_its_communication_includes_waiting() {
    let v = json(&["report", "-q", "--json", s(&tp2("host-rank0.json.gz"))]);
    assert!(v.get("ranks").is_none());
    assert_eq!(v["reports"][0]["communication"]["includes_waiting"], true);
    let o = run(&["report", "-q", s(&tp2("host-rank0.json.gz"))]);
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("waiting for the other ranks included"), "{t}");
}

#[test]
fn separate_and_duplicate_ranks_are_reported_one_by_one() {
    let (a, b) = (tp2("host-rank0.json.gz"), tp2("host-rank1.json.gz"));
    let v = json(&["report", "-q", "--json", "--separate", s(&a), s(&b)]);
    assert!(v.get("ranks").is_none());
    // The bundled directory holds two runs (ranks 0, 1, 0, 1): not one run.
    let v = json(&["report", "-q", "--json", s(&repo("traces/reference/tp2"))]);
    assert!(v.get("ranks").is_none());
    assert_eq!(v["reports"].as_array().unwrap().len(), 4);
    // --ranks on them is refused: two traces name the same rank.
    let o = run(&["report", "-q", "--ranks", s(&repo("traces/reference/tp2"))]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("name the same rank"), "{e}");
}

#[test]
fn diff_and_gate_compare_runs_of_ranks() {
    let d = tempfile::tempdir().unwrap();
    let host = run_dir(d.path(), "host");
    let kernel = run_dir(d.path(), "kernel");
    let v = json(&[
        "diff",
        "-q",
        "--json",
        "--allow-implausible",
        s(&host),
        s(&kernel),
    ]);
    assert_eq!(v["ranks"]["world_a"], 2);
    assert_eq!(v["ranks"]["late_a"], 1);
    assert_eq!(v["ranks"]["waiting"]["rank"], 0);
    // A run against itself passes, rank by rank.
    let o = run(&["gate", "-q", "--baseline", s(&host), "--current", s(&host)]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let t = String::from_utf8_lossy(&o.stdout);
    assert!(t.contains("2 ranks") && t.contains("== rank 1 =="), "{t}");
    // A run of ranks against one trace is refused.
    let one = tp2("host-rank0.json.gz");
    let o = run(&["gate", "-q", "--baseline", s(&one), "--current", s(&host)]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("compare like with like"), "{e}");
}

#[test]
fn export_tables_writes_one_partition_per_rank() {
    let d = tempfile::tempdir().unwrap();
    let host = run_dir(d.path(), "host");
    let out = d.path().join("tables");
    let o = run(&["export", "-q", s(&host), "--tables", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for f in [
        "rank_0/steps.parquet",
        "rank_1/steps.parquet",
        "rank_1/strings.parquet",
        "collectives.parquet",
        "rank_steps.parquet",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    // One file per trace only for the single-file exports.
    let o = run(&[
        "export",
        "-q",
        s(&host),
        "--chrome",
        s(&d.path().join("x.json")),
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn history_stores_the_rank_count_and_refuses_other_world_sizes() {
    let d = tempfile::tempdir().unwrap();
    let host = run_dir(d.path(), "host");
    let db = d.path().join("h.sqlite");
    let o = run(&[
        "history",
        "add",
        "-q",
        "--db",
        s(&db),
        "--accepted",
        s(&host),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("2 ranks"));
    let v = json(&["history", "list", "--db", s(&db), "--json"]);
    let r = &v["runs"][0];
    assert_eq!(
        (r["world_size"].as_i64(), r["late_rank"].as_i64()),
        (Some(2), Some(1))
    );
    assert!(r["run_step_ms"].as_f64().unwrap() > 0.0);
    // One trace against a baseline of two-rank runs: refused unless asked.
    let one = tp2("host-rank1.json.gz");
    let args = [
        "gate",
        "-q",
        "--baseline-history",
        "3",
        "--db",
        s(&db),
        "--current",
        s(&one),
    ];
    let o = run(&args);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("different world sizes"));
    let mut allowed = args.to_vec();
    allowed.push("--allow-incomparable");
    assert_ne!(run(&allowed).status.code(), Some(2));
    // The same run of ranks against it is judged.
    let o = run(&[
        "gate",
        "-q",
        "--baseline-history",
        "3",
        "--db",
        s(&db),
        "--current",
        s(&host),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
