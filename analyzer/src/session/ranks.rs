//! Several traces as the ranks of one run: the paths a user gives expanded (a directory's
//! traces, a recording's per-process traces), each trace's rank read from the trace itself
//! (Kineto `distributedInfo`, the recorded process's `RANK`), and the decision whether the
//! traces are ranks of one run or runs to report one by one.

use std::path::{Path, PathBuf};

use super::{AnalyzedRun, RankSource, Run, SessionSettings, analyze_run, import_run};
use crate::analysis::ranks::RankDigest;
use crate::error::{AnalyzerError, Result};
use crate::import::{ImportProgress, Imported, InputFormat};

/// Traces opened together at most (every one is held in memory until the ranks are
/// analysed).
pub const MAX_TRACES: usize = 1024;

/// A trace path to open, and whether the user named it or it was found by expansion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePath {
    pub path: PathBuf,
    /// Found inside a directory or beside a recording; dropped when it holds no GPU work
    /// (the launcher process of a recording).
    pub found: bool,
}

/// How traces given together are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RankMode {
    /// As the ranks of one run when every trace names a rank and no two name the same;
    /// otherwise one by one.
    #[default]
    Auto,
    /// As the ranks of one run; a trace that names no rank takes its position.
    Ranks,
    /// One by one.
    Separate,
}

fn is_trace_file(p: &Path) -> bool {
    let n = p
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if p.is_dir() {
        return p.join("manifest.json").is_file();
    }
    [".json", ".json.gz", ".sqlite"]
        .iter()
        .any(|s| n.ends_with(s))
}

/// `run.pid123.gst` beside `run.gst`: the recording's per-process traces.
fn process_siblings(gst: &Path) -> Vec<PathBuf> {
    let (Some(dir), Some(name)) = (gst.parent(), gst.file_name()) else {
        return Vec::new();
    };
    let name = name.to_string_lossy();
    let Some(stem) = name.strip_suffix(".gst") else {
        return Vec::new();
    };
    let prefix = format!("{stem}.pid");
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let pid: u64 = n
                .strip_prefix(&prefix)?
                .strip_suffix(".gst")?
                .parse()
                .ok()?;
            let p = gst.with_file_name(&n);
            p.join("manifest.json").is_file().then_some((pid, p))
        })
        .collect();
    out.sort();
    out.into_iter().map(|(_, p)| p).collect()
}

/// The traces `paths` stand for: a directory that is not a `.gst` trace gives its trace
/// files and `.gst` directories (sorted by name); a recording `run.gst` with per-process
/// traces `run.pidN.gst` beside it gives them too.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<TracePath>> {
    let mut out = Vec::new();
    for p in paths {
        let native = p.join("manifest.json").is_file();
        if p.is_dir() && !native {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| AnalyzerError::io(p, e))?
                .flatten()
                .map(|e| e.path())
                .filter(|q| is_trace_file(q))
                .collect();
            found.sort();
            if found.is_empty() {
                return Err(AnalyzerError::Unsupported {
                    path: p.clone(),
                    message: "a directory with no trace in it (.json, .json.gz, .sqlite, .gst)"
                        .into(),
                });
            }
            out.extend(
                found
                    .into_iter()
                    .map(|path| TracePath { path, found: true }),
            );
            continue;
        }
        let siblings = if native {
            process_siblings(p)
        } else {
            Vec::new()
        };
        out.push(TracePath {
            path: p.clone(),
            found: !siblings.is_empty(),
        });
        out.extend(
            siblings
                .into_iter()
                .map(|path| TracePath { path, found: true }),
        );
    }
    // A path named twice (a directory and a file in it) is opened once.
    let mut seen = std::collections::HashSet::new();
    out.retain(|t| seen.insert(t.path.clone()));
    Ok(out)
}

/// The rank a trace names and how.
fn named_rank(imported: &Imported) -> Option<(u32, RankSource)> {
    let m = &imported.trace.manifest;
    match m.ranks.as_slice() {
        [r] => Some((
            *r,
            if imported.format == InputFormat::Native {
                RankSource::Environment
            } else {
                RankSource::Distributed
            },
        )),
        _ => None,
    }
}

/// Opened traces, and whether they are the ranks of one run.
pub struct OpenedSet {
    /// In the order given (ranks: by rank).
    pub runs: Vec<AnalyzedRun>,
    pub as_ranks: bool,
    /// Files found by expansion and left out, and why.
    pub left_out: Vec<(PathBuf, LeftOut)>,
}

/// Why a file found in a directory or beside a recording was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeftOut {
    /// A trace with no kernel or memory operation (a recording's launcher process).
    NoGpuWork,
    /// Not a trace gapscope reads (the importer's reason).
    NotATrace(String),
}

