// Long on purpose: the policy, one metric's judgement, the step and structural checks against a
// trace or a baseline of stored runs all build one GateReport.
//! CI gate: compares per-bucket per-step distributions of a baseline and a current trace
//! with a bootstrap confidence interval on the median difference, a minimum effect size and
//! a noise floor from the baseline's own step-to-step spread, plus structural checks.

use serde::{Deserialize, Serialize};

use crate::analysis::Report;
use crate::analysis::plausibility::PlausibilityProblem;
use crate::analysis::stats::{self, mean, percentile_nearest_sorted};
use crate::analysis::steps::StepSource;
use crate::bucket::Bucket;
use crate::diff::{DiffSide, NameTimes, diff};

/// Version of the JSON gate schema.
pub const GATE_SCHEMA_VERSION: u32 = 1;

/// Gate policy (`--policy gate.toml`); every field has a default.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Smallest relative change of a bucket's median ms/step that counts, e.g. 0.03 = 3%.
    pub min_effect: f64,
    /// Confidence level of the bootstrap interval.
    pub confidence: f64,
    pub bootstrap_resamples: usize,
    /// Seed of the bootstrap, so a verdict is reproducible.
    pub seed: u64,
    /// Buckets below this share of the baseline's busy time per step on both sides (and idle
    /// metrics below this share of the baseline's step) are reported but never fail; a bucket
    /// that was below it and grows past it is judged.
    pub min_share: f64,
    /// Flag more kernels per step than the baseline by more than this.
    pub max_extra_kernels_per_step: f64,
    /// Flag fewer kernels per step than this share of the baseline's (a run that lost its
    /// GPU work, or whose steps were cut wrong).
    pub min_kernels_ratio: f64,
    /// Also gate the step time (TPOT) and the idle split (launch gaps, host gaps).
    pub gate_step_time: bool,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            min_effect: 0.03,
            confidence: 0.95,
            bootstrap_resamples: 1000,
            seed: 0x5eed,
            min_share: 0.005,
            max_extra_kernels_per_step: 0.5,
            min_kernels_ratio: 0.5,
            gate_step_time: true,
        }
    }
}

impl Policy {
    /// Reads a policy file (TOML, at most [`crate::config_file::MAX_CONFIG_BYTES`]) and checks
    /// its values; errors name the file and the field.
    pub fn from_file(p: &std::path::Path) -> crate::error::Result<Self> {
        use crate::config_file::{MAX_CONFIG_BYTES, parse_toml, read_config};
        let text = read_config(p, "policy", MAX_CONFIG_BYTES)?;
        let policy: Policy = parse_toml(p, &text, "policy")?;
        policy
            .validate()
            .map_err(|e| crate::error::AnalyzerError::parse(p, format!("invalid policy: {e}")))?;
        Ok(policy)
    }

    /// Checks every value's range; the error names the field and its allowed range.
    pub fn validate(&self) -> Result<(), String> {
        let range = |name: &str, v: f64, lo: f64, hi: f64| {
            if v.is_finite() && v >= lo && v <= hi {
                Ok(())
            } else {
                Err(format!("{name} = {v} is outside {lo}..={hi}"))
            }
        };
        range("min_effect", self.min_effect, 0.0, 10.0)?;
        range("confidence", self.confidence, 0.5, 0.999)?;
        range("min_share", self.min_share, 0.0, 1.0)?;
        range(
            "max_extra_kernels_per_step",
            self.max_extra_kernels_per_step,
            0.0,
            1e6,
        )?;
        range("min_kernels_ratio", self.min_kernels_ratio, 0.0, 1.0)?;
        if !(10..=100_000).contains(&self.bootstrap_resamples) {
            return Err(format!(
                "bootstrap_resamples = {} is outside 10..=100000",
                self.bootstrap_resamples
            ));
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Pass,
    Regression,
    Improvement,
    Inconclusive,
    /// The two traces cannot be compared (the gate refuses; exit 2).
    Incomparable,
}

impl std::fmt::Display for Verdict {
    /// The word every front end shows for the verdict.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // `pad` keeps width and alignment (`{:<13}`) working.
        f.pad(match self {
            Self::Pass => "pass",
            Self::Regression => "REGRESSION",
            Self::Improvement => "improvement",
            Self::Inconclusive => "inconclusive",
            Self::Incomparable => "cannot compare",
        })
    }
}

#[cfg(test)]
mod verdict_word_tests {
    use super::Verdict;

