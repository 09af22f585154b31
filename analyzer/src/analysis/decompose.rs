//! Per-step decomposition: one pass puts each activity in its step and bucket
//! (`decompose/accumulate.rs`), the accumulators become the analysis tables
//! (`to_tables.rs`, `idle.rs`), and the report is assembled from the tables (`rows.rs`).

use gapscope_traces::Phase;

use super::host::{self, GroupBy, HostIndex};
use super::intervals::{extent_sorted, merge_two};
use super::plausibility::{self, StepFacts, StepUnit};
use super::prepared::Prepared;
use super::report::*;
use super::stats::Summary;
use super::steps::{StepKind, StepSettings, Steps, detect};
use super::telemetry::{self, TelemetryReport};
use crate::bucket::Bucket;
use crate::import::Imported;
use crate::rules::RuleSet;
use crate::tables::{NameScope, NameTimeTable, StepBuckets, Tables};

mod accumulate;
mod idle;
mod rows;
mod to_tables;
use accumulate::{Accumulated, accumulate};
use rows::{BucketInputs, StepSets, bucket_rows, span_ms, step_report, with_gpu_work};

const NB: usize = Bucket::ALL.len();
const NS_PER_MS: f64 = 1e6;

/// Settings for one report.
#[derive(Debug, Clone)]
pub struct AnalysisSettings {
    pub steps: StepSettings,
    /// Names listed per bucket.
    pub top_per_bucket: usize,
    /// Names listed for `other`.
    pub top_other: usize,
    /// Host scopes listed in the idle attribution.
    pub top_host_scopes: usize,
    /// `report --by`: group GPU and host time by this key.
    pub group_by: Option<GroupBy>,
    /// The most steps analysed (`None`: all). Each step costs about 1 KB while it is
    /// analysed; a trace with more keeps its first steps and says so (a defect: the gate
    /// never passes it).
    pub max_steps: Option<usize>,
    /// An engine's speculative-decoding counters, for traces that do not show acceptance.
    pub spec_metrics: Option<crate::analysis::spec::SpecMetrics>,
    /// The engine's graph-capture trace: `--by` puts graph-replayed kernels on the ops and
    /// modules around their capture-time launches.
    pub graph_capture: Option<std::sync::Arc<crate::analysis::graph_capture::GraphCapture>>,
}

/// Steps analysed at most by default: far more than a profiled decode run holds (thousands),
/// and about 100 MB of per-step figures.
pub const DEFAULT_MAX_STEPS: usize = 100_000;

impl Default for AnalysisSettings {
    fn default() -> Self {
        Self {
            steps: StepSettings::default(),
            top_per_bucket: 3,
            top_other: 8,
            top_host_scopes: 5,
            group_by: None,
            max_steps: Some(DEFAULT_MAX_STEPS),
            spec_metrics: None,
            graph_capture: None,
        }
    }
}

/// Analyses one imported trace.
pub fn analyze(imported: &Imported, rules: &RuleSet, settings: &AnalysisSettings) -> Report {
    analyze_tables(imported, rules, settings, 0).report
}

/// One analysed run: its tables, the report derived from them, and what the explorer also
/// draws (the steps as detected, with how they were found, and the host scope index).
pub struct Analyzed {
    pub report: Report,
    pub tables: Tables,
    pub steps: Steps,
    pub host: HostIndex,
}

