//! Idle gaps with their host cause, and the host time charged per step.

use gapscope_traces::columnar_table;

columnar_table! {
    /// One idle gap on the steps' device, split by what the host was doing (see
    /// `analysis::host::idle_cause`). Rows for the report's steps with GPU work: the gaps
    /// inside each, and the gap from the previous such step to each.
    pub struct IdleGapTable / IdleGapRow {
        rank: u32 => UInt32Type = 0,
        /// The step the gap ends in.
        step: u32 => UInt32Type = 0,
        /// A [`super::GapKind`] code.
        kind: u8 => UInt8Type = 0,
        gpu_start_ns: i64 => Int64Type = 0,
        gpu_end_ns: i64 => Int64Type = 0,
        /// The activity that ends the gap: an [`super::ActivityKind`] code and its row.
        next_kind: u8 => UInt8Type = 0,
        next_index: u32 => UInt32Type = 0,
        /// The gap's time by cause; they sum to the gap's length.
        launch_ns: i64 => Int64Type = 0,
        host_compute_ns: i64 => Int64Type = 0,
        sync_ns: i64 => Int64Type = 0,
        gpu_wait_ns: i64 => Int64Type = 0,
        unexplained_ns: i64 => Int64Type = 0,
    }
}

columnar_table! {
    /// Host compute during one step's idle gaps charged to one host scope or runtime call
    /// (the innermost scope the issuing thread was in).
    pub struct StepScopeTable / StepScopeRow {
        rank: u32 => UInt32Type = 0,
        step: u32 => UInt32Type = 0,
        /// A [`super::ChargeKind`] code.
        charge: u8 => UInt8Type = 0,
        /// The scope's or call's name id.
        name: u32 => UInt32Type = 0,
        /// A [`super::GapKind`] code: charged in gaps inside the step or before it.
        gap_kind: u8 => UInt8Type = 0,
        host_ns: i64 => Int64Type = 0,
    }
}
