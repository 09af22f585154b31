//! The host-side scope forest: every host scope of a trace (Kineto `cpu_op` and
//! `python_function` rows, host annotations, NVTX ranges) as nodes with parent links, per
//! thread, so "what was thread T inside at time t" is a binary search plus a short walk.
//!
//! Scopes nest by time on their thread. A scope that starts inside another but ends after it
//! (a malformed or clock-skewed pair) is cut at its parent's end, so the nesting holds and
//! every instant has one innermost scope.

use gapscope_traces::{MODULE_CALL_PREFIX, MarkerSource, ScopeKind, StrId, Trace};

/// No node (the parent of a root).
pub const NONE: u32 = u32::MAX;

/// One host scope.
#[derive(Debug, Clone, Copy)]
pub struct Node {
    pub name: StrId,
    pub kind: ScopeKind,
    pub start: i64,
    pub end: i64,
    pub parent: u32,
    pub depth: u16,
}

/// All host scopes of a trace, grouped by thread and start-sorted within each thread.
#[derive(Debug, Default)]
pub struct Forest {
    pub nodes: Vec<Node>,
    /// `(tid, first node, end node)` per thread, sorted by tid.
    threads: Vec<(u64, u32, u32)>,
    /// Scopes cut at their parent's end (improper nesting in the source).
    pub cut: usize,
}

impl Forest {
    /// Builds the forest from the scope table and the host-side markers.
    pub fn build(trace: &Trace) -> Self {
        let s = &trace.scopes;
        let m = &trace.markers;
        let mut raw: Vec<(u64, i64, i64, StrId, ScopeKind)> = Vec::with_capacity(s.len() + m.len);
        for i in 0..s.len() {
            raw.push((
                s.tid[i],
                s.host_start_ns[i],
                s.host_end_ns[i],
                s.name[i],
                ScopeKind::from_code(s.kind[i]),
            ));
        }
        for i in 0..m.len {
            let (hs, he) = (m.host_start_ns[i], m.host_end_ns[i]);
            if hs == i64::MIN || he == i64::MIN {
                continue;
            }
            let src = MarkerSource::from_code(m.source[i]);
            if !matches!(src, MarkerSource::Nvtx | MarkerSource::KinetoUserAnnotation) {
                continue;
            }
            let kind = if trace.strings.get(m.name[i]).starts_with(MODULE_CALL_PREFIX) {
                ScopeKind::Module
            } else {
                ScopeKind::Annotation
            };
            raw.push((m.tid[i], hs, he, m.name[i], kind));
        }
        raw.retain(|r| r.2 >= r.1);
        // (tid, start, longest first) puts parents before their children; of two scopes
        // with the same span, the one read first is the parent (a stable sort, which is
        // also near linear here: Kineto writes each thread's ops in start order).
        raw.sort_by_key(|r| (r.0, r.1, std::cmp::Reverse(r.2)));
        let mut f = Forest {
            nodes: Vec::with_capacity(raw.len()),
            ..Self::default()
        };
        let mut stack: Vec<u32> = Vec::new();
        let mut cur_tid = None;
        for (tid, start, end, name, kind) in raw {
            if cur_tid != Some(tid) {
                let at = f.nodes.len() as u32;
                if let Some(last) = f.threads.last_mut() {
                    last.2 = at;
                }
                f.threads.push((tid, at, at));
                cur_tid = Some(tid);
                stack.clear();
            }
            while let Some(&top) = stack.last() {
                if f.nodes[top as usize].end <= start {
                    stack.pop();
                } else {
                    break;
                }
            }
            let (parent, depth, mut end) = match stack.last() {
                Some(&p) => (p, f.nodes[p as usize].depth.saturating_add(1), end),
                None => (NONE, 0, end),
            };
            if parent != NONE && end > f.nodes[parent as usize].end {
                end = f.nodes[parent as usize].end;
                f.cut += 1;
            }
            let id = f.nodes.len() as u32;
            f.nodes.push(Node {
                name,
                kind,
                start,
                end,
                parent,
                depth,
            });
            stack.push(id);
        }
        let n = f.nodes.len() as u32;
        if let Some(last) = f.threads.last_mut() {
            last.2 = n;
        }
        f
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Each thread with its start-sorted node range, by thread id.
    pub fn threads(&self) -> impl Iterator<Item = (u64, std::ops::Range<usize>)> + '_ {
        self.threads
            .iter()
            .map(|&(tid, a, b)| (tid, a as usize..b as usize))
    }

    /// The start-sorted node range of one thread.
    pub fn thread(&self, tid: u64) -> std::ops::Range<usize> {
        match self.threads.binary_search_by_key(&tid, |t| t.0) {
            Ok(i) => self.threads[i].1 as usize..self.threads[i].2 as usize,
            Err(_) => 0..0,
        }
    }

