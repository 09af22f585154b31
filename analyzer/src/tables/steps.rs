//! The step table and the step × bucket table.

use gapscope_traces::columnar_table;

use crate::bucket::Bucket;

columnar_table! {
    /// Every step of a run, in time order. Times are on the GPU clock of the step's device.
    pub struct StepTable / StepRow {
        rank: u32 => UInt32Type = 0,
        /// The step's position in the run's step list.
        step: u32 => UInt32Type = 0,
        /// The step's own number when its marker carries one, else -1.
        number: i64 => Int64Type = -1,
        /// A `Phase` code.
        phase: u8 => UInt8Type = 0,
        /// A [`super::Role`] code.
        role: u8 => UInt8Type = 0,
        /// 1 when the report's figures cover the step (decode steps; else the training
        /// iterations or every step).
        in_report: u8 => UInt8Type = 0,
        /// The number the report gives the step (`report --step N`, `worst_stall.step`, the
        /// explorer's `step N`): the report's steps numbered from 0 in time order; -1 for a
        /// step outside the report (null in the Arrow and Parquet tables).
        report_step: i64 => Int64Type = -1,
        /// Sequences in the step when its marker says, else 0.
        batch: u32 => UInt32Type = 0,
        /// Tokens the step produced when known (a decode step without speculation: one per
        /// sequence), else 0.
        tokens: u32 => UInt32Type = 0,
        /// The step's window.
        gpu_start_ns: i64 => Int64Type = 0,
        gpu_end_ns: i64 => Int64Type = 0,
        /// First activity start and last activity end in the step (`i64::MAX` and
        /// `i64::MIN` without activity).
        gpu_first_ns: i64 => Int64Type = i64::MAX,
        gpu_last_ns: i64 => Int64Type = i64::MIN,
        /// Speculative steps: the draft forwards in the step, and where its verify forward
        /// starts (the work before it is the draft's); 0 and the step's start otherwise.
        draft_forwards: u32 => UInt32Type = 0,
        verify_start_ns: i64 => Int64Type = 0,
        /// Overlap-correct GPU busy time.
        busy_ns: i64 => Int64Type = 0,
        /// The longest idle gap between two of the step's activities, and where it starts.
        max_gap_ns: i64 => Int64Type = 0,
        gpu_max_gap_at_ns: i64 => Int64Type = 0,
    }
}

impl StepTable {
    /// First to last activity of step `i`, ns (0 without activity).
    pub fn active_ns(&self, i: usize) -> i64 {
        (self.gpu_last_ns[i] - self.gpu_first_ns[i]).max(0)
    }

    /// Whether step `i` has GPU activity.
    pub fn has_work(&self, i: usize) -> bool {
        self.gpu_first_ns[i] < self.gpu_last_ns[i]
    }
}

columnar_table! {
    /// GPU time of one step in one bucket: rows only where the step has activity in the
    /// bucket, ordered by step, then bucket.
    pub struct StepBucketTable / StepBucketRow {
        rank: u32 => UInt32Type = 0,
        step: u32 => UInt32Type = 0,
        /// The bucket's index in `Bucket::ALL`.
        bucket: u8 => UInt8Type = 0,
        /// Summed activity time (concurrent activities both count).
        ns: i64 => Int64Type = 0,
        calls: u32 => UInt32Type = 0,
        /// Engine traces: model-derived bytes and FLOPs of the bucket's kernels in the
        /// step, and the time of the kernels that carry them (0 without a cost).
        bytes: i64 => Int64Type = 0,
        flops: i64 => Int64Type = 0,
        costed_ns: i64 => Int64Type = 0,
    }
}

/// The step × bucket table with each step's rows found in constant time.
#[derive(Debug, Clone, Default)]
pub struct StepBuckets {
    pub table: StepBucketTable,
    /// Row range of step `i`: `offsets[i]..offsets[i + 1]`.
    offsets: Vec<u32>,
}

/// One step's figures in one bucket (zeros where the step has none).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cell {
    pub ns: i64,
    pub calls: u32,
    pub bytes: i64,
    pub flops: i64,
    pub costed_ns: i64,
}

impl StepBuckets {
    /// Starts a table for `steps` steps; fill it step by step with [`StepBuckets::push_step`].
    pub fn with_steps(steps: usize) -> Self {
        let mut offsets = Vec::with_capacity(steps + 1);
        offsets.push(0);
        Self {
            table: StepBucketTable::default(),
            offsets,
        }
    }

    /// Appends the next step's rows (buckets without calls are left out).
    pub fn push_step(&mut self, rank: u32, step: u32, cells: &[Cell; Bucket::ALL.len()]) {
        for (b, c) in cells.iter().enumerate() {
            if c.calls == 0 && c.ns == 0 {
                continue;
            }
            self.table.push(StepBucketRow {
                rank,
                step,
                bucket: b as u8,
                ns: c.ns,
                calls: c.calls,
                bytes: c.bytes,
                flops: c.flops,
                costed_ns: c.costed_ns,
            });
        }
        self.offsets.push(self.table.len as u32);
    }

    /// Step `i`'s figures in bucket `b`.
    pub fn get(&self, i: usize, b: Bucket) -> Cell {
        let t = &self.table;
        let (Some(&lo), Some(&hi)) = (self.offsets.get(i), self.offsets.get(i + 1)) else {
            return Cell::default();
        };
        (lo as usize..hi as usize)
            .find(|&r| t.bucket[r] as usize == b.index())
            .map(|r| Cell {
                ns: t.ns[r],
                calls: t.calls[r],
                bytes: t.bytes[r],
                flops: t.flops[r],
                costed_ns: t.costed_ns[r],
            })
            .unwrap_or_default()
    }

    /// Step `i`'s time per bucket ([`Bucket::ALL`] order), ns.
    pub fn ns_of_step(&self, i: usize) -> [i64; Bucket::ALL.len()] {
        let mut out = [0; Bucket::ALL.len()];
        let t = &self.table;
        if let (Some(&lo), Some(&hi)) = (self.offsets.get(i), self.offsets.get(i + 1)) {
            for r in lo as usize..hi as usize {
                out[t.bucket[r] as usize] += t.ns[r];
            }
        }
        out
    }
}
