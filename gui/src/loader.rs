//! Opening a trace off the UI thread: import (with byte progress), analysis, lanes and the
//! level of detail run on a worker; the UI polls the shared [`Progress`] and never blocks.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use gapscope_analyzer::diff::whatif::{LeverSet, WhatIfOutput};
use gapscope_analyzer::explore::{Exploration, KernelTable, Stage, explore};
use gapscope_analyzer::import::ImportProgress;
use gapscope_analyzer::session::{self, Run, SessionSettings};

use gapscope_analyzer::explore::Spans;

use crate::lod::{LaneLod, Longest};
use crate::tracks::{ThreadInfo, Track, tracks};
use crate::views::step_names::StepNames;

/// A trace ready to draw.
pub struct Loaded {
    pub x: Arc<Exploration>,
    /// The kernel table, built after the timeline is shown (empty until then).
    pub kernel_table: Arc<OnceLock<KernelTable>>,
    /// One per GPU lane, same order as `x.lanes.gpu`.
    pub lods: Vec<LaneLod>,
    /// The longest-item index of each host row (per host lane, per depth) and marker row.
    pub host_longest: Vec<Vec<Longest>>,
    pub marker_longest: Vec<Vec<Longest>>,
    /// The steps as a timeline row (start-sorted, with the running end), its longest-step
    /// index, and every step's name in the numbering the CLI shares.
    pub step_spans: Spans,
    pub step_longest: Longest,
    pub step_names: StepNames,
    /// The timeline's tracks in their natural order (host threads grouped by process,
    /// busiest first), and the kind of trace their layout is kept for.
    pub tracks: Vec<Track>,
    pub layout_kind: String,
    /// Seconds from the start of the open to the data being ready.
    pub load_s: f64,
    /// Seconds per stage (import, analysis, lanes, kernel table, level of detail).
    pub stages_s: Vec<(&'static str, f64)>,
    /// The engine's lever what-if, made when first shown (or why there is none).
    pub levers: OnceLock<Result<WhatIfOutput, String>>,
}

/// What the worker has done so far, read by the UI every frame.
#[derive(Default)]
pub struct Progress {
    pub bytes_done: AtomicU64,
    pub bytes_total: AtomicU64,
    /// 0: importing; then 1 + the [`Stage`] index; 10: level of detail.
    pub stage: AtomicU8,
    pub result: Mutex<Option<Result<Loaded, String>>>,
}

impl Progress {
    /// (fraction done when known, what is happening).
    pub fn status(&self) -> (Option<f32>, &'static str) {
        match self.stage.load(Ordering::Relaxed) {
            0 => {
                let t = self.bytes_total.load(Ordering::Relaxed);
                let d = self.bytes_done.load(Ordering::Relaxed);
                ((t > 0).then(|| (d as f32 / t as f32).min(1.0)), "importing")
            }
            1 => (None, Stage::Analysing.label()),
            2 => (None, Stage::Lanes.label()),
            _ => (None, "building the level of detail"),
        }
    }

    pub fn take(&self) -> Option<Result<Loaded, String>> {
        self.result.lock().ok()?.take()
    }
}

pub(crate) struct Bytes<'a>(pub(crate) &'a Progress);

impl ImportProgress for Bytes<'_> {
    fn start(&self, total: Option<u64>) {
        self.0
            .bytes_total
            .store(total.unwrap_or(0), Ordering::Relaxed);
    }
    fn advance(&self, n: u64) {
        self.0.bytes_done.fetch_add(n, Ordering::Relaxed);
    }
}

impl Loaded {
    /// The hybrid engine's lever what-if, as `gapscope diff TRACE --what-if hybrid` makes it.
    pub fn levers(&self) -> &Result<WhatIfOutput, String> {
        self.levers.get_or_init(|| {
            self.x
                .lever_what_if(LeverSet::Hybrid)
                .map_err(|e| one_line(&e.to_string()))
        })
    }

    pub fn kernel_table(&self) -> Option<&KernelTable> {
        self.kernel_table.get()
    }

    /// Builds the kernel table on the calling thread (unless it exists).
    pub fn build_kernel_table(&self) {
        build_table(&self.x, &self.kernel_table);
    }
}

/// Builds the kernel table into `slot`; a panic (a bug) leaves an empty table rather than
/// a view that waits forever.
pub(crate) fn build_table(x: &Exploration, slot: &OnceLock<KernelTable>) {
    slot.get_or_init(|| {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            KernelTable::build(&x.trace, &x.tables.kernel_bucket, &x.tables.memop_bucket)
        }))
        .unwrap_or_default()
    });
}

/// Imports and analyses `path` on the calling thread (the kernel table stays to build).
pub fn load_blocking(path: &Path, s: &SessionSettings, p: &Progress) -> Result<Loaded, String> {
    let t0 = Instant::now();
    let run = Run::new(path);
    let imported = session::import_run(&run, s, &Bytes(p)).map_err(|e| one_line(&e.to_string()))?;
    let marks = Mutex::new(vec![("import", t0.elapsed().as_secs_f64())]);
    let stage = |st: Stage| {
        let (code, prev) = match st {
            Stage::Analysing => (1, None),
            Stage::Lanes => (2, Some("analysis")),
        };
        if let (Some(name), Ok(mut m)) = (prev, marks.lock()) {
            m.push((name, t0.elapsed().as_secs_f64()));
        }
        p.stage.store(code, Ordering::Relaxed);
    };
    let x = explore(&run, imported, s, &stage);
    let mut marks = marks.into_inner().unwrap_or_default();
    marks.push(("lanes", t0.elapsed().as_secs_f64()));
    p.stage.store(10, Ordering::Relaxed);
    Ok(ready(x, marks, t0))
}