    /// The innermost scope of thread `tid` that holds instant `t` (start <= t < end; a
    /// zero-length scope holds its own start), or [`NONE`].
    pub fn innermost(&self, tid: u64, t: i64) -> u32 {
        let r = self.thread(tid);
        let nodes = &self.nodes[r.clone()];
        let k = nodes.partition_point(|n| n.start <= t);
        if k == 0 {
            return NONE;
        }
        let mut id = (r.start + k - 1) as u32;
        while id != NONE {
            let n = &self.nodes[id as usize];
            if t < n.end || (n.start == n.end && n.start == t) {
                return id;
            }
            id = n.parent;
        }
        NONE
    }

    /// A node and its ancestors, innermost first.
    pub fn stack(&self, id: u32) -> impl Iterator<Item = (u32, &Node)> + '_ {
        let mut cur = id;
        std::iter::from_fn(move || {
            if cur == NONE {
                return None;
            }
            let n = self.nodes.get(cur as usize)?;
            let out = (cur, n);
            cur = n.parent;
            Some(out)
        })
    }

    /// The innermost node of `kind` in the stack of `id` (itself included), or [`NONE`].
    pub fn nearest(&self, id: u32, kind: ScopeKind) -> u32 {
        self.stack(id)
            .find(|(_, n)| n.kind == kind)
            .map_or(NONE, |(i, _)| i)
    }

    /// Attributes the instants of `[a, b)` on thread `tid` to the innermost scope open at
    /// each (or [`NONE`] where the thread is outside every scope), calling `emit(node, ns)`
    /// once per stretch. Costs the number of scopes that overlap the window, plus a search.
    /// `stack` is scratch space, reused across calls.
    pub fn innermost_over(
        &self,
        tid: u64,
        a: i64,
        b: i64,
        stack: &mut Vec<u32>,
        mut emit: impl FnMut(u32, i64),
    ) {
        if b <= a {
            return;
        }
        let r = self.thread(tid);
        let nodes = &self.nodes[r.clone()];
        // The open scopes at `a`, outermost first.
        stack.clear();
        stack.extend(self.stack(self.innermost(tid, a)).map(|(i, _)| i));
        stack.reverse();
        let first = nodes.partition_point(|n| n.start <= a);
        let mut t = a;
        let mut next = r.start + first;
        loop {
            // Close scopes that end before the next one opens.
            let next_start = if next < r.end {
                self.nodes[next].start.min(b)
            } else {
                b
            };
            while let Some(&top) = stack.last() {
                let end = self.nodes[top as usize].end;
                if end <= next_start {
                    if end > t {
                        emit(top, end - t);
                        t = end;
                    }
                    stack.pop();
                } else {
                    break;
                }
            }
            if next_start > t {
                emit(stack.last().copied().unwrap_or(NONE), next_start - t);
                t = next_start;
            }
            if t >= b || next >= r.end {
                break;
            }
            stack.push(next as u32);
            next += 1;
        }
    }
}

/// The layer index a module name carries (`nn.Module: LlamaDecoderLayer_3` -> 3,
/// `model.layers.7` -> 7): a trailing number after a word naming a layer or block.
pub fn layer_of(name: &str) -> Option<u32> {
    let lower = name.to_ascii_lowercase();
    let digits = lower.len() - lower.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    let (head, num) = lower.split_at(lower.len() - digits);
    let head = head.trim_end_matches(['_', '.', ' ', '#']);
    let word = head.rsplit([':', ' ', '.']).next().unwrap_or(head);
    let names_layer = word == "h"
        || ["layer", "layers", "block", "blocks"]
            .iter()
            .any(|w| word.ends_with(w));
    if names_layer { num.parse().ok() } else { None }
}

/// Whether a module call only wraps one elementwise function (an activation, dropout,
/// identity). Bucket rules look through such a module to the module that called it, so an
/// activation inside a gated norm files with the norm whether or not the source recorded the
/// activation's own call (torch.profiler records some and drops others).
pub fn is_transparent_module(name: &str) -> bool {
    let class = group_name(name);
    let class = class.strip_prefix(MODULE_CALL_PREFIX).unwrap_or(class);
    [
        "Activation",
        "SiLU",
        "GELU",
        "ReLU",
        "Tanh",
        "Sigmoid",
        "Softplus",
        "Dropout",
        "Identity",
    ]
    .iter()
    .any(|w| class.ends_with(w))
}