    #[test]
    fn the_verdict_word_pads() {
        assert_eq!(format!("[{:<13}]", Verdict::Regression), "[REGRESSION   ]");
        assert_eq!(Verdict::Incomparable.to_string(), "cannot compare");
    }
}

/// One metric's statistical verdict.
#[derive(Debug, Clone, Serialize)]
pub struct Judgement {
    pub verdict: Verdict,
    pub baseline_median_ms: f64,
    pub current_median_ms: f64,
    /// (current - baseline) / baseline median.
    pub rel_change: f64,
    /// Bootstrap CI of the relative median difference.
    pub ci_low: f64,
    pub ci_high: f64,
    /// The effect threshold used: max(min_effect, baseline noise floor).
    pub threshold: f64,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct BucketVerdict {
    pub bucket: Bucket,
    #[serde(flatten)]
    pub judgement: Judgement,
}

/// A step-time metric the gate judges besides the buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepMetric {
    /// Start-to-start period of consecutive decode steps.
    Tpot,
    /// GPU idle inside a step.
    LaunchGaps,
    /// GPU idle between steps.
    HostGaps,
}

impl StepMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tpot => "TPOT",
            Self::LaunchGaps => "launch gaps",
            Self::HostGaps => "host gaps",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct StepVerdict {
    pub metric: StepMetric,
    #[serde(flatten)]
    pub judgement: Judgement,
}

#[derive(Debug, Clone, Serialize)]
pub struct StructuralCheck {
    pub check: String,
    pub failed: bool,
    pub detail: String,
}

/// Gate settings that are not policy: what the command line may override.
#[derive(Debug, Clone, Copy, Default)]
pub struct GateOptions {
    /// Compare traces that differ in GPU, batch size or step kind, or whose steps look
    /// implausible (the differences are listed, not refused).
    pub allow_incomparable: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct GateReport {
    pub schema_version: u32,
    pub baseline: String,
    pub current: String,
    pub policy: Policy,
    /// Why the traces cannot be compared (GPU, batch size, step kind, implausible or
    /// missing steps). Non-empty means `verdict` is `incomparable`, unless overridden. JSON:
    /// `incomparable`, the clauses, and `incomparable_kinds`, the values.
    #[serde(flatten, serialize_with = "incomparable_fields")]
    pub incomparable: Vec<Incomparability>,
    /// Differences that `allow_incomparable` let through. JSON: `overridden` and
    /// `overridden_kinds`, as `incomparable`.
    #[serde(flatten, serialize_with = "overridden_fields")]
    pub overridden: Vec<Incomparability>,
    /// What a side is missing (truncated, events without times), each naming the side.
    /// Non-empty means the verdict is at best `inconclusive`, never `pass`.
    pub incomplete: Vec<String>,
    /// What makes the verdict less trustworthy without changing it: recordings whose
    /// capture overhead distorts their timings.
    pub warnings: Vec<String>,
    pub steps: Vec<StepVerdict>,
    pub buckets: Vec<BucketVerdict>,
    pub structural: Vec<StructuralCheck>,
    /// `incomparable` when the traces cannot be compared; `regression` when any bucket or
    /// step metric regressed or any structural check failed; `inconclusive` when nothing
    /// regressed but a side is incomplete; else `pass`.
    pub verdict: Verdict,
}

fn incomparable_fields<S: serde::Serializer>(
    v: &[Incomparability],
    s: S,
) -> Result<S::Ok, S::Error> {
    crate::text::texts_and_kinds(v, s, "incomparable", "incomparable_kinds")
}

fn overridden_fields<S: serde::Serializer>(v: &[Incomparability], s: S) -> Result<S::Ok, S::Error> {
    crate::text::texts_and_kinds(v, s, "overridden", "overridden_kinds")
}

/// One side of the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateSide {
    Baseline,
    Current,
}

impl GateSide {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Baseline => "baseline",
            Self::Current => "current",
        }
    }
}

/// How a report's steps are cut, as the comparability check sees it: automatic periodicity
/// detection (whose anchor kernel may differ between runs of one engine) is one cut; steps
/// found otherwise are cut by what found them (the marker ranges and names).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepCut {
    Automatic,
    By { source: StepSource },
}

impl StepCut {
    pub fn of(r: &Report) -> Self {
        if r.steps.source.is_periodic() {
            Self::Automatic
        } else {
            Self::By {
                source: r.steps.source.clone(),
            }
        }
    }
}

impl std::fmt::Display for StepCut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Automatic => f.write_str("automatic periodicity detection"),
            Self::By { source } => source.fmt(f),
        }
    }
}

