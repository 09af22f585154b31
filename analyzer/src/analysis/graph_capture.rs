//! Graph-capture traces: the torch.profiler trace an engine writes while it captures its CUDA
//! graphs (vLLM's `capture_torch_profiler_dir`, SGLang's `--enable-profile-cuda-graph`), used
//! to put the kernels a graph replays back on the ops and modules that launched them.
//!
//! What such a trace holds (traces/reference/graph-capture): the host ops, `nn.Module` calls
//! and launch calls (`cudaLaunchKernel`, `cuLaunchKernelEx`, …) made between
//! `cudaStreamBeginCapture` and `cudaStreamEndCapture`, each inside its op, but no kernel of
//! the graph (captured launches do not run) and no graph or graph-node id. The replay trace
//! holds each replay's kernels, all with the correlation id of their `cudaGraphLaunch`, and no
//! op or module around them. A capture on one stream records a chain, and each replay runs
//! that chain in order, so the rule is positional: the i-th launch call of the capture, in
//! host order, is the i-th kernel or memop of each replay, in GPU order. A replay is mapped
//! only when its activity count equals the capture's launch count, every position is of the
//! same kind (kernel, copy, set), and the size the capture declares (`capture_N_…`, SGLang's
//! `bs_N_…` file name) is not smaller than the tokens its step declares.

use std::collections::HashMap;
use std::path::Path;
use std::sync::LazyLock;

use gapscope_traces::{MarkerSource, Trace};
use regex::Regex;
use serde::Serialize;

use super::host::by_key::{GroupBy, scope_key};
use super::host::{Forest, LaunchMap};
use super::steps::engine_markers::classify;
use crate::error::{AnalyzerError, Result};
use crate::import::{ImportOptions, NoProgress, import_trace};

/// The mapping rule, as reports state it.
pub const RULE: &str = "the i-th launch call between cudaStreamBeginCapture and cudaStreamEndCapture (host order) is the i-th kernel or memop of each replay (GPU order)";

/// What one position of a captured graph is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotKind {
    Kernel,
    Memcpy,
    Memset,
}

impl SlotKind {
    fn of_call(name: &str) -> Option<Self> {
        if name.contains("LaunchKernel") || name.contains("LaunchCooperativeKernel") {
            Some(Self::Kernel)
        } else if name.contains("Memcpy") && name.contains("Async") {
            Some(Self::Memcpy)
        } else if name.contains("Memset") && name.contains("Async") {
            Some(Self::Memset)
        } else {
            None
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Kernel => "kernel",
            Self::Memcpy => "copy",
            Self::Memset => "set",
        }
    }
}

/// One position of a captured graph: its kind and the keys `--by` gives it (scope, op,
/// module, layer), read from the capture trace's host scopes around its launch call.
#[derive(Debug, Clone)]
struct Slot {
    kind: SlotKind,
    keys: [Option<String>; 4],
}

/// One graph captured in the capture trace.
#[derive(Debug, Clone, Serialize)]
pub struct CapturedGraph {
    /// The capture marker around it (`capture_8_FULL`), if any.
    pub marker: Option<String>,
    /// The batch size (tokens) it was captured for, when the marker or file name says.
    pub size: Option<u32>,
    /// Launch calls made during its capture: the graph's kernels and memops.
    pub launches: usize,
    #[serde(skip)]
    slots: Vec<Slot>,
}

/// A graph-capture trace, read and indexed.
#[derive(Debug, Clone)]
pub struct GraphCapture {
    /// The file, as given.
    pub path: String,
    pub graphs: Vec<CapturedGraph>,
}

fn group_index(by: GroupBy) -> usize {
    match by {
        GroupBy::Scope => 0,
        GroupBy::Op => 1,
        GroupBy::Module => 2,
        GroupBy::Layer => 3,
    }
}

static CAPTURE_MARKER: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^capture_(\d+)_").expect("constant regex"));
static BS_FILE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?:^|[^A-Za-z0-9])bs_?(\d+)").expect("constant regex"));

impl GraphCapture {
    /// Reads the capture trace at `path` (any format gapscope imports).
    pub fn open(path: &Path, opts: &ImportOptions) -> Result<Self> {
        let shown = path.display().to_string();
        let imported = import_trace(path, opts, &NoProgress)
            .map_err(|e| AnalyzerError::Invalid(format!("graph capture {e}")))?;
        let file = path.file_name().map(|f| f.to_string_lossy().into_owned());
        let g = Self::of_trace(&shown, &imported.trace, file.as_deref());
        if g.graphs.is_empty() {
            return Err(AnalyzerError::Invalid(format!(
                "graph capture {shown}: no graph capture in it (no cudaStreamBeginCapture … cudaStreamEndCapture with launch calls between): give the trace torch.profiler wrote while the engine captured its CUDA graphs"
            )));
        }
        Ok(g)
    }