impl LeftOut {
    pub fn describe(&self) -> String {
        match self {
            Self::NoGpuWork => "no GPU work in it (a launcher process)".to_owned(),
            Self::NotATrace(why) => format!("not a trace ({why})"),
        }
    }
}

/// Runs `f` on every item on up to `jobs` threads; results in the items' order.
fn parallel<T: Sync, R: Send>(items: &[T], jobs: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out: Vec<std::sync::Mutex<Option<R>>> =
        items.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, items.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    if let Ok(mut slot) = out[i].lock() {
                        *slot = Some(r);
                    }
                }
            });
        }
    });
    out.into_iter()
        .filter_map(|m| m.into_inner().ok().flatten())
        .collect()
}

/// Progress of several imports at once: their bytes add up on one bar.
struct Shared<'a>(&'a dyn ImportProgress);

impl ImportProgress for Shared<'_> {
    fn advance(&self, bytes: u64) {
        self.0.advance(bytes);
    }
}

/// One imported part of a trace (the whole trace, or one GPU of it) and the rank it names.
type Part = (Run, Imported, Option<(u32, RankSource)>);

/// Per trace: its parts or why it was left out, or the import's error.
type Imports = Vec<Result<std::result::Result<Vec<Part>, LeftOut>>>;

/// The traces `paths` stand for, checked against the limit, the progress started on their
/// bytes.
fn prepare(paths: &[PathBuf], progress: &dyn ImportProgress) -> Result<Vec<TracePath>> {
    let traces = expand(paths)?;
    if traces.len() > MAX_TRACES {
        return Err(AnalyzerError::Limit {
            path: paths.first().cloned().unwrap_or_default(),
            message: format!(
                "{} traces given or found; at most {MAX_TRACES} are opened together",
                traces.len()
            ),
        });
    }
    let bytes: Option<u64> = traces
        .iter()
        .map(|t| {
            std::fs::metadata(&t.path)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len())
        })
        .sum();
    progress.start(bytes);
    Ok(traces)
}

/// Imports one trace: its parts (one per GPU when its kernels ran on several and it names
/// no rank, unless `mode` reads traces one by one), or why it was left out.
fn import_parts(
    t: &TracePath,
    mode: RankMode,
    settings: &SessionSettings,
    progress: &dyn ImportProgress,
) -> Result<std::result::Result<Vec<Part>, LeftOut>> {
    let run = Run::new(&t.path);
    let imported = match import_run(&run, settings, progress) {
        Ok(x) => x,
        // A file found in a directory that is not a trace at all (a JSON of notes) is left
        // out and named; a broken trace stays an error.
        Err(AnalyzerError::Unsupported { message, .. }) if t.found => {
            return Ok(Err(LeftOut::NotATrace(message)));
        }
        Err(e) => return Err(e),
    };
    if t.found && imported.trace.kernels.len == 0 && imported.trace.memops.len == 0 {
        return Ok(Err(LeftOut::NoGpuWork));
    }
    let split = (mode != RankMode::Separate && imported.trace.manifest.ranks.len() != 1)
        .then(|| split_by_device(&imported.trace))
        .flatten();
    Ok(Ok(match split {
        Some(gpus) => gpus
            .into_iter()
            .map(|(d, trace)| {
                let r = Run {
                    label: Some(format!("{} (GPU {d})", run.path.display())),
                    ..run.clone()
                };
                let part = Imported {
                    trace,
                    format: imported.format,
                    warnings: imported.warnings.clone(),
                    defects: imported.defects.clone(),
                };
                (r, part, Some((d, RankSource::Device)))
            })
            .collect(),
        None => {
            let named = named_rank(&imported);
            vec![(run, imported, named)]
        }
    }))
}

/// Whether parts naming `named` are the ranks of one run (`mode`), and then each part's
/// rank and how it was known (a part naming none takes the first free rank).
fn decide(
    mode: RankMode,
    named: &[Option<(u32, RankSource)>],
) -> Result<Option<Vec<(u32, RankSource)>>> {
    let distinct = {
        let mut v: Vec<u32> = named.iter().flatten().map(|x| x.0).collect();
        v.sort_unstable();
        let n = v.len();
        v.dedup();
        v.len() == n
    };
    let as_ranks = match mode {
        RankMode::Separate => false,
        RankMode::Auto => named.len() > 1 && named.iter().all(Option::is_some) && distinct,
        RankMode::Ranks => {
            if !distinct {
                return Err(AnalyzerError::Invalid(
                    "two traces name the same rank: they are not ranks of one run".into(),
                ));
            }
            true
        }
    };
    if !as_ranks {
        return Ok(None);
    }
    let taken: Vec<u32> = named.iter().flatten().map(|x| x.0).collect();
    let mut free = (0u32..).filter(|r| !taken.contains(r));
    Ok(Some(
        named
            .iter()
            .map(|n| match n {
                Some(x) => *x,
                None => (free.next().unwrap_or(0), RankSource::Position),
            })
            .collect(),
    ))
}