/// Analyses one imported trace of rank `rank`: the tables, then the report from them.
#[expect(
    clippy::too_many_lines,
    reason = "the orchestrator: each stage is a call, and the report is assembled from the tables in one struct literal"
)]
pub fn analyze_tables(
    imported: &Imported,
    rules: &RuleSet,
    settings: &AnalysisSettings,
    rank: u32,
) -> Analyzed {
    let trace = &imported.trace;
    let mut p = {
        let _span = tracing::debug_span!("prepare").entered();
        Prepared::new(trace, rules)
    };
    let _span = tracing::debug_span!("decompose").entered();
    // Steps on the other core while the host side is indexed (unless the buckets already
    // needed it): the idle attribution below reads both.
    // The devices' busy time too: it needs no steps.
    let (mut steps, built, devices) = std::thread::scope(|s| {
        let steps = s.spawn(|| detect(&p, &settings.steps));
        let built = p.host.is_none().then(|| HostIndex::build(trace));
        let devices: Vec<DeviceBusy> = p.devices.iter().map(|&(d, _)| device_busy(&p, d)).collect();
        let steps = steps
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (steps, built, devices)
    });
    let steps_cut = settings
        .max_steps
        .filter(|&max| steps.steps.len() > max)
        .map(|max| {
            let found = steps.steps.len();
            steps.steps.truncate(max);
            steps.batch.truncate(max);
            steps.numbers.truncate(max);
            if let Some(spec) = steps.spec.as_mut() {
                spec.cycles.truncate(max);
            }
            crate::import::defects::SourceDefect::StepsCut { kept: max, found }
        });
    let host: HostIndex = match (built, p.host.take()) {
        (Some(h), _) | (None, Some(h)) => h,
        (None, None) => unreachable!("the host index is built above when Prepared has none"),
    };
    let hi = &host;

    let decode: Vec<bool> = steps.steps.iter().map(|s| s.is_decode()).collect();
    let any_decode = decode.iter().any(|&d| d);
    let Accumulated {
        accs,
        outside,
        names,
        prefill_names,
        other_kernel_ns,
        kernel_ns_in_scope,
        activity_in_steps_ns,
        activity_total_ns,
        scope_acts,
        kernel_step,
        memop_step,
    } = accumulate(&p, &steps, &decode, settings);
    let mut name_table = NameTimeTable::default();
    names.finish_into(rank, NameScope::Report, &mut name_table);
    prefill_names.finish_into(rank, NameScope::Prefill, &mut name_table);

    let decode_idx: Vec<usize> = (0..accs.len()).filter(|&i| decode[i]).collect();
    let of_phase = |ph: Phase| -> Vec<usize> {
        (0..accs.len())
            .filter(|&i| steps.steps[i].phase == ph)
            .collect()
    };
    let prefill_idx = of_phase(Phase::Prefill);
    let mixed_idx = of_phase(Phase::Mixed);
    let training = steps.kind == StepKind::TrainingIterations;
    let scope_idx: Vec<usize> = if any_decode {
        decode_idx.clone()
    } else {
        (0..accs.len()).collect()
    };
    let mut in_report = vec![false; accs.len()];
    for &i in &scope_idx {
        in_report[i] = true;
    }
    let (step_table, step_buckets) = to_tables::step_tables(&steps, &accs, &in_report, rank);
    // Without steps the report's buckets cover the whole device, as one pseudo-step.
    let mut whole_trace = StepBuckets::with_steps(1);
    if steps.steps.is_empty() {
        whole_trace.push_step(rank, 0, &to_tables::cells(&outside));
    }

    let mut step_report = step_report(
        &steps,
        &step_table,
        &StepSets {
            scope: &scope_idx,
            decode: any_decode,
            prefill: &prefill_idx,
            mixed: &mixed_idx,
        },
    );
    let marker_batch = trace
        .markers
        .batch_size
        .iter()
        .copied()
        .filter(|&b| b > 0)
        .max();
    step_report.batch_size = decode_idx
        .iter()
        .filter_map(|&i| steps.batch.get(i).copied())
        .filter(|&b| b > 0)
        .max()
        .or(marker_batch);
    step_report.context_tokens = steps.context_tokens;
    let scope_mean = step_report
        .tpot_ms
        .or(step_report.iteration_period_ms)
        .or(step_report.decode_span_ms)
        .or(step_report.iteration_ms)
        .map(|s| s.mean)
        .or_else(|| {
            let spans: Vec<f64> = scope_idx
                .iter()
                .map(|&i| span_ms(&steps.steps[i]))
                .collect();
            (!spans.is_empty()).then(|| Summary::of(&spans).mean)
        });

    let bucket_scope = if steps.steps.is_empty() {
        BucketScope::WholeTrace
    } else if training {
        BucketScope::TrainingIterations
    } else if any_decode {
        BucketScope::DecodeSteps
    } else {
        BucketScope::AllSteps
    };
    let report_rows = |cells, idx, step_mean_ms, per_step, scope| {
        let inputs = BucketInputs {
            cells,
            idx,
            step_mean_ms,
            per_step,
            names: &name_table,
            scope,
        };
        bucket_rows(&inputs, trace, settings)
    };
    let buckets = if steps.steps.is_empty() {
        report_rows(&whole_trace, &[0], None, false, NameScope::Report)
    } else {
        report_rows(
            &step_buckets,
            &scope_idx,
            scope_mean,
            true,
            NameScope::Report,
        )
    };
    let prefill_buckets = if prefill_idx.is_empty() {
        Vec::new()
    } else {
        let mean = step_report.prefill_ms.map(|s| s.mean);
        report_rows(&step_buckets, &prefill_idx, mean, true, NameScope::Prefill)
    };

    let mut other_top: Vec<NameTime> = name_table
        .of_scope(NameScope::Report)
        .filter(|e| {
            e.bucket as usize == Bucket::Other.index()
                && crate::tables::ActivityKind::from_code(e.kind)
                    == crate::tables::ActivityKind::Kernel
        })
        .map(|e| NameTime {
            name: trace.strings.get(e.name).to_owned(),
            ms: e.ns as f64 / NS_PER_MS,
            calls: e.calls,
        })
        .collect();
    other_top.sort_by(|a, b| b.ms.total_cmp(&a.ms));
    other_top.truncate(settings.top_other);

    let mut notes = trace.manifest.notes.clone();
    if p.devices.len() > 1
        && let Some(d) = steps.device
    {
        notes.push(format!(
            "{} devices in the trace; steps and buckets cover device {d}, busy % covers each",
            p.devices.len()
        ));
    }
    let mut warnings = imported.warnings.clone();
    let distortion = super::distortion::distortion(trace);
    if let Some(d) = &distortion {
        warnings.insert(0, d.warning());
    }
    let telemetry = telemetry_of(&p, &steps, &mut warnings);
    let windows: Vec<(i64, i64)> = scope_idx
        .iter()
        .map(|&i| {
            let st = &steps.steps[i];
            (
                st.gpu_end_ns.saturating_sub(st.gpu_start_ns),
                step_table.busy_ns[i],
            )
        })
        .collect();
    let plausibility = plausibility::check(&StepFacts {
        unit: if training {
            StepUnit::Iterations
        } else if any_decode {
            StepUnit::DecodeSteps
        } else {
            StepUnit::Steps
        },
        decode_steps: scope_idx.len(),
        tpot: step_report
            .tpot_ms
            .as_ref()
            .or(step_report.iteration_period_ms.as_ref()),
        periods: &step_report.series.tpot_ms,
        windows_ns: &windows,
        activity_in_steps_ns,
        activity_total_ns,
        buckets: &buckets,
        doubts: &steps.doubts,
    });
    // Why the GPU sat idle: the decode steps (or iterations) with GPU work, as the idle
    // figures of the step report count them.
    let active: Vec<usize> = if any_decode || training {
        with_gpu_work(&scope_idx, &step_table)
    } else {
        Vec::new()
    };
    // Graph replays, found once: the lever, `--by` and the source line read them.
    let graphs = super::graphs::GraphKernels::of(trace)
        .with_capture(trace, settings.graph_capture.as_deref());
    let replayed = graphs.count(trace);
    let idle = idle::idle(
        trace,
        hi,
        &accs,
        (&active, replayed),
        scope_mean,
        settings,
        rank,
    );
    drop(accs);
    let host_idle = idle.report;
    let groups = settings.group_by.map(|by| {
        host::by_key::group(
            trace,
            &hi.forest,
            &hi.launch_map,
            &scope_acts,
            scope_idx.len().max(1),
            by,
            &graphs,
        )
    });
    if p.scope_classified > 0 {
        notes.push(format!(
            "{} kernels were bucketed by the host scope they were launched in (scope rules)",
            p.scope_classified
        ));
    }
    let mut source = source_info(imported, &p, &steps, (graphs.launch_count, replayed), notes);
    if let Some(cut) = steps_cut {
        warnings.insert(0, format!("this trace {}", cut.describe()));
        source.defects.push(cut);
    }
    let communication = CommunicationTime::of(&buckets);
    let report = Report {
        schema_version: REPORT_SCHEMA_VERSION,
        source,
        warnings,
        plausibility,
        bucket_scope,
        devices,
        steps: step_report,
        speculative: steps.spec.as_ref().and_then(|s| {
            crate::analysis::spec::SpecReport::of(
                s,
                &p,
                steps.device,
                settings.spec_metrics.as_ref(),
            )
        }),
        buckets,
        prefill_buckets,
        other: OtherReport {
            share_of_kernel_time_pct: pct(other_kernel_ns as f64, kernel_ns_in_scope as f64),
            top: other_top,
        },
        telemetry,
        distortion,
        host_idle,
        groups,
        communication,
    };
    let Prepared {
        kernel_bucket,
        memop_bucket,
        ..
    } = p;
    let tables = Tables {
        steps: step_table,
        step_buckets,
        idle_gaps: idle.gaps,
        step_scopes: idle.scopes,
        names: name_table,
        kernel_bucket,
        memop_bucket,
        kernel_step,
        memop_step,
        rank,
    };
    Analyzed {
        report,
        tables,
        steps,
        host,
    }
}

