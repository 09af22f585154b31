//! Opening several traces (or a directory) at once, off the UI thread, the way the CLI
//! does: `session::ranks::open_set` decides whether they are the ranks of one run; if so
//! the multi-rank analysis and its lanes are made too. Each trace then becomes a document
//! of its own, as when opened alone.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use gapscope_analyzer::analysis::ranks::{RanksReport, RanksTables, analyze_ranks};
use gapscope_analyzer::explore::Exploration;
use gapscope_analyzer::explore::ranks::{RankLanes, exploration_of};
use gapscope_analyzer::import::ImportProgress;
use gapscope_analyzer::session::ranks::{RankMode, open_set};
use gapscope_analyzer::session::{AnalyzedRun, SessionSettings};

use crate::loader::{Bytes, Loaded, Progress, build_table, one_line, ready};

/// The ranks of one run, ready to draw.
pub struct RanksLoaded {
    pub lanes: RankLanes,
    pub report: RanksReport,
    pub tables: RanksTables,
    /// Each rank's exploration, in lane order (for kernel names).
    pub runs: Vec<Arc<Exploration>>,
}

/// What a set load gives: one document per trace, and the ranks when they are one run.
pub struct SetLoaded {
    pub docs: Vec<(PathBuf, Loaded)>,
    pub ranks: Option<RanksLoaded>,
    /// Files found in a directory and left out, and why.
    pub left_out: Vec<String>,
}

/// How a set load ended.
pub enum SetResult {
    Loaded(Box<SetLoaded>),
    /// The set could not be opened as a whole (a trace failed): open each path alone, so
    /// each shows its own error.
    OneByOne(String),
}

/// Whether `paths` are opened as a set: several of them, or a directory that is not a
/// native trace.
pub fn is_set(paths: &[PathBuf]) -> bool {
    paths.len() > 1
        || paths
            .iter()
            .any(|p| p.is_dir() && !p.join("manifest.json").is_file())
}

/// A set load in progress: its bytes and stage, and its result when done.
pub struct SetLoad {
    pub paths: Vec<PathBuf>,
    pub progress: Arc<Progress>,
    pub result: Arc<Mutex<Option<SetResult>>>,
}

impl SetLoad {
    pub fn take(&self) -> Option<SetResult> {
        self.result.lock().ok()?.take()
    }
}

/// Import progress of the whole set; once every trace is imported, the stage is analysis.
struct SetBytes<'a>(Bytes<'a>);

impl ImportProgress for SetBytes<'_> {
    fn start(&self, total: Option<u64>) {
        self.0.start(total);
    }
    fn advance(&self, n: u64) {
        self.0.advance(n);
    }
    fn finish(&self) {
        self.0.0.stage.store(1, Ordering::Relaxed);
    }
}

fn label(run: &AnalyzedRun) -> PathBuf {
    run.run
        .label
        .as_ref()
        .map_or_else(|| run.run.path.clone(), PathBuf::from)
}

/// Opens `paths` as a set on the calling thread.
pub fn load_set_blocking(paths: &[PathBuf], s: &SessionSettings, p: &Progress) -> SetResult {
    let t0 = Instant::now();
    let jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let set = match open_set(paths, RankMode::Auto, jobs, s, &SetBytes(Bytes(p))) {
        Ok(set) => set,
        Err(e) => return SetResult::OneByOne(one_line(&e.to_string())),
    };
    let analysed = t0.elapsed().as_secs_f64();
    p.stage.store(2, Ordering::Relaxed);
    let left_out = set
        .left_out
        .iter()
        .map(|(path, why)| format!("{}: left out, {}", path.display(), why.describe()))
        .collect();
    let ranks = set.as_ranks.then(|| {
        let refs: Vec<&AnalyzedRun> = set.runs.iter().collect();
        let a = analyze_ranks(&refs);
        let lanes = RankLanes::build(&refs, &a);
        (lanes, a.report, a.tables)
    });
    p.stage.store(10, Ordering::Relaxed);
    let docs: Vec<(PathBuf, Loaded)> = set
        .runs
        .into_iter()
        .map(|run| {
            let path = label(&run);
            let marks = vec![("import and analysis", analysed)];
            (path, ready(exploration_of(run), marks, t0))
        })
        .collect();
    let ranks = ranks.map(|(lanes, report, tables)| RanksLoaded {
        // As ranks, the runs come sorted by rank, as the lanes do.
        runs: docs.iter().map(|(_, d)| Arc::clone(&d.x)).collect(),
        lanes,
        report,
        tables,
    });
    SetResult::Loaded(Box::new(SetLoaded {
        docs,
        ranks,
        left_out,
    }))
}

/// Starts opening `paths` as a set on a worker thread; `done` runs when the result is in.
pub fn spawn_set(
    paths: Vec<PathBuf>,
    s: SessionSettings,
    done: impl Fn() + Send + 'static,
) -> SetLoad {
    let progress = Arc::new(Progress::default());
    let result: Arc<Mutex<Option<SetResult>>> = Arc::default();
    let (p, r, ps) = (Arc::clone(&progress), Arc::clone(&result), paths.clone());
    let worker = std::thread::Builder::new()
        .name("gapscope-load-set".into())
        .spawn(move || {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                load_set_blocking(&ps, &s, &p)
            }))
            .unwrap_or_else(|_| {
                SetResult::OneByOne(format!(
                    "{}: the analysis failed (internal error)",
                    first(&ps).display()
                ))
            });
            let tables: Vec<_> = match &out {
                SetResult::Loaded(l) => l
                    .docs
                    .iter()
                    .map(|(_, d)| (Arc::clone(&d.x), Arc::clone(&d.kernel_table)))
                    .collect(),
                SetResult::OneByOne(_) => Vec::new(),
            };
            if let Ok(mut slot) = r.lock() {
                *slot = Some(out);
            }
            done();
            for (x, slot) in tables {
                build_table(&x, &slot);
            }
            done();
        });
    if let (Err(e), Ok(mut slot)) = (worker, result.lock()) {
        *slot = Some(SetResult::OneByOne(format!(
            "cannot start a loader thread: {e}"
        )));
    }
    SetLoad {
        paths,
        progress,
        result,
    }
}

fn first(paths: &[PathBuf]) -> &Path {
    paths.first().map_or(Path::new(""), PathBuf::as_path)
}