/// Imports every trace `paths` stand for, `jobs` at a time, into their parts.
fn import_all(
    paths: &[PathBuf],
    mode: RankMode,
    jobs: usize,
    settings: &SessionSettings,
    progress: &dyn ImportProgress,
) -> Result<(Vec<TracePath>, Imports)> {
    let traces = prepare(paths, progress)?;
    let shared = Shared(progress);
    let imported = parallel(&traces, jobs, |t| import_parts(t, mode, settings, &shared));
    progress.finish();
    Ok((traces, imported))
}

/// Imports and analyses every trace `paths` stand for, `jobs` traces at a time, and decides
/// whether they are the ranks of one run (`mode`); each run's `rank` and `rank_source` say
/// what was decided. Every trace stays in memory: see [`open_digests`] for a run of many
/// ranks.
pub fn open_set(
    paths: &[PathBuf],
    mode: RankMode,
    jobs: usize,
    settings: &SessionSettings,
    progress: &dyn ImportProgress,
) -> Result<OpenedSet> {
    let (traces, imported) = import_all(paths, mode, jobs, settings, progress)?;
    let mut parts: Vec<Part> = Vec::new();
    let mut left_out = Vec::new();
    for (t, r) in traces.iter().zip(imported) {
        match r? {
            Ok(p) => parts.extend(p),
            Err(why) => left_out.push((t.path.clone(), why)),
        }
    }
    if parts.is_empty() {
        return Err(no_gpu_work(paths));
    }
    let named: Vec<Option<(u32, RankSource)>> = parts.iter().map(|p| p.2).collect();
    let ranks = decide(mode, &named)?;
    let mut opened: Vec<(Run, Imported)> = parts.into_iter().map(|(r, i, _)| (r, i)).collect();
    if let Some(ranks) = &ranks {
        for ((run, _), (rank, source)) in opened.iter_mut().zip(ranks) {
            run.rank = *rank;
            run.rank_source = *source;
        }
        opened.sort_by_key(|(r, _)| r.rank);
    }
    let slots: Vec<std::sync::Mutex<Option<(Run, Imported)>>> = opened
        .into_iter()
        .map(|x| std::sync::Mutex::new(Some(x)))
        .collect();
    let runs = parallel(&slots, jobs, |slot| {
        let taken = slot.lock().ok().and_then(|mut s| s.take());
        taken.map(|(run, imported)| analyze_run(run, imported, settings))
    })
    .into_iter()
    .flatten()
    .collect();
    Ok(OpenedSet {
        runs,
        as_ranks: ranks.is_some(),
        left_out,
    })
}

fn no_gpu_work(paths: &[PathBuf]) -> AnalyzerError {
    AnalyzerError::Unsupported {
        path: paths.first().cloned().unwrap_or_default(),
        message: "no trace with GPU work in it".into(),
    }
}

/// Traces opened as [`open_set`] does, each digested right after its own analysis and its
/// trace dropped: memory holds `jobs` traces at a time and the digests, whatever the rank
/// count.
pub struct DigestSet {
    /// Each trace's (part's) report, in the order of `digests`.
    pub reports: Vec<crate::analysis::Report>,
    pub digests: Vec<RankDigest>,
    pub as_ranks: bool,
    pub left_out: Vec<(PathBuf, LeftOut)>,
}

/// [`open_set`] for a run of many ranks: every trace is imported, analysed and digested on
/// one of `jobs` threads, and only its report and digest are kept. The cause of a
/// straggler reads traces again ([`reopen`]).
pub fn open_digests(
    paths: &[PathBuf],
    mode: RankMode,
    jobs: usize,
    settings: &SessionSettings,
    progress: &dyn ImportProgress,
) -> Result<DigestSet> {
    let traces = prepare(paths, progress)?;
    let shared = Shared(progress);
    let hint = traces.len() as u32;
    type Digested = (
        crate::analysis::Report,
        RankDigest,
        Option<(u32, RankSource)>,
    );
    let done = parallel(&traces, jobs, |t| {
        import_parts(t, mode, settings, &shared).map(|r| {
            r.map(|parts| {
                parts
                    .into_iter()
                    .map(|(mut run, imported, named)| {
                        run.rank = named.map_or(0, |x| x.0);
                        let a = analyze_run(run, imported, settings);
                        let d = RankDigest::of(&a, hint);
                        (a.report, d, named)
                    })
                    .collect::<Vec<Digested>>()
            })
        })
    });
    progress.finish();
    let mut kept: Vec<Digested> = Vec::new();
    let mut left_out = Vec::new();
    for (t, r) in traces.iter().zip(done) {
        match r? {
            Ok(p) => kept.extend(p),
            Err(why) => left_out.push((t.path.clone(), why)),
        }
    }
    if kept.is_empty() {
        return Err(no_gpu_work(paths));
    }
    let named: Vec<Option<(u32, RankSource)>> = kept.iter().map(|k| k.2).collect();
    let ranks = decide(mode, &named)?;
    if let Some(ranks) = &ranks {
        for ((_, d, _), (rank, source)) in kept.iter_mut().zip(ranks) {
            d.run.rank = *rank;
            d.run.rank_source = *source;
        }
        kept.sort_by_key(|k| k.1.run.rank);
    }
    let (reports, digests) = kept.into_iter().map(|(r, d, _)| (r, d)).unzip();
    Ok(DigestSet {
        reports,
        digests,
        as_ranks: ranks.is_some(),
        left_out,
    })
}

