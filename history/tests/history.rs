//! Run history on SQLite, and on a real PostgreSQL server in the ignored test that `.ci/run`
//! runs after starting one (it sets GAPSCOPE_TEST_POSTGRES_URL).

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gapscope_analyzer::RuleSet;
use gapscope_analyzer::analysis::{AnalysisSettings, Report, analyze};
use gapscope_analyzer::gate::{GateOptions, Policy, Verdict, gate_runs};
use gapscope_analyzer::import::{ImportOptions, NoProgress, import_trace};
use gapscope_history::{History, HistoryError};
use gapscope_tests::{names, snapshot};

fn nsys_export() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nsys-2025.3.sqlite")
}

fn report() -> Report {
    let imported = import_trace(&nsys_export(), &ImportOptions::default(), &NoProgress).unwrap();
    analyze(&imported, &RuleSet::builtin(), &AnalysisSettings::default())
}

fn err(r: Result<History, HistoryError>) -> String {
    let e = r.err().expect("fails").to_string();
    assert!(!e.contains('\n'), "one line: {e}");
    e
}

fn exercise(db: &str) {
    let r = report();
    let h = History::open_or_create(db).unwrap();
    let before = h.list(100_000).unwrap().len();
    let a = h.add(&r, "first", true).unwrap();
    let b = h.add(&r, "second; DROP TABLE runs; --", false).unwrap();
    assert!(b > a);
    let runs = h.list(2).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].id, b);
    assert_eq!(
        runs[0].label, "second; DROP TABLE runs; --",
        "bound, not interpolated"
    );
    assert!(runs[1].accepted && !runs[0].accepted);
    assert_eq!(runs[0].decode_steps, r.steps.decode_steps as i64);
    assert_eq!(h.run(a).unwrap().unwrap().label, "first");
    assert!(h.run(b + 1_000_000).unwrap().is_none());
    let buckets = h.buckets(a).unwrap();
    assert_eq!(buckets.len(), r.buckets.len());
    let gemv = buckets.iter().find(|x| x.bucket == "gemv").unwrap();
    let want = r
        .buckets
        .iter()
        .find(|x| x.bucket.as_str() == "gemv")
        .unwrap();
    assert_eq!(gemv.ms_per_step_median, want.ms_per_step.map(|s| s.median));
    let t = h.trend("gemv", 2).unwrap();
    assert_eq!(t.iter().map(|p| p.id).collect::<Vec<_>>(), vec![a, b]);
    assert!(h.bucket_names().unwrap().contains(&"gemv".to_owned()));
    let acc = h.accepted_buckets(100_000).unwrap();
    assert!(acc.iter().any(|(s, b)| s.id == a && !b.is_empty()));
    assert!(acc.iter().all(|(s, _)| s.accepted));
    drop(h);
    // Reopening for reading runs no migration and keeps the rows; it cannot add.
    let h = History::open(db).unwrap();
    assert_eq!(h.list(100_000).unwrap().len(), before + 2);
    let e = h.add(&r, "x", false).unwrap_err().to_string();
    assert!(e.contains("reading"), "{e}");

    // Two concurrent writers lose nothing (labels unique to this run: a PostgreSQL database
    // outlives the test).
    let tag = format!(
        "{}-{:?}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
    );
    let tag = &tag;
    let per = 25;
    std::thread::scope(|s| {
        for w in 0..2 {
            let r = &r;
            s.spawn(move || {
                let h = History::open_or_create(db).unwrap();
                for i in 0..per {
                    h.add(r, &format!("writer {w} {tag} run {i}"), false)
                        .unwrap();
                }
            });
        }
    });
    let all = h.list(100_000).unwrap();
    assert_eq!(all.len(), before + 2 + 2 * per);
    for w in 0..2 {
        let mine = all
            .iter()
            .filter(|x| x.label.starts_with(&format!("writer {w} {tag} ")))
            .count();
        assert_eq!(mine, per, "writer {w}");
    }
}

