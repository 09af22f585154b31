//! Run history on SQLite (always) and on a real PostgreSQL server when
//! GAPSCOPE_TEST_POSTGRES_URL is set (`.ci/run` starts one and sets it).

use std::path::Path;

use gapscope_analyzer::RuleSet;
use gapscope_analyzer::analysis::{AnalysisSettings, Report, analyze};
use gapscope_analyzer::history::History;
use gapscope_analyzer::import::{ImportOptions, NoProgress, import_trace};

fn report() -> Report {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nsys/nsys-2025.3.sqlite");
    let imported = import_trace(&p, &ImportOptions::default(), &NoProgress).unwrap();
    analyze(&imported, &RuleSet::builtin(), &AnalysisSettings::default())
}

fn exercise(db: &str) {
    let r = report();
    let h = History::open(db).unwrap();
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
    drop(h);
    // Reopening runs no migration twice and keeps the rows.
    let h = History::open(db).unwrap();
    assert_eq!(h.list(100_000).unwrap().len(), before + 2);

    // Two concurrent writers lose nothing.
    let per = 25;
    std::thread::scope(|s| {
        for w in 0..2 {
            let r = &r;
            s.spawn(move || {
                let h = History::open(db).unwrap();
                for i in 0..per {
                    h.add(r, &format!("writer {w} run {i}"), false).unwrap();
                }
            });
        }
    });
    let all = h.list(100_000).unwrap();
    assert_eq!(all.len(), before + 2 + 2 * per);
    for w in 0..2 {
        let mine = all
            .iter()
            .filter(|x| x.label.starts_with(&format!("writer {w} ")))
            .count();
        assert!(mine >= per, "writer {w}: {mine}");
    }
}

#[test]
fn sqlite_history_add_list_trend_and_concurrent_writers() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sub/history.sqlite");
    exercise(db.to_str().unwrap());
}

#[test]
fn postgres_history_when_a_server_is_available() {
    match std::env::var("GAPSCOPE_TEST_POSTGRES_URL") {
        Ok(url) => exercise(&url),
        Err(_) => eprintln!("GAPSCOPE_TEST_POSTGRES_URL not set: PostgreSQL history test skipped"),
    }
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
    let e = History::open(p.to_str().unwrap())
        .err()
        .expect("fails")
        .to_string();
    assert!(e.contains("not-a-db.sqlite") && !e.contains('\n'), "{e}");
    let e = History::open("postgres://nobody:secret@127.0.0.1:1/none")
        .err()
        .expect("fails")
        .to_string();
    assert!(!e.contains("secret"), "password redacted: {e}");
}
