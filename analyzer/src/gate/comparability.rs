//! Whether two runs (or a run and stored runs) can be compared, as typed clauses.

use super::*;

/// Whether a report has GPU work to judge.
pub(super) fn gpu_events(r: &Report) -> usize {
    r.source.kernels + r.source.memops
}

/// Why two reports cannot be compared; empty when they can.
pub(super) fn comparability(baseline: &Report, current: &Report) -> Vec<Incomparability> {
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
    if let (Some(a), Some(b)) = (
        baseline.source.decoder_layers,
        current.source.decoder_layers,
    ) && a != b
    {
        out.push(Incomparability::ModelDiffers {
            baseline_layers: a,
            current_layers: b,
        });
    }
    let (ka, kb) = (StepCut::of(baseline), StepCut::of(current));
    if ka != kb {
        out.push(Incomparability::StepsCutDifferently {
            baseline: ka,
            current: kb,
        });
    }
    match (
        baseline.speculative.is_some(),
        current.speculative.is_some(),
    ) {
        (true, false) => out.push(Incomparability::SpeculationDiffers {
            speculative: GateSide::Baseline,
        }),
        (false, true) => out.push(Incomparability::SpeculationDiffers {
            speculative: GateSide::Current,
        }),
        _ => {}
    }
    for (side, r) in [(GateSide::Baseline, baseline), (GateSide::Current, current)] {
        out.extend(implausible(side, r));
    }
    out
}

/// The GPU check's clause, if the GPUs differ or one side names none.
pub(super) fn gpu_clause(baseline: Option<&str>, current: Option<&str>) -> Option<Incomparability> {
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
pub(super) fn implausible(side: GateSide, r: &Report) -> Option<Incomparability> {
    (!r.plausibility.plausible).then(|| Incomparability::Implausible {
        side,
        problems: r.plausibility.problems.clone(),
    })
}

/// Why the current trace cannot be compared with stored runs: the runs store their GPUs, not
/// their batch size or step kind, so the GPU and the current steps' plausibility are checked.
pub(super) fn runs_comparability(
    baseline: &RunsBaseline,
    current: &Report,
) -> Vec<Incomparability> {
    let gpu = current.source.step_gpu.as_deref();
    // Stored speculative runs keep their time per token; plain ones do not.
    let speculation = match (
        !baseline.time_per_token_ms.is_empty(),
        current.speculative.is_some(),
    ) {
        (true, false) => Some(GateSide::Baseline),
        (false, true) => Some(GateSide::Current),
        _ => None,
    }
    .map(|speculative| Incomparability::SpeculationDiffers { speculative });
    gpu_clause(baseline.gpu(gpu).as_deref(), gpu)
        .into_iter()
        .chain(speculation)
        .chain(implausible(GateSide::Current, current))
        .collect()
}