/// `n` threads open a database that does not exist yet, each for writing, at once, and add
/// a run: every one succeeds and every run is stored.
fn concurrent_first_use(db: &str, n: usize) {
    let r = report();
    let barrier = std::sync::Barrier::new(n);
    let ids: Vec<i64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|i| {
                let (r, barrier) = (&r, &barrier);
                s.spawn(move || {
                    barrier.wait();
                    let h = History::open_or_create(db).unwrap_or_else(|e| panic!("{i}: {e}"));
                    h.add(r, &format!("first use {i}"), true)
                        .unwrap_or_else(|e| panic!("{i}: {e}"))
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), n);
    let runs = History::open(db).unwrap().list(100_000).unwrap();
    assert_eq!(
        runs.iter()
            .filter(|x| x.label.starts_with("first use "))
            .count(),
        n
    );
}

#[test]
fn sqlite_history_add_list_trend_and_concurrent_writers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.sqlite");
    exercise(db.to_str().unwrap());
}

#[test]
fn sqlite_first_use_by_concurrent_writers_applies_the_schema_once() {
    for round in 0..5 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.sqlite");
        concurrent_first_use(db.to_str().unwrap(), 16);
        assert_eq!(
            names(dir.path())
                .into_iter()
                .filter(|n| n.ends_with(".creating"))
                .count(),
            0,
            "round {round}: no temporary files left"
        );
    }
    // A `sqlite://` URL is created in place (as where the file system has no hard links):
    // the schema is then applied under SQLite's write lock.
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.sqlite");
        concurrent_first_use(&format!("sqlite://{}", db.display()), 16);
    }
}

/// `.ci/run` starts a server and runs this with `--ignored`.
#[expect(
    clippy::disallowed_methods,
    reason = "a test reads its environment (GAPSCOPE_TEST_POSTGRES_URL)"
)]
#[test]
#[ignore = "needs PostgreSQL: set GAPSCOPE_TEST_POSTGRES_URL (.ci/run starts a server)"]
fn postgres_history_add_list_trend_and_concurrent_first_use() {
    use sqlx::Connection;
    let url = std::env::var("GAPSCOPE_TEST_POSTGRES_URL")
        .expect("GAPSCOPE_TEST_POSTGRES_URL must name a PostgreSQL database");
    exercise(&url);
    // A fresh database, used first by 16 writers at once.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let name = format!("gapscope_first_use_{}", std::process::id());
    let mut admin = rt
        .block_on(sqlx::postgres::PgConnection::connect(&url))
        .unwrap();
    for sql in [
        format!("DROP DATABASE IF EXISTS {name}"),
        format!("CREATE DATABASE {name}"),
    ] {
        rt.block_on(sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut admin))
            .unwrap();
    }
    let (base, _) = url.rsplit_once('/').unwrap();
    let fresh = format!("{base}/{name}");
    let e = err(History::open(&fresh));
    assert!(e.contains("no gapscope history tables"), "{e}");
    concurrent_first_use(&fresh, 16);
    // Figures that are not finite numbers: refused at `add`; stored by another tool, read as
    // invalid.
    let mut bad = report();
    bad.buckets[0].share_of_busy_pct = f64::INFINITY;
    let h = History::open_or_create(&fresh).unwrap();
    let e = h.add(&bad, "x", true).unwrap_err().to_string();
    assert!(e.contains("not a finite number"), "{e}");
    drop(h);
    let mut c = rt
        .block_on(sqlx::postgres::PgConnection::connect(&fresh))
        .unwrap();
    let insert = "INSERT INTO runs (created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted) VALUES (1, 'nan', 't', 'g', 1, 'NaN', '-Infinity', 0)";
    rt.block_on(sqlx::raw_sql(insert).execute(&mut c)).unwrap();
    rt.block_on(c.close()).unwrap();
    let runs = History::open(&fresh).unwrap().list(1).unwrap();
    assert_eq!((runs[0].tpot_median_ms, runs[0].busy_pct), (None, None));
    assert_eq!(runs[0].invalid, ["tpot_median_ms", "busy_pct"]);
    let drop_db = format!("DROP DATABASE {name}");
    rt.block_on(sqlx::raw_sql(sqlx::AssertSqlSafe(drop_db)).execute(&mut admin))
        .unwrap();
}

