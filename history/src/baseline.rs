//! The gate's baseline of stored runs: per-metric samples taken from the accepted runs' rows
//! (each run's median, so the bootstrap sees the run-to-run spread), and the check that
//! stored values that are not finite numbers leave something to judge against.

use gapscope_analyzer::bucket::Bucket;
use gapscope_analyzer::gate::{BucketSamples, RunsBaseline};

use crate::{History, Result, RunBucket, RunSummary};

/// The gate's baseline from `runs` (from [`History::accepted_buckets`], newest first): each
/// bucket's samples are the runs' median ms/step and calls per step, TPOT's the runs' median
/// TPOT; a figure stored as NULL or as no finite number is left out.
pub fn baseline(runs: &[(RunSummary, Vec<RunBucket>)]) -> RunsBaseline {
    RunsBaseline {
        runs: runs.iter().map(|(r, _)| r.id).collect(),
        gpus: runs.iter().map(|(r, _)| r.gpu.clone()).collect(),
        tpot_ms: runs.iter().filter_map(|(r, _)| r.tpot_median_ms).collect(),
        time_per_token_ms: runs
            .iter()
            .filter_map(|(r, _)| r.time_per_token_ms)
            .collect(),
        buckets: Bucket::ALL
            .iter()
            .filter_map(|&bk| {
                let rows: Vec<&RunBucket> = runs
                    .iter()
                    .filter_map(|(_, b)| b.iter().find(|x| x.bucket == bk.as_str()))
                    .collect();
                (!rows.is_empty()).then(|| BucketSamples {
                    bucket: bk,
                    ms_per_step: rows.iter().filter_map(|x| x.ms_per_step_median).collect(),
                    calls_per_step: rows.iter().filter_map(|x| x.calls_per_step).collect(),
                })
            })
            .collect(),
    }
}

impl History {
    /// Whether `runs` (from [`History::accepted_buckets`]) make a usable gate baseline, as
    /// [`baseline`] builds it from their finite figures. An error
    /// when stored non-finite values leave a judged figure (TPOT, a bucket's ms/step) with no
    /// finite value in any run, or nothing finite at all: the gate would judge against
    /// nothing. Otherwise a warning naming the runs whose non-finite values were left out, if
    /// any.
    pub fn check_baseline(&self, runs: &[(RunSummary, Vec<RunBucket>)]) -> Result<Option<String>> {
        let bad: Vec<String> = runs
            .iter()
            .filter(|(r, b)| !r.invalid.is_empty() || b.iter().any(|x| !x.invalid.is_empty()))
            .map(|(r, _)| r.id.to_string())
            .collect();
        if bad.is_empty() {
            return Ok(None);
        }
        let mut lost = Vec::new();
        if runs
            .iter()
            .any(|(r, _)| r.invalid.contains(&"tpot_median_ms"))
            && runs.iter().all(|(r, _)| r.tpot_median_ms.is_none())
        {
            lost.push("TPOT".to_owned());
        }
        for bk in Bucket::ALL {
            let rows: Vec<&RunBucket> = runs
                .iter()
                .filter_map(|(_, b)| b.iter().find(|x| x.bucket == bk.as_str()))
                .collect();
            if rows
                .iter()
                .any(|x| x.invalid.contains(&"ms_per_step_median"))
                && rows.iter().all(|x| x.ms_per_step_median.is_none())
            {
                lost.push(format!("{} ms/step", bk.as_str()));
            }
        }
        let any_finite = runs.iter().any(|(r, b)| {
            r.tpot_median_ms.is_some() || b.iter().any(|x| x.ms_per_step_median.is_some())
        });
        let runs_named = format!(
            "accepted run{} {} store{} figures that are not finite numbers",
            if bad.len() == 1 { "" } else { "s" },
            bad.join(", "),
            if bad.len() == 1 { "s" } else { "" }
        );
        if !any_finite {
            return Err(self.ctx.fail(&format!(
                "no usable baseline: {runs_named}, and no finite figure is left"
            )));
        }
        if !lost.is_empty() {
            return Err(self.ctx.fail(&format!(
                "no usable baseline: {runs_named}, and no finite value is left for {}",
                lost.join(", ")
            )));
        }
        Ok(Some(format!(
            "history {}: {runs_named}; they were left out of the baseline",
            self.ctx.name
        )))
    }
}
