//! A run set opened through the session: each run's rank goes into every table row, and a
//! clock offset moves every time of the run without changing a figure.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::Path;

use gapscope_analyzer::import::NoProgress;
use gapscope_analyzer::session::{Run, RunSet, Session, SessionSettings};

#[test]
fn ranks_and_clock_offsets_reach_the_tables() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/reference/engine-llama3-8b-npl1.gst");
    let offset = 1_000_000_007;
    let set = RunSet {
        runs: vec![
            Run::new(&path),
            Run {
                label: Some("rank 1".into()),
                rank: 1,
                clock_offset_ns: offset,
                ..Run::new(&path)
            },
        ],
    };
    let s = Session::open(set, SessionSettings::default(), &NoProgress).unwrap();
    let (a, b) = (&s.runs[0], &s.runs[1]);
    assert_eq!(b.report.source.path, "rank 1");
    assert!(a.tables.steps.len > 0);
    assert!(a.tables.steps.rank.iter().all(|&r| r == 0));
    assert!(b.tables.steps.rank.iter().all(|&r| r == 1));
    assert!(b.tables.step_buckets.table.rank.iter().all(|&r| r == 1));
    assert!(b.activities().rank.iter().all(|&r| r == 1));
    for (x, y) in a
        .tables
        .steps
        .gpu_start_ns
        .iter()
        .zip(&b.tables.steps.gpu_start_ns)
    {
        assert_eq!(y - x, offset);
    }
    // The figures do not move with the clock.
    let (ta, tb) = (
        a.report.steps.tpot_ms.unwrap(),
        b.report.steps.tpot_ms.unwrap(),
    );
    assert_eq!((ta.n, ta.mean), (tb.n, tb.mean));
    assert_eq!(a.report.buckets.len(), b.report.buckets.len());
    for (x, y) in a.report.buckets.iter().zip(&b.report.buckets) {
        assert_eq!(
            (x.bucket, x.total_ms, x.calls),
            (y.bucket, y.total_ms, y.calls)
        );
    }
}