    /// The graphs captured in `trace`; `file` (its file name) may declare the size.
    pub fn of_trace(path: &str, trace: &Trace, file: Option<&str>) -> Self {
        let forest = Forest::build(trace);
        let map = LaunchMap::build(trace, &forest);
        let l = &trace.launches;
        let name = |i: usize| trace.strings.get(l.name[i]);
        let mut order: Vec<usize> = (0..l.len).collect();
        order.sort_by_key(|&i| (l.host_start_ns[i], l.host_end_ns[i], i));
        let file_size = file
            .and_then(|f| BS_FILE.captures(f))
            .and_then(|c| c[1].parse().ok());
        let mut graphs = Vec::new();
        for (pos, &b) in order.iter().enumerate() {
            if !name(b).contains("StreamBeginCapture") {
                continue;
            }
            let tid = l.tid[b];
            let mut slots = Vec::new();
            let mut last_end = i64::MIN;
            for &i in &order[pos + 1..] {
                if l.tid[i] != tid {
                    continue;
                }
                let n = name(i);
                if n.contains("StreamEndCapture") {
                    break;
                }
                // A driver call made inside a runtime call is the same launch.
                if l.host_start_ns[i] < last_end {
                    continue;
                }
                let Some(kind) = SlotKind::of_call(n) else {
                    continue;
                };
                last_end = l.host_end_ns[i];
                let node = map.launch_scope[i];
                let keys = [GroupBy::Scope, GroupBy::Op, GroupBy::Module, GroupBy::Layer]
                    .map(|by| scope_key(trace, &forest, node, by));
                slots.push(Slot { kind, keys });
            }
            if slots.is_empty() {
                continue;
            }
            let marker = capture_marker(trace, tid, l.host_start_ns[b]);
            let size = marker
                .as_deref()
                .and_then(|m| CAPTURE_MARKER.captures(m))
                .and_then(|c| c[1].parse().ok())
                .or(file_size);
            graphs.push(CapturedGraph {
                marker,
                size,
                launches: slots.len(),
                slots,
            });
        }
        Self {
            path: path.to_owned(),
            graphs,
        }
    }

    /// The launch counts and sizes of the captured graphs, for messages.
    fn describe(&self) -> String {
        let v: Vec<String> = self
            .graphs
            .iter()
            .map(|g| match (&g.marker, g.size) {
                (Some(m), _) => format!("{m}: {} launches", g.launches),
                (None, Some(s)) => format!("size {s}: {} launches", g.launches),
                (None, None) => format!("{} launches", g.launches),
            })
            .collect();
        v.join(", ")
    }
}

/// The capture marker (a host annotation) around `t` on thread `tid`: the innermost whose
/// name says capture, else the innermost.
fn capture_marker(trace: &Trace, tid: u64, t: i64) -> Option<String> {
    let m = &trace.markers;
    let mut best: Option<(bool, i64, usize)> = None;
    for i in 0..m.len {
        let (s, e) = (m.host_start_ns[i], m.host_end_ns[i]);
        if m.tid[i] != tid || s == i64::MIN || e == i64::MIN || s > t || e < t {
            continue;
        }
        let says = CAPTURE_MARKER.is_match(trace.strings.get(m.name[i]));
        let cand = (says, -(e - s), i);
        if best.is_none_or(|b| (cand.0, cand.1) > (b.0, b.1)) {
            best = Some(cand);
        }
    }
    best.map(|(_, _, i)| trace.strings.get(m.name[i]).to_owned())
}

/// How the capture trace was used on a replay trace (JSON: `graph_capture` of `--by`).
#[derive(Debug, Clone, Serialize)]
pub struct CaptureUse {
    /// The capture trace, as given.
    pub path: String,
    /// The mapping rule.
    pub rule: &'static str,
    /// The graphs it captured.
    pub graphs: Vec<CapturedGraph>,
    /// Graph launches in the replay trace, and those whose replay was mapped.
    pub graph_launches: usize,
    pub launches_mapped: usize,
    /// Replayed kernels and memops put on the capture's scopes, whole trace.
    pub activities_mapped: usize,
    /// Why the other graph launches were not mapped, one line per reason with its count.
    pub refused: Vec<String>,
    /// Of the steps `--by` reports: mapped activities and their GPU time, per step.
    pub mapped_per_step: f64,
    pub mapped_gpu_ms_per_step: f64,
}

