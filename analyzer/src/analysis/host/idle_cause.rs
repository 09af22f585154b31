//! Why the GPU sat idle: for each idle gap in the decode window, what the host thread that
//! issued the work ending the gap was doing during it.
//!
//! A gap `[a, b)` ends when activity N starts at `b`. N's launch record (by correlation)
//! names the thread T and the call `[ls, le)` that issued it.
//!
//! - Before `le` the work did not exist yet, so the gap is the host's: each instant of
//!   `[a, min(b, le))` goes to what T was doing then. Inside a launch call (or another call
//!   that issues work) it is **launch** overhead; inside a synchronising call (stream,
//!   event or device synchronize, a blocking copy, `cudaFree`) it is **sync**; inside a
//!   host scope (an op, a module, a Python function, an annotation) or a runtime call that
//!   issues nothing (allocation, module loading) it is **host compute**, charged to the
//!   innermost scope or the call; outside every recorded scope it is **unexplained**.
//! - After `le` the work was issued and waited for the GPU: the first
//!   [`LAUNCH_LATENCY_NS`] of that count as launch (the launch-to-start latency); the rest
//!   is a **GPU-side wait** (a dependency on another stream or an event, not the host).
//! - A gap whose next activity has no launch record is unexplained.

use std::collections::HashMap;
use std::hash::BuildHasherDefault;

use gapscope_traces::strings::FxHasher;
use gapscope_traces::{ScopeKind, StrId, Trace};

use super::forest::{Forest, NONE};
use super::launch_map::{ApiClass, LaunchMap};

/// The part of an issued-but-not-started wait counted as launch latency.
pub const LAUNCH_LATENCY_NS: i64 = 20_000;

/// Idle time split by cause, ns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Causes {
    pub launch: i64,
    pub host_compute: i64,
    pub sync: i64,
    pub gpu_wait: i64,
    pub unexplained: i64,
}

impl std::ops::AddAssign for Causes {
    fn add_assign(&mut self, o: Causes) {
        self.launch += o.launch;
        self.host_compute += o.host_compute;
        self.sync += o.sync;
        self.gpu_wait += o.gpu_wait;
        self.unexplained += o.unexplained;
    }
}

impl Causes {
    pub fn total(&self) -> i64 {
        self.launch + self.host_compute + self.sync + self.gpu_wait + self.unexplained
    }
}

/// What host compute is charged to: a scope's name, or a runtime call's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Charge {
    Scope(StrId),
    Api(StrId),
}

/// Host compute charged to one name, with the scope that took the most of it (for its
/// enclosing stack).
#[derive(Debug, Clone, Copy, Default)]
pub struct Charged {
    pub ns: i64,
    pub example: Option<(u32, i64)>,
}

/// The idle attribution of a set of gaps.
pub struct IdleAttribution<'a> {
    trace: &'a Trace,
    forest: &'a Forest,
    map: &'a LaunchMap,
    /// Host compute per charged name, over the gaps attributed so far.
    pub charged: HashMap<Charge, Charged, BuildHasherDefault<FxHasher>>,
    /// Launch time inside the gaps per scope around the launch call (the ops that issue
    /// the work the GPU waits for).
    pub launched: HashMap<StrId, i64, BuildHasherDefault<FxHasher>>,
    /// Scratch stack for [`Forest::innermost_over`].
    scratch: Vec<u32>,
    /// Gaps whose ending activity had a launch record, and all gaps.
    pub linked: usize,
    pub gaps: usize,
}

impl<'a> IdleAttribution<'a> {
    pub fn new(trace: &'a Trace, forest: &'a Forest, map: &'a LaunchMap) -> Self {
        Self {
            trace,
            forest,
            map,
            charged: HashMap::default(),
            launched: HashMap::default(),
            scratch: Vec::new(),
            linked: 0,
            gaps: 0,
        }
    }

    /// The correlation id of an activity tag (kernel index >= 0, memop `-(i + 1)`).
    fn correlation(&self, tag: i64) -> u64 {
        if tag >= 0 {
            self.trace
                .kernels
                .correlation
                .get(tag as usize)
                .copied()
                .unwrap_or(0)
        } else {
            self.trace
                .memops
                .correlation
                .get((-tag - 1) as usize)
                .copied()
                .unwrap_or(0)
        }
    }