/// What one pass over the steps' device's activities adds up: per step, outside the steps,
/// per name, and the totals the plausibility check and `report --by` need.
/// `graphs`: graph launches on the host and the kernels they replayed.
fn source_info(
    imported: &Imported,
    p: &Prepared,
    steps: &Steps,
    graphs: (usize, usize),
    notes: Vec<String>,
) -> SourceInfo {
    let trace = &imported.trace;
    let (graph_launches, graph_kernels) = graphs;
    SourceInfo {
        path: trace.manifest.source_path.clone().unwrap_or_default(),
        converted_from: None,
        format: imported.format.as_str().to_owned(),
        gpus: trace.manifest.gpus.iter().map(|g| g.label()).collect(),
        step_gpu: steps
            .device
            .or(p.primary_device())
            .and_then(|d| trace.manifest.gpus.iter().find(|g| g.device == d))
            .map(|g| g.name.clone())
            .filter(|n| !n.is_empty()),
        kernels: trace.kernels.len,
        memops: trace.memops.len,
        launches: trace.launches.len,
        markers: trace.markers.len,
        scopes: trace.scopes.len(),
        graph_launches,
        graph_kernels,
        truncated: trace.manifest.truncated,
        untimed_events: trace.manifest.untimed_events,
        decoder_layers: decoder_layers(trace),
        world_size: trace.manifest.world_size,
        defects: imported.defects.clone(),
        model_config: trace.manifest.model_config.clone(),
        engine_config: trace.manifest.engine_config.clone(),
        notes,
    }
}