/// Opens one rank's trace again as it was opened in its set (one GPU of a trace split by
/// GPU included).
pub fn reopen(run: &Run, settings: &SessionSettings) -> Result<AnalyzedRun> {
    let mut imported = import_run(run, settings, &crate::import::NoProgress)?;
    if run.rank_source == RankSource::Device {
        let part = split_by_device(&imported.trace)
            .and_then(|g| g.into_iter().find(|(d, _)| *d == run.rank))
            .ok_or_else(|| {
                AnalyzerError::Invalid(format!(
                    "{}: no GPU {} in it any more",
                    run.path.display(),
                    run.rank
                ))
            })?;
        imported.trace = part.1;
    }
    Ok(analyze_run(run.clone(), imported, settings))
}

/// A trace whose kernels ran on several GPUs (an nsys export of a whole `torchrun`, one
/// process driving several GPUs), as one trace per GPU: its kernels, memory operations,
/// GPU-side markers and samples, and the host rows (launches, scopes, host ranges) of the
/// threads that launched its kernels. `None` when the kernels ran on one GPU.
pub fn split_by_device(t: &gapscope_traces::Trace) -> Option<Vec<(u32, gapscope_traces::Trace)>> {
    use std::collections::{HashMap, HashSet};
    let k = &t.kernels;
    let mut devices: Vec<u32> = k
        .device
        .iter()
        .copied()
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    devices.sort_unstable();
    if devices.len() < 2 {
        return None;
    }
    // The launching thread of each kernel, by correlation id.
    let l = &t.launches;
    let mut by_corr: HashMap<u64, u64> = HashMap::new();
    for i in 0..l.len {
        by_corr.insert(l.correlation[i], l.tid[i]);
    }
    let world = devices.len() as u32;
    let out = devices
        .iter()
        .map(|&d| {
            let keep_k: Vec<bool> = k.device.iter().map(|&x| x == d).collect();
            let tids: HashSet<u64> = (0..k.len)
                .filter(|&i| keep_k[i])
                .filter_map(|i| by_corr.get(&k.correlation[i]).copied())
                .collect();
            let m = &t.memops;
            let keep_m: Vec<bool> = m.device.iter().map(|&x| x == d).collect();
            let keep_l: Vec<bool> = l.tid.iter().map(|x| tids.contains(x)).collect();
            let mk = &t.markers;
            // GPU-side ranges by their device; host ranges by the launching threads.
            let keep_mk: Vec<bool> = (0..mk.len)
                .map(|i| {
                    if mk.gpu_start_ns[i] != i64::MIN {
                        mk.device[i] == d
                    } else {
                        tids.contains(&mk.tid[i])
                    }
                })
                .collect();
            let sc = &t.scopes;
            let keep_sc: Vec<bool> = sc.tid.iter().map(|x| tids.contains(x)).collect();
            let sa = &t.samples;
            let keep_sa: Vec<bool> = sa.device.iter().map(|&x| x == d).collect();
            let mut manifest = t.manifest.clone();
            manifest.ranks = vec![d];
            manifest.world_size = Some(world);
            manifest.notes.push(format!(
                "GPU {d} of a trace whose kernels ran on {world} GPUs"
            ));
            let scopes = sc.select(&keep_sc);
            // Input shapes point at scope rows: kept only when no scope was dropped.
            let input_dims = if scopes.len == sc.len {
                t.input_dims.clone()
            } else {
                Default::default()
            };
            let part = gapscope_traces::Trace {
                manifest,
                strings: t.strings.clone(),
                kernels: k.select(&keep_k),
                memops: m.select(&keep_m),
                launches: l.select(&keep_l),
                markers: mk.select(&keep_mk),
                samples: sa.select(&keep_sa),
                scopes,
                input_dims,
            };
            (d, part)
        })
        .collect();
    Some(out)
}