#[test]
fn bad_database_is_a_one_line_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("not-a-db.sqlite");
    std::fs::write(
        &p,
        b"this is not sqlite at all, just some text padding padding",
    )
    .unwrap();
    for e in [
        err(History::open(p.to_str().unwrap())),
        err(History::open_or_create(p.to_str().unwrap())),
    ] {
        assert!(
            e.contains("not-a-db.sqlite") && e.contains("not a gapscope history database"),
            "{e}"
        );
    }
    let e = err(History::open(dir.path().to_str().unwrap()));
    assert!(e.contains("directory"), "{e}");
    // A FIFO would block SQLite's open until a writer appears: refused before opening.
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo (coreutils) runs");
    assert!(made.success());
    for e in [
        err(History::open(fifo.to_str().unwrap())),
        err(History::open_or_create(fifo.to_str().unwrap())),
    ] {
        assert!(e.contains("not a regular file"), "{e}");
    }
}

/// B21: an unreachable server is reported as such, at once, and no message shows the
/// password, whatever the URL's spelling or the failure.
#[test]
fn postgres_errors_name_the_cause_quickly_and_never_show_the_password() {
    let t = Instant::now();
    let e = err(History::open("postgres://nobody:s3cret@127.0.0.1:1/none"));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    assert!(
        e.contains("cannot connect") && !e.contains("pool timed out"),
        "{e}"
    );
    assert!(e.to_lowercase().contains("refused"), "{e}");
    assert!(e.contains("nobody:***@127.0.0.1:1"), "{e}");
    for url in [
        "postgres://nobody:s3cret@127.0.0.1:1/none",
        "postgresql://nobody:s3cret@127.0.0.1:notaport/none",
        "postgres://nobody:s3cret@/none",
        "postgres://nobody@127.0.0.1:1/none?password=s3cret",
        "postgres://nobody:s3c%72et@127.0.0.1:1/none",
        "postgres://nobody:s3/cret@127.0.0.1:1/none",
        "postgres://nobody:s3cret@127.0.0.1:1/none?sslmode=bogus",
    ] {
        for e in [err(History::open(url)), err(History::open_or_create(url))] {
            assert!(
                !e.contains("s3cret") && !e.contains("s3c%72et") && !e.contains("s3/cret"),
                "{url}: {e}"
            );
        }
    }
    let e = err(History::open("mysql://u:s3cret@h/d"));
    assert!(e.contains("unsupported") && !e.contains("s3cret"), "{e}");
}

/// B18: reading never creates anything; a missing database is an error that says how to
/// make one. Writing creates the file, never a missing directory.
#[test]
fn reading_a_missing_database_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("nonexistent/dir/h.sqlite");
    let e = err(History::open(db.to_str().unwrap()));
    assert!(
        e.contains("no history database at") && e.contains("gapscope history add"),
        "{e}"
    );
    let missing = dir.path().join("h.sqlite");
    err(History::open(missing.to_str().unwrap()));
    err(History::open(&format!("sqlite://{}", missing.display())));
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
    let e = err(History::open_or_create(db.to_str().unwrap()));
    assert!(e.contains("does not exist"), "{e}");
    assert!(names(dir.path()).is_empty(), "{:?}", names(dir.path()));
}

/// A `--db` value that is not a URL is a file path, query-like characters included.
#[test]
fn a_path_with_a_query_is_a_file_of_that_name() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("x?mode=memory");
    let h = History::open_or_create(db.to_str().unwrap()).unwrap();
    h.add(&report(), "stored", false).unwrap();
    drop(h);
    assert_eq!(names(dir.path()), vec!["x?mode=memory".to_owned()]);
    let runs = History::open(db.to_str().unwrap())
        .unwrap()
        .list(10)
        .unwrap();
    assert_eq!(runs.len(), 1);
    // As a URL the same text asks for SQLite's in-memory database, which is refused.
    let url = format!("sqlite://{}", db.display());
    let e = err(History::open(&url));
    assert!(e.contains("in-memory"), "{e}");
}