/// Distinct decoder layers: the engine's layer column when loaded, else the layer numbers in
/// the module scopes' names.
fn decoder_layers(trace: &gapscope_traces::Trace) -> Option<u32> {
    use std::collections::{HashMap, HashSet};
    let k = &trace.kernels;
    let mut layers: HashSet<i64> = HashSet::new();
    if k.layer.len() == k.len {
        layers.extend(k.layer.iter().filter(|&&l| l >= 0).map(|&l| i64::from(l)));
    }
    if layers.is_empty() {
        let s = &trace.scopes;
        let module = gapscope_traces::ScopeKind::Module as u8;
        let mut seen: HashMap<gapscope_traces::StrId, Option<u32>> = HashMap::new();
        for i in (0..s.len).filter(|&i| s.kind[i] == module) {
            let layer = *seen
                .entry(s.name[i])
                .or_insert_with(|| super::host::forest::layer_of(trace.strings.get(s.name[i])));
            layers.extend(layer.map(i64::from));
        }
    }
    (!layers.is_empty()).then_some(layers.len() as u32)
}

/// NVML telemetry of the steps' device over the decode steps (the device's kernel span
/// without steps).
fn telemetry_of(
    p: &Prepared,
    steps: &Steps,
    warnings: &mut Vec<String>,
) -> Option<TelemetryReport> {
    let k = &p.trace.kernels;
    let device = steps.device.or(p.primary_device());
    let kernel_span = device.and_then(|d| {
        let on = p.kernels_on(d);
        let start = k.gpu_start_ns[*on.first()? as usize];
        let end = on.iter().map(|&i| k.gpu_end_ns[i as usize]).max()?;
        Some((start, end.max(start)))
    });
    telemetry::telemetry(
        &p.trace.samples,
        device,
        telemetry::window(&steps.steps, kernel_span),
        warnings,
    )
}