/// A scope name with an nn.Module instance counter dropped (`nn.Module: Linear_12` ->
/// `nn.Module: Linear`), so the calls of one module class group together. Other names are
/// returned as they are.
pub fn group_name(name: &str) -> &str {
    if name.starts_with(MODULE_CALL_PREFIX)
        && let Some(cut) = name.rfind('_')
        && cut + 1 < name.len()
        && name[cut + 1..].bytes().all(|c| c.is_ascii_digit())
    {
        return &name[..cut];
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_traces::{MarkerRow, ScopeRow};

    fn trace(rows: &[(u64, &str, u8, i64, i64)]) -> Trace {
        let mut t = Trace::default();
        t.strings.intern("");
        for &(tid, name, kind, s, e) in rows {
            let name = t.strings.intern(name);
            t.scopes.push(ScopeRow {
                pid: 1,
                tid,
                name,
                kind,
                host_start_ns: s,
                host_end_ns: e,
            });
        }
        t
    }

    #[test]
    fn nesting_and_lookup() {
        let t = trace(&[
            (1, "outer", 1, 0, 100),
            (1, "a", 1, 10, 40),
            (1, "a.inner", 1, 20, 30),
            (1, "b", 1, 50, 90),
            (2, "other thread", 1, 0, 1000),
        ]);
        let f = Forest::build(&t);
        let name = |id: u32| t.strings.get(f.nodes[id as usize].name).to_owned();
        assert_eq!(name(f.innermost(1, 25)), "a.inner");
        assert_eq!(name(f.innermost(1, 30)), "a");
        assert_eq!(name(f.innermost(1, 45)), "outer");
        assert_eq!(name(f.innermost(1, 60)), "b");
        assert_eq!(f.innermost(1, 100), NONE);
        assert_eq!(name(f.innermost(2, 500)), "other thread");
        assert_eq!(f.innermost(3, 5), NONE);
        let names: Vec<String> = f.stack(f.innermost(1, 25)).map(|(i, _)| name(i)).collect();
        assert_eq!(names, ["a.inner", "a", "outer"]);
    }

    #[test]
    fn improper_nesting_is_cut_at_the_parent() {
        let t = trace(&[(1, "p", 1, 0, 10), (1, "c", 1, 5, 20)]);
        let f = Forest::build(&t);
        assert_eq!(f.cut, 1);
        assert_eq!(f.nodes[1].end, 10);
        assert_eq!(f.innermost(1, 15), NONE);
    }

    #[test]
    fn innermost_over_a_window_splits_by_scope() {
        let t = trace(&[
            (1, "outer", 1, 0, 100),
            (1, "a", 1, 10, 40),
            (1, "a.inner", 1, 20, 30),
            (1, "b", 1, 50, 90),
        ]);
        let f = Forest::build(&t);
        let mut got: Vec<(String, i64)> = Vec::new();
        f.innermost_over(1, 5, 120, &mut Vec::new(), |id, ns| {
            let n = if id == NONE {
                "-".to_owned()
            } else {
                t.strings.get(f.nodes[id as usize].name).to_owned()
            };
            match got.last_mut() {
                Some((l, v)) if *l == n => *v += ns,
                _ => got.push((n, ns)),
            }
        });
        let want: Vec<(String, i64)> = [
            ("outer", 5),
            ("a", 10),
            ("a.inner", 10),
            ("a", 10),
            ("outer", 10),
            ("b", 40),
            ("outer", 10),
            ("-", 20),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), *v))
        .collect();
        assert_eq!(got, want);
        let total: i64 = got.iter().map(|g| g.1).sum();
        assert_eq!(total, 115);
        // A window inside one leaf.
        let mut one = Vec::new();
        f.innermost_over(1, 22, 28, &mut Vec::new(), |id, ns| one.push((id, ns)));
        assert_eq!(one, [(2, 6)]);
    }

    #[test]
    fn host_markers_join_the_forest_as_modules_or_annotations() {
        let mut t = trace(&[(7, "aten::mm", 1, 10, 20)]);
        for (name, s, e) in [("decode_step", 0, 100), ("nn.Module: Linear_3", 5, 30)] {
            let name = t.strings.intern(name);
            t.markers.push(MarkerRow {
                name,
                source: MarkerSource::Nvtx as u8,
                tid: 7,
                host_start_ns: s,
                host_end_ns: e,
                ..Default::default()
            });
        }
        let f = Forest::build(&t);
        let kinds: Vec<ScopeKind> = f.stack(f.innermost(7, 15)).map(|(_, n)| n.kind).collect();
        assert_eq!(
            kinds,
            [ScopeKind::Op, ScopeKind::Module, ScopeKind::Annotation]
        );
    }

    #[test]
    fn layers_and_group_names() {
        assert_eq!(layer_of("nn.Module: LlamaDecoderLayer_3"), Some(3));
        assert_eq!(layer_of("nn.Module: Qwen3NextDecoderLayer_12"), Some(12));
        assert_eq!(layer_of("model.layers.7"), Some(7));
        assert_eq!(layer_of("nn.Module: GPT2Block_2"), Some(2));
        assert_eq!(layer_of("nn.Module: Linear_3"), None);
        assert_eq!(layer_of("nn.Module: MyMesh_3"), None);
        assert_eq!(layer_of("transformer.h.5"), Some(5));
        assert_eq!(layer_of("aten::mm"), None);
        assert_eq!(group_name("nn.Module: Linear_12"), "nn.Module: Linear");
        assert_eq!(group_name("nn.Module: Linear"), "nn.Module: Linear");
        assert_eq!(group_name("aten::add_"), "aten::add_");
        assert!(is_transparent_module("nn.Module: SiLUActivation_3"));
        assert!(is_transparent_module("nn.Module: Dropout_0"));
        assert!(!is_transparent_module(
            "nn.Module: Qwen3NextGatedDeltaNet_0"
        ));
        assert!(!is_transparent_module("nn.Module: Linear_2"));
    }
}
