//! The engine's lever what-if for an opened run, as `gapscope diff --what-if` makes it: the
//! report's steps grouped by the engine's op from the tables and the host index, then each
//! lever predicted ([`crate::diff::whatif`]).

use super::Exploration;
use crate::analysis::host::{GroupBy, by_key};
use crate::diff::whatif::{LeverSet, WhatIfError, WhatIfOutput, what_if};
use crate::tables::NO_STEP;

impl Exploration {
    /// The what-if of lever set `set` from this run alone; an error says why there is none
    /// (a trace without the engine's op columns, or without decode steps).
    pub fn lever_what_if(&self, set: LeverSet) -> Result<WhatIfOutput, WhatIfError> {
        let t = &self.tables;
        let k = &self.trace.kernels;
        let m = &self.trace.memops;
        let in_report = |step: u32| {
            step != NO_STEP
                && t.steps
                    .in_report
                    .get(step as usize)
                    .is_some_and(|&v| v != 0)
        };
        // The report's activities in start order, kernels first at equal starts, as the
        // analysis pass walks them (kernel index, memop `-(index + 1)`).
        let mut ks: Vec<usize> = (0..t.kernel_step.len())
            .filter(|&i| in_report(t.kernel_step[i]))
            .collect();
        ks.sort_by_key(|&i| (k.gpu_start_ns[i], i));
        let mut ms: Vec<usize> = (0..t.memop_step.len())
            .filter(|&i| in_report(t.memop_step[i]))
            .collect();
        ms.sort_by_key(|&i| (m.gpu_start_ns[i], i));
        let acts: Vec<i64> = crate::analysis::intervals::merge_two(
            ks.iter().map(|&i| (k.gpu_start_ns[i], i as i64)),
            ms.iter().map(|&i| (m.gpu_start_ns[i], -(i as i64) - 1)),
        )
        .map(|(_, tag)| tag)
        .collect();
        let steps = t.report_steps().len();
        let mut report = self.report.clone();
        report.groups = Some(by_key::group(
            &self.trace,
            &self.forest,
            &self.launch_map,
            &acts,
            steps.max(1),
            GroupBy::Op,
            &crate::analysis::graphs::GraphKernels::of(&self.trace),
        ));
        what_if(set, &report, &[])
    }
}
