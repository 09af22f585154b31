//! End-to-end tests of `gapscope history` (and `gate --baseline-history`) on SQLite files:
//! input validation, reading that never creates or modifies anything, concurrent first use,
//! read-only databases, and messages that never show a password.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use gapscope_tests::{
    gapscope, gate_history_args, names, output_of_fresh_executable, repo, run, stderr,
};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A small trace that analyses quickly.
fn trace() -> String {
    repo("analyzer/tests/data/nsys/nsys-2025.3.sqlite")
        .to_str()
        .unwrap()
        .to_owned()
}

/// Exit 2 with one line on stderr; that line.
fn fails(o: &Output) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    e
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn add(db: &str, label: &str) -> Output {
    let t = trace();
    run(&[
        "history",
        "--db",
        db,
        "add",
        &t,
        "--label",
        label,
        "--accepted",
        "-q",
    ])
}

fn run_count(db: &str) -> usize {
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&[
        "history", "--db", db, "--json", "list", "--limit", "100000",
    ])))
    .unwrap();
    v["runs"].as_array().unwrap().len()
}

/// B18: an unknown bucket is an error that lists the valid names; aliases are accepted.
#[test]
fn trend_of_an_unknown_bucket_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let db = db.to_str().unwrap();
    ok(&add(db, "a"));
    let e = fails(&run(&["history", "--db", db, "trend", "--bucket", "bogus"]));
    assert!(
        e.contains("unknown bucket `bogus`") && e.contains("gemm_dense") && e.contains("other"),
        "{e}"
    );
    let v: serde_json::Value = serde_json::from_str(&ok(&run(&[
        "history", "--db", db, "--json", "trend", "--bucket", "mmvq",
    ])))
    .unwrap();
    assert_eq!(v["bucket"], "gemv");
    assert_eq!(v["points"].as_array().unwrap().len(), 1);
    let o = run(&["history", "--db", db, "list", "--limit=0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = fails(&run(&["history", "--db", db, "show", "99"]));
    assert!(e.contains("no run 99"), "{e}");
}

/// B18: list, show, trend and gate --baseline-history create nothing: a missing database is
/// exit 2 with one line. `add` creates the file but not a missing directory.
#[test]
fn reading_commands_never_create_a_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nonexistent/dir/h.sqlite");
    let db = db.to_str().unwrap();
    let t = trace();
    for args in [
        vec!["history", "--db", db, "list"],
        vec!["history", "--db", db, "show", "1"],
        vec!["history", "--db", db, "trend", "--bucket", "gemv"],
        gate_history_args(db, &t),
    ] {
        let e = fails(&run(&args));
        assert!(
            e.contains(&format!("no history database at {db}"))
                && e.contains("`gapscope history add` creates one"),
            "{args:?}: {e}"
        );
        assert!(names(dir.path()).is_empty(), "{args:?} created something");
    }
    let e = fails(&add(db, "a"));
    assert!(e.contains("does not exist"), "{e}");
    assert!(names(dir.path()).is_empty());
    // The default database: `add` creates `.gapscope/` in the working directory.
    let o = gapscope()
        .current_dir(dir.path())
        .args(["history", "list"])
        .output()
        .unwrap();
    fails(&o);
    assert!(names(dir.path()).is_empty());
    let o = gapscope()
        .current_dir(dir.path())
        .args(["history", "add", "-q", &t])
        .output()
        .unwrap();
    ok(&o);
    assert!(dir.path().join(".gapscope/history.sqlite").is_file());
}

/// Issue point 7: 16 `history add` processes on a database that does not exist yet all
/// succeed and all runs are stored (before: "table runs already exists").
#[test]
fn concurrent_first_use_by_sixteen_processes() {
    for round in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.sqlite");
        let db = db.to_str().unwrap();
        let t = trace();
        let children: Vec<_> = (0..16)
            .map(|i| {
                gapscope()
                    .args([
                        "history",
                        "--db",
                        db,
                        "add",
                        "-q",
                        &t,
                        "--label",
                        &format!("p{i}"),
                    ])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for (i, c) in children.into_iter().enumerate() {
            let o = c.wait_with_output().unwrap();
            assert!(
                o.status.success(),
                "round {round} process {i}: {}",
                stderr(&o)
            );
        }
        assert_eq!(run_count(db), 16, "round {round}");
        assert_eq!(
            names(dir.path()),
            vec!["h.sqlite".to_owned()],
            "round {round}"
        );
    }
}

/// A `--db` value that is not a URL is a path: `x?mode=memory` is a file of that name that
/// stores the run (before: an in-memory database that stored nothing).
#[test]
fn a_query_like_path_is_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x?mode=memory");
    let db = db.to_str().unwrap();
    ok(&add(db, "a"));
    assert_eq!(names(dir.path()), vec!["x?mode=memory".to_owned()]);
    assert_eq!(run_count(db), 1);
    assert_eq!(
        names(dir.path()),
        vec!["x?mode=memory".to_owned()],
        "reading leaves nothing behind"
    );
}

