//! The host side of a trace: scopes (ops, modules, Python functions, annotations, NVTX),
//! which launch issued each kernel, why the GPU sat idle, and time grouped by scope.

pub mod by_key;
pub mod forest;
pub mod idle_cause;
pub mod launch_map;
pub mod report;

pub use by_key::{GroupBy, GroupReport, GroupRow, GroupSource, MissingScopes};

/// The host side of a trace, indexed: the scope forest and the launch records.
pub struct HostIndex {
    pub forest: Forest,
    pub launch_map: LaunchMap,
}

impl HostIndex {
    pub fn build(trace: &gapscope_traces::Trace) -> Self {
        let forest = Forest::build(trace);
        let launch_map = LaunchMap::build(trace, &forest);
        Self { forest, launch_map }
    }
}
pub use forest::Forest;
pub use launch_map::LaunchMap;
pub use report::{
    ChargeKind, HostIdleReport, IdleCause, IdleCauseRow, Lever, LeverScope, ScopeTime,
};
