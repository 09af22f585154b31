#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
//! Hostile SQLite inputs through the `gapscope` binary (issue 31 classes 3, 7, 11, 12 and
//! 16b): nsys exports whose rows live in a `-wal` or whose text is UTF-16, history databases
//! with a live `-wal`, in-memory `--db` values, stored figures that are not finite numbers
//! and stored text with control characters. Each case ends in exit 0 with the right figures
//! or exit 2 with one `gapscope: error:` line, and leaves its inputs as they were.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use gapscope_tests::{Snapshot, gapscope, mkfifo, names, repo, run, run_within, snapshot, stderr};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{AssertSqlSafe, ConnectOptions, Connection};

const FIXTURE: &str = "analyzer/tests/data/nsys/nsys-2025.3.sqlite";
/// Kernels in the fixture, and the copies a test commits into a `-wal`.
const KERNELS: u64 = 6;
const EXTRA: u64 = 2_000;

fn fails_with_one_line(o: &Output) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("gapscope: error: "), "{e}");
    e
}

fn succeeds(o: &Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// `dir` holds the same files, byte for byte and time for time, as `before`.
fn unchanged(dir: &Path, before: &Snapshot, what: &str) {
    let after = snapshot(dir);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "{what}: files created or removed"
    );
    for (name, (bytes, mtime)) in before {
        assert!(after[name].0 == *bytes, "{what}: {name} changed");
        assert_eq!(after[name].1, *mtime, "{what}: {name} touched");
    }
}

async fn open(p: &Path) -> SqliteConnection {
    SqliteConnectOptions::new()
        .filename(p)
        .connect()
        .await
        .expect("open")
}

/// Opens `db` in WAL mode with automatic checkpoints off and runs `sql`: the rows it commits
/// live in the `-wal` only, for as long as the returned connection stays open.
fn commit_into_wal(rt: &tokio::runtime::Runtime, db: &Path, sql: &str) -> SqliteConnection {
    rt.block_on(async {
        let mut c = open(db).await;
        let script = format!("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0; {sql}");
        sqlx::raw_sql(AssertSqlSafe(script))
            .execute(&mut c)
            .await
            .expect("commit into the WAL");
        c
    })
}

/// How a database with rows only in its `-wal` is handed to gapscope.
#[derive(Clone, Copy, Debug)]
enum WalLeft {
    /// In place, its writer (this process) still connected: file, `-wal`, live `-shm`.
    Live,
    /// Copies of the file, `-wal` and `-shm`, as a killed writer leaves them.
    Killed,
    /// Copies of the file and its `-wal` only.
    NoShm,
}

const ALL_WAYS: [WalLeft; 3] = [WalLeft::Live, WalLeft::Killed, WalLeft::NoShm];

/// Runs `check` on `db` after `sql` was committed into its `-wal`, left as `left` says.
fn with_wal(db: &Path, sql: &str, left: WalLeft, check: impl FnOnce(&Path)) {
    let rt = runtime();
    let mut writer = commit_into_wal(&rt, db, sql);
    let name = db.file_name().unwrap().to_str().unwrap();
    let copies = tempfile::tempdir().expect("tempdir");
    let copy = |suffixes: &[&str]| {
        for sfx in suffixes {
            let f = format!("{name}{sfx}");
            std::fs::copy(db.with_file_name(&f), copies.path().join(&f)).expect("copy");
        }
        copies.path().join(name)
    };
    match left {
        WalLeft::Live => check(db),
        WalLeft::Killed => check(&copy(&["", "-wal", "-shm"])),
        WalLeft::NoShm => check(&copy(&["", "-wal"])),
    }
    rt.block_on(async { sqlx::raw_sql("SELECT 1").execute(&mut writer).await })
        .expect("the writer is still connected");
    rt.block_on(writer.close()).expect("close");
}