/// A SQLite file that is not a history (an nsys export) is refused, for reading and for
/// writing, and left byte for byte as it was, with nothing created beside it.
#[test]
fn an_unrelated_sqlite_file_is_refused_and_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("export.sqlite");
    std::fs::copy(nsys_export(), &p).unwrap();
    let before = std::fs::read(&p).unwrap();
    for e in [
        err(History::open(p.to_str().unwrap())),
        err(History::open_or_create(p.to_str().unwrap())),
    ] {
        assert!(
            e.contains("export.sqlite") && e.contains("not a gapscope history database"),
            "{e}"
        );
    }
    assert_eq!(std::fs::read(&p).unwrap(), before);
    assert_eq!(names(dir.path()), vec!["export.sqlite".to_owned()]);
    // An empty file is not a history either, but `open_or_create` may make it one.
    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").unwrap();
    let e = err(History::open(empty.to_str().unwrap()));
    assert!(e.contains("not a gapscope history database"), "{e}");
    History::open_or_create(empty.to_str().unwrap())
        .unwrap()
        .add(&report(), "", false)
        .unwrap();
    assert_eq!(
        History::open(empty.to_str().unwrap())
            .unwrap()
            .list(5)
            .unwrap()
            .len(),
        1
    );
}

/// Runs `sql` on the SQLite database `db` through a plain connection, with automatic
/// checkpoints off, and hands the still-open connection's files to `check` in copies of the
/// file and its `-wal` (with the `-shm` when `keep_shm`), as a writer killed after
/// committing leaves them.
fn with_uncheckpointed(db: &Path, sql: &str, keep_shm: bool, check: impl FnOnce(&Path)) {
    use sqlx::{ConnectOptions, Connection};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let c = rt.block_on(async {
        let mut c = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(db)
            .connect()
            .await
            .unwrap();
        let script = format!("PRAGMA wal_autocheckpoint = 0; {sql}");
        sqlx::raw_sql(sqlx::AssertSqlSafe(script))
            .execute(&mut c)
            .await
            .unwrap();
        c
    });
    let copies = tempfile::tempdir().unwrap();
    let name = db.file_name().unwrap().to_str().unwrap();
    let mut files = vec![name.to_owned(), format!("{name}-wal")];
    if keep_shm {
        files.push(format!("{name}-shm"));
    }
    for f in &files {
        std::fs::copy(db.with_file_name(f), copies.path().join(f)).unwrap();
    }
    check(&copies.path().join(name));
    rt.block_on(c.close()).unwrap();
}

const INSERT_RUN: &str = "INSERT INTO runs (created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted) VALUES (1, 'in the wal', 't', 'g', 3, 2.5, 50.0, 1);
     INSERT INTO run_buckets VALUES (last_insert_rowid(), 'gemv', 1.25, 2.0, 40.0);";

/// Issue 31 class 11: reading a history whose latest run is committed only in its `-wal`
/// sees that run and leaves the file, its `-wal` and `-shm` byte for byte and time for time
/// as they were, creating nothing (before: the read checkpointed the WAL into the file and
/// deleted the `-wal` and `-shm`).
#[test]
fn reading_a_wal_history_sees_its_rows_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    History::open_or_create(db.to_str().unwrap())
        .unwrap()
        .add(&report(), "in the file", true)
        .unwrap();
    for keep_shm in [true, false] {
        let work = tempfile::tempdir().unwrap();
        let writer = work.path().join("h.sqlite");
        std::fs::copy(&db, &writer).unwrap();
        with_uncheckpointed(&writer, INSERT_RUN, keep_shm, |copy| {
            let before = snapshot(copy.parent().unwrap());
            assert!(before["h.sqlite-wal"].0.len() > 1000);
            let scratch = tempfile::tempdir().unwrap();
            if !keep_shm {
                // Without a scratch directory the private copy is refused, with the reason.
                let e = History::open(copy.to_str().unwrap())
                    .and_then(|h| h.list(10))
                    .unwrap_err()
                    .to_string();
                assert!(e.contains("no scratch directory was given"), "{e}");
            }
            let h = History::open_in(copy.to_str().unwrap(), scratch.path()).unwrap();
            let runs = h.list(10).unwrap();
            let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
            assert_eq!(
                labels,
                ["in the wal", "in the file"],
                "shm kept: {keep_shm}"
            );
            assert_eq!(
                h.buckets(runs[0].id).unwrap()[0].ms_per_step_median,
                Some(1.25)
            );
            assert_eq!(h.trend("gemv", 10).unwrap().len(), 2);
            assert_eq!(h.accepted_buckets(5).unwrap().len(), 2);
            drop(h);
            let after = snapshot(copy.parent().unwrap());
            assert!(after == before, "shm kept: {keep_shm}: files changed");
        });
    }
    // And a history without a `-wal`: nothing appears beside it.
    let before = snapshot(dir.path());
    assert_eq!(
        History::open(db.to_str().unwrap())
            .unwrap()
            .list(5)
            .unwrap()
            .len(),
        1
    );
    assert!(snapshot(dir.path()) == before);
}

