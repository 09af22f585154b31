//! Time per kernel or memop name: the one definition of a name's time. A name's time is the
//! sum of its activities' durations (start to end, concurrent ones both counted) over the
//! steps of a scope on the steps' device; per step, that sum over the scope's step count.

use gapscope_traces::columnar_table;

use super::{ActivityKind, NameScope};

columnar_table! {
    /// Time per name and scope, rows in name-id order, kernels before memops.
    pub struct NameTimeTable / NameTimeRow {
        rank: u32 => UInt32Type = 0,
        /// A [`NameScope`] code.
        scope: u8 => UInt8Type = 0,
        /// An [`ActivityKind`] code.
        kind: u8 => UInt8Type = 0,
        name: u32 => UInt32Type = 0,
        /// The bucket of the name's first activity in the scope.
        bucket: u8 => UInt8Type = 0,
        ns: i64 => Int64Type = 0,
        calls: u64 => UInt64Type = 0,
    }
}

/// Time per distinct name while the steps are walked.
#[derive(Clone, Copy, Default)]
struct Acc {
    ns: i64,
    calls: u64,
    bucket: u8,
}

/// Accumulates [`NameTimeTable`] rows for one scope.
pub struct NameAccumulator {
    kernels: Vec<Acc>,
    memops: Vec<Acc>,
}

impl NameAccumulator {
    /// For a trace whose string table holds `names` strings.
    pub fn new(names: usize) -> Self {
        Self {
            kernels: vec![Acc::default(); names],
            memops: vec![Acc::default(); names],
        }
    }

    pub fn add(&mut self, kind: ActivityKind, name: u32, bucket: u8, ns: i64) {
        let v = match kind {
            ActivityKind::Kernel => &mut self.kernels,
            ActivityKind::Memop => &mut self.memops,
        };
        if let Some(e) = v.get_mut(name as usize) {
            if e.calls == 0 {
                e.bucket = bucket;
            }
            e.ns += ns;
            e.calls += 1;
        }
    }

    /// Adds `other`'s times, which came after this one's (a pass split in two).
    pub fn join(&mut self, other: &NameAccumulator) {
        for (mine, theirs) in [
            (&mut self.kernels, &other.kernels),
            (&mut self.memops, &other.memops),
        ] {
            for (a, b) in mine.iter_mut().zip(theirs) {
                if b.calls > 0 {
                    if a.calls == 0 {
                        a.bucket = b.bucket;
                    }
                    a.ns += b.ns;
                    a.calls += b.calls;
                }
            }
        }
    }

    /// Appends the names seen to `table`.
    pub fn finish_into(self, rank: u32, scope: NameScope, table: &mut NameTimeTable) {
        for (kind, v) in [
            (ActivityKind::Kernel, self.kernels),
            (ActivityKind::Memop, self.memops),
        ] {
            for (name, e) in v.into_iter().enumerate().filter(|(_, e)| e.calls > 0) {
                table.push(NameTimeRow {
                    rank,
                    scope: scope as u8,
                    kind: kind as u8,
                    name: name as u32,
                    bucket: e.bucket,
                    ns: e.ns,
                    calls: e.calls,
                });
            }
        }
    }
}

impl NameTimeTable {
    /// The rows of one scope.
    pub fn of_scope(&self, scope: NameScope) -> impl Iterator<Item = NameTimeRow> + '_ {
        (0..self.len)
            .filter(move |&i| self.scope[i] == scope as u8)
            .map(|i| self.row(i))
    }
}