fn kernels_of(trace: &Path) -> u64 {
    let out = succeeds(&run(&["report", "--json", "-q", s(trace)]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    v["reports"][0]["source"]["kernels"]
        .as_u64()
        .expect("kernel count")
}

/// A copy of the fixture in a fresh directory.
fn export_copy(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join(name);
    std::fs::copy(repo(FIXTURE), &p).expect("copy");
    (dir, p)
}

const KERNELS_INTO_WAL: &str = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
     INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT k.* FROM CUPTI_ACTIVITY_KIND_KERNEL k, n WHERE k.rowid = 6;";

/// Class 3: an nsys export whose committed rows sit in an uncheckpointed `-wal` is read
/// whole (before: 6 kernels of 2,006), however the `-wal` was left, and the export, its
/// `-wal` and `-shm` keep their bytes and times, with nothing created beside them.
#[test]
fn nsys_rows_in_a_wal_are_read_and_the_files_left_alone() {
    for left in ALL_WAYS {
        let (_dir, p) = export_copy("export.sqlite");
        with_wal(&p, KERNELS_INTO_WAL, left, |p| {
            let dir = p.parent().unwrap();
            let before = snapshot(dir);
            assert!(before.contains_key("export.sqlite-wal"), "{left:?}");
            assert_eq!(kernels_of(p), KERNELS + EXTRA, "{left:?}");
            unchanged(dir, &before, &format!("{left:?}"));
            // The native import carries every kernel too.
            let gst = tempfile::tempdir().expect("tempdir");
            let o = gst.path().join("t.gst");
            succeeds(&run(&["import", "-q", s(p), "-o", s(&o)]));
            assert_eq!(kernels_of(&o), KERNELS + EXTRA, "{left:?}");
            unchanged(dir, &before, &format!("{left:?} import"));
        });
    }
}

/// A `-wal` beside an export that is not a regular file (a FIFO, a link to a device) is
/// refused in one line, at once; a `-shm` that is a FIFO is never opened.
#[test]
fn nsys_sidecars_that_are_not_files_never_hang() {
    let (dir, p) = export_copy("export.sqlite");
    let wal = dir.path().join("export.sqlite-wal");
    mkfifo(&wal);
    let o = run_within(&["report", "-q", s(&p)], Duration::from_secs(20));
    let e = fails_with_one_line(&o);
    assert!(
        e.contains("export.sqlite-wal") && e.contains("not a regular file"),
        "{e}"
    );
    std::fs::remove_file(&wal).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &wal).unwrap();
    let e = fails_with_one_line(&run_within(
        &["report", "-q", s(&p)],
        Duration::from_secs(20),
    ));
    assert!(e.contains("not a regular file"), "{e}");
    std::fs::remove_file(&wal).unwrap();
    // Rows in a real `-wal`, and a FIFO where the `-shm` would be.
    let rt = runtime();
    let writer = commit_into_wal(&rt, &p, KERNELS_INTO_WAL);
    let copies = tempfile::tempdir().unwrap();
    for f in ["export.sqlite", "export.sqlite-wal"] {
        std::fs::copy(dir.path().join(f), copies.path().join(f)).unwrap();
    }
    rt.block_on(writer.close()).unwrap();
    mkfifo(&copies.path().join("export.sqlite-shm"));
    let c = copies.path().join("export.sqlite");
    let o = run_within(&["report", "--json", "-q", s(&c)], Duration::from_secs(60));
    let v: serde_json::Value = serde_json::from_str(&succeeds(&o)).unwrap();
    assert_eq!(v["reports"][0]["source"]["kernels"], KERNELS + EXTRA);
}

/// The parts of a report that do not depend on the file's name.
fn figures(trace: &Path) -> serde_json::Value {
    let out = succeeds(&run(&["report", "--json", "-q", s(trace)]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let r = &v["reports"][0];
    serde_json::json!([
        r["source"]["kernels"],
        r["steps"],
        r["buckets"],
        r["source"]["gpus"]
    ])
}

/// Class 12: an nsys export stored as UTF-16 (little or big endian) reports what its UTF-8
/// original reports (before: refused, "no CUPTI tables"). A name that is not valid UTF-16
/// is a one-line error or read, never a panic.
#[test]
fn utf16_nsys_exports_report_like_utf8() {
    let want = figures(&repo(FIXTURE));
    assert_eq!(want[0], KERNELS);
    for encoding in ["UTF-16le", "UTF-16be"] {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("utf16.sqlite");
        gapscope_tests::sqlite::recoded_copy(&repo(FIXTURE), &p, encoding);
        assert_eq!(figures(&p), want, "{encoding}");
        // A lone surrogate in the kernel names.
        let lone = if encoding == "UTF-16le" {
            "00D8"
        } else {
            "D800"
        };
        runtime().block_on(async {
            let mut c = open(&p).await;
            let sql = format!(
                "UPDATE StringIds SET value = CAST(X'{lone}' AS TEXT) || value WHERE value LIKE 'argmax%'"
            );
            sqlx::raw_sql(AssertSqlSafe(sql)).execute(&mut c).await.unwrap();
            c.close().await.unwrap();
        });
        let o = run(&["report", "--json", "-q", s(&p)]);
        if !o.status.success() {
            fails_with_one_line(&o);
        }
    }
}

/// A history with two accepted runs of the fixture, made by `gapscope history add`.
fn history(dir: &Path) -> PathBuf {
    let db = dir.join("h.sqlite");
    for label in ["first", "second"] {
        succeeds(&run(&[
            "history",
            "--db",
            s(&db),
            "add",
            "-q",
            s(&repo(FIXTURE)),
            "--label",
            label,
            "--accepted",
        ]));
    }
    db
}

fn gate_history(db: &Path, n: &str) -> Output {
    run(&[
        "gate",
        "-q",
        "--json",
        "--baseline-history",
        n,
        "--db",
        s(db),
        "--current",
        s(&repo(FIXTURE)),
    ])
}

/// Class 11: list, show, trend and the gate read a history whose latest run is committed
/// only in its `-wal` (writer connected, killed, or the `-shm` lost), see that run, and leave
/// the file, `-wal` and `-shm` byte for byte as they were (before: the read checkpointed the
/// WAL into the file and deleted the `-wal` and `-shm`).
#[test]
fn history_reads_leave_a_wal_history_alone() {
    let base = tempfile::tempdir().unwrap();
    let made = history(base.path());
    for left in ALL_WAYS {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.sqlite");
        std::fs::copy(&made, &db).unwrap();
        let sql = "INSERT INTO runs (created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted) VALUES (1, 'only in the wal', 't', 'g', 1, NULL, 31.5, 0);
                   INSERT INTO run_buckets VALUES (last_insert_rowid(), 'gemv', 0.25, 1.0, 50.0);";
        with_wal(&db, sql, left, |db| {
            let dir = db.parent().unwrap();
            let before = snapshot(dir);
            assert!(before.contains_key("h.sqlite-wal"), "{left:?}");
            let list = succeeds(&run(&["history", "--db", s(db), "list"]));
            assert!(list.contains("only in the wal"), "{left:?}: {list}");
            let v: serde_json::Value = serde_json::from_str(&succeeds(&run(&[
                "history",
                "--db",
                s(db),
                "--json",
                "list",
            ])))
            .unwrap();
            assert_eq!(v["runs"].as_array().unwrap().len(), 3, "{left:?}");
            let show = succeeds(&run(&["history", "--db", s(db), "show", "3"]));
            assert!(show.contains("0.2500"), "{left:?}: {show}");
            let trend = succeeds(&run(&[
                "history",
                "--db",
                s(db),
                "trend",
                "--bucket",
                "gemv",
            ]));
            // The title, the column headers, three runs.
            assert_eq!(trend.lines().count(), 5, "{left:?}: {trend}");
            let g = gate_history(db, "2");
            let v: serde_json::Value = serde_json::from_str(&succeeds(&g)).unwrap();
            assert_eq!(v["verdict"], "pass", "{left:?}");
            unchanged(dir, &before, &format!("{left:?}"));
        });
    }
}

/// Class 16b: an in-memory `--db` is refused in one line (before: `:memory:` made a file of
/// that name in the working directory and stored the run nowhere), and nothing is created.
#[test]
fn in_memory_histories_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let t = repo(FIXTURE);
    for db in [
        ":memory:",
        "sqlite::memory:",
        "sqlite://:memory:",
        "sqlite://?mode=memory",
        "sqlite://",
    ] {
        for args in [
            vec!["history", "--db", db, "add", "-q", s(&t)],
            vec!["history", "--db", db, "list"],
            vec!["history", "--db", db, "show", "1"],
            vec!["history", "--db", db, "trend", "--bucket", "gemv"],
            vec![
                "gate",
                "-q",
                "--baseline-history",
                "1",
                "--db",
                db,
                "--current",
                s(&t),
            ],
        ] {
            let o = gapscope()
                .args(&args)
                .current_dir(dir.path())
                .output()
                .unwrap();
            let e = fails_with_one_line(&o);
            assert!(
                e.contains("in-memory") && e.contains("postgres://"),
                "{args:?}: {e}"
            );
            assert!(
                names(dir.path()).is_empty(),
                "{args:?} created {:?}",
                names(dir.path())
            );
        }
    }
}

/// Stores, as another tool could, an accepted run whose figures are infinite, and gives
/// the accepted run before it a TPOT, so that each judged figure keeps a finite value.
const INFINITE_RUN: &str = "UPDATE runs SET tpot_median_ms = 0.25;
     INSERT INTO runs (created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted) VALUES (3, 'bad', 't', (SELECT gpu FROM runs WHERE id = 1), 1, 9e999, -9e999, 1);
     INSERT INTO run_buckets SELECT last_insert_rowid(), bucket, 9e999, 9e999, -9e999 FROM run_buckets WHERE run_id = 1;";

/// No `inf` or `NaN` printed as a figure.
fn no_non_finite_figure(out: &str) {
    let lower = out.to_lowercase();
    for w in lower.split(|c: char| !c.is_ascii_alphanumeric()) {
        assert!(!matches!(w, "inf" | "infinity" | "nan"), "{out}");
    }
}

/// One warning line naming the run.
fn warned(o: &Output, id: &str) {
    let e = stderr(o);
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(
        e.starts_with("gapscope: warning: ") && e.contains(id),
        "{e}"
    );
}

/// Class 7 (history): stored figures that are not finite numbers print as `invalid` (null
/// in JSON) with one warning, never as `inf`; a gate whose history baseline has nothing
/// finite left exits 2 in one line (before: every verdict inconclusive, exit 0); one with
/// finite figures left passes, with a warning.
#[test]
fn non_finite_history_figures_are_never_figures() {
    let dir = tempfile::tempdir().unwrap();
    let db = history(dir.path());
    let rt = runtime();
    rt.block_on(async {
        let mut c = open(&db).await;
        sqlx::raw_sql(INFINITE_RUN).execute(&mut c).await.unwrap();
        c.close().await.unwrap();
    });
    let db = s(&db);
    let o = run(&["history", "--db", db, "list"]);
    let out = succeeds(&o);
    warned(&o, "run 3");
    assert!(out.contains("invalid"), "{out}");
    no_non_finite_figure(&out);
    let o = run(&["history", "--db", db, "--json", "list"]);
    let v: serde_json::Value = serde_json::from_str(&succeeds(&o)).unwrap();
    let bad = &v["runs"][0];
    assert!(
        bad["tpot_median_ms"].is_null() && bad["busy_pct"].is_null(),
        "{v}"
    );
    assert_eq!(
        bad["invalid"],
        serde_json::json!(["tpot_median_ms", "busy_pct"])
    );
    for args in [
        vec!["history", "--db", db, "show", "3"],
        vec!["history", "--db", db, "trend", "--bucket", "gemv"],
        vec!["history", "--db", db, "--json", "show", "3"],
        vec!["history", "--db", db, "--json", "trend", "--bucket", "gemv"],
    ] {
        let o = run(&args);
        let out = succeeds(&o);
        warned(&o, "3");
        no_non_finite_figure(&out);
        if args.contains(&"--json") {
            serde_json::from_str::<serde_json::Value>(&out).unwrap();
        } else {
            assert!(out.contains("invalid"), "{args:?}: {out}");
        }
    }
    let e = fails_with_one_line(&gate_history(Path::new(db), "1"));
    assert!(
        e.contains("no usable baseline") && e.contains("run 3"),
        "{e}"
    );
    let o = gate_history(Path::new(db), "2");
    let v: serde_json::Value = serde_json::from_str(&succeeds(&o)).unwrap();
    assert_eq!(v["verdict"], "pass");
    warned(&o, "run 3");
    no_non_finite_figure(&serde_json::to_string(&v).unwrap());
}

/// Labels, trace paths and bucket names come from users and traces: with newlines,
/// carriage returns and escape sequences they neither forge a row of list, show or trend
/// nor reach the terminal raw.
#[test]
fn stored_text_cannot_forge_rows_or_drive_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let trace = dir.path().join("odd\nname\r\x1b[2J.sqlite");
    std::fs::copy(repo(FIXTURE), &trace).unwrap();
    let label = "v1\n    9       yes      1     0.001    99.00  forged\x1b[31m\rred";
    let o = succeeds(&run(&[
        "history",
        "--db",
        s(&db),
        "add",
        "-q",
        s(&trace),
        "--label",
        label,
        "--accepted",
    ]));
    assert_eq!(o.lines().count(), 1, "{o}");
    let bucket = "gemv\n\x1b]0;title\x07\rx";
    runtime().block_on(async {
        let mut c = open(&db).await;
        sqlx::query("INSERT INTO run_buckets VALUES (1, ?1, 1.0, 1.0, 1.0)")
            .bind(bucket)
            .execute(&mut c)
            .await
            .unwrap();
        c.close().await.unwrap();
    });
    let clean = |out: &str, lines: usize, what: &str| {
        assert!(!out.contains(['\x1b', '\r', '\x07']), "{what}: {out:?}");
        assert_eq!(out.lines().count(), lines, "{what}: {out}");
        assert!(out.contains("\\u{1b}"), "{what}: {out}");
    };
    let db = s(&db);
    clean(&succeeds(&run(&["history", "--db", db, "list"])), 2, "list");
    // show: the run's line, the table's title and headers, 7 buckets; trend: the title,
    // the headers, one run.
    let show = succeeds(&run(&["history", "--db", db, "show", "1"]));
    clean(&show, 3 + 7, "show");
    let trend = succeeds(&run(&["history", "--db", db, "trend", "--bucket", "gemv"]));
    clean(&trend, 3, "trend");
    let trend = succeeds(&run(&["history", "--db", db, "trend", "--bucket", bucket]));
    clean(&trend, 3, "trend of the odd bucket");
    let v: serde_json::Value =
        serde_json::from_str(&succeeds(&run(&["history", "--db", db, "--json", "list"]))).unwrap();
    assert_eq!(v["runs"][0]["label"], label);
}