/// Issue 31 class 7: a run with a figure that is not a finite number is refused at `add`,
/// storing nothing; non-finite values another tool stored read as `None`, named in
/// `invalid`, and a gate baseline left with nothing finite is an error.
#[test]
fn figures_that_are_not_finite_are_refused_and_never_read_as_figures() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let db = db.to_str().unwrap();
    let h = History::open_or_create(db).unwrap();
    let good = report();
    let mut bad = good.clone();
    bad.buckets[0].share_of_busy_pct = f64::NAN;
    let mut worse = good.clone();
    if let Some(t) = worse.steps.tpot_ms.as_mut() {
        t.median = f64::INFINITY;
    } else {
        worse.buckets[0].calls_per_step = Some(f64::NEG_INFINITY);
    }
    for r in [&bad, &worse] {
        let e = h.add(r, "x", true).unwrap_err().to_string();
        assert!(
            e.contains("not a finite number") && !e.contains('\n'),
            "{e}"
        );
        assert!(gapscope_history::check_storable(r).is_err());
    }
    assert!(h.list(10).unwrap().is_empty(), "nothing stored");
    let ok_id = h.add(&good, "good", true).unwrap();
    drop(h);
    // Another tool stores infinities (SQLite stores a NaN as NULL).
    with_uncheckpointed(
        Path::new(db),
        "UPDATE runs SET tpot_median_ms = 2.0;
         INSERT INTO runs (created_unix_ms, label, trace_path, gpu, decode_steps, tpot_median_ms, busy_pct, accepted) VALUES (2, 'inf', 't', 'g', 3, 9e999, -9e999, 1);
         INSERT INTO run_buckets SELECT last_insert_rowid(), bucket, 9e999, -9e999, 9e999 FROM run_buckets;",
        true,
        |copy| {
            let h = History::open(copy.to_str().unwrap()).unwrap();
            let runs = h.list(10).unwrap();
            let inf = &runs[0];
            assert_eq!((inf.tpot_median_ms, inf.busy_pct), (None, None));
            assert_eq!(inf.invalid, ["tpot_median_ms", "busy_pct"]);
            assert!(runs[1].invalid.is_empty());
            for b in h.buckets(inf.id).unwrap() {
                assert_eq!(
                    (b.ms_per_step_median, b.calls_per_step, b.share_of_busy_pct),
                    (None, None, None)
                );
                assert_eq!(b.invalid.len(), 3);
            }
            let t = h.trend("gemv", 10).unwrap();
            assert_eq!(t[1].ms_per_step_median, None);
            assert_eq!(t[1].invalid, ["ms_per_step_median"]);
            let json = serde_json::to_value(&runs).unwrap();
            assert!(json[0]["tpot_median_ms"].is_null(), "{json}");
            assert_eq!(json[0]["invalid"][0], "tpot_median_ms");
            // The finite run still makes a baseline, with a warning; alone, the infinite one
            // does not.
            let both = h.accepted_buckets(2).unwrap();
            let w = h.check_baseline(&both).unwrap().expect("a warning");
            assert!(w.contains(&format!("run {}", inf.id)), "{w}");
            let only = h.accepted_buckets(1).unwrap();
            let e = h.check_baseline(&only).unwrap_err().to_string();
            assert!(e.contains("no usable baseline") && !e.contains('\n'), "{e}");
            assert!(h.check_baseline(&both[1..]).unwrap().is_none());
            assert_eq!(both[1].0.id, ok_id);
        },
    );
}

