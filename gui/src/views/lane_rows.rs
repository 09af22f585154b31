//! What the timeline's rows hold, as the row painter reads it: a GPU lane's kernels and
//! memops coloured by bucket, a marker or host-scope row, and the steps.

use egui::{Color32, Mesh, Rect};
use gapscope_analyzer::Bucket;
use gapscope_analyzer::explore::{GpuLane, HostRow, Spans};
use gapscope_traces::{ScopeKind, StrId};

use super::format;
use super::row_paint::{Mapper, RowSource};
use crate::loader::Loaded;
use crate::lod::{LaneLod, Longest};
use crate::palette;

pub struct GpuRow<'a> {
    pub l: &'a Loaded,
    pub lane: &'a GpuLane,
    pub lod: &'a LaneLod,
    /// Kernel name whose instances are highlighted (the kernel table's choice).
    pub highlight: Option<StrId>,
    /// The search's matches on this lane, sorted lane indices (None: no search).
    pub found: Option<&'a [u32]>,
}

impl GpuRow<'_> {
    fn name_id(&self, i: usize) -> StrId {
        let a = self.lane.act[i];
        let t = &self.l.x.trace;
        if a.is_memop() {
            t.memops.name[a.index()]
        } else {
            t.kernels.name[a.index()]
        }
    }
    fn marked(&self) -> bool {
        self.highlight.is_some() || self.found.is_some()
    }
    fn is_marked(&self, i: usize) -> bool {
        self.highlight.is_some_and(|h| self.name_id(i) == h)
            || self
                .found
                .is_some_and(|f| f.binary_search(&(i as u32)).is_ok())
    }
}

impl RowSource for GpuRow<'_> {
    fn spans(&self) -> &Spans {
        &self.lane.spans
    }
    fn color(&self, i: usize) -> Color32 {
        let c = palette::bucket(self.lane.bucket[i]);
        if !self.marked() {
            c
        } else if self.is_marked(i) {
            palette::HIGHLIGHT
        } else {
            palette::dim(c)
        }
    }
    fn label(&self, i: usize) -> String {
        gapscope_analyzer::text::short(self.l.x.trace.strings.get(self.name_id(i)))
    }
    fn run_color(&self, i: usize, j: usize) -> Color32 {
        let c = palette::bucket(self.lod.dominant(self.lane, i, j));
        match self.found {
            // A folded run holding a match is drawn as a match, so none hides in a fold.
            Some(f)
                if f[f.partition_point(|&x| (x as usize) < i)..]
                    .first()
                    .is_some_and(|&x| (x as usize) < j) =>
            {
                palette::HIGHLIGHT
            }
            _ if self.marked() => palette::dim(c),
            _ => c,
        }
    }
    fn longest(&self, i: usize, j: usize) -> Option<usize> {
        (j > i).then(|| self.lod.longest(self.lane, i, j))
    }
    fn run_label(&self, i: usize, j: usize) -> String {
        let s = self.lod.summary(self.lane, i, j);
        format!(
            "{} × {}",
            format::count(s.count as u64),
            Bucket::ALL[s.dominant as usize].as_str()
        )
    }
}

pub struct ScopeRowSrc<'a> {
    pub l: &'a Loaded,
    pub row: &'a HostRow,
    pub markers: bool,
    pub longest: Option<&'a Longest>,
    /// The search's matches on this row (sorted row indices), when a search is on.
    pub found: Option<&'a [u32]>,
}

impl ScopeRowSrc<'_> {
    pub fn name(&self, i: usize) -> &str {
        let id = self.row.id[i] as usize;
        let t = &self.l.x.trace;
        if self.markers {
            t.strings.get(t.markers.name[id])
        } else {
            t.strings.get(self.l.x.forest.nodes[id].name)
        }
    }
    fn kind(&self, i: usize) -> ScopeKind {
        if self.markers {
            ScopeKind::Annotation
        } else {
            self.l.x.forest.nodes[self.row.id[i] as usize].kind
        }
    }
}

impl RowSource for ScopeRowSrc<'_> {
    fn spans(&self) -> &Spans {
        &self.row.spans
    }
    fn color(&self, i: usize) -> Color32 {
        let c = palette::scope(self.kind(i));
        match self.found {
            Some(f) if f.binary_search(&(i as u32)).is_ok() => palette::HIGHLIGHT,
            Some(_) => palette::dim(c),
            None => c,
        }
    }
    fn label(&self, i: usize) -> String {
        self.name(i).to_owned()
    }
    fn longest(&self, i: usize, j: usize) -> Option<usize> {
        let idx = self.longest?;
        (j > i).then(|| idx.of(&self.row.spans.start_ns, &self.row.spans.end_ns, i, j))
    }
    fn run_color(&self, i: usize, _j: usize) -> Color32 {
        palette::dim(palette::scope(self.kind(i)))
    }
    fn run_label(&self, i: usize, j: usize) -> String {
        let what = if self.markers { "markers" } else { "scopes" };
        format!("{} {what}", format::count((j - i) as u64))
    }
    /// Every marker and scope wider than a pixel is drawn (an NVTX step range among them).
    fn min_px(&self) -> f64 {
        1.0
    }
}

/// The steps lane: every step wider than a pixel drawn, runs of narrower ones folded with
/// their count.
pub struct StepRowSrc<'a> {
    pub l: &'a Loaded,
}

impl RowSource for StepRowSrc<'_> {
    fn spans(&self) -> &Spans {
        &self.l.step_spans
    }
    fn color(&self, i: usize) -> Color32 {
        palette::phase(self.l.x.steps[i].phase)
    }
    fn label(&self, i: usize) -> String {
        let s = &self.l.x.steps[i];
        let name = self.l.step_names.label(i);
        if s.draft_forwards > 0 {
            format!(
                "{name} · {} drafts, verify · {} tokens",
                s.draft_forwards, s.tokens
            )
        } else {
            name
        }
    }
    fn run_color(&self, _i: usize, _j: usize) -> Color32 {
        palette::FOLDED_STEPS
    }
    fn run_label(&self, i: usize, j: usize) -> String {
        format!("{} steps", format::count((j - i) as u64))
    }
    fn longest(&self, i: usize, j: usize) -> Option<usize> {
        let s = &self.l.step_spans;
        (j > i).then(|| self.l.step_longest.of(&s.start_ns, &s.end_ns, i, j))
    }
    fn min_px(&self) -> f64 {
        1.0
    }
    fn numbered_labels(&self) -> bool {
        true
    }
    /// A speculative step's draft window then its verify forward; a stall's red top edge.
    fn decorate(&self, i: usize, r: Rect, m: &Mapper, mesh: &mut Mesh) {
        let s = &self.l.x.steps[i];
        if s.draft_forwards > 0 {
            let v = m.sx(s.verify_start_ns).clamp(r.left(), r.right());
            mesh.add_colored_rect(
                Rect::from_x_y_ranges(r.left()..=v, r.y_range()),
                palette::DRAFT,
            );
            mesh.add_colored_rect(
                Rect::from_x_y_ranges(v..=r.right(), r.y_range()),
                palette::VERIFY,
            );
        }
        if s.stall {
            mesh.add_colored_rect(
                Rect::from_x_y_ranges(r.x_range(), r.top()..=r.top() + 3.0),
                palette::STALL,
            );
        }
    }
}