impl std::fmt::Display for CaptureUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "graph capture {}: {:.0} replayed kernels and memops per step ({} ms/step) put on the scopes of their capture-time launches ({} of {} graph launches; {}); rule: {}",
            self.path,
            self.mapped_per_step,
            crate::text::ms(self.mapped_gpu_ms_per_step),
            self.launches_mapped,
            self.graph_launches,
            describe_graphs(&self.graphs),
            RULE
        )?;
        for r in &self.refused {
            write!(f, "; not mapped: {r}")?;
        }
        Ok(())
    }
}

fn describe_graphs(g: &[CapturedGraph]) -> String {
    GraphCapture {
        path: String::new(),
        graphs: g.to_vec(),
    }
    .describe()
}

/// The capture's positions matched to a replay trace's activities.
#[derive(Debug, Clone)]
pub struct CaptureMap {
    capture: GraphCapture,
    /// Activity tag (kernel index, memop `-(i + 1)`) -> (graph, slot).
    slot_of: HashMap<i64, (u32, u32)>,
    pub graph_launches: usize,
    pub launches_mapped: usize,
    refused: Vec<(String, usize)>,
}

impl CaptureMap {
    /// Matches each graph launch of `trace` to a captured graph of `capture`.
    pub fn build(trace: &Trace, capture: &GraphCapture) -> Self {
        let l = &trace.launches;
        let graph_corr: HashMap<u64, usize> = (0..l.len)
            .filter(|&i| l.correlation[i] != 0)
            .filter(|&i| trace.strings.get(l.name[i]).contains("GraphLaunch"))
            .map(|i| (l.correlation[i], i))
            .collect();
        let mut replays: HashMap<u64, Vec<(i64, i64, SlotKind)>> = HashMap::new();
        let k = &trace.kernels;
        for i in 0..k.len {
            if graph_corr.contains_key(&k.correlation[i]) {
                let e = replays.entry(k.correlation[i]).or_default();
                e.push((k.gpu_start_ns[i], i as i64, SlotKind::Kernel));
            }
        }
        let m = &trace.memops;
        for i in 0..m.len {
            if graph_corr.contains_key(&m.correlation[i]) {
                let kind = if m.kind[i] == gapscope_traces::MemopKind::Memset as u8 {
                    SlotKind::Memset
                } else {
                    SlotKind::Memcpy
                };
                let e = replays.entry(m.correlation[i]).or_default();
                e.push((m.gpu_start_ns[i], -(i as i64) - 1, kind));
            }
        }
        let mut out = Self {
            capture: capture.clone(),
            slot_of: HashMap::new(),
            graph_launches: graph_corr.len(),
            launches_mapped: 0,
            refused: Vec::new(),
        };
        let mut refused: HashMap<String, usize> = HashMap::new();
        let sizes = step_sizes(trace);
        let mut corrs: Vec<(&u64, &usize)> = graph_corr.iter().collect();
        corrs.sort_by_key(|&(_, &li)| (l.host_start_ns[li], li));
        for (corr, &li) in corrs {
            let mut acts = replays.remove(corr).unwrap_or_default();
            // GPU order; for equal starts, trace order (kernels before memops).
            acts.sort_by_key(|&(t, tag, _)| (t, tag < 0, tag.unsigned_abs()));
            let tokens = step_tokens(&sizes, l.tid[li], l.host_start_ns[li]);
            match pick(capture, &acts, tokens) {
                Ok(g) => {
                    out.launches_mapped += 1;
                    for (slot, &(_, tag, _)) in acts.iter().enumerate() {
                        out.slot_of.insert(tag, (g as u32, slot as u32));
                    }
                }
                Err(why) => *refused.entry(why).or_default() += 1,
            }
        }
        let mut refused: Vec<(String, usize)> = refused.into_iter().collect();
        refused.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out.refused = refused;
        out
    }

    /// The key `by` gives activity `tag` through the capture: `Some(None)` when it was
    /// mapped to a launch with no scope of that kind around it, `None` when not mapped.
    pub fn key(&self, tag: i64, by: GroupBy) -> Option<Option<&str>> {
        let &(g, s) = self.slot_of.get(&tag)?;
        let slot = &self.capture.graphs[g as usize].slots[s as usize];
        Some(slot.keys[group_index(by)].as_deref())
    }

    /// Replayed kernels and memops mapped, whole trace.
    pub fn mapped(&self) -> usize {
        self.slot_of.len()
    }

