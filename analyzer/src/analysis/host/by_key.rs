//! GPU and host time grouped by scope, framework op, module or layer (`report --by`).
//!
//! GPU time: each kernel and memop in the decode steps goes to the key of the launch that
//! issued it: its innermost scope, its innermost op, its innermost module, or the layer of
//! the nearest module whose name carries a layer number. Engine traces carry op and layer
//! per kernel and use those. Host time: the time the launching threads spent in scopes of
//! each key over the host span of those launches, each instant counted once, for the
//! innermost scope of the grouping's kind (a module's time excludes its child modules').

use std::collections::{HashMap, HashSet};

use gapscope_traces::{NO_STR, ScopeKind, Trace};
use serde::Serialize;

use super::forest::{Forest, NONE, Node, group_name, layer_of};
use super::launch_map::LaunchMap;

/// The key `report --by` groups on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GroupBy {
    /// The innermost host scope (module instance numbers dropped).
    Scope,
    /// The innermost framework op (`aten::mm`; the engine's op).
    Op,
    /// The innermost `nn.Module` class.
    Module,
    /// The decoder layer.
    Layer,
}

impl GroupBy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scope => "scope",
            Self::Op => "op",
            Self::Module => "module",
            Self::Layer => "layer",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        [Self::Scope, Self::Op, Self::Module, Self::Layer]
            .into_iter()
            .find(|g| g.as_str() == s)
    }
}

/// One key's share.
#[derive(Debug, Clone, Serialize)]
pub struct GroupRow {
    pub key: String,
    /// GPU time (kernels and memops) of the work this key launched, ms per step.
    pub gpu_ms_per_step: f64,
    pub calls_per_step: f64,
    /// Share of the GPU time in scope, %.
    pub gpu_share_pct: f64,
    /// Host time inside scopes of this key, ms per step (`None` without host scopes).
    pub host_ms_per_step: Option<f64>,
    /// Engine traces: the model-derived bytes and FLOPs its kernels declare, per step
    /// (`None` when none declares them).
    pub bytes_per_step: Option<f64>,
    pub flops_per_step: Option<f64>,
}

/// Where a grouped table's keys come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum GroupSource {
    /// The host scopes around each launch.
    #[serde(rename = "host scopes")]
    HostScopes,
    /// The engine's own op and layer columns.
    #[serde(rename = "engine columns")]
    EngineColumns,
}

impl std::fmt::Display for GroupSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::HostScopes => "host scopes",
            Self::EngineColumns => "engine columns",
        })
    }
}

/// The grouped table.
#[derive(Debug, Clone, Serialize)]
pub struct GroupReport {
    pub by: GroupBy,
    /// Where keys come from (JSON: `host scopes` or `engine columns`).
    pub source: GroupSource,
    pub steps: usize,
    /// Largest GPU time first.
    pub rows: Vec<GroupRow>,
    /// GPU time with no key (no launch record, or no scope of the kind around the launch),
    /// ms per step.
    pub unattributed_gpu_ms_per_step: f64,
    /// GPU time of kernels replayed from CUDA graphs, ms per step: launched by one graph
    /// launch, they carry no op, module or layer of their own.
    pub graph_gpu_ms_per_step: f64,
    /// Why the keys cannot be there at all (the trace records no scope of the kind).
    pub missing: Option<MissingScopes>,
    /// How a graph-capture trace put replayed kernels on its ops and modules, when one was
    /// given (their GPU time is in the rows, and still in `graph_gpu_ms_per_step`).
    pub graph_capture: Option<crate::analysis::graph_capture::CaptureUse>,
}

/// A trace that cannot be grouped by the key asked for, and what capture would allow it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MissingScopes {
    /// No `nn.Module` scopes: torch.profiler needs `with_stack=True, with_modules=True`.
    NoModules,
    /// No host scopes at all (and no engine columns).
    NoScopes,
}

impl std::fmt::Display for MissingScopes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::NoModules => {
                "the trace records no nn.Module scopes: capture with torch.profiler(with_stack=True, with_modules=True) to put GPU time on modules and decoder layers"
            }
            Self::NoScopes => {
                "the trace records no host scopes: capture ops and Python frames (torch.profiler with_stack=True, with_modules=True) or NVTX ranges to group GPU time"
            }
        })
    }
}