/// Why two reports cannot be compared; its `Display` is the clause the gate shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Incomparability {
    /// The baseline has no kernels or memops.
    NoBaselineGpuWork,
    /// The baseline has no decode steps.
    NoBaselineDecodeSteps { steps: StepSource },
    /// The stored-runs baseline holds no runs.
    NoBaselineRuns,
    /// The traces name different GPUs.
    GpuDiffers { baseline: String, current: String },
    /// `side` names no GPU (the other names `other`), so the GPU cannot be checked.
    GpuUnnamed { side: GateSide, other: String },
    /// The markers give different batch sizes.
    BatchDiffers { baseline: u32, current: u32 },
    /// The steps are cut differently.
    StepsCutDifferently { baseline: StepCut, current: StepCut },
    /// A side's steps look implausible.
    Implausible {
        side: GateSide,
        problems: Vec<PlausibilityProblem>,
    },
}

impl std::fmt::Display for Incomparability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoBaselineGpuWork => {
                f.write_str("the baseline has no GPU work (no kernels or memops)")
            }
            Self::NoBaselineDecodeSteps { steps } => {
                write!(f, "the baseline has no decode steps ({steps})")
            }
            Self::NoBaselineRuns => f.write_str("the baseline holds no runs"),
            Self::GpuDiffers { baseline, current } => {
                write!(f, "GPU differs (baseline {baseline}, current {current})")
            }
            Self::GpuUnnamed {
                side: GateSide::Current,
                other,
            } => write!(
                f,
                "the current trace names no GPU (baseline {other}), so the GPU cannot be checked"
            ),
            Self::GpuUnnamed {
                side: GateSide::Baseline,
                other,
            } => write!(
                f,
                "the baseline names no GPU (current {other}), so the GPU cannot be checked"
            ),
            Self::BatchDiffers { baseline, current } => {
                write!(
                    f,
                    "batch size differs (baseline {baseline}, current {current})"
                )
            }
            Self::StepsCutDifferently { baseline, current } => write!(
                f,
                "steps are cut differently (baseline: {baseline}; current: {current})"
            ),
            Self::Implausible { side, problems } => write!(
                f,
                "the {}'s steps look implausible: {}",
                side.as_str(),
                crate::analysis::Plausibility::summary_of(problems)
            ),
        }
    }
}

impl GateReport {
    /// One line saying why the verdict is what it is.
    pub fn headline(&self) -> String {
        let line = self.verdict_line();
        // Whatever the verdict, a side that misses work is said.
        if self.incomplete.is_empty() || self.verdict == Verdict::Inconclusive {
            line
        } else {
            format!("{line}; and {}", self.incomplete.join("; "))
        }
    }

    fn verdict_line(&self) -> String {
        match self.verdict {
            Verdict::Incomparable => {
                let why: Vec<String> = self.incomparable.iter().map(|c| c.to_string()).collect();
                format!("cannot compare: {}", why.join("; "))
            }
            Verdict::Regression => {
                let mut why: Vec<String> = self
                    .structural
                    .iter()
                    .filter(|c| c.failed)
                    .map(|c| format!("{}: {}", c.check, c.detail))
                    .collect();
                why.extend(
                    self.steps
                        .iter()
                        .filter(|s| s.judgement.verdict == Verdict::Regression)
                        .map(|s| format!("{} {}", s.metric.as_str(), s.judgement.reason)),
                );
                why.extend(
                    self.buckets
                        .iter()
                        .filter(|b| b.judgement.verdict == Verdict::Regression)
                        .map(|b| format!("{} {}", b.bucket, b.judgement.reason)),
                );
                format!("regression: {}", why.join("; "))
            }
            Verdict::Inconclusive => format!(
                "inconclusive: nothing regressed, but {}",
                self.incomplete.join("; ")
            ),
            _ => "pass: no bucket, step metric or structural check regressed".to_owned(),
        }
    }
}

/// xorshift64*: a small deterministic generator for the bootstrap.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// [`stats::median`], but 0 for an empty side (which [`judge`] calls inconclusive).
fn median(v: &[f64]) -> f64 {
    if v.is_empty() { 0.0 } else { stats::median(v) }
}

