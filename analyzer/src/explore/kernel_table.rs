//! The kernel table: one row per distinct kernel or memop name (and bucket) over the whole
//! trace, with calls, total, mean, p50, p99 and share, and the explorer's filter and sort.

use std::collections::HashMap;

use gapscope_traces::{StrId, Trace};
use regex::Regex;

use crate::analysis::stats::percentile_select;
use crate::bucket::Bucket;

#[derive(Debug, Clone, PartialEq)]
pub struct KernelRow {
    pub name: String,
    pub name_id: StrId,
    pub bucket: Bucket,
    pub memop: bool,
    pub calls: u64,
    pub total_ns: i64,
    pub mean_ns: f64,
    /// Median and 99th percentile of the durations (linear interpolation, numpy's default).
    pub p50_ns: f64,
    pub p99_ns: f64,
    /// Share of the summed GPU activity time of the whole trace, %.
    pub share_pct: f64,
}

#[derive(Debug, Default)]
pub struct KernelTable {
    /// Most total time first.
    pub rows: Vec<KernelRow>,
    /// Summed GPU activity time of all rows, ns.
    pub total_ns: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SortKey {
    Name,
    Bucket,
    Calls,
    #[default]
    Total,
    Mean,
    P50,
    P99,
    Share,
}

/// A filter and an order for the table.
#[derive(Debug, Clone, Default)]
pub struct TableQuery {
    /// Rows whose name matches.
    pub regex: Option<Regex>,
    pub bucket: Option<Bucket>,
    pub sort: SortKey,
    pub ascending: bool,
}

impl KernelTable {
    pub fn build(trace: &Trace, kernel_bucket: &[u8], memop_bucket: &[u8]) -> Self {
        let k = &trace.kernels;
        let m = &trace.memops;
        // Group id per activity: a dense slot per name for its first bucket, a map for the
        // rare name seen in a second bucket (scope rules).
        const UNSET: u32 = u32::MAX;
        let mut first: Vec<(u32, u8)> = vec![(UNSET, 0); trace.strings.len()];
        let mut extra: HashMap<(StrId, u8), u32> = HashMap::new();
        let mut groups: Vec<(StrId, u8, bool)> = Vec::new();
        let mut group_of =
            |name: StrId, b: u8, memop: bool, groups: &mut Vec<(StrId, u8, bool)>| {
                let mut new = || {
                    groups.push((name, b, memop));
                    groups.len() as u32 - 1
                };
                match first.get_mut(name as usize) {
                    Some(slot) if slot.0 == UNSET => {
                        *slot = (new(), b);
                        slot.0
                    }
                    Some(slot) if slot.1 == b => slot.0,
                    _ => *extra.entry((name, b)).or_insert_with(new),
                }
            };
        let n = k.len + m.len;
        let mut gid: Vec<u32> = Vec::with_capacity(n);
        let mut dur: Vec<i64> = Vec::with_capacity(n);
        for i in 0..k.len {
            let b = kernel_bucket.get(i).copied().unwrap_or(Bucket::Other as u8);
            gid.push(group_of(k.name[i], b, false, &mut groups));
            dur.push((k.gpu_end_ns[i] - k.gpu_start_ns[i]).max(0));
        }
        for i in 0..m.len {
            let b = memop_bucket.get(i).copied().unwrap_or(Bucket::Other as u8);
            gid.push(group_of(m.name[i], b, true, &mut groups));
            dur.push((m.gpu_end_ns[i] - m.gpu_start_ns[i]).max(0));
        }
        // Counting sort of the durations by group.
        let mut start = vec![0usize; groups.len() + 1];
        for &g in &gid {
            start[g as usize + 1] += 1;
        }
        for i in 0..groups.len() {
            start[i + 1] += start[i];
        }
        let mut at = start.clone();
        let mut sorted = vec![0i64; n];
        for (&g, &d) in gid.iter().zip(&dur) {
            sorted[at[g as usize]] = d;
            at[g as usize] += 1;
        }
        drop((gid, dur));
        let mut total_ns = 0i64;
        let mut rows: Vec<KernelRow> = groups
            .iter()
            .enumerate()
            .map(|(g, &(name_id, b, memop))| {
                let v = &mut sorted[start[g]..start[g + 1]];
                let total: i64 = v.iter().sum();
                total_ns += total;
                let calls = v.len() as u64;
                KernelRow {
                    name: trace.strings.get(name_id).to_owned(),
                    name_id,
                    bucket: Bucket::ALL[(b as usize).min(Bucket::ALL.len() - 1)],
                    memop,
                    calls,
                    total_ns: total,
                    mean_ns: total as f64 / calls.max(1) as f64,
                    p50_ns: percentile_select(v, 50.0),
                    p99_ns: percentile_select(v, 99.0),
                    share_pct: 0.0,
                }
            })
            .collect();
        for r in &mut rows {
            r.share_pct = if total_ns > 0 {
                r.total_ns as f64 / total_ns as f64 * 100.0
            } else {
                0.0
            };
        }
        rows.sort_by(|a, b| {
            b.total_ns
                .cmp(&a.total_ns)
                .then_with(|| a.name.cmp(&b.name))
        });
        Self { rows, total_ns }
    }

