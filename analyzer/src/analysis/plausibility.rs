//! Is the step set plausible? A report over steps that are not decode iterations (layers
//! taken for steps, a microbenchmark cut into 178k "steps", training sub-phases) prints
//! figures that look right and mean nothing. These checks flag such step sets; the report
//! puts them at its top, and `gate` and `diff` refuse to compare them.

use serde::Serialize;

use super::report::BucketRow;
use super::stats::Summary;

/// Step-to-step spread above which the steps are probably not one kind of iteration.
pub const MAX_TPOT_CV: f64 = 0.5;
/// Least share of the device's GPU activity time that the steps (any phase) must hold.
pub const MIN_COVERAGE: f64 = 0.5;
/// Largest share of steps whose GPU work runs longer than the step itself.
pub const MAX_OVERFULL_STEP_SHARE: f64 = 0.1;
/// A step's work may exceed its window by this factor before it counts as overfull
/// (timer granularity, a kernel straddling the end marker).
pub const OVERFULL_FACTOR: f64 = 1.05;
/// Shortest plausible median decode step, ms (10 µs: one kernel launch and a few more).
pub const MIN_STEP_MS: f64 = 0.01;
/// A bucket's share of the step above this is impossible on one stream, %.
pub const MAX_SHARE_OF_STEP_PCT: f64 = 100.5;

/// Which check failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PlausibilityCheck {
    /// TPOT coefficient of variation above [`MAX_TPOT_CV`].
    TpotSpread,
    /// The steps hold less than [`MIN_COVERAGE`] of the device's GPU activity time.
    Coverage,
    /// More than [`MAX_OVERFULL_STEP_SHARE`] of the steps are shorter than their own work.
    StepsShorterThanWork,
    /// The median step is shorter than [`MIN_STEP_MS`].
    TinySteps,
    /// A bucket takes more than 100% of the step.
    ShareOverStep,
    /// The periodic detector's steps look like the layers of one step (they share one
    /// graph launch, or lie inside one engine step marker).
    LayersAsSteps,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PlausibilityProblem {
    pub check: PlausibilityCheck,
    pub detail: String,
}

/// The verdict on a report's step set. `plausible` is true when no check failed (a trace
/// without steps is plausible: it has nothing to mislead with).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Plausibility {
    pub plausible: bool,
    pub problems: Vec<PlausibilityProblem>,
}

impl Default for Plausibility {
    fn default() -> Self {
        Self {
            plausible: true,
            problems: Vec::new(),
        }
    }
}

impl Plausibility {
    /// One line naming every failed check, for refusals.
    pub fn summary(&self) -> String {
        Self::summary_of(&self.problems)
    }

    /// [`Self::summary`] of a list of problems.
    pub fn summary_of(problems: &[PlausibilityProblem]) -> String {
        problems
            .iter()
            .map(|p| p.detail.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The periods' CV without the longest one, from five periods on (with fewer, or without the
/// periods, infinite: the check then goes by the CV of all). One long period is a warm-up, not
/// steps of several kinds: llama.cpp captures its CUDA graph in the first decode step (20 ms
/// against 5), which alone puts 8 steps over a CV of 50%.
fn spread_without_longest(periods: &[f64]) -> f64 {
    if periods.len() < 5 {
        return f64::INFINITY;
    }
    let longest = periods
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i);
    let rest: Vec<f64> = periods
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != longest)
        .map(|(_, &v)| v)
        .collect();
    Summary::of(&rest).cv
}

/// What the checked steps are: decode steps, training iterations, or steps of any phase
/// (none is a decode step).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepUnit {
    DecodeSteps,
    Iterations,
    Steps,
}

impl std::fmt::Display for StepUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::DecodeSteps => "decode steps",
            Self::Iterations => "iterations",
            Self::Steps => "steps",
        })
    }
}

/// What the checks look at, gathered during decomposition.
pub struct StepFacts<'a> {
    /// What the steps are.
    pub unit: StepUnit,
    /// Steps in scope (decode steps, iterations, or all steps when none is a decode step).
    pub decode_steps: usize,
    pub tpot: Option<&'a Summary>,
    /// The periods `tpot` summarises, ms (for the spread without the longest one).
    pub periods: &'a [f64],
    /// Each decode step's window on the GPU and the busy time (interval union) of the work
    /// that starts in it, ns.
    pub windows_ns: &'a [(i64, i64)],
    /// GPU activity time (summed durations) inside any step, and on the whole device, ns.
    pub activity_in_steps_ns: i64,
    pub activity_total_ns: i64,
    pub buckets: &'a [BucketRow],
    /// Step detection's own doubts (layers taken for steps).
    pub doubts: &'a [String],
}