    /// Attributes gap `[a, b)`, which ends when activity `next` starts, adding to `into`.
    pub fn gap(&mut self, a: i64, b: i64, next: i64, into: &mut Causes) {
        if b <= a {
            return;
        }
        self.gaps += 1;
        let Some(li) = self.map.launch_of(self.correlation(next)) else {
            into.unexplained += b - a;
            return;
        };
        self.linked += 1;
        let l = &self.trace.launches;
        let li = li as usize;
        let tid = l.tid[li];
        let le = l.host_end_ns[li].max(l.host_start_ns[li]);
        let host_end = b.min(le);
        if host_end > a {
            self.host_window(tid, a, host_end, into);
        }
        let issued = b - host_end.max(a);
        if issued > 0 {
            let latency = issued.min(LAUNCH_LATENCY_NS);
            into.launch += latency;
            into.gpu_wait += issued - latency;
        }
    }

    /// Splits `[a, b)` on thread `tid` over its API calls and host scopes.
    fn host_window(&mut self, tid: u64, a: i64, b: i64, into: &mut Causes) {
        let calls = self.map.calls_on(tid);
        let mut k = calls.partition_point(|c| c.start < a);
        // A call that started before the window may still be running in it.
        while k > 0 && calls[k - 1].end > a {
            k -= 1;
        }
        let mut t = a;
        while t < b {
            let Some(c) = calls.get(k) else {
                self.scopes(tid, t, b, into);
                break;
            };
            k += 1;
            if c.end <= t {
                continue;
            }
            if c.start >= b {
                self.scopes(tid, t, b, into);
                break;
            }
            if c.start > t {
                self.scopes(tid, t, c.start, into);
                t = c.start;
            }
            let until = c.end.min(b);
            let ns = until - t;
            match c.class {
                ApiClass::Launch => {
                    into.launch += ns;
                    // The graph's own launch is not one of the eager launches around it.
                    if !self.trace.strings.get(c.name).contains("GraphLaunch") {
                        self.charge_launch(tid, t, until);
                    }
                }
                ApiClass::Sync => into.sync += ns,
                ApiClass::Other => {
                    into.host_compute += ns;
                    self.charged.entry(Charge::Api(c.name)).or_default().ns += ns;
                }
            }
            t = until;
        }
    }

    /// Charges launch time `[a, b)` on `tid` to the innermost scope around it.
    fn charge_launch(&mut self, tid: u64, a: i64, b: i64) {
        let forest = self.forest;
        let launched = &mut self.launched;
        forest.innermost_over(tid, a, b, &mut self.scratch, |node, ns| {
            if node != NONE {
                *launched
                    .entry(forest.nodes[node as usize].name)
                    .or_default() += ns;
            }
        });
    }

    fn scopes(&mut self, tid: u64, a: i64, b: i64, into: &mut Causes) {
        if self.forest.is_empty() {
            into.unexplained += b - a;
            return;
        }
        let forest = self.forest;
        let charged = &mut self.charged;
        forest.innermost_over(tid, a, b, &mut self.scratch, |node, ns| {
            if node == NONE {
                into.unexplained += ns;
                return;
            }
            into.host_compute += ns;
            let n = &forest.nodes[node as usize];
            let e = charged.entry(Charge::Scope(n.name)).or_default();
            e.ns += ns;
            if e.example.is_none_or(|(_, best)| ns > best) {
                e.example = Some((node, ns));
            }
        });
    }

    /// Adds the charges and counts of `other`, made over later gaps of the same trace: the
    /// result is the attribution of both sets of gaps in order.
    pub fn absorb(&mut self, other: IdleAttribution<'_>) {
        self.linked += other.linked;
        self.gaps += other.gaps;
        for (k, ns) in other.launched {
            *self.launched.entry(k).or_default() += ns;
        }
        for (k, c) in other.charged {
            let e = self.charged.entry(k).or_default();
            e.ns += c.ns;
            if let Some((node, ns)) = c.example
                && e.example.is_none_or(|(_, best)| ns > best)
            {
                e.example = Some((node, ns));
            }
        }
    }

    /// The kind of a scope node.
    pub fn node_kind(&self, node: u32) -> Option<ScopeKind> {
        self.forest.nodes.get(node as usize).map(|n| n.kind)
    }