/// Groups the activities `acts` (kernel index >= 0, memop `-(i + 1)`), taken over `steps`
/// steps.
pub fn group(
    trace: &Trace,
    forest: &Forest,
    map: &LaunchMap,
    acts: &[i64],
    steps: usize,
    by: GroupBy,
    graphs: &crate::analysis::graphs::GraphKernels,
) -> GroupReport {
    let k = &trace.kernels;
    let m = &trace.memops;
    let engine = forest.is_empty()
        && k.op.len() == k.len
        && k.layer.len() == k.len
        && (0..k.len).any(|i| k.op[i] != NO_STR || k.layer[i] >= 0);
    let mut gpu: HashMap<String, (i64, u64)> = HashMap::new();
    // Declared (bytes, FLOPs) per key, engine traces only.
    let mut cost: HashMap<String, (f64, f64)> = HashMap::new();
    let mut unattributed = 0i64;
    let mut graph = 0i64;
    let mut total = 0i64;
    let mut threads: HashSet<u64> = HashSet::new();
    let (mut host_lo, mut host_hi) = (i64::MAX, i64::MIN);
    let mut key_cache: HashMap<u32, Option<String>> = HashMap::new();
    // Replays mapped through a graph-capture trace: count and GPU time.
    let (mut mapped_n, mut mapped_ns) = (0usize, 0i64);
    let capture = graphs.capture.as_ref();
    for &tag in acts {
        let (dur, corr, ki) = if tag >= 0 {
            let i = tag as usize;
            (
                k.gpu_end_ns[i] - k.gpu_start_ns[i],
                k.correlation[i],
                Some(i),
            )
        } else {
            let i = (-tag - 1) as usize;
            (m.gpu_end_ns[i] - m.gpu_start_ns[i], m.correlation[i], None)
        };
        let dur = dur.max(0);
        total += dur;
        if ki.is_some_and(|i| graphs.replayed(trace, i)) {
            graph += dur;
        }
        let key = if engine {
            match ki {
                Some(i) => engine_key(trace, (&k.op, &k.layer), i, by),
                None => engine_key(trace, (&m.op, &m.layer), (-tag - 1) as usize, by),
            }
        } else if let Some(key) = capture.and_then(|c| c.key(tag, by)) {
            mapped_n += 1;
            mapped_ns += dur;
            key.map(str::to_owned)
        } else {
            map.launch_of(corr).and_then(|li| {
                let li = li as usize;
                threads.insert(trace.launches.tid[li]);
                host_lo = host_lo.min(trace.launches.host_start_ns[li]);
                host_hi = host_hi.max(trace.launches.host_end_ns[li]);
                let node = map.launch_scope[li];
                key_cache
                    .entry(node)
                    .or_insert_with(|| scope_key(trace, forest, node, by))
                    .clone()
            })
        };
        match key {
            Some(key) => {
                if let Some(i) = ki.filter(|_| engine) {
                    let (b, f) = (
                        k.bytes.get(i).copied().unwrap_or(-1),
                        k.flops.get(i).copied().unwrap_or(-1),
                    );
                    if b >= 0 || f >= 0 {
                        let c = cost.entry(key.clone()).or_default();
                        c.0 += b.max(0) as f64;
                        c.1 += f.max(0) as f64;
                    }
                }
                let e = gpu.entry(key).or_default();
                e.0 += dur;
                e.1 += 1;
            }
            None => unattributed += dur,
        }
    }
    let host = (!engine && !forest.is_empty() && host_lo < host_hi)
        .then(|| host_time(trace, forest, &threads, host_lo, host_hi, by));
    let n = steps.max(1) as f64;
    let mut keys: HashSet<&String> = gpu.keys().collect();
    if let Some(h) = &host {
        keys.extend(h.keys());
    }
    let mut rows: Vec<GroupRow> = keys
        .into_iter()
        .map(|key| {
            let (ns, calls) = gpu.get(key).copied().unwrap_or_default();
            GroupRow {
                key: key.clone(),
                gpu_ms_per_step: ns as f64 / 1e6 / n,
                calls_per_step: calls as f64 / n,
                gpu_share_pct: if total > 0 {
                    100.0 * ns as f64 / total as f64
                } else {
                    0.0
                },
                host_ms_per_step: host
                    .as_ref()
                    .map(|h| h.get(key).copied().unwrap_or(0) as f64 / 1e6 / n),
                bytes_per_step: cost.get(key).map(|c| c.0 / n),
                flops_per_step: cost.get(key).map(|c| c.1 / n),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.gpu_ms_per_step
            .total_cmp(&a.gpu_ms_per_step)
            .then(
                b.host_ms_per_step
                    .unwrap_or(0.0)
                    .total_cmp(&a.host_ms_per_step.unwrap_or(0.0)),
            )
            .then(a.key.cmp(&b.key))
    });
    GroupReport {
        by,
        source: if engine {
            GroupSource::EngineColumns
        } else {
            GroupSource::HostScopes
        },
        steps,
        rows,
        unattributed_gpu_ms_per_step: unattributed as f64 / 1e6 / n,
        graph_gpu_ms_per_step: graph as f64 / 1e6 / n,
        // A capture trace that mapped replays brings the scopes the replay trace lacks.
        missing: if mapped_n > 0 {
            None
        } else {
            missing_scopes(forest, engine, by)
        },
        graph_capture: capture.map(|c| c.usage(mapped_n as f64 / n, mapped_ns as f64 / 1e6 / n)),
    }
}

/// Whether the trace holds no scope that `by` could read.
fn missing_scopes(forest: &Forest, engine: bool, by: GroupBy) -> Option<MissingScopes> {
    if engine {
        return None;
    }
    if forest.is_empty() {
        return Some(MissingScopes::NoScopes);
    }
    let modules = forest.nodes.iter().any(|n| n.kind == ScopeKind::Module);
    (matches!(by, GroupBy::Module | GroupBy::Layer) && !modules).then_some(MissingScopes::NoModules)
}

/// An engine activity's key from its op and layer columns: the kernel table's, or the memop
/// table's (traces written before memops had them read as none: unattributed).
fn engine_key(
    trace: &Trace,
    (ops, layers): (&[u32], &[i32]),
    i: usize,
    by: GroupBy,
) -> Option<String> {
    match by {
        GroupBy::Scope | GroupBy::Op => {
            let op = ops.get(i).copied().unwrap_or(NO_STR);
            (op != NO_STR).then(|| trace.strings.get(op).to_owned())
        }
        GroupBy::Module => None,
        GroupBy::Layer => {
            let l = layers.get(i).copied().unwrap_or(-1);
            (l >= 0).then(|| format!("layer {l}"))
        }
    }
}

/// The key of the launch whose innermost scope is `node`: that of the nearest scope, itself
/// included, that the grouping keys on.
pub(crate) fn scope_key(trace: &Trace, forest: &Forest, node: u32, by: GroupBy) -> Option<String> {
    forest
        .stack(node)
        .find(|(_, n)| is_key(trace, n, by))
        .map(|(_, n)| key_name(trace, n, by))
}

/// Whether a scope is one the grouping keys on.
fn is_key(trace: &Trace, n: &Node, by: GroupBy) -> bool {
    match by {
        GroupBy::Scope => true,
        GroupBy::Op => n.kind == ScopeKind::Op,
        GroupBy::Module => n.kind == ScopeKind::Module,
        GroupBy::Layer => {
            n.kind == ScopeKind::Module && layer_of(trace.strings.get(n.name)).is_some()
        }
    }
}

/// The key a scope the grouping keys on stands for.
fn key_name(trace: &Trace, n: &Node, by: GroupBy) -> String {
    let name = trace.strings.get(n.name);
    match (by, layer_of(name)) {
        (GroupBy::Layer, Some(l)) => format!("layer {l}"),
        _ => group_name(name).to_owned(),
    }
}

/// Exclusive host time per key on `threads` over `[lo, hi]`: each key node's duration less
/// that of its nearest key-node descendants.
fn host_time(
    trace: &Trace,
    forest: &Forest,
    threads: &HashSet<u64>,
    lo: i64,
    hi: i64,
    by: GroupBy,
) -> HashMap<String, i64> {
    let mut out: HashMap<String, i64> = HashMap::new();
    let mut tids: Vec<u64> = threads.iter().copied().collect();
    tids.sort_unstable();
    for tid in tids {
        let r = forest.thread(tid);
        // Nearest key-node ancestor of each node of the thread (parents come first).
        let mut near: Vec<u32> = vec![NONE; r.len()];
        let mut own: Vec<i64> = vec![0; r.len()];
        for (off, id) in r.clone().enumerate() {
            let n = &forest.nodes[id];
            if n.parent != NONE {
                let p = n.parent as usize - r.start;
                near[off] = if is_key(trace, &forest.nodes[n.parent as usize], by) {
                    n.parent
                } else {
                    near[p]
                };
            }
            if n.end < lo || n.start > hi || !is_key(trace, n, by) {
                continue;
            }
            let dur = n.end.min(hi) - n.start.max(lo);
            own[off] += dur;
            if near[off] != NONE {
                own[near[off] as usize - r.start] -= dur;
            }
        }
        for (off, id) in r.enumerate() {
            if own[off] != 0 {
                // Only key scopes hold time here.
                let key = key_name(trace, &forest.nodes[id], by);
                *out.entry(key).or_default() += own[off];
            }
        }
    }
    out.retain(|_, v| *v > 0);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::graphs::GraphKernels;
    use gapscope_traces::{KernelRow, LaunchRow, ScopeRow};

    #[test]
    fn kernels_and_host_time_group_by_module_op_and_layer() {
        let mut t = Trace::default();
        t.strings.intern("");
        let scope = |t: &mut Trace, name: &str, kind: ScopeKind, s: i64, e: i64| {
            let name = t.strings.intern(name);
            t.scopes.push(ScopeRow {
                pid: 1,
                tid: 1,
                name,
                kind: kind as u8,
                host_start_ns: s,
                host_end_ns: e,
            });
        };
        scope(
            &mut t,
            "nn.Module: LlamaDecoderLayer_0",
            ScopeKind::Module,
            0,
            100,
        );
        scope(&mut t, "nn.Module: Linear_0", ScopeKind::Module, 10, 40);
        scope(&mut t, "aten::linear", ScopeKind::Op, 12, 38);
        scope(
            &mut t,
            "nn.Module: LlamaDecoderLayer_1",
            ScopeKind::Module,
            100,
            200,
        );
        scope(&mut t, "nn.Module: Linear_1", ScopeKind::Module, 110, 150);
        scope(&mut t, "aten::linear", ScopeKind::Op, 112, 148);
        let launch = t.strings.intern("cudaLaunchKernel");
        let kname = t.strings.intern("gemv");
        for (i, at) in [20i64, 120, 160].into_iter().enumerate() {
            t.launches.push(LaunchRow {
                pid: 1,
                tid: 1,
                correlation: i as u64 + 1,
                name: launch,
                host_start_ns: at,
                host_end_ns: at + 5,
                ..Default::default()
            });
            t.kernels.push(KernelRow {
                correlation: i as u64 + 1,
                name: kname,
                gpu_start_ns: 1000 + 100 * i as i64,
                gpu_end_ns: 1000 + 100 * i as i64 + 10 * (i as i64 + 1),
                ..Default::default()
            });
        }
        let f = Forest::build(&t);
        let m = LaunchMap::build(&t, &f);
        let acts = [0i64, 1, 2];
        let g = group(&t, &f, &m, &acts, 1, GroupBy::Module, &GraphKernels::of(&t));
        let row = |g: &GroupReport, k: &str| g.rows.iter().find(|r| r.key == k).cloned();
        let lin = row(&g, "nn.Module: Linear").unwrap();
        assert!((lin.gpu_ms_per_step - 30e-6).abs() < 1e-12);
        assert_eq!(lin.calls_per_step, 2.0);
        // Host time over the launches' span 20..165: Linear 20 (of 10..40) + 40; the
        // layers keep what their Linear children do not take.
        assert!((lin.host_ms_per_step.unwrap() - 60e-6).abs() < 1e-12);
        let dl_host = row(&g, "nn.Module: LlamaDecoderLayer")
            .unwrap()
            .host_ms_per_step;
        assert!((dl_host.unwrap() - (60e-6 + 25e-6)).abs() < 1e-12);
        let dl = row(&g, "nn.Module: LlamaDecoderLayer").unwrap();
        assert!((dl.gpu_ms_per_step - 30e-6).abs() < 1e-12);
        let g = group(&t, &f, &m, &acts, 1, GroupBy::Layer, &GraphKernels::of(&t));
        let l0 = row(&g, "layer 0").unwrap();
        let l1 = row(&g, "layer 1").unwrap();
        assert!((l0.gpu_ms_per_step - 10e-6).abs() < 1e-12);
        assert!((l1.gpu_ms_per_step - 50e-6).abs() < 1e-12);
        let g = group(&t, &f, &m, &acts, 1, GroupBy::Op, &GraphKernels::of(&t));
        let op = row(&g, "aten::linear").unwrap();
        assert_eq!(op.calls_per_step, 2.0);
        assert!((g.unattributed_gpu_ms_per_step - 30e-6).abs() < 1e-12);
        assert_eq!(g.source, GroupSource::HostScopes);
    }
}
