//! A run's identity: where its trace is, its rank and its clock offset.

use std::path::PathBuf;

use gapscope_traces::Trace;

/// How a run's rank was known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RankSource {
    /// One process: rank 0.
    Alone,
    /// Kineto's `distributedInfo.rank` (torch.distributed).
    Distributed,
    /// The recorded process's `RANK` environment variable (`gapscope-record`'s manifest).
    Environment,
    /// One GPU of a trace that holds several: its device index.
    Device,
    /// The trace's position among the paths given (no rank in the trace).
    Position,
}

impl RankSource {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Alone => "one process",
            Self::Distributed => "distributedInfo",
            Self::Environment => "RANK",
            Self::Device => "GPU index",
            Self::Position => "position",
        }
    }
}

/// One trace of a run set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// The trace file or `.gst` directory.
    pub path: PathBuf,
    /// How reports name the run (`None`: the path as given).
    pub label: Option<String>,
    /// The process's rank in a multi-process run; 0 for one process.
    pub rank: u32,
    /// How the rank was known.
    pub rank_source: RankSource,
    /// Added to every time of the trace, ns, to put it on a common clock with the other
    /// runs of the set (0: as recorded).
    pub clock_offset_ns: i64,
}

impl Run {
    /// A one-process run at `path`, on its own clock.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            label: None,
            rank: 0,
            rank_source: RankSource::Alone,
            clock_offset_ns: 0,
        }
    }

    /// The name reports give the run.
    pub fn name(&self) -> String {
        self.label
            .clone()
            .unwrap_or_else(|| self.path.display().to_string())
    }

    /// Moves every time of `t` by the run's clock offset.
    pub fn align(&self, t: &mut Trace) {
        let d = self.clock_offset_ns;
        if d == 0 {
            return;
        }
        // `i64::MIN` is "unknown" (a marker without a GPU or host time): it stays so.
        let shift = |v: &mut Vec<i64>| {
            v.iter_mut()
                .filter(|x| **x != i64::MIN)
                .for_each(|x| *x = x.saturating_add(d))
        };
        shift(&mut t.kernels.gpu_start_ns);
        shift(&mut t.kernels.gpu_end_ns);
        shift(&mut t.memops.gpu_start_ns);
        shift(&mut t.memops.gpu_end_ns);
        shift(&mut t.launches.host_start_ns);
        shift(&mut t.launches.host_end_ns);
        shift(&mut t.markers.host_start_ns);
        shift(&mut t.markers.host_end_ns);
        shift(&mut t.markers.gpu_start_ns);
        shift(&mut t.markers.gpu_end_ns);
        shift(&mut t.samples.host_ns);
        shift(&mut t.scopes.host_start_ns);
        shift(&mut t.scopes.host_end_ns);
    }
}

/// The runs analysed together: one trace per rank of one run, or the runs being compared.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSet {
    pub runs: Vec<Run>,
}

impl RunSet {
    /// One run per path, each rank 0 on its own clock.
    pub fn of_paths<P: Into<PathBuf>>(paths: impl IntoIterator<Item = P>) -> Self {
        Self {
            runs: paths.into_iter().map(Run::new).collect(),
        }
    }
}