/// An exploration ready to draw: its level of detail built; `marks` are the stages so far
/// (name, seconds since `t0` at its end).
pub fn ready(x: Exploration, mut marks: Vec<(&'static str, f64)>, t0: Instant) -> Loaded {
    let lods = x.lanes.gpu.iter().map(LaneLod::build).collect();
    let rows = |rows: &[gapscope_analyzer::explore::HostRow]| -> Vec<Longest> {
        rows.iter()
            .map(|r| Longest::build(&r.spans.start_ns, &r.spans.end_ns))
            .collect()
    };
    let host_longest = x.lanes.host.iter().map(|h| rows(&h.rows)).collect();
    let marker_longest = x.lanes.markers.iter().map(|m| rows(&m.rows)).collect();
    let step_spans = Spans::new(
        x.steps.iter().map(|s| s.start_ns).collect(),
        x.steps.iter().map(|s| s.end_ns.max(s.start_ns)).collect(),
    );
    let step_longest = Longest::build(&step_spans.start_ns, &step_spans.end_ns);
    let step_names = StepNames::of(&x.steps, &x.tables);
    let tracks = tracks_of(&x);
    let layout_kind = layout_kind(&x);
    let load_s = t0.elapsed().as_secs_f64();
    marks.push(("level of detail", load_s));
    let mut prev = 0.0;
    let stages_s = marks
        .into_iter()
        .map(|(n, t)| {
            let d = t - prev;
            prev = t;
            (n, d)
        })
        .collect();
    Loaded {
        x: Arc::new(x),
        kernel_table: Arc::default(),
        lods,
        host_longest,
        marker_longest,
        step_spans,
        step_longest,
        step_names,
        tracks,
        layout_kind,
        load_s,
        stages_s,
        levers: OnceLock::new(),
    }
}

/// The tracks of an exploration: its lanes, the host threads with their process and busy
/// time (their outermost scopes).
fn tracks_of(x: &Exploration) -> Vec<Track> {
    let pids = thread_pids(&x.trace);
    let pid_of = |tid: u64| {
        pids.binary_search_by_key(&tid, |p| p.0)
            .map_or(0, |i| pids[i].1)
    };
    let threads: Vec<ThreadInfo> = x
        .lanes
        .host
        .iter()
        .map(|h| ThreadInfo {
            tid: h.tid,
            pid: pid_of(h.tid),
            rows: h.rows.len(),
            busy_ns: h.rows.first().map_or(0, |r| {
                r.spans
                    .start_ns
                    .iter()
                    .zip(&r.spans.end_ns)
                    .map(|(s, e)| e - s)
                    .sum()
            }),
        })
        .collect();
    let markers: Vec<(u32, usize)> = x
        .lanes
        .markers
        .iter()
        .map(|m| (m.device, m.rows.len()))
        .collect();
    let gpu: Vec<(u32, u32)> = x.lanes.gpu.iter().map(|g| (g.device, g.stream)).collect();
    tracks(&markers, &gpu, &threads)
}

/// The kind of trace a layout is kept for: its format, and whether it holds Python stacks.
fn layout_kind(x: &Exploration) -> String {
    let python = x
        .forest
        .nodes
        .iter()
        .any(|n| n.kind == gapscope_traces::ScopeKind::Python);
    format!(
        "{}{}",
        x.report.source.format,
        if python { "-stack" } else { "" }
    )
}

/// Each thread's process, from the scopes and launches recorded on it, sorted by thread.
fn thread_pids(t: &gapscope_traces::Trace) -> Vec<(u64, u32)> {
    let mut seen = std::collections::BTreeMap::new();
    let mut last = None;
    let pairs = (0..t.scopes.len())
        .map(|i| (t.scopes.tid[i], t.scopes.pid[i]))
        .chain((0..t.launches.len).map(|i| (t.launches.tid[i], t.launches.pid[i])));
    // Rows come grouped by thread: the map sees each run of one thread once.
    for p in pairs {
        if last != Some(p) {
            seen.entry(p.0).or_insert(p.1);
            last = Some(p);
        }
    }
    seen.into_iter().collect()
}

/// Starts loading `path` on a worker thread; `done` runs when the result is in `Progress`.
pub fn spawn(path: PathBuf, s: SessionSettings, done: impl Fn() + Send + 'static) -> Arc<Progress> {
    let p = Arc::new(Progress::default());
    let q = Arc::clone(&p);
    let worker = std::thread::Builder::new()
        .name("gapscope-load".into())
        .spawn(move || {
            // A panic in the analysis is a bug, but it must not take the window down.
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                load_blocking(&path, &s, &q)
            }))
            .unwrap_or_else(|_| {
                Err(format!(
                    "{}: the analysis failed (internal error)",
                    path.display()
                ))
            });
            // The timeline goes first; the kernel table follows on this thread.
            let table = r
                .as_ref()
                .ok()
                .map(|l| (Arc::clone(&l.x), Arc::clone(&l.kernel_table)));
            if let Ok(mut slot) = q.result.lock() {
                *slot = Some(r);
            }
            done();
            if let Some((x, slot)) = table {
                build_table(&x, &slot);
                done();
            }
        });
    if let (Err(e), Ok(mut slot)) = (worker, p.result.lock()) {
        *slot = Some(Err(format!("cannot start a loader thread: {e}")));
    }
    p
}

/// The first line of an error, for the window.
pub fn one_line(s: &str) -> String {
    s.lines().next().unwrap_or("").trim().to_owned()
}
