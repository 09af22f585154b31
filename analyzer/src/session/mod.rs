//! The one way to analyse traces, whatever the front end: a [`Run`] (or a [`RunSet`]) and
//! one typed [`SessionSettings`] go in; an [`AnalyzedRun`] comes out with its tables and the
//! report derived from them. The CLI keeps only its flags and its standard-input spool, the
//! explorer its worker thread and level of detail; Python (`python/src/trace.rs`) calls the
//! same functions.
//!
//! ```text
//! Knobs ─resolve─► SessionSettings ─┐
//! Run (path, rank, clock offset) ───┴─► import_run ─► analyze_run ─► AnalyzedRun
//!                                                                     ├ tables (steps, step × bucket,
//!                                                                     │   idle gaps, step scopes, names,
//!                                                                     │   activities on demand)
//!                                                                     └ report, diff, what-if, gate
//! ```

pub mod ranks;
pub mod run;
pub mod settings;

use gapscope_traces::Trace;

pub use run::{RankSource, Run, RunSet};
pub use settings::{Knobs, SessionSettings};

use crate::analysis::host::HostIndex;
use crate::analysis::steps::Steps;
use crate::analysis::{Analyzed, Report, analyze_tables};
use crate::diff::{DiffSide, NameTimes};
use crate::error::Result;
use crate::import::{ImportProgress, Imported, InputFormat, import_trace};
use crate::tables::{ActivityTable, Tables};

/// One analysed run: its trace, the tables and the report made from them.
pub struct AnalyzedRun {
    pub run: Run,
    pub format: InputFormat,
    pub trace: Trace,
    pub tables: Tables,
    pub report: Report,
    /// The steps as detected, with how they were found.
    pub steps: Steps,
    /// The host scope forest and launch map.
    pub host: HostIndex,
    /// Every name's time over the report's steps, for diffs.
    pub names: NameTimes,
}

impl AnalyzedRun {
    /// Every kernel and memop with its bucket, step, rank and role.
    pub fn activities(&self) -> ActivityTable {
        ActivityTable::build(&self.trace, &self.tables)
    }

    /// This run as one side of a diff.
    pub fn diff_side(&self) -> DiffSide<'_> {
        DiffSide {
            report: &self.report,
            names: &self.names,
        }
    }
}

/// Imports `run`'s trace as `settings` say and puts it on the run's clock.
pub fn import_run(
    run: &Run,
    settings: &SessionSettings,
    progress: &dyn ImportProgress,
) -> Result<Imported> {
    let mut imported = import_trace(&run.path, &settings.import, progress)?;
    run.align(&mut imported.trace);
    check_graph_capture(&imported.trace, settings)?;
    Ok(imported)
}

/// Refuses a graph-capture trace that maps none of `trace`'s graph replays (another model,
/// another batch size, or a trace that replays no graph), with the reason.
fn check_graph_capture(trace: &Trace, settings: &SessionSettings) -> Result<()> {
    use crate::analysis::graph_capture::CaptureMap;
    match settings.analysis.graph_capture.as_deref() {
        Some(c) => match CaptureMap::build(trace, c).refusal() {
            Some(why) => Err(crate::error::AnalyzerError::Invalid(why)),
            None => Ok(()),
        },
        None => Ok(()),
    }
}

/// Analyses an imported trace of `run` in place: the tables, the report from them (naming
/// the run) and every name's time.
pub fn analyze(
    run: &Run,
    imported: &Imported,
    settings: &SessionSettings,
) -> (Analyzed, NameTimes) {
    let mut a = analyze_tables(imported, &settings.rules, &settings.analysis, run.rank);
    if let Some(c) = a.report.communication.as_mut() {
        use crate::analysis::ranks::collectives::{collectives_of, message_floor};
        let colls = collectives_of(&imported.trace, &a.tables);
        c.floor = message_floor(&imported.trace, &a.tables, &colls, None);
    }
    if let Some(label) = &run.label {
        a.report.source.path = label.clone();
    } else {
        a.report
            .source
            .set_input_path(&run.path.display().to_string());
    }
    let names = NameTimes::of(&a.report, &a.tables, &imported.trace.strings);
    (a, names)
}

/// Analyses an imported trace of `run`: the tables, then the report from them.
pub fn analyze_run(run: Run, imported: Imported, settings: &SessionSettings) -> AnalyzedRun {
    let (
        Analyzed {
            report,
            tables,
            steps,
            host,
        },
        names,
    ) = analyze(&run, &imported, settings);
    AnalyzedRun {
        run,
        format: imported.format,
        trace: imported.trace,
        tables,
        report,
        steps,
        host,
        names,
    }
}

/// Imports and analyses `run`.
pub fn open_run(
    run: Run,
    settings: &SessionSettings,
    progress: &dyn ImportProgress,
) -> Result<AnalyzedRun> {
    let imported = import_run(&run, settings, progress)?;
    Ok(analyze_run(run, imported, settings))
}

/// Imports and analyses a trace of `run` held in memory (a Kineto JSON or gzip, an nsys
/// export); `run.path` names it.
pub fn open_bytes(
    run: Run,
    bytes: &[u8],
    settings: &SessionSettings,
    progress: &dyn ImportProgress,
) -> Result<AnalyzedRun> {
    let mut imported = crate::import::import_bytes(
        &run.path.display().to_string(),
        bytes,
        &settings.import,
        progress,
    )?;
    run.align(&mut imported.trace);
    check_graph_capture(&imported.trace, settings)?;
    Ok(analyze_run(run, imported, settings))
}

/// Runs analysed with one set of settings.
pub struct Session {
    pub settings: SessionSettings,
    pub runs: Vec<AnalyzedRun>,
}

impl Session {
    pub fn new(settings: SessionSettings) -> Self {
        Self {
            settings,
            runs: Vec::new(),
        }
    }

    /// Opens every run of `set`, in order.
    pub fn open(
        set: RunSet,
        settings: SessionSettings,
        progress: &dyn ImportProgress,
    ) -> Result<Self> {
        let mut s = Self::new(settings);
        for run in set.runs {
            s.add(run, progress)?;
        }
        Ok(s)
    }

    /// Opens one more run; returns its index.
    pub fn add(&mut self, run: Run, progress: &dyn ImportProgress) -> Result<usize> {
        self.runs.push(open_run(run, &self.settings, progress)?);
        Ok(self.runs.len() - 1)
    }
}