/// Runs every check.
pub fn check(f: &StepFacts) -> Plausibility {
    let mut problems = Vec::new();
    let mut fail = |check, detail: String| problems.push(PlausibilityProblem { check, detail });
    if f.decode_steps == 0 {
        return Plausibility::default();
    }
    if let Some(t) = f.tpot {
        if t.n >= 3 && t.cv > MAX_TPOT_CV && spread_without_longest(f.periods) > MAX_TPOT_CV {
            fail(
                PlausibilityCheck::TpotSpread,
                format!(
                    "{} varies by CV {:.0}% over {} periods (more than {:.0}%): the steps are \
                     probably not one kind of iteration",
                    if f.unit == StepUnit::DecodeSteps {
                        "TPOT"
                    } else {
                        "the step period"
                    },
                    100.0 * t.cv,
                    t.n,
                    100.0 * MAX_TPOT_CV
                ),
            );
        }
        if t.n >= 1 && t.median < MIN_STEP_MS {
            fail(
                PlausibilityCheck::TinySteps,
                format!(
                    "median step {:.4} ms over {} {} is shorter than {} ms: these are kernels or \
                     layers, not {}",
                    t.median, f.decode_steps, f.unit, MIN_STEP_MS, f.unit
                ),
            );
        }
        for b in f.buckets {
            if let Some(s) = b.share_of_step_pct
                && s > MAX_SHARE_OF_STEP_PCT
            {
                fail(
                    PlausibilityCheck::ShareOverStep,
                    format!(
                        "bucket {} takes {s:.1}% of the step: the steps are shorter than the \
                         work they hold, or streams overlap",
                        b.bucket
                    ),
                );
            }
        }
    }
    if f.activity_total_ns > 0 {
        let cov = f.activity_in_steps_ns as f64 / f.activity_total_ns as f64;
        if cov < MIN_COVERAGE {
            fail(
                PlausibilityCheck::Coverage,
                format!(
                    "the steps hold {:.1}% of the GPU's activity time (less than {:.0}%): most \
                     work is outside them",
                    100.0 * cov,
                    100.0 * MIN_COVERAGE
                ),
            );
        }
    }
    let n = f.windows_ns.len();
    if n > 0 {
        let over = f
            .windows_ns
            .iter()
            .filter(|&&(window, busy)| busy as f64 > OVERFULL_FACTOR * window as f64 + 1_000.0)
            .count();
        if over as f64 > MAX_OVERFULL_STEP_SHARE * n as f64 {
            fail(
                PlausibilityCheck::StepsShorterThanWork,
                format!(
                    "{over} of {n} {} are shorter than the GPU work that starts in them: the \
                     step markers do not bracket the work",
                    f.unit
                ),
            );
        }
    }
    for d in f.doubts {
        fail(PlausibilityCheck::LayersAsSteps, d.clone());
    }
    Plausibility {
        plausible: problems.is_empty(),
        problems,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(t: Option<&'a Summary>, w: &'a [(i64, i64)]) -> StepFacts<'a> {
        StepFacts {
            unit: StepUnit::DecodeSteps,
            decode_steps: w.len().max(1),
            tpot: t,
            periods: &[],
            windows_ns: w,
            activity_in_steps_ns: 90,
            activity_total_ns: 100,
            buckets: &[],
            doubts: &[],
        }
    }

    #[test]
    fn regular_steps_pass() {
        let t = Summary::of(&[5.0, 5.1, 4.9, 5.0]);
        let w = [(5_000_000, 4_000_000); 5];
        assert!(check(&facts(Some(&t), &w)).plausible);
    }

    #[test]
    fn one_warm_up_period_is_no_spread_but_periods_of_two_kinds_are() {
        // llama.cpp with CUDA graphs: the first decode step captures the graph.
        let warm = [20.0, 5.0, 5.1, 4.9, 5.0, 5.0, 5.1];
        let t = Summary::of(&warm);
        assert!(t.cv > MAX_TPOT_CV);
        let w = [(5_000_000, 4_000_000); 8];
        let mut f = facts(Some(&t), &w);
        f.periods = &warm;
        assert!(check(&f).plausible, "{:?}", check(&f));
        let mixed = [20.0, 1.0, 20.0, 1.0, 20.0, 1.0, 20.0];
        let t = Summary::of(&mixed);
        let mut f = facts(Some(&t), &w);
        f.periods = &mixed;
        assert_eq!(check(&f).problems[0].check, PlausibilityCheck::TpotSpread);
    }

    #[test]
    fn each_check_fires() {
        let t = Summary::of(&[0.001, 10.0, 0.002, 0.001, 0.002]);
        let w = [(1_000, 900_000); 5];
        let p = check(&facts(Some(&t), &w));
        let kinds: Vec<_> = p.problems.iter().map(|x| x.check).collect();
        assert!(kinds.contains(&PlausibilityCheck::TpotSpread), "{p:?}");
        assert!(kinds.contains(&PlausibilityCheck::TinySteps), "{p:?}");
        assert!(
            kinds.contains(&PlausibilityCheck::StepsShorterThanWork),
            "{p:?}"
        );
        let mut f = facts(None, &[]);
        f.activity_in_steps_ns = 10;
        assert_eq!(check(&f).problems[0].check, PlausibilityCheck::Coverage);
        let doubt = ["12 of the 12 periodic steps replay from one graph launch".to_owned()];
        let mut f = facts(None, &[]);
        f.doubts = &doubt;
        let p = check(&f);
        assert!(!p.plausible);
        assert_eq!(p.problems[0].check, PlausibilityCheck::LayersAsSteps);
    }
}