/// The gate's baseline of stored runs: each bucket's samples are the accepted runs' medians,
/// in the history's order; the current trace the runs were made of passes against them, and
/// one that lost its GPU work regresses.
#[test]
fn accepted_runs_make_a_baseline_of_per_run_samples() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let db = db.to_str().unwrap();
    let r = report();
    let h = History::open_or_create(db).unwrap();
    let a = h.add(&r, "a", true).unwrap();
    h.add(&r, "not accepted", false).unwrap();
    let b = h.add(&r, "b", true).unwrap();
    drop(h);
    let h = History::open(db).unwrap();
    let runs = h.accepted_buckets(5).unwrap();
    let base = gapscope_history::baseline(&runs);
    assert_eq!(base.runs, [b, a]);
    assert_eq!(
        base.gpus,
        [r.source.gpus.join("; "), r.source.gpus.join("; ")]
    );
    let tpot: Vec<f64> = r.steps.tpot_ms.map(|t| t.median).into_iter().collect();
    assert_eq!(base.tpot_ms, [tpot.clone(), tpot].concat());
    assert_eq!(base.buckets.len(), r.buckets.len());
    for row in &r.buckets {
        let s = base
            .buckets
            .iter()
            .find(|s| s.bucket == row.bucket)
            .unwrap();
        let median: Vec<f64> = row.ms_per_step.map(|m| m.median).into_iter().collect();
        assert_eq!(
            s.ms_per_step,
            [median.clone(), median].concat(),
            "{}",
            row.bucket
        );
        let calls: Vec<f64> = row.calls_per_step.into_iter().collect();
        assert_eq!(
            s.calls_per_step,
            [calls.clone(), calls].concat(),
            "{}",
            row.bucket
        );
    }
    let p = Policy::default();
    let g = gate_runs(&base, &r, &p, GateOptions::default());
    assert_eq!(g.verdict, Verdict::Pass, "{}", g.headline());
    assert_eq!(
        g.baseline,
        format!("history: median of 2 accepted runs ({b}, {a})")
    );
    assert!(g.incomparable.is_empty() && !g.buckets.is_empty());
    let mut lost = r.clone();
    lost.source.kernels = 0;
    lost.source.memops = 0;
    let g = gate_runs(&base, &lost, &p, GateOptions::default());
    assert_eq!(g.verdict, Verdict::Regression);
    assert!(g.headline().contains("no GPU work"), "{}", g.headline());
}

/// Speculative runs store their time per token, tokens per step and acceptance (schema
/// version 2); the gate judges time per token against them, and refuses a plain run.
#[test]
fn speculative_runs_store_their_figures_and_gate_on_time_per_token() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let db = db.to_str().unwrap();
    let trace = gapscope_tests::repo("traces/reference/hf-spec/hf-spec-assisted-k4.json.gz");
    let imported = import_trace(&trace, &ImportOptions::default(), &NoProgress).unwrap();
    let spec = analyze(&imported, &RuleSet::builtin(), &AnalysisSettings::default());
    let sp = spec.speculative.as_ref().unwrap();
    let h = History::open_or_create(db).unwrap();
    let a = h.add(&spec, "spec", true).unwrap();
    let p = h.add(&report(), "plain", false).unwrap();
    let runs = h.list(10).unwrap();
    let stored = runs.iter().find(|r| r.id == a).unwrap();
    assert_eq!(stored.time_per_token_ms, sp.tpot_per_token_ms);
    assert_eq!(stored.tokens_per_step, sp.tokens_per_step);
    assert_eq!(stored.acceptance_rate, sp.acceptance_rate);
    let plain = runs.iter().find(|r| r.id == p).unwrap();
    assert_eq!(plain.time_per_token_ms, None);
    let base = gapscope_history::baseline(&h.accepted_buckets(5).unwrap());
    assert_eq!(base.time_per_token_ms.len(), 1);
    let g = gate_runs(&base, &spec, &Policy::default(), GateOptions::default());
    assert!(
        g.steps
            .iter()
            .any(|s| s.metric == gapscope_analyzer::gate::StepMetric::TimePerToken),
        "{}",
        g.headline()
    );
    let g = gate_runs(&base, &report(), &Policy::default(), GateOptions::default());
    assert_eq!(g.verdict, Verdict::Incomparable, "{}", g.headline());
    assert!(g.headline().contains("speculatively"), "{}", g.headline());
}
