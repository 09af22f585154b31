//! The gate itself: completeness, comparability, buckets, steps and structure, then the
//! verdict, against a trace or stored runs.

use super::*;

/// Fewer stored runs than this make a baseline whose intervals the gate warns about.
pub const MIN_BASELINE_RUNS: usize = 3;

/// What the current trace is judged against.
#[derive(Clone, Copy)]
pub(super) enum Base<'a> {
    Trace(&'a Report),
    Runs(&'a RunsBaseline),
}

#[expect(
    clippy::too_many_lines,
    reason = "the gate's stages in the order a reader checks them (completeness, comparability, buckets, steps, structure, verdict) over one report being built"
)]
pub(super) fn gate_on(base: Base<'_>, current: &Report, p: &Policy, o: GateOptions) -> GateReport {
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
            .chain(match base {
                Base::Runs(b) if !b.runs.is_empty() && b.runs.len() < MIN_BASELINE_RUNS => Some(format!(
                    "the baseline is {} accepted run{}: intervals from fewer than {MIN_BASELINE_RUNS} runs say little about run-to-run spread",
                    b.runs.len(),
                    if b.runs.len() == 1 { "" } else { "s" }
                )),
                _ => None,
            })
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
        Base::Trace(baseline) if baseline.steps.decode_steps == 0 => {
            report
                .incomparable
                .push(Incomparability::NoBaselineDecodeSteps {
                    steps: baseline.steps.source.clone(),
                })
        }
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
            // The runs keep their median TPOT (and time per token), not their idle split.
            Base::Runs(b) => {
                let per_token = current
                    .speculative
                    .as_ref()
                    .map_or(&[][..], |s| s.series.ms_per_token.as_slice());
                judge_steps(
                    [
                        (
                            StepMetric::Tpot,
                            b.tpot_ms.as_slice(),
                            current.steps.series.tpot_ms.as_slice(),
                            1.0,
                        ),
                        (
                            StepMetric::TimePerToken,
                            b.time_per_token_ms.as_slice(),
                            per_token,
                            1.0,
                        ),
                    ],
                    p,
                )
            }
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
    let too_noisy = report
        .buckets
        .iter()
        .map(|b| &b.judgement)
        .chain(report.steps.iter().map(|s| &s.judgement))
        .any(|j| j.too_noisy);
    report.verdict = if failed {
        Verdict::Regression
    } else if !report.incomplete.is_empty() || too_noisy {
        // A side that misses work, or a baseline too noisy for a change its median shows,
        // cannot vouch for a pass.
        Verdict::Inconclusive
    } else {
        Verdict::Pass
    };
    report
}

/// TPOT and the idle split, judged like the buckets. Idle metrics weigh by their share of
/// the baseline's step, so a 5 µs launch gap that doubles does not fail a 5 ms step.
pub(super) fn step_verdicts(baseline: &Report, current: &Report, p: &Policy) -> Vec<StepVerdict> {
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
    let mut out = judge_steps(
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
    );
    // Two speculative runs: their time per token and rejected share are gated too.
    if let (Some(b), Some(c)) = (&baseline.speculative, &current.speculative)
        && !b.series.ms_per_token.is_empty()
        && !c.series.ms_per_token.is_empty()
    {
        out.extend(judge_steps(
            [
                (
                    StepMetric::TimePerToken,
                    &b.series.ms_per_token[..],
                    &c.series.ms_per_token[..],
                    1.0,
                ),
                (
                    StepMetric::Rejection,
                    &b.series.rejected_share[..],
                    &c.series.rejected_share[..],
                    1.0,
                ),
            ],
            p,
        ));
    }
    out
}

/// Judges each step metric's samples, baseline and current, with its weight.
pub(super) fn judge_steps<const N: usize>(
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
