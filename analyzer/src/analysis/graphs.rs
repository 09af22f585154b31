//! Kernels replayed from CUDA (or HIP) graphs: one graph launch on the host, many kernels
//! on the GPU, none with a launch, op or module of its own.

use std::collections::HashSet;

use gapscope_traces::Trace;

use super::graph_capture::{CaptureMap, GraphCapture};

/// Which kernels of a trace were replayed from graphs: by their graph id (recordings), or
/// by the correlation of the graph launch that replayed them (Kineto).
pub struct GraphKernels {
    launches: HashSet<u64>,
    has_graph_id: bool,
    /// Graph launch calls in the trace.
    pub launch_count: usize,
    /// The replays mapped back to a graph-capture trace's launches, when one was given.
    pub capture: Option<CaptureMap>,
}

impl GraphKernels {
    pub fn of(trace: &Trace) -> Self {
        let l = &trace.launches;
        let graph_names: Vec<bool> = trace
            .strings
            .values()
            .iter()
            .map(|v| v.contains("GraphLaunch"))
            .collect();
        let launches: Vec<u64> = (0..l.len)
            .filter(|&i| {
                graph_names
                    .get(l.name[i] as usize)
                    .copied()
                    .unwrap_or(false)
            })
            .map(|i| l.correlation[i])
            .collect();
        Self {
            launch_count: launches.len(),
            launches: launches.into_iter().collect(),
            has_graph_id: trace.kernels.graph_id.len() == trace.kernels.len,
            capture: None,
        }
    }

    /// These replays mapped to the launches of `capture` (a graph-capture trace), if given.
    pub fn with_capture(mut self, trace: &Trace, capture: Option<&GraphCapture>) -> Self {
        self.capture = capture.map(|c| CaptureMap::build(trace, c));
        self
    }

    /// How many of the trace's kernels were replayed from graphs.
    pub fn count(&self, trace: &Trace) -> usize {
        (0..trace.kernels.len)
            .filter(|&i| self.replayed(trace, i))
            .count()
    }

    /// Whether kernel `i` was replayed from a graph.
    pub fn replayed(&self, trace: &Trace, i: usize) -> bool {
        let k = &trace.kernels;
        (self.has_graph_id && k.graph_id[i] != 0) || self.launches.contains(&k.correlation[i])
    }
}
