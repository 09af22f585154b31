//! The ranks' steps paired with each other, their collectives matched across ranks, and
//! each rank's clock fitted to the first rank's on the collectives' completions.

use serde::Serialize;

use super::collectives::Collective;

/// One rank's report steps, as the alignment sees them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RankSteps {
    /// Indices into the rank's step table, in time order.
    pub index: Vec<u32>,
    /// The step's own number (from its marker), -1 when unknown.
    pub number: Vec<i64>,
    pub gpu_end_ns: Vec<i64>,
}

/// How the ranks' steps were paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepPairing {
    /// By the number every step's marker carries (`decode_step_7`, `ProfilerStep#7`).
    Numbers,
    /// In order, each rank shifted by the step offset whose ends agree best with the
    /// first rank's.
    Order,
}

/// One rank's clock against the first rank's, from matched collectives' completions (a
/// collective ends on every rank at nearly the same instant).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClockFit {
    pub rank: u32,
    /// Median of (this rank's end − the first rank's end) over matched collectives, ns.
    pub offset_ns: i64,
    /// Median absolute deviation of those differences around the offset, ns.
    pub residual_ns: i64,
    /// Whether the offset is within the tolerance of a shared clock (5 µs): then no
    /// correction is applied; otherwise the rank's times are moved by −offset.
    pub shared: bool,
    /// Collectives the fit used.
    pub matched: u32,
}

/// A shared clock is assumed while the completions agree within this, ns.
pub const SHARED_CLOCK_NS: i64 = 5_000;

/// The alignment of several ranks.
#[derive(Debug, Clone)]
pub struct Alignment {
    pub pairing: StepPairing,
    /// Per aligned step, each rank's step (an index into that rank's step table).
    pub steps: Vec<Vec<u32>>,
    /// Per aligned step, each rank's step number when the pairing used numbers, else -1.
    pub numbers: Vec<i64>,
    /// Matched collectives: per collective, its aligned step and each rank's index into
    /// that rank's collective list.
    pub groups: Vec<(u32, Vec<u32>)>,
    /// Per rank, the collectives inside aligned steps that found no partner.
    pub unmatched: Vec<u32>,
    /// Per rank, the clock correction added to its times (−offset when not shared).
    pub correction_ns: Vec<i64>,
    pub clocks: Vec<ClockFit>,
}

fn median(v: &mut [i64]) -> i64 {
    if v.is_empty() {
        return 0;
    }
    let m = v.len() / 2;
    *v.select_nth_unstable(m).1
}

/// The step offset of `other` against `first` (other's step k + d pairs with first's k),
/// within ±`max` steps: on a shared clock the one whose step ends agree best; when no offset
/// brings the ends within half a step of each other (another host's clock), the one whose
/// differences spread least, then the one that pairs most steps, then the smallest.
fn order_offset(first: &[i64], other: &[i64], max: i64) -> i64 {
    let diffs = |d: i64| -> Vec<i64> {
        (0..first.len() as i64)
            .filter_map(|k| {
                let j = k + d;
                (j >= 0 && (j as usize) < other.len())
                    .then(|| other[j as usize] - first[k as usize])
            })
            .collect()
    };
    let enough = |v: &[i64]| v.len() * 2 >= first.len().min(other.len()).max(1);
    let mut period: Vec<i64> = first.windows(2).map(|w| w[1] - w[0]).collect();
    let period = median(&mut period);
    let mut raw = (i64::MAX, 0i64);
    let mut spread = ((i64::MAX, usize::MAX), 0i64);
    for d in -max..=max {
        let v = diffs(d);
        if !enough(&v) {
            continue;
        }
        let mut abs: Vec<i64> = v.iter().map(|x| x.saturating_abs()).collect();
        let m = median(&mut abs);
        if m < raw.0 || (m == raw.0 && d.abs() < raw.1.abs()) {
            raw = (m, d);
        }
        let mut c = v.clone();
        let mid = median(&mut c);
        let mut dev: Vec<i64> = v.iter().map(|x| (x - mid).saturating_abs()).collect();
        let key = (median(&mut dev), usize::MAX - v.len());
        if key < spread.0 || (key == spread.0 && d.abs() < spread.1.abs()) {
            spread = (key, d);
        }
    }
    if period > 0 && raw.0 <= period / 2 {
        raw.1
    } else {
        spread.1
    }
}

