//! One step numbering for the CLI, its JSON and the explorer: the steps the report covers
//! (decode steps, or a training trace's iterations) are numbered from 0 in time order, as
//! `gapscope report` numbers them ("worst stall … inside decode step 3", `worst_stall.step`
//! in the JSON); a step outside the report (a prefill before the decode steps) is named by
//! its phase and its place among the other steps of that phase outside the report.

use std::fmt;

use gapscope_analyzer::explore::StepView;
use gapscope_analyzer::tables::Tables;
use gapscope_traces::Phase;

/// The name of one step of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepName {
    /// Step `n` of the report (its `n`th step), in phase `phase`.
    Report { n: usize, phase: Phase },
    /// The `n`th step of `phase` that the report does not cover.
    Outside { n: usize, phase: Phase },
}

impl fmt::Display for StepName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepName::Report { n, phase } => write!(f, "step {n} · {}", phase.as_str()),
            StepName::Outside { n, phase } => write!(f, "{} {n}", phase.as_str()),
        }
    }
}

/// Every step's name, and the step the report numbers `n`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct StepNames {
    names: Vec<StepName>,
    /// Report step `n` → index in the run's steps.
    report: Vec<usize>,
}

impl StepNames {
    /// The names of `steps` (the explorer's step views, in time order) from the tables'
    /// `in_report` column.
    pub fn of(steps: &[StepView], tables: &Tables) -> Self {
        let in_report = |k: usize| tables.steps.in_report.get(k).is_some_and(|&r| r != 0);
        let mut report = Vec::new();
        let mut outside = [0usize; Phase::ALL.len()];
        let names = steps
            .iter()
            .enumerate()
            .map(|(k, s)| {
                if in_report(k) {
                    report.push(k);
                    StepName::Report {
                        n: report.len() - 1,
                        phase: s.phase,
                    }
                } else {
                    let slot = Phase::ALL.iter().position(|&p| p == s.phase).unwrap_or(0);
                    outside[slot] += 1;
                    StepName::Outside {
                        n: outside[slot] - 1,
                        phase: s.phase,
                    }
                }
            })
            .collect();
        Self { names, report }
    }

    /// The name of run step `k` (its index in the explorer's steps).
    pub fn name(&self, k: usize) -> Option<StepName> {
        self.names.get(k).copied()
    }

    /// The run step the report numbers `n` (`--step n`), if there is one.
    pub fn report_step(&self, n: usize) -> Option<usize> {
        self.report.get(n).copied()
    }

    /// How many steps the report numbers.
    pub fn report_len(&self) -> usize {
        self.report.len()
    }

    /// The short name on an axis: the report's number, or the phase and its number.
    pub fn axis_label(&self, k: usize) -> String {
        match self.name(k) {
            Some(StepName::Report { n, .. }) => n.to_string(),
            Some(StepName::Outside { n, phase }) => format!("{} {n}", phase.as_str()),
            None => format!("#{k}"),
        }
    }

    /// The name on the step-aligned ruler: "step 3", or "prefill 0".
    pub fn ruler_label(&self, k: usize) -> String {
        match self.name(k) {
            Some(StepName::Report { n, .. }) => format!("step {n}"),
            Some(StepName::Outside { n, phase }) => format!("{} {n}", phase.as_str()),
            None => format!("#{k}"),
        }
    }

    /// "step 3 · decode", or "#k" for an index past the steps (never shown for real steps).
    pub fn label(&self, k: usize) -> String {
        self.name(k)
            .map_or_else(|| format!("#{k}"), |n| n.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_analyzer::tables::StepRow;

    fn view(phase: Phase) -> StepView {
        StepView {
            index: 0,
            phase,
            batch: 0,
            tokens: 0,
            draft_forwards: 0,
            verify_start_ns: 0,
            start_ns: 0,
            end_ns: 0,
            bucket_ms: [0.0; gapscope_analyzer::Bucket::ALL.len()],
            busy_ms: 0.0,
            active_ms: 0.0,
            idle_ms: 0.0,
            max_gap_ms: 0.0,
            max_gap_at_ns: 0,
            stall: false,
        }
    }

    #[test]
    fn report_steps_are_numbered_as_the_cli_numbers_them() {
        // A prefill, then three decode steps the report covers.
        let phases = [Phase::Prefill, Phase::Decode, Phase::Decode, Phase::Decode];
        let mut t = Tables::default();
        for (i, p) in phases.iter().enumerate() {
            t.steps.push(StepRow {
                step: i as u32,
                phase: *p as u8,
                in_report: u8::from(*p == Phase::Decode),
                ..StepRow::default()
            });
        }
        let steps: Vec<StepView> = phases.iter().map(|&p| view(p)).collect();
        let names = StepNames::of(&steps, &t);
        // The CLI's "decode step 0" is the run's second step, not "#1".
        assert_eq!(names.label(1), "step 0 · decode");
        assert_eq!(names.label(3), "step 2 · decode");
        assert_eq!(names.label(0), "prefill 0");
        assert_eq!(names.report_step(0), Some(1));
        assert_eq!(names.report_step(3), None);
        assert_eq!(names.report_len(), 3);
    }
}