/// Bootstrap CI of `median(y) - median(x)` relative to `median(x)`, and the relative
/// half-width of the CI of `median(x)` alone (the baseline's noise floor).
pub fn bootstrap(x: &[f64], y: &[f64], p: &Policy) -> (f64, f64, f64) {
    let mx = median(x);
    if x.is_empty() || y.is_empty() || mx <= 0.0 {
        return (0.0, 0.0, 0.0);
    }
    let mut rng = Rng(p.seed | 1);
    let mut diffs = Vec::with_capacity(p.bootstrap_resamples);
    let mut base = Vec::with_capacity(p.bootstrap_resamples);
    let mut bx = vec![0.0; x.len()];
    let mut by = vec![0.0; y.len()];
    for _ in 0..p.bootstrap_resamples.max(10) {
        for v in bx.iter_mut() {
            *v = x[rng.below(x.len())];
        }
        for v in by.iter_mut() {
            *v = y[rng.below(y.len())];
        }
        let (a, b) = (median(&bx), median(&by));
        diffs.push((b - a) / mx);
        base.push((a - mx) / mx);
    }
    let alpha = (1.0 - p.confidence.clamp(0.5, 0.999)) / 2.0;
    let q = |v: &mut Vec<f64>, f: f64| {
        v.sort_by(f64::total_cmp);
        percentile_nearest_sorted(v, 100.0 * f)
    };
    // A duration cannot fall by more than all of it: with non-negative samples the change
    // is at least -100%, whatever the resampled baseline median was.
    let floor = if x.iter().chain(y).all(|&v| v >= 0.0) {
        -1.0
    } else {
        f64::NEG_INFINITY
    };
    let lo = q(&mut diffs, alpha).max(floor);
    let hi = q(&mut diffs, 1.0 - alpha).max(floor);
    let noise = (q(&mut base, 1.0 - alpha) - q(&mut base, alpha)) / 2.0;
    (lo, hi, noise)
}

/// Judges one metric's per-step samples. `share` is the metric's weight in the baseline
/// (share of busy time for a bucket, of the step for an idle metric): below the policy's
/// `min_share` a metric never fails.
pub fn judge(x: &[f64], y: &[f64], share: f64, p: &Policy) -> Judgement {
    let (mx, my) = (median(x), median(y));
    let rel = if mx > 0.0 {
        (my - mx) / mx
    } else if my > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    let (lo, hi, noise) = bootstrap(x, y, p);
    let threshold = p.min_effect.max(noise);
    let present = |v: &[f64]| v.iter().any(|&t| t > 0.0);
    let (verdict, reason) = if x.is_empty() || y.is_empty() {
        (Verdict::Inconclusive, "no samples on one side".to_owned())
    } else if !x.iter().chain(y).all(|v| v.is_finite()) {
        (
            Verdict::Inconclusive,
            "a sample is not a number (a broken trace or history)".to_owned(),
        )
    } else if !present(x) {
        if present(y) {
            (
                Verdict::Regression,
                "appears in the current trace".to_owned(),
            )
        } else {
            (Verdict::Pass, "absent in both".to_owned())
        }
    } else if !present(y) {
        if share < p.min_share {
            (
                Verdict::Pass,
                format!(
                    "absent from the current trace ({:.2}% of the baseline, below the policy's floor)",
                    100.0 * share
                ),
            )
        } else {
            (
                Verdict::Improvement,
                format!(
                    "absent from the current trace (was {:.2}% of the baseline)",
                    100.0 * share
                ),
            )
        }
    } else if share < p.min_share {
        (
            Verdict::Pass,
            format!(
                "{:.2}% of the baseline, below the policy's floor",
                100.0 * share
            ),
        )
    } else if lo > 0.0 && rel > threshold {
        (
            Verdict::Regression,
            format!(
                "median +{:.1}% (CI {:+.1}%..{:+.1}%) exceeds {:.1}%",
                100.0 * rel,
                100.0 * lo,
                100.0 * hi,
                100.0 * threshold
            ),
        )
    } else if hi < 0.0 && rel < -threshold {
        (
            Verdict::Improvement,
            format!(
                "median {:.1}% (CI {:+.1}%..{:+.1}%) beyond -{:.1}%",
                100.0 * rel,
                100.0 * lo,
                100.0 * hi,
                100.0 * threshold
            ),
        )
    } else if lo >= -threshold && hi <= threshold {
        (
            Verdict::Pass,
            format!(
                "CI {:+.1}%..{:+.1}% within ±{:.1}%",
                100.0 * lo,
                100.0 * hi,
                100.0 * threshold
            ),
        )
    } else if rel.abs() <= threshold && (lo <= 0.0 && hi >= 0.0) {
        (
            Verdict::Pass,
            format!(
                "median {:+.1}% within ±{:.1}%, CI {:+.1}%..{:+.1}% includes 0",
                100.0 * rel,
                100.0 * threshold,
                100.0 * lo,
                100.0 * hi
            ),
        )
    } else {
        (
            Verdict::Inconclusive,
            format!(
                "median {:+.1}%, CI {:+.1}%..{:+.1}% straddles the {:.1}% threshold",
                100.0 * rel,
                100.0 * lo,
                100.0 * hi,
                100.0 * threshold
            ),
        )
    };
    Judgement {
        verdict,
        baseline_median_ms: mx,
        current_median_ms: my,
        rel_change: rel,
        ci_low: lo,
        ci_high: hi,
        threshold,
        reason,
    }
}

