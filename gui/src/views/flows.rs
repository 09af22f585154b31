//! Launch → kernel flows: the host API call that launched a kernel or memop (through its
//! correlation id, the analysis's launch map), the op and module around that call, and the
//! arrow from the call on its thread's track to the activity on its GPU lane: for the
//! selected activity, and on demand for every activity in a box selection.

use egui::{Color32, Painter, Pos2, Rect, Shape, Stroke, vec2};
use gapscope_analyzer::analysis::host::forest::NONE;
use gapscope_analyzer::explore::ActRef;
use gapscope_traces::ScopeKind;

use super::timeline::{Hit, TimelineState};
use crate::loader::Loaded;
use crate::tracks::{Track, TrackBody, TrackKey};

/// Most arrows drawn for a box selection.
pub const MAX_RANGE_FLOWS: usize = 400;

/// The flows asked for, and where "back" returns to after a jump to a launch.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Flows {
    /// Draw the arrows of every activity in the box selection.
    pub range: bool,
    /// The selection and visible window before the last jump to a launch.
    pub back: Option<(Hit, f64, f64)>,
}

/// Who launched an activity.
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    /// Row of the launch table.
    pub index: u32,
    pub api: String,
    pub tid: u64,
    pub start_ns: i64,
    pub end_ns: i64,
    /// The innermost op and module scope around the call, when the host recorded them.
    pub op: Option<String>,
    pub module: Option<String>,
}

/// The launch of activity `a`, when its correlation id has one.
pub fn launch_of(l: &Loaded, a: ActRef) -> Option<Launch> {
    let t = &l.x.trace;
    let corr = if a.is_memop() {
        t.memops.correlation.get(a.index())
    } else {
        t.kernels.correlation.get(a.index())
    };
    let i = l.x.launch_map.launch_of(*corr?)?;
    launch_at(l, i)
}

/// Launch record `i` with the scopes around it.
pub fn launch_at(l: &Loaded, i: u32) -> Option<Launch> {
    let t = &l.x.trace;
    let li = i as usize;
    if li >= t.launches.len {
        return None;
    }
    let forest = &l.x.forest;
    let scope = l.x.launch_map.launch_scope.get(li).copied().unwrap_or(NONE);
    let name = |kind| {
        let id = if scope == NONE {
            NONE
        } else {
            forest.nearest(scope, kind)
        };
        (id != NONE).then(|| t.strings.get(forest.nodes[id as usize].name).to_owned())
    };
    Some(Launch {
        index: i,
        api: t.strings.get(t.launches.name[li]).to_owned(),
        tid: t.launches.tid[li],
        start_ns: t.launches.host_start_ns[li],
        end_ns: t.launches.host_end_ns[li],
        op: name(ScopeKind::Op),
        module: name(ScopeKind::Module),
    })
}

/// "launched by cudaLaunchKernel on thread 851 · op aten::mm · module nn.Module: Mlp_3".
pub fn describe_launch(w: &Launch) -> String {
    let mut s = format!("launched by {} on thread {}", w.api, w.tid);
    if let Some(op) = &w.op {
        s += &format!("\nop {op}");
    }
    if let Some(m) = &w.module {
        s += &format!("\nmodule {m}");
    }
    s
}

/// Where a thread's track was drawn this frame: its band's first row.
fn thread_row(l: &Loaded, tracks: &[(TrackKey, Rect, f32)], tid: u64) -> Option<Rect> {
    let hi = l.x.lanes.host.iter().position(|h| h.tid == tid)?;
    let key = l
        .tracks
        .iter()
        .find(|t: &&Track| t.body == TrackBody::Thread(hi))?
        .key;
    tracks
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, band, h)| Rect::from_min_size(band.min, vec2(band.width(), *h)))
}

/// Draws the arrows of the selected activity (and of the box selection's activities when
/// asked) from their launches; returns how many were drawn.
pub fn paint(
    painter: &Painter,
    l: &Loaded,
    st: &TimelineState,
    x_of: &dyn Fn(i64) -> f32,
    lane_left: f32,
) -> usize {
    let Some(g) = &st.geometry else { return 0 };
    let mut acts: Vec<ActRef> = Vec::new();
    match (&st.selected, &st.flows.back) {
        (Some(Hit::Activity(a)), _) => acts.push(*a),
        // At a launch jumped to from its kernel: that kernel's arrow.
        (Some(Hit::Launch(_)), Some((Hit::Activity(a), _, _))) => acts.push(*a),
        _ => {}
    }
    if st.flows.range
        && let Some(sel) = &st.selection
    {
        for &li in &sel.lanes {
            let Some(lane) = l.x.lanes.gpu.get(li) else {
                continue;
            };
            let r = lane.overlapping(sel.sums.t0_ns, sel.sums.t1_ns);
            acts.extend(lane.act[r].iter().take(MAX_RANGE_FLOWS));
        }
        acts.truncate(MAX_RANGE_FLOWS);
    }
    let mut n = 0;
    for a in acts {
        let Some(w) = launch_of(l, a) else { continue };
        let Some(d) = l.x.detail(a) else { continue };
        let lane =
            l.x.lanes
                .gpu
                .iter()
                .position(|g| g.device == d.device && g.stream == d.stream);
        let Some(to_row) = lane.and_then(|li| g.gpu_rows.iter().find(|(i, _)| *i == li)) else {
            continue;
        };
        let Some(from_row) = thread_row(l, &g.tracks, w.tid) else {
            continue;
        };
        let from = Pos2::new(x_of(w.start_ns).max(lane_left), from_row.center().y);
        let to = Pos2::new(x_of(d.start_ns).max(lane_left), to_row.1.center().y);
        arrow(painter, from, to, crate::palette::FLOW);
        // The launch call itself, as a mark on the thread's row.
        let x1 = x_of(w.end_ns).max(from.x + 2.0);
        painter.rect_filled(
            Rect::from_x_y_ranges(from.x..=x1, from_row.y_range()),
            0.0,
            crate::palette::FLOW,
        );
        n += 1;
    }
    n
}

/// An arrow from `a` to `b` with its head at `b`.
fn arrow(p: &Painter, a: Pos2, b: Pos2, c: Color32) {
    p.line_segment([a, b], Stroke::new(1.5, c));
    let dir = (b - a).normalized();
    let side = vec2(-dir.y, dir.x);
    p.add(Shape::convex_polygon(
        vec![b, b - dir * 8.0 + side * 4.0, b - dir * 8.0 - side * 4.0],
        c,
        Stroke::NONE,
    ));
}