fn pct(a: f64, b: f64) -> f64 {
    if b > 0.0 { 100.0 * a / b } else { 0.0 }
}

fn device_busy(p: &Prepared, d: u32) -> DeviceBusy {
    let k = &p.trace.kernels;
    let m = &p.trace.memops;
    let ki = || {
        p.kernels_on(d)
            .iter()
            .map(|&i| (k.gpu_start_ns[i as usize], k.gpu_end_ns[i as usize]))
    };
    let mi = || {
        p.memops_on(d)
            .iter()
            .map(|&i| (m.gpu_start_ns[i as usize], m.gpu_end_ns[i as usize]))
    };
    // One pass over the kernels; a second over both only where the device has memops.
    let kernels = extent_sorted(ki());
    let all = if p.memops_on(d).is_empty() {
        kernels
    } else {
        extent_sorted(merge_two(ki(), mi()))
    };
    let (lo, hi) = (all.lo, all.hi);
    let span = if hi > lo { hi - lo } else { 0 };
    let kernel_busy = kernels.union;
    let busy = all.union;
    DeviceBusy {
        device: d,
        span_ns: span,
        kernel_busy_ns: kernel_busy,
        busy_ns: busy,
        kernel_busy_pct: pct(kernel_busy as f64, span as f64),
        busy_pct: pct(busy as f64, span as f64),
    }
}

#[cfg(test)]
mod tests {
    use gapscope_traces::{KernelRow, Manifest, MarkerRow, MarkerSource, Trace};

    use super::*;
    use crate::import::InputFormat;

    /// Engine-marked steps of `phases`, each `len` ns long with one 500 ns kernel, 1 µs apart.
    fn trace(phases: &[(Phase, i64)]) -> Imported {
        let mut t = Trace::new(Manifest::new("test"));
        let k = t.strings.intern("gemv_bf16_b1");
        let mut now = 1_000;
        for &(ph, len) in phases {
            let name = t.strings.intern(ph.as_str());
            t.kernels.push(KernelRow {
                name: k,
                gpu_start_ns: now,
                gpu_end_ns: now + 500,
                ..KernelRow::default()
            });
            t.markers.push(MarkerRow {
                name,
                source: MarkerSource::Engine as u8,
                phase: ph as u8,
                gpu_start_ns: now,
                gpu_end_ns: now + len,
                batch_size: 8,
                ..MarkerRow::default()
            });
            now += 1_000_000;
        }
        Imported {
            trace: t,
            format: InputFormat::Native,
            warnings: Vec::new(),
            defects: Vec::new(),
        }
    }