    /// Why the capture maps none of the trace's graph replays, or `None` when it maps some.
    pub fn refusal(&self) -> Option<String> {
        if self.launches_mapped > 0 {
            return None;
        }
        let why = if self.graph_launches == 0 {
            "the trace replays no CUDA graph (no graph launch with a correlation id)".to_owned()
        } else {
            let reasons: Vec<String> = self.refused.iter().map(|(r, _)| r.clone()).collect();
            format!(
                "none of the trace's {} graph launches matches it: {}",
                self.graph_launches,
                reasons.join("; ")
            )
        };
        Some(format!(
            "graph capture {} refused ({}): {why}",
            self.capture.path,
            self.capture.describe()
        ))
    }

    /// The summary `--by` reports, with the per-step figures of its steps.
    pub fn usage(&self, mapped_per_step: f64, mapped_gpu_ms_per_step: f64) -> CaptureUse {
        CaptureUse {
            path: self.capture.path.clone(),
            rule: RULE,
            graphs: self.capture.graphs.clone(),
            graph_launches: self.graph_launches,
            launches_mapped: self.launches_mapped,
            activities_mapped: self.mapped(),
            refused: self
                .refused
                .iter()
                .map(|(r, n)| format!("{n} graph launch{}: {r}", if *n == 1 { "" } else { "es" }))
                .collect(),
            mapped_per_step,
            mapped_gpu_ms_per_step,
        }
    }
}

/// The graph of `capture` that one replay's activities `acts` match, or why none does.
fn pick(
    capture: &GraphCapture,
    acts: &[(i64, i64, SlotKind)],
    tokens: Option<u32>,
) -> std::result::Result<usize, String> {
    let n = acts.len();
    let same_count: Vec<usize> = (0..capture.graphs.len())
        .filter(|&g| capture.graphs[g].launches == n)
        .collect();
    if same_count.is_empty() {
        return Err(format!(
            "its replay runs {n} kernels and memops, no captured graph as many launches"
        ));
    }
    let mut why = String::new();
    let mut ok: Vec<usize> = Vec::new();
    for g in same_count {
        let graph = &capture.graphs[g];
        if let Some(at) = (0..n).find(|&i| graph.slots[i].kind != acts[i].2) {
            why = format!(
                "position {at} of its replay is a {}, the capture launched a {} there",
                acts[at].2.as_str(),
                graph.slots[at].kind.as_str()
            );
            continue;
        }
        if let (Some(size), Some(t)) = (graph.size, tokens)
            && t > size
        {
            why = format!(
                "its step declares {t} tokens, the graph was captured for {size}: another batch size's graph"
            );
            continue;
        }
        ok.push(g);
    }
    match ok.len() {
        0 => Err(why),
        1 => Ok(ok[0]),
        _ => {
            // Several graphs fit: the smallest captured size that holds the step (vLLM and
            // SGLang pad a batch to the next captured size).
            let sized: Vec<(u32, usize)> = ok
                .iter()
                .filter_map(|&g| capture.graphs[g].size.map(|s| (s, g)))
                .filter(|&(s, _)| tokens.is_some_and(|t| s >= t))
                .collect();
            sized.iter().min().map(|&(_, g)| g).ok_or_else(|| {
                format!(
                    "{} captured graphs of {n} launches fit and no declared size tells them apart",
                    ok.len()
                )
            })
        }
    }
}

/// The step markers of a trace that declare a size: `(tid, start, end, tokens else
/// requests)`, host times, sorted by start.
fn step_sizes(trace: &Trace) -> Vec<(u64, i64, i64, u32)> {
    let m = &trace.markers;
    let mut out: Vec<(u64, i64, i64, u32)> = (0..m.len)
        .filter(|&i| m.host_start_ns[i] != i64::MIN && m.host_end_ns[i] != i64::MIN)
        .filter_map(|i| {
            let (_, meta) = classify(
                trace.strings.get(m.name[i]),
                MarkerSource::from_code(m.source[i]),
            )?;
            let n = if meta.tokens > 0 {
                u32::try_from(meta.tokens).unwrap_or(u32::MAX)
            } else {
                meta.batch
            };
            (n > 0).then_some((m.tid[i], m.host_start_ns[i], m.host_end_ns[i], n))
        })
        .collect();
    out.sort_unstable_by_key(|r| (r.1, r.2));
    out
}

/// The size the innermost of `sizes` around host time `t` on `tid` declares.
fn step_tokens(sizes: &[(u64, i64, i64, u32)], tid: u64, t: i64) -> Option<u32> {
    let upto = sizes.partition_point(|r| r.1 <= t);
    sizes[..upto]
        .iter()
        .filter(|r| r.0 == tid && r.2 >= t)
        .min_by_key(|r| r.2 - r.1)
        .map(|r| r.3)
}

#[cfg(test)]
mod tests;