    /// The enclosing stack of a charged scope's example, innermost first, as names, with
    /// repeated Python frames and annotations left out past the first op or module.
    pub fn stack_names(&self, node: u32, max: usize) -> Vec<String> {
        let mut out = Vec::new();
        for (_, n) in self.forest.stack(node) {
            if out.len() >= max {
                break;
            }
            let keep = out.is_empty() || matches!(n.kind, ScopeKind::Op | ScopeKind::Module);
            if keep {
                out.push(self.trace.strings.get(n.name).to_owned());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_traces::{KernelRow, LaunchRow, ScopeRow};

    /// One host thread: an op 0..100 holding a launch call 80..90 whose kernel runs at
    /// 200; a sync call 100..150.
    fn fixture() -> Trace {
        let mut t = Trace::default();
        t.strings.intern("");
        let op = t.strings.intern("aten::_cudnn_attention_forward");
        let launch = t.strings.intern("cudaLaunchKernel");
        let sync = t.strings.intern("cudaStreamSynchronize");
        let k = t.strings.intern("kernel");
        t.scopes.push(ScopeRow {
            pid: 1,
            tid: 1,
            name: op,
            kind: ScopeKind::Op as u8,
            host_start_ns: 0,
            host_end_ns: 100,
        });
        for (name, s, e, corr) in [(launch, 80, 90, 7), (sync, 100, 150, 0)] {
            t.launches.push(LaunchRow {
                pid: 1,
                tid: 1,
                correlation: corr,
                name,
                host_start_ns: s,
                host_end_ns: e,
                ..Default::default()
            });
        }
        t.kernels.push(KernelRow {
            correlation: 7,
            name: k,
            gpu_start_ns: 200,
            gpu_end_ns: 210,
            ..Default::default()
        });
        t
    }

    #[test]
    fn a_gap_splits_into_host_compute_launch_and_wait() {
        let t = fixture();
        let f = Forest::build(&t);
        let m = LaunchMap::build(&t, &f);
        let mut a = IdleAttribution::new(&t, &f, &m);
        let mut c = Causes::default();
        // Idle from 10 to 200: the op runs 10..80, the launch call 80..90, then the kernel is
        // issued and waits 110 ns (all of it launch latency).
        a.gap(10, 200, 0, &mut c);
        assert_eq!(
            c,
            Causes {
                launch: 10 + 110,
                host_compute: 70,
                ..Causes::default()
            }
        );
        assert_eq!(c.total(), 190);
        let op = t.strings.lookup("aten::_cudnn_attention_forward").unwrap();
        assert_eq!(a.charged[&Charge::Scope(op)].ns, 70);
    }

    #[test]
    fn issued_work_that_waits_long_is_a_gpu_side_wait() {
        let mut t = fixture();
        t.kernels.gpu_start_ns[0] = 100_200;
        let f = Forest::build(&t);
        let m = LaunchMap::build(&t, &f);
        let mut a = IdleAttribution::new(&t, &f, &m);
        let mut c = Causes::default();
        a.gap(95, 100_200, 0, &mut c);
        assert_eq!(c.launch, LAUNCH_LATENCY_NS);
        assert_eq!(c.gpu_wait, 100_200 - 95 - LAUNCH_LATENCY_NS);
        assert_eq!(c.total(), 100_200 - 95);
    }

    #[test]
    fn sync_and_unscoped_time_and_unlinked_gaps() {
        let mut t = fixture();
        // The kernel is issued by a call at 160..170, after the sync.
        t.launches.host_start_ns[0] = 160;
        t.launches.host_end_ns[0] = 170;
        let f = Forest::build(&t);
        let m = LaunchMap::build(&t, &f);
        let mut a = IdleAttribution::new(&t, &f, &m);
        let mut c = Causes::default();
        a.gap(90, 175, 0, &mut c);
        // 90..100 in the op, 100..150 sync, 150..160 outside every scope, 160..170 launch,
        // 170..175 issued.
        assert_eq!(
            c,
            Causes {
                host_compute: 10,
                sync: 50,
                unexplained: 10,
                launch: 10 + 5,
                gpu_wait: 0
            }
        );
        let mut u = Causes::default();
        t.kernels.correlation[0] = 99;
        let m = LaunchMap::build(&t, &f);
        let mut a = IdleAttribution::new(&t, &f, &m);
        a.gap(0, 50, 0, &mut u);
        assert_eq!(u.unexplained, 50);
        assert_eq!((a.linked, a.gaps), (0, 1));
    }
}
