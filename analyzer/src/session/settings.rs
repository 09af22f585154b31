//! One typed set of analysis settings, resolved from the knobs a user sets the same way in
//! every front end (the CLI's flags, the explorer's options, later Python's arguments).

use std::path::PathBuf;
use std::sync::Arc;

use gapscope_traces::KERNEL_ANALYSIS_COLUMNS;

use crate::analysis::host::GroupBy;
use crate::analysis::{AnalysisSettings, DEFAULT_MAX_STEPS};
use crate::error::{AnalyzerError, Result};
use crate::import::ImportOptions;
use crate::rules::RuleSet;

/// The knobs that change what an analysis finds. Every front end exposes each one.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Knobs {
    /// Extra bucket rules (TOML), tried before the built-in ones.
    pub rules_file: Option<PathBuf>,
    /// Marker names that delimit steps (a regex), instead of the automatic choice.
    pub step_regex: Option<String>,
    /// Ignore markers and annotations; find steps from the periodic kernel sequence.
    pub no_markers: bool,
    /// Load what a truncated JSON or gzip file holds instead of refusing it.
    pub allow_truncated: bool,
    /// The most events an import loads (`None`: the default; `Some(0)`: no limit).
    pub max_events: Option<u64>,
    /// The most steps analysed (`None`: the default; `Some(0)`: no limit).
    pub max_steps: Option<usize>,
    /// Names listed per bucket in the report (`None`: 3). Display only: the diff and the
    /// tables always see every name.
    pub top: Option<usize>,
    /// Group GPU and host time per step by this key too.
    pub group_by: Option<GroupBy>,
    /// Load every kernel column (the explorer shows launch geometry); otherwise only those
    /// the analysis reads.
    pub all_columns: bool,
    /// Where a private copy of an input may be made when it cannot be read in place.
    pub scratch_dir: Option<PathBuf>,
    /// An engine's speculative-decoding counters (vLLM or SGLang logs, vLLM's Prometheus
    /// text), for traces that do not show acceptance.
    pub spec_metrics: Option<PathBuf>,
    /// The trace the engine's profiler wrote while it captured its CUDA graphs (vLLM's
    /// `capture_traces/`, SGLang's `--enable-profile-cuda-graph`): graph-replayed kernels
    /// are then put on the ops and modules around their capture-time launches.
    pub graph_capture: Option<PathBuf>,
}

/// Rules, analysis settings and import options: what a session needs to open a run.
#[derive(Clone)]
pub struct SessionSettings {
    pub rules: Arc<RuleSet>,
    pub analysis: AnalysisSettings,
    pub import: ImportOptions,
}

impl Default for SessionSettings {
    fn default() -> Self {
        Self::resolve(&Knobs::default()).unwrap_or_else(|_| Self {
            rules: Arc::new(RuleSet::builtin()),
            analysis: AnalysisSettings::default(),
            import: ImportOptions::default(),
        })
    }
}

impl SessionSettings {
    /// The settings `k` describes: reads the rules file, compiles the step regex.
    pub fn resolve(k: &Knobs) -> Result<Self> {
        let rules = match &k.rules_file {
            Some(p) => RuleSet::with_user_file(p)?,
            None => RuleSet::builtin(),
        };
        let mut analysis = AnalysisSettings::default();
        if let Some(re) = &k.step_regex {
            analysis.steps.regex = regex::Regex::new(re).map_err(|e| {
                AnalyzerError::Invalid(format!("step regex {re:?} is not a valid regex: {e}"))
            })?;
        }
        analysis.steps.ignore_markers = k.no_markers;
        analysis.max_steps = match k.max_steps {
            None => Some(DEFAULT_MAX_STEPS),
            Some(0) => None,
            Some(n) => Some(n),
        };
        analysis.top_per_bucket = k.top.unwrap_or(3);
        if let Some(p) = &k.spec_metrics {
            analysis.spec_metrics = Some(read_spec_metrics(p)?);
        }
        analysis.group_by = k.group_by;
        let mut kernel_columns: Option<Vec<String>> = (!k.all_columns).then(|| {
            KERNEL_ANALYSIS_COLUMNS
                .iter()
                .map(|s| s.to_string())
                .collect()
        });
        // Grouping by the engine's op or layer reads those columns.
        if k.group_by.is_some()
            && let Some(cols) = &mut kernel_columns
        {
            for c in ["op", "layer"] {
                if !cols.iter().any(|x| x == c) {
                    cols.push(c.to_owned());
                }
            }
        }
        Self {
            rules: Arc::new(rules),
            analysis,
            import: ImportOptions {
                kernel_columns,
                allow_truncated: k.allow_truncated,
                max_events: k.max_events.map(|n| if n == 0 { u64::MAX } else { n }),
                scratch_dir: k.scratch_dir.clone(),
            },
        }
        .with_graph_capture(k.graph_capture.as_deref())
    }
}

impl SessionSettings {
    /// These settings with the engine's graph-capture trace at `path` (`None`: without
    /// one): `--by` then puts the kernels each graph replays on the ops and modules around
    /// the launches made while it was captured. Reads and indexes the file; an unreadable
    /// file, or one that holds no capture, is an error.
    pub fn with_graph_capture(mut self, path: Option<&std::path::Path>) -> Result<Self> {
        self.analysis.graph_capture = match path {
            None => None,
            Some(p) => {
                let opts = ImportOptions {
                    kernel_columns: None,
                    ..self.import.clone()
                };
                Some(Arc::new(
                    crate::analysis::graph_capture::GraphCapture::open(p, &opts)?,
                ))
            }
        };
        Ok(self)
    }
}

/// The counters in the file at `p` (at most 64 MiB read).
fn read_spec_metrics(p: &std::path::Path) -> Result<crate::analysis::spec::SpecMetrics> {
    use std::io::Read;
    const MAX: u64 = 64 << 20;
    let f = std::fs::File::open(p)
        .map_err(|e| AnalyzerError::Invalid(format!("--spec-metrics {}: {e}", p.display())))?;
    let mut bytes = Vec::new();
    f.take(MAX)
        .read_to_end(&mut bytes)
        .map_err(|e| AnalyzerError::Invalid(format!("--spec-metrics {}: {e}", p.display())))?;
    let text = String::from_utf8_lossy(&bytes);
    crate::analysis::spec::metrics::parse(&text)
        .map_err(|e| AnalyzerError::Invalid(format!("--spec-metrics {}: {e}", p.display())))
}