/// Pairs the ranks' steps, then matches each aligned step's collectives in order (the
/// i-th of a step on every rank, while their kinds agree), then fits each rank's clock.
pub fn align(ranks: &[u32], steps: &[RankSteps], colls: &[Vec<Collective>]) -> Alignment {
    let n = steps.len();
    let numbered = steps.iter().all(|s| {
        !s.number.is_empty() && s.number.iter().all(|&x| x >= 0) && {
            let mut v = s.number.clone();
            v.sort_unstable();
            v.windows(2).all(|w| w[0] != w[1])
        }
    });
    let (pairing, aligned, numbers): (StepPairing, Vec<Vec<u32>>, Vec<i64>) = if numbered {
        let at: Vec<std::collections::HashMap<i64, u32>> = steps
            .iter()
            .map(|s| {
                s.number
                    .iter()
                    .copied()
                    .zip(s.index.iter().copied())
                    .collect()
            })
            .collect();
        let mut common: Vec<i64> = steps[0].number.clone();
        common.sort_unstable();
        common.retain(|x| at.iter().all(|m| m.contains_key(x)));
        let rows = common
            .iter()
            .map(|x| at.iter().map(|m| m[x]).collect())
            .collect();
        (StepPairing::Numbers, rows, common)
    } else {
        let offs: Vec<i64> = steps
            .iter()
            .map(|s| order_offset(&steps[0].gpu_end_ns, &s.gpu_end_ns, 4))
            .collect();
        let lo = offs.iter().map(|&d| -d).max().unwrap_or(0).max(0);
        let mut rows = Vec::new();
        let mut k = lo;
        loop {
            let row: Option<Vec<u32>> = steps
                .iter()
                .zip(&offs)
                .map(|(s, &d)| {
                    let j = k + d;
                    (j >= 0 && (j as usize) < s.index.len()).then(|| s.index[j as usize])
                })
                .collect();
            match row {
                Some(r) => rows.push(r),
                None => break,
            }
            k += 1;
        }
        let len = rows.len();
        (StepPairing::Order, rows, vec![-1; len])
    };
    // Each rank's collectives grouped by its step.
    let by_step: Vec<std::collections::HashMap<u32, Vec<u32>>> = colls
        .iter()
        .map(|c| {
            let mut m: std::collections::HashMap<u32, Vec<u32>> = Default::default();
            for (i, x) in c.iter().enumerate() {
                m.entry(x.step).or_default().push(i as u32);
            }
            m
        })
        .collect();
    let mut groups: Vec<(u32, Vec<u32>)> = Vec::new();
    let mut unmatched = vec![0u32; n];
    for (k, row) in aligned.iter().enumerate() {
        let lists: Vec<&[u32]> = row
            .iter()
            .enumerate()
            .map(|(r, s)| by_step[r].get(s).map(Vec::as_slice).unwrap_or(&[]))
            .collect();
        let common = lists.iter().map(|l| l.len()).min().unwrap_or(0);
        let mut matched = 0;
        for i in 0..common {
            let kind = colls[0][lists[0][i] as usize].kind;
            if (1..n).any(|r| colls[r][lists[r][i] as usize].kind != kind) {
                break;
            }
            groups.push((k as u32, lists.iter().map(|l| l[i]).collect()));
            matched += 1;
        }
        for (r, l) in lists.iter().enumerate() {
            unmatched[r] += (l.len() - matched) as u32;
        }
    }
    let mut clocks = Vec::with_capacity(n);
    let mut correction_ns = vec![0i64; n];
    for r in 0..n {
        let mut d: Vec<i64> = groups
            .iter()
            .map(|(_, g)| colls[r][g[r] as usize].gpu_end_ns - colls[0][g[0] as usize].gpu_end_ns)
            .collect();
        let offset = median(&mut d);
        let mut dev: Vec<i64> = d.iter().map(|x| (x - offset).saturating_abs()).collect();
        let residual = median(&mut dev);
        let shared = offset.saturating_abs() <= SHARED_CLOCK_NS;
        // Moved only onto a fit that holds: completions that disagree are no clock.
        if !shared && residual <= super::verdict::COMPLETION_RESIDUAL_NS {
            correction_ns[r] = -offset;
        }
        clocks.push(ClockFit {
            rank: ranks[r],
            offset_ns: offset,
            residual_ns: residual,
            shared,
            matched: groups.len() as u32,
        });
    }
    Alignment {
        pairing,
        steps: aligned,
        numbers,
        groups,
        unmatched,
        correction_ns,
        clocks,
    }
}
