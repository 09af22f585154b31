//! The activity table: every kernel and memop with its bucket, step, rank and role. Built
//! when asked ([`ActivityTable::build`]) from the trace's own columns and the per-activity
//! columns the analysis keeps, so a run held in memory does not carry its times twice.

use gapscope_traces::{Trace, columnar_table};

use super::{ActivityKind, NO_STEP, Role, Tables};

columnar_table! {
    /// Kernels then memops, each in the trace's row order.
    pub struct ActivityTable / ActivityRow {
        rank: u32 => UInt32Type = 0,
        device: u32 => UInt32Type = 0,
        stream: u32 => UInt32Type = 0,
        /// An [`ActivityKind`] code.
        kind: u8 => UInt8Type = 0,
        /// The activity's row in the trace's kernel or memop table.
        index: u32 => UInt32Type = 0,
        /// Name id in the trace's string table.
        name: u32 => UInt32Type = 0,
        /// The bucket's index in `Bucket::ALL`.
        bucket: u8 => UInt8Type = 0,
        /// The step that holds the activity on the steps' device, or `u32::MAX`.
        step: u32 => UInt32Type = u32::MAX,
        /// A [`Role`] code: the step's role (`draft` for a speculative step's work before
        /// its verify forward), `target` outside the steps.
        role: u8 => UInt8Type = 0,
        gpu_start_ns: i64 => Int64Type = 0,
        gpu_end_ns: i64 => Int64Type = 0,
    }
}

impl ActivityTable {
    /// The activities of `trace` as the analysis `tables` of the same trace see them.
    pub fn build(trace: &Trace, tables: &Tables) -> Self {
        let (k, m) = (&trace.kernels, &trace.memops);
        let mut t = Self::default();
        t.reserve(k.len + m.len);
        // The step's role; a speculative step's work before its verify forward is the
        // draft's.
        let role = |step: u32, start: i64| {
            let st = &tables.steps;
            let i = step as usize;
            if step == NO_STEP || i >= st.len() {
                return Role::Target as u8;
            }
            if st.draft_forwards[i] > 0 && start < st.verify_start_ns[i] {
                return Role::Draft as u8;
            }
            st.role[i]
        };
        let at = |v: &[u32], i: usize| v.get(i).copied().unwrap_or(NO_STEP);
        for i in 0..k.len {
            let step = at(&tables.kernel_step, i);
            t.push(ActivityRow {
                rank: tables.rank,
                device: k.device[i],
                stream: k.stream.get(i).copied().unwrap_or(0),
                kind: ActivityKind::Kernel as u8,
                index: i as u32,
                name: k.name[i],
                bucket: tables.kernel_bucket.get(i).copied().unwrap_or(0),
                step,
                role: role(step, k.gpu_start_ns[i]),
                gpu_start_ns: k.gpu_start_ns[i],
                gpu_end_ns: k.gpu_end_ns[i],
            });
        }
        for i in 0..m.len {
            let step = at(&tables.memop_step, i);
            t.push(ActivityRow {
                rank: tables.rank,
                device: m.device[i],
                stream: m.stream.get(i).copied().unwrap_or(0),
                kind: ActivityKind::Memop as u8,
                index: i as u32,
                name: m.name[i],
                bucket: tables.memop_bucket.get(i).copied().unwrap_or(0),
                step,
                role: role(step, m.gpu_start_ns[i]),
                gpu_start_ns: m.gpu_start_ns[i],
                gpu_end_ns: m.gpu_end_ns[i],
            });
        }
        t
    }
}
