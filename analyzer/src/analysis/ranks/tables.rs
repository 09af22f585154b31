//! The multi-rank tables: every matched collective on every rank, and every aligned step on
//! every rank with its time split into compute, communication transfer, communication wait
//! and idle.

use gapscope_traces::columnar_table;

columnar_table! {
    /// One row per matched collective and rank, in collective order, then rank.
    pub struct CollectiveTable / CollectiveRow {
        /// The collective's position among the matched ones.
        collective: u32 => UInt32Type = 0,
        /// The aligned step that holds it.
        step: u32 => UInt32Type = 0,
        /// A `CollectiveKind` code (`codes.parquet`: column `collective_kind`).
        collective_kind: u8 => UInt8Type = 0,
        rank: u32 => UInt32Type = 0,
        /// The kernel's row in the rank's kernel table.
        kernel: u32 => UInt32Type = 0,
        /// On the first rank's clock (the rank's clock correction added).
        gpu_start_ns: i64 => Int64Type = 0,
        gpu_end_ns: i64 => Int64Type = 0,
        /// Time inside the kernel before the last rank arrived.
        wait_ns: i64 => Int64Type = 0,
        /// The rest of the kernel: the transfer once every rank is there.
        transfer_ns: i64 => Int64Type = 0,
        /// 1 on the rank that arrived last.
        last: u8 => UInt8Type = 0,
    }
}

columnar_table! {
    /// One row per aligned step and rank, in step order, then rank.
    pub struct RankStepTable / RankStepRow {
        /// The aligned step's position.
        step: u32 => UInt32Type = 0,
        rank: u32 => UInt32Type = 0,
        /// The step's index in the rank's own step table.
        rank_step: u32 => UInt32Type = 0,
        /// The step's number from its marker, -1 when unknown.
        number: i64 => Int64Type = -1,
        /// The step's window on the first rank's clock.
        gpu_start_ns: i64 => Int64Type = 0,
        gpu_end_ns: i64 => Int64Type = 0,
        /// GPU busy (interval union), communication included.
        busy_ns: i64 => Int64Type = 0,
        /// Busy time outside communication kernels.
        compute_ns: i64 => Int64Type = 0,
        /// Matched collectives: time after the last rank arrived, and before.
        transfer_ns: i64 => Int64Type = 0,
        wait_ns: i64 => Int64Type = 0,
        /// Communication kernels that matched no other rank's (transfer and wait unknown).
        unsplit_ns: i64 => Int64Type = 0,
        /// The step's window minus busy.
        idle_ns: i64 => Int64Type = 0,
        collectives: u32 => UInt32Type = 0,
        /// Matched collectives this rank arrived last at.
        last: u32 => UInt32Type = 0,
    }
}
