//! From GPU work to the host call that issued it: each kernel and memop to its launch record
//! (through the correlation id, which is what Kineto's `ac2g` flows and nsys's correlation
//! ids carry), and each thread's host API calls in time order, classed as launches,
//! synchronisation or other calls.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use gapscope_traces::strings::FxHasher;
use gapscope_traces::{StrId, Trace};

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

use super::forest::{Forest, NONE};

/// What a host API call does to the GPU timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiClass {
    /// Issues work: kernel, graph, copy and set launches, plus the small calls around them.
    Launch,
    /// Blocks the host until the GPU catches up.
    Sync,
    /// Host work in the runtime that is neither (allocation, module loading).
    Other,
}

/// The class of an API call from its name (CUDA runtime and driver, HIP).
pub fn api_class(name: &str) -> ApiClass {
    let is_async = name.contains("Async") || name.contains("async");
    // A plain cudaMemcpy waits for the copy; cudaFree waits for the device.
    let blocking =
        (name.contains("Memcpy") || name.contains("memcpy") || name.contains("Free")) && !is_async;
    if name.contains("Synchronize") || name.contains("synchronize") || blocking {
        ApiClass::Sync
    } else if [
        "Malloc",
        "ModuleLoad",
        "LibraryLoad",
        "MemGetInfo",
        "HostAlloc",
    ]
    .iter()
    .any(|w| name.contains(w))
    {
        ApiClass::Other
    } else {
        ApiClass::Launch
    }
}

/// One host API call on a thread.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    pub start: i64,
    pub end: i64,
    pub name: StrId,
    pub class: ApiClass,
}

/// Launch records indexed for attribution.
pub struct LaunchMap {
    by_corr: FxMap<u64, u32>,
    /// Host calls per thread, start-sorted: `(tid, calls)` sorted by tid.
    calls: Vec<(u64, Vec<Call>)>,
    /// Innermost host scope around each launch record ([`NONE`] when none).
    pub launch_scope: Vec<u32>,
}

impl LaunchMap {
    pub fn build(trace: &Trace, forest: &Forest) -> Self {
        let l = &trace.launches;
        let mut by_corr = FxMap::with_capacity_and_hasher(l.len, Default::default());
        let mut per_tid: FxMap<u64, Vec<Call>> = FxMap::default();
        let mut classes: Vec<Option<ApiClass>> = vec![None; trace.strings.len()];
        for i in 0..l.len {
            if l.correlation[i] != 0 {
                by_corr.entry(l.correlation[i]).or_insert(i as u32);
            }
            let name = l.name[i];
            let class = match classes.get_mut(name as usize) {
                Some(Some(c)) => *c,
                Some(slot) => {
                    let c = api_class(trace.strings.get(name));
                    *slot = Some(c);
                    c
                }
                None => ApiClass::Launch,
            };
            per_tid.entry(l.tid[i]).or_default().push(Call {
                start: l.host_start_ns[i],
                end: l.host_end_ns[i].max(l.host_start_ns[i]),
                name,
                class,
            });
        }
        let mut calls: Vec<(u64, Vec<Call>)> = per_tid.into_iter().collect();
        calls.sort_by_key(|c| c.0);
        for (_, v) in &mut calls {
            v.sort_unstable_by_key(|c| (c.start, c.end));
        }
        let launch_scope = if forest.is_empty() {
            vec![NONE; l.len]
        } else {
            (0..l.len)
                .map(|i| forest.innermost(l.tid[i], l.host_start_ns[i]))
                .collect()
        };
        Self {
            by_corr,
            calls,
            launch_scope,
        }
    }

    /// The launch record of a correlation id.
    pub fn launch_of(&self, correlation: u64) -> Option<u32> {
        if correlation == 0 {
            return None;
        }
        self.by_corr.get(&correlation).copied()
    }

    /// The API calls of one thread, start-sorted.
    pub fn calls_on(&self, tid: u64) -> &[Call] {
        match self.calls.binary_search_by_key(&tid, |c| c.0) {
            Ok(i) => &self.calls[i].1,
            Err(_) => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_classes() {
        for n in [
            "cudaLaunchKernel",
            "cuLaunchKernel",
            "cudaGraphLaunch",
            "cudaMemcpyAsync",
            "cudaMemsetAsync",
            "hipLaunchKernel",
            "cudaGetDevice",
        ] {
            assert_eq!(api_class(n), ApiClass::Launch, "{n}");
        }
        for n in [
            "cudaDeviceSynchronize",
            "cudaStreamSynchronize",
            "cudaEventSynchronize",
            "cuCtxSynchronize",
            "cudaMemcpy",
            "hipMemcpy",
            "hipDeviceSynchronize",
            "cudaFree",
        ] {
            assert_eq!(api_class(n), ApiClass::Sync, "{n}");
        }
        assert_eq!(api_class("cudaFreeAsync"), ApiClass::Launch);
        for n in ["cudaMalloc", "cuModuleLoadData", "cudaHostAlloc"] {
            assert_eq!(api_class(n), ApiClass::Other, "{n}");
        }
    }
}
