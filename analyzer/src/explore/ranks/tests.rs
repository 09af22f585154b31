//! The explorer's rank lanes on real TP=2 captures (rank 1 stalls 20 ms before each step)
//! and on hand-made rows.

use std::path::{Path, PathBuf};

use super::row::Row;
use super::*;
use crate::analysis::ranks::analyze_ranks;
use crate::import::NoProgress;
use crate::session::ranks::{RankMode, open_set};
use crate::session::{Knobs, SessionSettings};

fn tp2() -> (Vec<AnalyzedRun>, RanksAnalysis, RankLanes) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/reference/tp2");
    let paths: Vec<PathBuf> = ["host-rank1.json.gz", "host-rank0.json.gz"]
        .iter()
        .map(|n| dir.join(n))
        .collect();
    let settings = SessionSettings::resolve(&Knobs::default()).expect("settings");
    let set = open_set(&paths, RankMode::Auto, 2, &settings, &NoProgress).expect("opens");
    assert!(set.as_ranks);
    let refs: Vec<&AnalyzedRun> = set.runs.iter().collect();
    let a = analyze_ranks(&refs);
    let lanes = RankLanes::build(&refs, &a);
    (set.runs, a, lanes)
}

#[test]
fn tp2_lanes_mark_the_late_rank_and_split_each_collective() {
    let (_runs, a, l) = tp2();
    let ranks: Vec<u32> = l.lanes.iter().map(|x| x.rank).collect();
    assert_eq!(ranks, [0, 1]);
    assert_eq!(l.late_lane(), Some(1), "rank 1 sets the step");
    assert!(!l.lanes[0].sets_step);
    for lane in &l.lanes {
        assert_eq!(lane.steps.step.len() as u32, a.report.aligned_steps);
        assert_eq!(
            lane.collectives.row.len() as u32,
            a.report.matched_collectives
        );
        assert!(!lane.kernels.row.is_empty(), "the other kernels are there");
        let c = &lane.collectives;
        for i in 0..c.row.len() {
            let dur = c.row.spans.end_ns[i] - c.row.spans.start_ns[i];
            assert_eq!(c.wait_ns[i] + c.transfer_ns[i], dur);
        }
    }
    // Rank 0 waits for rank 1 about 20.5 ms once per step (the planted host stall).
    let c = &l.lanes[0].collectives;
    for (k, w) in l.lanes[0].steps.spans.start_ns.iter().enumerate() {
        let end = l.lanes[0].steps.spans.end_ns[k];
        let longest = (0..c.row.len())
            .filter(|&i| c.row.spans.start_ns[i] >= *w && c.row.spans.start_ns[i] < end)
            .map(|i| c.wait_ns[i])
            .max()
            .unwrap_or(0);
        if k > 0 {
            let ms = longest as f64 / 1e6;
            assert!((19.0..22.5).contains(&ms), "step {k}: longest wait {ms} ms");
        }
    }
    // Rank 1 arrived last at most collectives; its details say so.
    let lasts = l.lanes[1].collectives.last.iter().filter(|&&x| x).count();
    assert!(lasts * 2 > l.lanes[1].collectives.row.len());
    let i = (0..c.row.len()).max_by_key(|&i| c.wait_ns[i]).unwrap_or(0);
    let d = l.collective_detail(0, i).expect("a collective");
    assert_eq!((d.rank, d.last, d.last_rank), (0, false, Some(1)));
    assert_eq!(d.kind, CollectiveKind::AllReduce);
    assert!(d.wait_ns > 19_000_000, "{d:?}");
    // The same collective on rank 1 ends at nearly the same instant (common clock).
    let j = l.by_collective[d.collective as usize][1] as usize;
    let d1 = l.collective_detail(1, j).expect("partner");
    assert!(d1.last && d1.wait_ns < d.wait_ns);
    assert!((d1.end_ns - d.end_ns).abs() < 100_000, "{d:?} {d1:?}");
}

#[test]
fn tp2_queries_draw_about_one_item_per_pixel() {
    let (_runs, _a, l) = tp2();
    let (t0, t1) = l.span_ns;
    let width = 1000.0;
    for lane in 0..l.lanes.len() {
        let c = l.collectives_in(lane, t0, t1, width);
        let k = l.kernels_in(lane, t0, t1, width);
        let s = l.steps_in(lane, t0, t1, width);
        assert!(!c.is_empty() && !k.is_empty() && !s.is_empty());
        assert!(c.len() as f64 <= width / 2.0, "{} collectives", c.len());
        assert!(k.len() as f64 <= width / 2.0, "{} kernels", k.len());
        // Every collective is drawn once, folded or not.
        let n: usize = c.iter().map(|d| d.items.len()).sum();
        assert_eq!(n, l.lanes[lane].collectives.row.len());
        for d in &c {
            assert!(d.start_ns <= d.wait_end_ns && d.wait_end_ns <= d.end_ns);
        }
    }
    // Zoomed out, no links; on one step, each collective alone and linked across ranks.
    assert!(l.links_in(t0, t1, width).is_empty());
    let st = &l.lanes[0].steps.spans;
    let (a, b) = (st.start_ns[2], st.end_ns[2]);
    let links = l.links_in(a, b, 2000.0);
    assert!(!links.is_empty());
    assert!(links.iter().all(|k| k.end_ns.iter().all(Option::is_some)));
    assert!(links.iter().filter(|k| k.last_lane == Some(1)).count() * 2 > links.len());
    let c = l.collectives_in(0, a, b, 2000.0);
    assert!(
        c.iter()
            .any(|d| d.items.len() == 1 && d.wait_ns > 19_000_000)
    );
}

#[test]
fn a_fold_stops_at_a_wide_item_and_at_a_gap() {
    // 200 items of 1 ns every 2 ns, then one of 300 ns, then a gap, then 3 narrow ones.
    let mut s: Vec<i64> = (0..200).map(|i| i * 2).collect();
    let mut e: Vec<i64> = s.iter().map(|x| x + 1).collect();
    s.push(400);
    e.push(700);
    s.extend([900, 902, 904]);
    e.extend([901, 903, 905]);
    let row = Row::new(Spans::new(s, e));
    // 1000 ns over 1000 px: 3 px = 3 ns.
    assert_eq!(row.fold(0, 1000, 1000.0), [0..200, 200..201, 201..204]);
    assert_eq!(row.longest(0, 204), 200);
    assert_eq!(row.longest(0, 200), 0);
    assert_eq!(row.first_wide(0, 204, 3), Some(200));
}