    /// The rows that pass the query's filter, in its order (row indices).
    pub fn select(&self, q: &TableQuery) -> Vec<u32> {
        let mut idx: Vec<u32> = (0..self.rows.len() as u32)
            .filter(|&i| {
                let r = &self.rows[i as usize];
                q.bucket.is_none_or(|b| b == r.bucket)
                    && q.regex.as_ref().is_none_or(|re| re.is_match(&r.name))
            })
            .collect();
        let rows = &self.rows;
        let key = |i: &u32| &rows[*i as usize];
        idx.sort_by(|a, b| {
            let (a, b) = (key(a), key(b));
            let o = match q.sort {
                SortKey::Name => a.name.cmp(&b.name),
                SortKey::Bucket => a.bucket.as_str().cmp(b.bucket.as_str()),
                SortKey::Calls => a.calls.cmp(&b.calls),
                SortKey::Total | SortKey::Share => a.total_ns.cmp(&b.total_ns),
                SortKey::Mean => a.mean_ns.total_cmp(&b.mean_ns),
                SortKey::P50 => a.p50_ns.total_cmp(&b.p50_ns),
                SortKey::P99 => a.p99_ns.total_cmp(&b.p99_ns),
            };
            if q.ascending { o } else { o.reverse() }
        });
        idx
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_traces::KernelRow as TraceKernel;

    #[test]
    fn percentiles_match_numpy_and_filters_narrow() {
        let mut t = Trace::default();
        let a = t.strings.intern("gemv_a");
        let b = t.strings.intern("attn_b");
        for (i, d) in [10i64, 20, 30, 40].into_iter().enumerate() {
            t.kernels.push(TraceKernel {
                name: a,
                gpu_start_ns: i as i64 * 100,
                gpu_end_ns: i as i64 * 100 + d,
                ..TraceKernel::default()
            });
        }
        t.kernels.push(TraceKernel {
            name: b,
            gpu_start_ns: 1000,
            gpu_end_ns: 1500,
            ..TraceKernel::default()
        });
        let kb = vec![0, 0, 0, 0, Bucket::Attention as u8];
        let tab = KernelTable::build(&t, &kb, &[]);
        assert_eq!(tab.total_ns, 600);
        let r = &tab.rows[1];
        assert_eq!((r.name.as_str(), r.calls, r.total_ns), ("gemv_a", 4, 100));
        // numpy.percentile([10,20,30,40], [50, 99]) = 25.0, 39.7
        assert_eq!(r.p50_ns, 25.0);
        assert!((r.p99_ns - 39.7).abs() < 1e-9);
        let q = TableQuery {
            regex: Some(Regex::new("gemv").unwrap()),
            ..TableQuery::default()
        };
        assert_eq!(tab.select(&q), vec![1]);
        let q = TableQuery {
            bucket: Some(Bucket::Attention),
            ..TableQuery::default()
        };
        assert_eq!(tab.select(&q), vec![0]);
    }
}
