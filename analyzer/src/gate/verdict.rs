//! What the gate answers: verdicts, judgements, the report and the typed clauses of why two
//! runs cannot be compared.

use super::*;

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
    pub(super) fn the_verdict_word_pads() {
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
    /// The baseline's own spread (its noise floor) is wider than the policy's `max_noise`,
    /// and the median moved by more than `min_effect`: the baseline cannot judge the change.
    pub too_noisy: bool,
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
    /// Speculative runs: each step's period over the tokens it produced.
    TimePerToken,
    /// Speculative runs: the share of each step's candidates rejected.
    Rejection,
}

impl StepMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Tpot => "TPOT",
            Self::LaunchGaps => "launch gaps",
            Self::HostGaps => "host gaps",
            Self::TimePerToken => "time per token",
            Self::Rejection => "rejected candidates",
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

pub(super) fn incomparable_fields<S: serde::Serializer>(
    v: &[Incomparability],
    s: S,
) -> Result<S::Ok, S::Error> {
    crate::text::texts_and_kinds(v, s, "incomparable", "incomparable_kinds")
}

pub(super) fn overridden_fields<S: serde::Serializer>(
    v: &[Incomparability],
    s: S,
) -> Result<S::Ok, S::Error> {
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
    /// The runs' models have different numbers of decoder layers: different models.
    ModelDiffers {
        baseline_layers: u32,
        current_layers: u32,
    },
    /// The steps are cut differently.
    StepsCutDifferently { baseline: StepCut, current: StepCut },
    /// One side decodes speculatively and the other does not: its steps produce several
    /// tokens each, so step figures do not compare.
    SpeculationDiffers { speculative: GateSide },
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
            Self::ModelDiffers {
                baseline_layers,
                current_layers,
            } => write!(
                f,
                "the models differ (baseline {baseline_layers} decoder layers, current {current_layers})"
            ),
            Self::StepsCutDifferently { baseline, current } => write!(
                f,
                "steps are cut differently (baseline: {baseline}; current: {current})"
            ),
            Self::SpeculationDiffers { speculative } => write!(
                f,
                "the {} decodes speculatively and the other does not (its steps produce several \
                 tokens each, so step times do not compare)",
                speculative.as_str()
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

    pub(super) fn verdict_line(&self) -> String {
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
            Verdict::Inconclusive => {
                let mut why = self.incomplete.clone();
                let noisy: Vec<String> = self
                    .steps
                    .iter()
                    .map(|s| (s.metric.as_str().to_owned(), &s.judgement))
                    .chain(
                        self.buckets
                            .iter()
                            .map(|b| (b.bucket.to_string(), &b.judgement)),
                    )
                    .filter(|(_, j)| j.too_noisy)
                    .map(|(name, j)| {
                        format!(
                            "{name} moved {:+.1}% against a baseline spread of ±{:.1}%",
                            100.0 * j.rel_change,
                            100.0 * j.threshold
                        )
                    })
                    .collect();
                if !noisy.is_empty() {
                    why.push(format!(
                        "the baseline is too noisy to judge: {}",
                        noisy.join(", ")
                    ));
                }
                format!("inconclusive: nothing regressed, but {}", why.join("; "))
            }
            _ => "pass: no bucket, step metric or structural check regressed".to_owned(),
        }
    }
}