    fn report(phases: &[(Phase, i64)]) -> Report {
        analyze(
            &trace(phases),
            &RuleSet::builtin(),
            &AnalysisSettings::default(),
        )
    }

    #[test]
    fn mixed_steps_are_reported_apart_and_stay_out_of_tpot() {
        let (d, m, p) = (Phase::Decode, Phase::Mixed, Phase::Prefill);
        let r = report(&[
            (p, 900_000),
            (d, 600_000),
            (d, 600_000),
            (m, 800_000),
            (d, 600_000),
            (d, 600_000),
            (d, 600_000),
        ]);
        let s = &r.steps;
        assert_eq!((s.decode_steps, s.prefill_steps, s.mixed_steps), (5, 1, 1));
        // Periods only between consecutive decode steps: 1-2, 4-5, 5-6.
        assert_eq!(s.tpot_ms.unwrap().n, 3);
        assert_eq!(s.series.tpot_ms.len(), 3);
        let mixed = s.mixed_ms.unwrap();
        assert_eq!(mixed.n, 1);
        assert!((mixed.median - 0.8).abs() < 1e-9);
        assert_eq!(s.decode_span_ms.unwrap().n, 5);
        assert_eq!(s.batch_size, Some(8));
        assert_eq!(s.kind, StepKind::InferenceSteps);
    }

    #[test]
    fn a_single_decode_step_keeps_its_span_and_a_mixed_only_trace_has_no_tpot() {
        let r = report(&[(Phase::Decode, 700_000)]);
        assert!(r.steps.tpot_ms.is_none());
        assert!((r.steps.decode_span_ms.unwrap().median - 0.7).abs() < 1e-9);

        let r = report(&[(Phase::Mixed, 700_000)]);
        assert_eq!(r.steps.decode_steps, 0);
        assert!(r.steps.tpot_ms.is_none() && r.steps.decode_span_ms.is_none());
        // The bucket table covers the mixed step rather than nothing.
        let gemv = r.buckets.iter().find(|b| b.bucket == Bucket::Gemv).unwrap();
        assert_eq!(gemv.calls, 1);
        assert!(r.plausibility.plausible, "{:?}", r.plausibility);
    }

    #[test]
    fn training_iterations_are_not_tpot() {
        let mut imp = trace(&[(Phase::Decode, 600_000); 4]);
        let t = &mut imp.trace;
        let name = t.strings.intern("ProfilerStep#1");
        for i in 0..t.markers.len {
            t.markers.name[i] = name;
            t.markers.source[i] = MarkerSource::KinetoGpuAnnotation as u8;
            t.markers.phase[i] = Phase::Unknown as u8;
        }
        let opt = t.strings.intern("Optimizer.step#SGD.step");
        t.markers.push(MarkerRow {
            name: opt,
            source: MarkerSource::KinetoUserAnnotation as u8,
            host_start_ns: 0,
            host_end_ns: 10,
            ..MarkerRow::default()
        });
        let r = analyze(&imp, &RuleSet::builtin(), &AnalysisSettings::default());
        let s = &r.steps;
        assert_eq!(s.kind, StepKind::TrainingIterations);
        assert_eq!((s.decode_steps, s.iterations), (0, 4));
        assert!(s.tpot_ms.is_none() && s.decode_span_ms.is_none());
        assert!(s.series.tpot_ms.is_empty());
        assert!((s.iteration_ms.unwrap().median - 0.6).abs() < 1e-9);
        assert!((s.iteration_period_ms.unwrap().median - 1.0).abs() < 1e-9);
        assert!(
            r.buckets
                .iter()
                .any(|b| b.bucket == Bucket::Gemv && b.calls == 4)
        );
    }
}
