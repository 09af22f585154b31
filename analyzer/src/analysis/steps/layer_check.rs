//! Are the periodic detector's steps steps, or the layers of one step? A model repeats its
//! layers, so a trace of one step is periodic too (the vLLM MI300X decode trace gave twelve
//! 0.88 ms "steps" of one 10.7 ms step). Two facts give it away: a CUDA/HIP graph launch
//! replays one step, so segments that share a graph launch are layers; and segments that lie
//! inside one engine step marker (with `--no-markers`) are layers of that step.

use std::collections::{HashMap, HashSet};

use gapscope_traces::MarkerSource;

use super::engine_markers::{KINDS, Meta, Role, Tier};
use super::{Range, Step, candidate_ranges, project, short};
use crate::analysis::prepared::Prepared;

/// Reasons to doubt periodic steps, one line each.
pub(super) fn doubts(
    p: &Prepared,
    device: Option<u32>,
    rows: &[Option<(u16, Meta)>],
    steps: &[Step],
) -> Vec<String> {
    let Some(d) = device else {
        return Vec::new();
    };
    if steps.len() < 2 {
        return Vec::new();
    }
    let mut out = Vec::new();
    out.extend(shared_graph_launch(p, d, steps));
    out.extend(inside_engine_marker(p, d, rows, steps));
    out
}

/// Step index of each start time; steps are start-sorted and tile the timeline.
fn step_at(steps: &[Step], t: i64) -> Option<usize> {
    let i = steps.partition_point(|s| s.gpu_start_ns <= t);
    (i > 0 && t < steps[i - 1].gpu_end_ns).then(|| i - 1)
}

/// Steps whose kernels come from a graph launch that also fed another step.
fn shared_graph_launch(p: &Prepared, device: u32, steps: &[Step]) -> Option<String> {
    let l = &p.trace.launches;
    let mut graph: HashMap<u64, u32> = HashMap::new();
    for i in 0..l.len {
        if p.trace.strings.get(l.name[i]).contains("GraphLaunch") {
            graph.insert(l.correlation[i], l.name[i]);
        }
    }
    if graph.is_empty() {
        return None;
    }
    let k = &p.trace.kernels;
    // Per graph launch: the first and last step its kernels start in.
    let mut spans: HashMap<u64, (usize, usize)> = HashMap::new();
    for &i in p.kernels_on(device) {
        let i = i as usize;
        if !graph.contains_key(&k.correlation[i]) {
            continue;
        }
        let Some(s) = step_at(steps, k.gpu_start_ns[i]) else {
            continue;
        };
        let e = spans.entry(k.correlation[i]).or_insert((s, s));
        e.0 = e.0.min(s);
        e.1 = e.1.max(s);
    }
    let mut shared: HashSet<usize> = HashSet::new();
    let mut name = None;
    // A launch whose kernels span three steps or more holds a whole step: its segments are
    // layers. (Two neighbouring steps sharing a launch is an anchor off the step start.)
    for (corr, &(a, b)) in &spans {
        if b >= a + 2 {
            shared.extend(a..=b);
            name.get_or_insert(graph[corr]);
        }
    }
    let n = shared.len();
    (n >= 2 && 2 * n >= steps.len()).then(|| {
        format!(
            "{n} of the {} periodic steps replay from one graph launch ({}) that spans three \
             or more of them: a graph launch replays one step, so these are probably its layers",
            steps.len(),
            name.map_or("", |s| p.trace.strings.get(s))
        )
    })
}

/// Engine step markers (ignored under `--no-markers`) that each hold several periodic steps.
fn inside_engine_marker(
    p: &Prepared,
    device: u32,
    rows: &[Option<(u16, Meta)>],
    steps: &[Step],
) -> Option<String> {
    let select = |i: usize| {
        rows[i].is_some_and(|(k, _)| {
            let k = &KINDS[k as usize];
            k.tier == Tier::Engine && k.role == Role::Step
        }) && MarkerSource::from_code(p.trace.markers.source[i]) != MarkerSource::Engine
    };
    let (gpu, host) = candidate_ranges(p, Some(device), rows, &select);
    let mut windows: Vec<(Range, i64, i64)> = gpu.iter().map(|r| (*r, r.start, r.end)).collect();
    if windows.is_empty() {
        windows = project(p, device, &host);
    }
    let (mut worst, mut at): (usize, Option<Range>) = (0, None);
    for &(r, s, e) in &windows {
        let tol = (e.saturating_sub(s) / 100).max(1_000);
        // Steps are start-sorted and tile the timeline.
        let from = steps.partition_point(|st| st.gpu_start_ns < s.saturating_sub(tol));
        let inside = steps[from..]
            .iter()
            .take_while(|st| st.gpu_end_ns <= e.saturating_add(tol))
            .count();
        if inside > worst {
            worst = inside;
            at = Some(r);
        }
    }
    (worst >= 2).then(|| {
        let name = at.map_or("", |r| p.trace.strings.get(r.name));
        let engine = at
            .and_then(|r| r.kind)
            .and_then(|k| KINDS[k as usize].engine)
            .unwrap_or("engine");
        format!(
            "{worst} periodic steps lie inside one {engine} step marker ({:?}): they are layers \
             of that step; without --no-markers the markers delimit the steps",
            short(name)
        )
    })
}