/// Listing an nsys export is refused and leaves it byte for byte as it was (before: the
/// history tables were added to it).
#[test]
fn an_unrelated_sqlite_file_is_not_modified() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("export.sqlite");
    std::fs::copy(trace(), &p).unwrap();
    let before = std::fs::read(&p).unwrap();
    let db = p.to_str().unwrap();
    for o in [run(&["history", "--db", db, "list"]), add(db, "a")] {
        let e = fails(&o);
        assert!(e.contains("not a gapscope history database"), "{e}");
    }
    assert_eq!(std::fs::read(&p).unwrap(), before);
    assert_eq!(names(dir.path()), vec!["export.sqlite".to_owned()]);
}

/// Runs `gapscope args` in `dir` without write access to `dir` or the files in it. Root
/// writes through file modes, so as root the command runs as `nobody` (a copy of the binary
/// in a directory `nobody` can reach); otherwise the modes are cleared. Either way a probe
/// checks that writing really fails, so the test cannot pass without the restriction.
fn run_without_write_access(dir: &Path, args: &[&str]) -> Output {
    let me = std::fs::metadata(dir).unwrap().uid();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o444)).unwrap();
    }
    let probe = dir.join("probe");
    if me == 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let bin_dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(bin_dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let copy = bin_dir.path().join("gapscope");
        std::fs::copy(env!("CARGO_BIN_EXE_gapscope"), &copy).unwrap();
        let as_nobody = |prog: &Path, args: &[&str]| {
            output_of_fresh_executable(
                Command::new("setpriv")
                    .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                    .arg(prog)
                    .args(args)
                    .current_dir(dir),
            )
        };
        let touch = as_nobody(Path::new("/usr/bin/touch"), &[probe.to_str().unwrap()]);
        assert!(
            !touch.status.success() && !probe.exists(),
            "nobody can write {}",
            dir.display()
        );
        as_nobody(&copy, args)
    } else {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        let writable = std::fs::write(&probe, b"").is_ok();
        let o = gapscope().args(args).current_dir(dir).output().unwrap();
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(!writable, "{} is writable", dir.display());
        o
    }
}

/// A history in a read-only file and directory can be listed, shown and trended, and the
/// reading leaves nothing behind.
#[test]
fn a_read_only_database_can_be_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let db = db.to_str().unwrap();
    ok(&add(db, "a"));
    ok(&add(db, "b"));
    let before = std::fs::read(db).unwrap();
    let o = run_without_write_access(dir.path(), &["history", "--db", "h.sqlite", "list"]);
    let out = ok(&o);
    assert_eq!(out.lines().count(), 3, "{out}");
    let o = run_without_write_access(
        dir.path(),
        &["history", "--db", "h.sqlite", "trend", "--bucket", "gemv"],
    );
    // The title, the column headers, two runs.
    assert_eq!(ok(&o).lines().count(), 4);
    assert_eq!(std::fs::read(db).unwrap(), before);
    assert_eq!(names(dir.path()), vec!["h.sqlite".to_owned()]);
}

/// B21 and the password rule: an unreachable server is reported as refused within a few
/// seconds, and the password never appears.
#[test]
fn postgres_connection_errors_are_quick_and_redacted() {
    let t = Instant::now();
    let o = run(&[
        "history",
        "--db",
        "postgres://ci:s3cret@127.0.0.1:1/gapscope",
        "list",
    ]);
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let e = fails(&o);
    assert!(
        e.to_lowercase().contains("refused") && !e.contains("pool timed out"),
        "{e}"
    );
    assert!(!e.contains("s3cret") && e.contains("ci:***@"), "{e}");
}