/// Whether a report has GPU work to judge.
fn gpu_events(r: &Report) -> usize {
    r.source.kernels + r.source.memops
}

/// Why two reports cannot be compared; empty when they can.
fn comparability(baseline: &Report, current: &Report) -> Vec<Incomparability> {
    let mut out: Vec<Incomparability> = gpu_clause(
        baseline.source.step_gpu.as_deref(),
        current.source.step_gpu.as_deref(),
    )
    .into_iter()
    .collect();
    if let (Some(a), Some(b)) = (baseline.steps.batch_size, current.steps.batch_size)
        && a != b
    {
        out.push(Incomparability::BatchDiffers {
            baseline: a,
            current: b,
        });
    }
    let (ka, kb) = (StepCut::of(baseline), StepCut::of(current));
    if ka != kb {
        out.push(Incomparability::StepsCutDifferently {
            baseline: ka,
            current: kb,
        });
    }
    for (side, r) in [(GateSide::Baseline, baseline), (GateSide::Current, current)] {
        out.extend(implausible(side, r));
    }
    out
}

/// The GPU check's clause, if the GPUs differ or one side names none.
fn gpu_clause(baseline: Option<&str>, current: Option<&str>) -> Option<Incomparability> {
    match (baseline, current) {
        (Some(a), Some(b)) if a != b => Some(Incomparability::GpuDiffers {
            baseline: a.to_owned(),
            current: b.to_owned(),
        }),
        // The GPU check is never skipped silently: one side naming none cannot be checked.
        (Some(a), None) => Some(Incomparability::GpuUnnamed {
            side: GateSide::Current,
            other: a.to_owned(),
        }),
        (None, Some(b)) => Some(Incomparability::GpuUnnamed {
            side: GateSide::Baseline,
            other: b.to_owned(),
        }),
        _ => None,
    }
}

/// The clause for a side whose steps look implausible.
fn implausible(side: GateSide, r: &Report) -> Option<Incomparability> {
    (!r.plausibility.plausible).then(|| Incomparability::Implausible {
        side,
        problems: r.plausibility.problems.clone(),
    })
}

/// Why the current trace cannot be compared with stored runs: the runs store their GPUs, not
/// their batch size or step kind, so the GPU and the current steps' plausibility are checked.
fn runs_comparability(baseline: &RunsBaseline, current: &Report) -> Vec<Incomparability> {
    let gpu = current.source.step_gpu.as_deref();
    gpu_clause(baseline.gpu(gpu).as_deref(), gpu)
        .into_iter()
        .chain(implausible(GateSide::Current, current))
        .collect()
}

/// Runs the gate.
pub fn gate(baseline: &Report, current: &Report, p: &Policy) -> GateReport {
    gate_with(baseline, current, p, GateOptions::default())
}

/// [`gate`] with options.
pub fn gate_with(baseline: &Report, current: &Report, p: &Policy, o: GateOptions) -> GateReport {
    gate_on(Base::Trace(baseline), current, p, o)
}

/// The gate of `current` against stored runs' figures ([`RunsBaseline`]) instead of a
/// trace: each bucket's and TPOT's samples are the runs' medians. What the runs do not store
/// (the idle split, CUDA graph replays, defects, batch size, step kind) is not judged.
pub fn gate_runs(
    baseline: &RunsBaseline,
    current: &Report,
    p: &Policy,
    o: GateOptions,
) -> GateReport {
    gate_on(Base::Runs(baseline), current, p, o)
}

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
    fn calls(&self, b: Bucket) -> f64 {
        self.buckets
            .iter()
            .find(|x| x.bucket == b)
            .map_or(0.0, |x| mean(&x.calls_per_step))
    }
}

