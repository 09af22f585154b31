//! The host side of a trace: scopes (ops, modules, Python functions, annotations, NVTX),
//! which launch issued each kernel, why the GPU sat idle, and time grouped by scope.

pub mod by_key;
pub mod forest;
pub mod idle_cause;
pub mod launch_map;
pub mod report;

pub use by_key::{GroupBy, GroupReport, GroupRow};
pub use forest::Forest;
pub use launch_map::LaunchMap;
pub use report::{HostIdleReport, IdleCauseRow, Lever, ScopeTime};
