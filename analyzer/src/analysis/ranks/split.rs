//! Each matched collective's time split into waiting and transfer on every rank, and the
//! per-step and per-rank figures made from it.

use super::align::Alignment;
use super::collectives::Collective;
use super::tables::{CollectiveRow, RankStepRow};
use super::{RankRow, RanksTables, median_f};

/// What the split of the collectives gives.
pub struct Split {
    /// Per aligned step and rank: wait, transfer, collectives arrived last at.
    pub acc: Vec<Vec<(i64, i64, u32)>>,
    /// Per matched collective, the position of the rank that arrived last.
    pub last_of: Vec<usize>,
    pub late_count: Vec<u32>,
    /// Per rank and aligned step, the longest wait at one collective.
    pub longest: Vec<Vec<i64>>,
    /// Per aligned step, the collective with the largest lag (last arrival − the one
    /// before it), and that lag.
    pub worst_lag: Vec<Option<(usize, i64)>>,
}

/// Splits every matched collective; its rows go to `tables.collectives`.
pub fn split(
    colls: &[Vec<Collective>],
    al: &Alignment,
    rank_ids: &[u32],
    tables: &mut RanksTables,
) -> Split {
    let n = colls.len();
    let k_steps = al.steps.len();
    let mut acc = vec![vec![(0i64, 0i64, 0u32); n]; k_steps]; // (wait, transfer, last)
    let mut last_of = Vec::with_capacity(al.groups.len());
    let mut late_count = vec![0u32; n];
    // Per rank and aligned step, the longest wait at one collective.
    let mut longest = vec![vec![0i64; k_steps]; n];
    // Per aligned step, the collective with the largest lag (last arrival − the one
    // before it), and that lag.
    let mut worst_lag: Vec<Option<(usize, i64)>> = vec![None; k_steps];
    for (ci, (k, g)) in al.groups.iter().enumerate() {
        let c: Vec<&Collective> = (0..n).map(|r| &colls[r][g[r] as usize]).collect();
        let start = |r: usize| c[r].gpu_start_ns + al.correction_ns[r];
        let end = |r: usize| c[r].gpu_end_ns + al.correction_ns[r];
        let last = (0..n).max_by_key(|&r| (start(r), r)).unwrap_or(0);
        let arrive = start(last);
        last_of.push(last);
        late_count[last] += 1;
        let before = (0..n)
            .filter(|&r| r != last)
            .map(start)
            .max()
            .unwrap_or(arrive);
        let lag = arrive - before;
        let w = &mut worst_lag[*k as usize];
        if w.is_none_or(|(_, l)| lag > l) {
            *w = Some((ci, lag));
        }
        for r in 0..n {
            let dur = end(r) - start(r);
            let wait = (arrive - start(r)).clamp(0, dur);
            let lw = &mut longest[r][*k as usize];
            *lw = (*lw).max(wait);
            let a = &mut acc[*k as usize][r];
            a.0 += wait;
            a.1 += dur - wait;
            a.2 += (r == last) as u32;
            tables.collectives.push(CollectiveRow {
                collective: ci as u32,
                step: *k,
                collective_kind: c[r].kind as u8,
                rank: rank_ids[r],
                kernel: c[r].kernel,
                gpu_start_ns: start(r),
                gpu_end_ns: end(r),
                wait_ns: wait,
                transfer_ns: dur - wait,
                last: (r == last) as u8,
            });
        }
    }
    Split {
        acc,
        last_of,
        late_count,
        longest,
        worst_lag,
    }
}

/// One row per aligned step and rank into `tables.steps`; returns the slowest rank's step
/// time per aligned step.
pub fn step_rows(
    steps: &[&crate::tables::StepTable],
    colls: &[Vec<Collective>],
    al: &Alignment,
    sp: &Split,
    rank_ids: &[u32],
    tables: &mut RanksTables,
) -> Vec<i64> {
    let n = steps.len();
    let k_steps = al.steps.len();
    let acc = &sp.acc;
    let comm_per_step: Vec<std::collections::HashMap<u32, (i64, u32)>> = colls
        .iter()
        .map(|cs| {
            let mut m: std::collections::HashMap<u32, (i64, u32)> = Default::default();
            for c in cs {
                let e = m.entry(c.step).or_default();
                e.0 += c.gpu_end_ns - c.gpu_start_ns;
                e.1 += 1;
            }
            m
        })
        .collect();
    let mut slowest = Vec::with_capacity(k_steps);
    for (k, row) in al.steps.iter().enumerate() {
        let mut worst = 0i64;
        for r in 0..n {
            let s = row[r] as usize;
            let st = steps[r];
            let (a, b) = (st.gpu_start_ns[s], st.gpu_end_ns[s]);
            let busy = st.busy_ns[s];
            let (comm, calls) = comm_per_step[r].get(&row[r]).copied().unwrap_or((0, 0));
            let (wait, transfer, last) = acc[k][r];
            worst = worst.max(b - a);
            tables.steps.push(RankStepRow {
                step: k as u32,
                rank: rank_ids[r],
                rank_step: row[r],
                number: al.numbers[k],
                gpu_start_ns: a + al.correction_ns[r],
                gpu_end_ns: b + al.correction_ns[r],
                busy_ns: busy,
                compute_ns: (busy - comm).max(0),
                transfer_ns: transfer,
                wait_ns: wait,
                unsplit_ns: (comm - wait - transfer).max(0),
                idle_ns: ((b - a) - busy).max(0),
                collectives: calls,
                last,
            });
        }
        slowest.push(worst);
    }
    slowest
}

/// Each rank's medians over the aligned steps.
pub fn rank_rows(
    tables: &RanksTables,
    sp: &Split,
    rank_ids: &[u32],
    matched: usize,
) -> Vec<RankRow> {
    let (longest, late_count) = (&sp.longest, &sp.late_count);
    (0..rank_ids.len())
        .map(|r| {
            let t = &tables.steps;
            let rows: Vec<usize> = (0..t.len).filter(|&i| t.rank[i] == rank_ids[r]).collect();
            let med = |f: &dyn Fn(usize) -> f64| median_f(rows.iter().map(|&i| f(i)).collect());
            let ms = |v: i64| v as f64 / 1e6;
            let step = |i: usize| (t.gpu_end_ns[i] - t.gpu_start_ns[i]).max(1) as f64;
            RankRow {
                rank: rank_ids[r],
                step_ms: med(&|i| step(i) / 1e6),
                longest_wait_ms: median_f(longest[r].iter().map(|&x| ms(x)).collect()),
                compute_ms: med(&|i| ms(t.compute_ns[i])),
                transfer_ms: med(&|i| ms(t.transfer_ns[i])),
                wait_ms: med(&|i| ms(t.wait_ns[i])),
                unsplit_ms: med(&|i| ms(t.unsplit_ns[i])),
                idle_ms: med(&|i| ms(t.idle_ns[i])),
                busy_pct: med(&|i| 100.0 * t.busy_ns[i] as f64 / step(i)),
                working_pct: med(&|i| {
                    100.0 * (t.busy_ns[i] - t.wait_ns[i]).max(0) as f64 / step(i)
                }),
                late_share: if matched == 0 {
                    0.0
                } else {
                    late_count[r] as f64 / matched as f64
                },
            }
        })
        .collect()
}
