//! A baseline of stored runs: per-metric samples a run history builds from its rows.

use super::*;

/// A baseline of stored runs: per-metric samples, one per run (each run's median), so the
/// bootstrap sees the run-to-run spread. A run history builds it from its rows;
/// [`gate_runs`] judges a trace against it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunsBaseline {
    /// The runs' ids, as the history lists them.
    pub runs: Vec<i64>,
    /// Each run's GPUs as stored (names joined by `; `, empty when its trace named none), in
    /// the order of `runs`.
    pub gpus: Vec<String>,
    /// The runs' median TPOTs, ms: one sample per run that stores a finite one.
    pub tpot_ms: Vec<f64>,
    /// Speculative runs: their time per token, ms (empty when the runs decode plainly).
    pub time_per_token_ms: Vec<f64>,
    /// The buckets any run stores, each once.
    pub buckets: Vec<BucketSamples>,
}

/// One bucket's samples in a [`RunsBaseline`]: one per run that stores the bucket with a
/// finite figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BucketSamples {
    pub bucket: Bucket,
    /// The runs' median ms/step. Empty when no run stores a finite one: the bucket is then
    /// zero in each run.
    pub ms_per_step: Vec<f64>,
    /// The runs' calls per step.
    pub calls_per_step: Vec<f64>,
}

impl RunsBaseline {
    /// How the gate report names this baseline.
    pub fn describe(&self) -> String {
        let ids: Vec<String> = self.runs.iter().map(i64::to_string).collect();
        format!(
            "history: median of {} accepted runs ({})",
            self.runs.len(),
            ids.join(", ")
        )
    }

    /// The GPU the runs were recorded on, for the GPU check against a current trace on
    /// `current`: that GPU when every run's list names it, else the first run's list that
    /// does not (`None` when that run named none); without a current GPU, the first list.
    pub fn gpu(&self, current: Option<&str>) -> Option<String> {
        match current {
            Some(name) => self.gpus.iter().find(|g| !g.contains(name)).map_or_else(
                || Some(name.to_owned()),
                |g| (!g.is_empty()).then(|| g.clone()),
            ),
            None => self.gpus.iter().find(|g| !g.is_empty()).cloned(),
        }
    }

    /// Calls per step of a bucket: the runs' mean, 0 where none stores it.
    pub(super) fn calls(&self, b: Bucket) -> f64 {
        self.buckets
            .iter()
            .find(|x| x.bucket == b)
            .map_or(0.0, |x| mean(&x.calls_per_step))
    }
}