/// What the current trace is judged against.
#[derive(Clone, Copy)]
enum Base<'a> {
    Trace(&'a Report),
    Runs(&'a RunsBaseline),
}

fn gate_on(base: Base<'_>, current: &Report, p: &Policy, o: GateOptions) -> GateReport {
    let baseline_gpu = match base {
        Base::Trace(b) => b.source.step_gpu.clone(),
        Base::Runs(b) => b.gpu(current.source.step_gpu.as_deref()),
    };
    let sides: Vec<(&str, &Report)> = match base {
        Base::Trace(b) => vec![("baseline", b), ("current", current)],
        // The current trace's defects and distortion are its own, not the runs'.
        Base::Runs(_) => vec![("current", current)],
    };
    let mut report = GateReport {
        schema_version: GATE_SCHEMA_VERSION,
        baseline: match base {
            Base::Trace(b) => b.source.path.clone(),
            Base::Runs(b) => b.describe(),
        },
        current: current.source.path.clone(),
        policy: p.clone(),
        incomparable: Vec::new(),
        overridden: Vec::new(),
        incomplete: sides
            .iter()
            .flat_map(|(side, r)| {
                r.source
                    .defects
                    .iter()
                    .map(move |d| format!("the {side} trace {}", d.describe()))
            })
            .collect(),
        warnings: sides
            .iter()
            .filter_map(|(side, r)| Some(format!("{side}: {}", r.distortion.as_ref()?.warning())))
            .chain(
                (baseline_gpu.is_none() && current.source.step_gpu.is_none())
                    .then(|| "GPU not checked: neither trace names its GPU".to_owned()),
            )
            .collect(),
        steps: Vec::new(),
        buckets: Vec::new(),
        structural: Vec::new(),
        verdict: Verdict::Pass,
    };
    // A baseline without GPU work or steps is no baseline: nothing can be compared.
    match base {
        Base::Trace(baseline) if gpu_events(baseline) == 0 => {
            report.incomparable.push(Incomparability::NoBaselineGpuWork)
        }
        Base::Trace(baseline) if baseline.steps.decode_steps == 0 => report
            .incomparable
            .push(Incomparability::NoBaselineDecodeSteps {
                steps: baseline.steps.source.clone(),
            }),
        Base::Runs(b) if b.runs.is_empty() => {
            report.incomparable.push(Incomparability::NoBaselineRuns)
        }
        _ => {}
    }
    if !report.incomparable.is_empty() {
        report.verdict = Verdict::Incomparable;
        return report;
    }
    let current_kernels_per_step: f64 = current
        .buckets
        .iter()
        .filter_map(|x| x.calls_per_step)
        .sum();
    let baseline_kernels_per_step = match base {
        Base::Trace(_) => None,
        Base::Runs(b) => Some(Bucket::ALL.iter().map(|&bk| b.calls(bk)).sum::<f64>()),
    };
    // A current run without GPU work or steps lost what the baseline had: a regression.
    let had = match base {
        Base::Trace(b) => format!(
            "{} kernels, {} decode steps",
            b.source.kernels, b.steps.decode_steps
        ),
        Base::Runs(b) => format!(
            "{} runs of {:.1} kernels per step",
            b.runs.len(),
            baseline_kernels_per_step.unwrap_or(0.0)
        ),
    };
    let lost = if gpu_events(current) == 0 {
        Some(format!(
            "the current trace has no GPU work (baseline: {had})"
        ))
    } else if current.steps.decode_steps == 0 {
        Some(format!(
            "the current trace has no decode steps ({}; baseline: {had})",
            current.steps.source
        ))
    } else {
        None
    };
    if let Some(detail) = lost {
        report.structural.push(StructuralCheck {
            check: "GPU work and steps".into(),
            failed: true,
            detail,
        });
        report.verdict = Verdict::Regression;
        return report;
    }
    let differences = match base {
        Base::Trace(b) => comparability(b, current),
        Base::Runs(b) => runs_comparability(b, current),
    };
    if o.allow_incomparable {
        report.overridden = differences;
    } else if !differences.is_empty() {
        report.incomparable = differences;
        report.verdict = Verdict::Incomparable;
        return report;
    }

    // The baseline's per-step samples of each bucket, and how many steps (runs) it has.
    let (rows, baseline_steps): (Vec<(Bucket, &[f64])>, usize) = match base {
        Base::Trace(b) => (
            b.buckets
                .iter()
                .map(|r| (r.bucket, r.per_step_ms.as_slice()))
                .collect(),
            b.steps.decode_steps,
        ),
        Base::Runs(b) => (
            b.buckets
                .iter()
                .map(|r| (r.bucket, r.ms_per_step.as_slice()))
                .collect(),
            b.runs.len(),
        ),
    };
    let current_steps = current.steps.decode_steps;
    // The baseline's busy time per step, the unit of every bucket's weight.
    let busy_per_step: f64 = rows.iter().map(|(_, s)| mean(s)).sum();
    for bk in Bucket::ALL {
        let x = rows.iter().find(|(b, _)| *b == bk).map(|(_, s)| *s);
        let y = current
            .buckets
            .iter()
            .find(|b| b.bucket == bk)
            .map(|b| b.per_step_ms.as_slice());
        let samples = |row: Option<&[f64]>, n: usize| -> Vec<f64> {
            match row {
                Some(s) if !s.is_empty() => s.to_vec(),
                // Absent on this side: zero in each of its steps.
                _ => vec![0.0; n],
            }
        };
        let xs = samples(x, baseline_steps);
        let ys = samples(y, current_steps);
        let present = |s: &[f64]| s.iter().any(|&v| v > 0.0);
        if !present(&xs) && !present(&ys) {
            continue;
        }
        // A bucket weighs what it costs per step on the heavier side, in the baseline's busy
        // time: one that grows from almost nothing (the state copies of a slow lever) is
        // judged, not waved through as small in the baseline.
        let share = if busy_per_step > 0.0 {
            mean(&xs).max(mean(&ys)) / busy_per_step
        } else {
            0.0
        };
        report.buckets.push(BucketVerdict {
            bucket: bk,
            judgement: judge(&xs, &ys, if present(&xs) { share } else { 1.0 }, p),
        });
    }
    if p.gate_step_time {
        report.steps = match base {
            Base::Trace(b) => step_verdicts(b, current, p),
            // The runs keep their median TPOT, not their idle split.
            Base::Runs(b) => judge_steps(
                [(
                    StepMetric::Tpot,
                    b.tpot_ms.as_slice(),
                    current.steps.series.tpot_ms.as_slice(),
                    1.0,
                )],
                p,
            ),
        };
    }

    let (kc, kb, copies, gathers, graphs) = match base {
        Base::Trace(b) => {
            // The gate reads the diff's counts, not its names.
            let none = NameTimes::default();
            let side = |report| DiffSide {
                report,
                names: &none,
            };
            let d = diff(side(current), side(b), 5);
            let st = d.structural;
            // The diff runs current as A against baseline as B.
            (
                st.a_kernels_per_step,
                st.b_kernels_per_step,
                st.extra_copies_per_step,
                st.extra_gathers_per_step,
                StructuralCheck {
                    check: "CUDA graph replays".into(),
                    failed: d.b.graph_kernels > 0 && d.a.graph_kernels == 0,
                    detail: st.graph_replays.to_string(),
                },
            )
        }
        Base::Runs(b) => {
            let calls = |bk: Bucket| {
                let row = current.buckets.iter().find(|x| x.bucket == bk);
                row.and_then(|x| x.calls_per_step).unwrap_or(0.0) - b.calls(bk)
            };
            (
                current_kernels_per_step,
                baseline_kernels_per_step.unwrap_or(0.0),
                calls(Bucket::Copy),
                calls(Bucket::EmbedGather),
                StructuralCheck {
                    check: "CUDA graph replays".into(),
                    failed: false,
                    detail: "not checked: the baseline's runs do not store them".into(),
                },
            )
        }
    };
    report.structural = vec![
        StructuralCheck {
            check: "kernels per step".into(),
            failed: kc - kb > p.max_extra_kernels_per_step || kc < p.min_kernels_ratio * kb,
            detail: if kc < p.min_kernels_ratio * kb {
                format!(
                    "{kc:.1} vs baseline {kb:.1}: fewer than {:.0}% of the baseline's",
                    100.0 * p.min_kernels_ratio
                )
            } else {
                format!("{kc:.1} vs baseline {kb:.1}")
            },
        },
        StructuralCheck {
            check: "new copies per step".into(),
            failed: copies > 0.5,
            detail: format!("{copies:+.1} copy calls per step"),
        },
        StructuralCheck {
            check: "new gathers per step".into(),
            failed: gathers > 0.5,
            detail: format!("{gathers:+.1} gather calls per step"),
        },
        graphs,
    ];
    let failed = report
        .buckets
        .iter()
        .any(|b| b.judgement.verdict == Verdict::Regression)
        || report
            .steps
            .iter()
            .any(|s| s.judgement.verdict == Verdict::Regression)
        || report.structural.iter().any(|s| s.failed);
    report.verdict = if failed {
        Verdict::Regression
    } else if !report.incomplete.is_empty() {
        // A side that misses work cannot vouch for a pass.
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    };
    report
}

/// TPOT and the idle split, judged like the buckets. Idle metrics weigh by their share of
/// the baseline's step, so a 5 µs launch gap that doubles does not fail a 5 ms step.
fn step_verdicts(baseline: &Report, current: &Report, p: &Policy) -> Vec<StepVerdict> {
    let (bs, cs) = (&baseline.steps.series, &current.steps.series);
    // TPOT, or the step spans of a trace that keeps only some steps (no TPOT periods).
    let step_ms = baseline
        .steps
        .tpot_ms
        .or(baseline.steps.decode_span_ms)
        .map(|t| t.mean)
        .unwrap_or(0.0);
    let share = |v: &[f64]| {
        if step_ms > 0.0 {
            mean(v) / step_ms
        } else {
            0.0
        }
    };
    judge_steps(
        [
            (StepMetric::Tpot, &bs.tpot_ms[..], &cs.tpot_ms[..], 1.0),
            (
                StepMetric::LaunchGaps,
                &bs.launch_gap_ms,
                &cs.launch_gap_ms,
                share(&bs.launch_gap_ms),
            ),
            (
                StepMetric::HostGaps,
                &bs.host_gap_ms,
                &cs.host_gap_ms,
                share(&bs.host_gap_ms),
            ),
        ],
        p,
    )
}

/// Judges each step metric's samples, baseline and current, with its weight.
fn judge_steps<const N: usize>(
    metrics: [(StepMetric, &[f64], &[f64], f64); N],
    p: &Policy,
) -> Vec<StepVerdict> {
    metrics
        .into_iter()
        // Metrics a side cannot have (one step: no TPOT; stored runs: no idle split) are
        // left out rather than judged on nothing.
        .filter(|(_, x, y, _)| !x.is_empty() && !y.is_empty())
        .map(|(metric, x, y, w)| StepVerdict {
            metric,
            judgement: judge(x, y, w, p),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incomparability_clauses_read_as_before() {
        use crate::analysis::plausibility::PlausibilityCheck;
        let clauses = [
            Incomparability::GpuUnnamed {
                side: GateSide::Baseline,
                other: "NVIDIA H200".into(),
            },
            Incomparability::StepsCutDifferently {
                baseline: StepCut::Automatic,
                current: StepCut::By {
                    source: StepSource::NotFound,
                },
            },
            Incomparability::Implausible {
                side: GateSide::Current,
                problems: vec![PlausibilityProblem {
                    check: PlausibilityCheck::Coverage,
                    detail: "most work is outside them".into(),
                }],
            },
        ];
        let text: Vec<String> = clauses.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "the baseline names no GPU (current NVIDIA H200), so the GPU cannot be checked",
                "steps are cut differently (baseline: automatic periodicity detection; current: none: no step markers and no periodic kernel sequence)",
                "the current's steps look implausible: most work is outside them",
            ]
        );
    }

    fn noisy(n: usize, base: f64, cv: f64, seed: u64) -> Vec<f64> {
        let mut r = Rng(seed | 1);
        (0..n)
            .map(|_| {
                let u = (r.next() >> 11) as f64 / (1u64 << 53) as f64;
                base * (1.0 + cv * (2.0 * u - 1.0))
            })
            .collect()
    }

    #[test]
    fn intervals_of_durations_never_fall_below_minus_100_percent() {
        let p = Policy::default();
        // A skewed baseline (resampled medians up to 10x its median) against zeros.
        let x = [1.0, 1.0, 1.0, 10.0, 10.0, 10.0];
        let (lo, hi, _) = bootstrap(&x, &[0.0; 6], &p);
        assert!(lo >= -1.0 && hi >= lo, "{lo} {hi}");
        let j = judge(&x, &[f64::NAN, 1.0], 0.5, &p);
        assert_eq!(j.verdict, Verdict::Inconclusive, "{}", j.reason);
    }

    #[test]
    fn stored_runs_name_their_gpu_for_the_gpu_check() {
        let b = RunsBaseline {
            runs: vec![3, 2],
            gpus: vec!["NVIDIA H100 80GB HBM3".into(), String::new()],
            ..RunsBaseline::default()
        };
        assert_eq!(b.describe(), "history: median of 2 accepted runs (3, 2)");
        // The run that does not name the current GPU is the one compared.
        assert_eq!(b.gpu(Some("NVIDIA H100 80GB HBM3")), None);
        assert_eq!(
            b.gpu(Some("NVIDIA A100")).as_deref(),
            Some("NVIDIA H100 80GB HBM3")
        );
        assert_eq!(b.gpu(None).as_deref(), Some("NVIDIA H100 80GB HBM3"));
        let same = RunsBaseline {
            gpus: vec!["A; B".into(), "B".into()],
            ..b
        };
        assert_eq!(same.gpu(Some("B")).as_deref(), Some("B"));
    }

    #[test]
    fn verdicts_on_known_shifts() {
        let p = Policy::default();
        let x = noisy(64, 1.0, 0.01, 1);
        assert_eq!(
            judge(&x, &noisy(64, 1.0, 0.01, 2), 0.5, &p).verdict,
            Verdict::Pass
        );
        assert_eq!(
            judge(&x, &noisy(64, 1.10, 0.01, 3), 0.5, &p).verdict,
            Verdict::Regression
        );
        assert_eq!(
            judge(&x, &noisy(64, 0.90, 0.01, 4), 0.5, &p).verdict,
            Verdict::Improvement
        );
        // A 10% shift inside 60% step-to-step noise with 4 steps cannot be called.
        let v = judge(&noisy(4, 1.0, 0.6, 5), &noisy(4, 1.1, 0.6, 6), 0.5, &p);
        assert_ne!(v.verdict, Verdict::Regression, "{v:?}");
    }
}
