//! What-ifs for named engine levers, predicted from one trace of the slow configuration
//! before the lever is switched: the hybrid models' state copies, state gathers and 3-D
//! out_proj GEMVs (the levers of `gapscope-engine --state-update/--state-read/--out-proj`).
//!
//! The model, per decode step (the trace's launch-timed steps, whose span is the step time):
//! - `state_update=inplace`: the `state_copy` D2D copies disappear.
//! - `state_read=fused_ids`: the `state_gather` kernels disappear; the recurrence then reads
//!   the same bytes from the cache slots that it read from the gathered scratch, so nothing
//!   is added.
//! - `out_proj=2d`: at decode with more than one sequence, the per-row `out_proj`
//!   launches (one per sequence and layer) become one linear per layer, timed as the trace's
//!   own linear of the same shape at this batch (`o_proj` of the full-attention layers:
//!   `[hidden, heads x head_dim]`, the out_proj's `[hidden, v_heads x v_dim]` in the Qwen3-Next
//!   shapes), scaled by the FLOP ratio; without one, at the FLOP rate of the trace's GEMMs.
//! - Each removed launch also takes its share of the step's idle time inside the step
//!   (launch gaps per launch), which matters for eager steps.
//!
//! The levers combine by adding their changes. Ops are the engine's op column (`report --by
//! op`); a trace without them cannot be predicted from.

use serde::Serialize;

use crate::analysis::Report;
use crate::analysis::host::{GroupRow, GroupSource};
use crate::bucket::Bucket;

/// The engine op names the levers act on.
pub const STATE_COPY_OP: &str = "state_copy";
pub const STATE_GATHER_OP: &str = "state_gather";
pub const OUT_PROJ_OP: &str = "out_proj";
/// The linear whose shape matches out_proj in the Qwen3-Next shapes.
pub const OUT_PROJ_TWIN_OP: &str = "o_proj";

/// An engine lever switched to its fast setting, or all of them together. Written (and
/// serialised) as `state_update=inplace`, `state_read=fused_ids`, `out_proj=2d` or `all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineLever {
    /// The engine's name for the lever (`state_update`), or `all`: the key `--measured`
    /// names it by.
    pub knob: &'static str,
    /// Its fast setting (`inplace`); `None` for `all`.
    pub value: Option<&'static str>,
}

impl EngineLever {
    /// Every hybrid lever at once.
    pub const ALL: Self = Self {
        knob: "all",
        value: None,
    };
}

impl std::fmt::Display for EngineLever {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.value {
            Some(v) => write!(f, "{}={v}", self.knob),
            None => f.write_str(self.knob),
        }
    }
}

impl Serialize for EngineLever {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// One lever's (or a combination's) predicted step.
#[derive(Debug, Clone, Serialize)]
pub struct LeverPrediction {
    /// `state_update=inplace`, `state_read=fused_ids`, `out_proj=2d`, or `all`.
    pub lever: EngineLever,
    /// GPU time that goes, ms per step.
    pub removed_ms: f64,
    /// GPU time that comes, ms per step.
    pub added_ms: f64,
    /// Launches fewer per step, and the idle time inside the step that goes with them.
    pub launches_removed: f64,
    pub gaps_removed_ms: f64,
    /// The slow step's span minus what goes plus what comes.
    pub predicted_step_ms: f64,
    /// How the lever's change was computed, in a sentence.
    pub basis: String,
}

/// The predictions from one slow trace.
#[derive(Debug, Clone, Serialize)]
pub struct LeverWhatIf {
    pub path: String,
    pub decode_steps: usize,
    pub batch_size: Option<u32>,
    /// Median span of the decode steps (first to last GPU activity), ms: the step time the
    /// predictions start from.
    pub step_ms: f64,
    /// Its spread: CV of the spans, %.
    pub step_cv_pct: f64,
    /// Launches (kernels and memops) per step, and the idle time inside a step per launch.
    pub launches_per_step: f64,
    pub gap_per_launch_ms: f64,
    pub levers: Vec<LeverPrediction>,
}

fn op<'a>(r: &'a Report, name: &str) -> Option<&'a GroupRow> {
    r.groups.as_ref()?.rows.iter().find(|g| g.key == name)
}

/// The hybrid levers' predictions; the report must come from an engine trace analysed with
/// the op grouping (`report --by op`).
pub fn hybrid_levers(r: &Report) -> Result<LeverWhatIf, String> {
    let groups = r
        .groups
        .as_ref()
        .ok_or("the report was made without the op grouping")?;
    if groups.source != GroupSource::EngineColumns {
        return Err(format!(
            "{} has no engine op columns; the lever what-ifs need a gapscope-engine trace",
            r.source.path
        ));
    }
    let span = decode_span(r)?;
    // GPU time per step (kernels and memops), the most any lever can remove.
    let busy: f64 = r
        .buckets
        .iter()
        .filter_map(|b| b.ms_per_step.as_ref().map(|s| s.mean))
        .filter(|v| v.is_finite())
        .sum();
    let launches: f64 = r.buckets.iter().filter_map(|b| b.calls_per_step).sum();
    let gap_per_launch = match (r.steps.launch_gap_ms_per_step, launches > 0.0) {
        (Some(g), true) => g / launches,
        _ => 0.0,
    };
    let ms = |name: &str| op(r, name).map_or((0.0, 0.0), |g| (g.gpu_ms_per_step, g.calls_per_step));
    let predict = |lever: EngineLever, c: &Change| {
        let gaps = c.launches_removed * gap_per_launch;
        // A step never gets shorter than the GPU work left in it.
        let left = (busy - c.removed_ms + c.added_ms).max(0.0);
        LeverPrediction {
            lever,
            removed_ms: c.removed_ms,
            added_ms: c.added_ms,
            launches_removed: c.launches_removed,
            gaps_removed_ms: gaps,
            predicted_step_ms: (span.median - c.removed_ms + c.added_ms - gaps).max(left),
            basis: c.basis.clone(),
        }
    };
    let (copy_ms, copy_calls) = ms(STATE_COPY_OP);
    let update = Change {
        removed_ms: copy_ms,
        added_ms: 0.0,
        launches_removed: copy_calls,
        basis: format!("{copy_calls:.0} state copies per step go ({copy_ms:.3} ms)"),
    };
    let (gather_ms, gather_calls) = ms(STATE_GATHER_OP);
    let read = Change {
        removed_ms: gather_ms,
        added_ms: 0.0,
        launches_removed: gather_calls,
        basis: format!(
            "{gather_calls:.0} state gathers per step go ({gather_ms:.3} ms); the recurrence reads \
             the same bytes from the slots"
        ),
    };
    let out = out_proj(r);
    let parts = [&update, &read, &out];
    let all = Change {
        removed_ms: parts.iter().map(|p| p.removed_ms).sum(),
        added_ms: parts.iter().map(|p| p.added_ms).sum(),
        launches_removed: parts.iter().map(|p| p.launches_removed).sum(),
        basis: "the three changes added".into(),
    };
    // Inputs that contradict each other (ops holding more GPU time than the buckets, or
    // more launches than the step has) would predict steps that cannot happen.
    let slack = 1.01;
    if all.removed_ms > busy * slack + 1e-6 {
        return Err(format!(
            "{}: the levers' ops hold {:.3} ms of GPU time per step but the step has {:.3} ms; \
             the trace's op columns and its kernels disagree",
            r.source.path, all.removed_ms, busy
        ));
    }
    if all.launches_removed > launches * slack + 1e-6 {
        return Err(format!(
            "{}: the levers' ops make {:.0} launches per step but the step has {:.0}; the \
             trace's op columns and its kernels disagree",
            r.source.path, all.launches_removed, launches
        ));
    }
    if ![all.removed_ms, all.added_ms, all.launches_removed]
        .iter()
        .all(|v| v.is_finite())
    {
        return Err(format!(
            "{}: the levers' ops carry non-finite times",
            r.source.path
        ));
    }
    let [update_lever, read_lever, out_lever] = FAST.map(|(knob, fast)| EngineLever {
        knob,
        value: Some(fast),
    });
    let levers = vec![
        predict(update_lever, &update),
        predict(read_lever, &read),
        predict(out_lever, &out),
        predict(EngineLever::ALL, &all),
    ];
    Ok(LeverWhatIf {
        path: r.source.path.clone(),
        decode_steps: r.steps.decode_steps,
        batch_size: r.steps.batch_size,
        step_ms: span.median,
        step_cv_pct: span.cv * 100.0,
        launches_per_step: launches,
        gap_per_launch_ms: gap_per_launch,
        levers,
    })
}

/// The median span of a trace's decode steps (what a lever's step is predicted from and
/// measured by), or why there is none: no decode steps, or steps that span no time.
pub fn decode_span(r: &Report) -> Result<crate::analysis::stats::Summary, String> {
    let span = r
        .steps
        .decode_span_ms
        .ok_or_else(|| format!("{} has no decode steps", r.source.path))?;
    if !(span.median.is_finite() && span.median > 0.0) {
        return Err(format!("{}: its decode steps span no time", r.source.path));
    }
    Ok(span)
}

/// The fast setting of each hybrid lever, as the engine's `levers.hybrid` names it.
const FAST: [(&str, &str); 3] = [
    ("state_update", "inplace"),
    ("state_read", "fused_ids"),
    ("out_proj", "2d"),
];

/// Whether `measured` is the slow trace's run with `lever` (`state_update`, `state_read`,
/// `out_proj` or `all`) switched and nothing else: the same model and batch, and engine
/// levers equal but for the one(s) named. An error says what differs.
pub fn check_measured(slow: &Report, measured: &Report, lever: &str) -> Result<(), String> {
    let (a, b) = (&slow.source, &measured.source);
    match (&a.model_config, &b.model_config) {
        (Some(x), Some(y)) if x != y => {
            return Err("it is a run of another model (its model config differs)".into());
        }
        (Some(_), None) => return Err("it names no model, so it cannot be matched".into()),
        _ => {}
    }
    if slow.steps.batch_size != measured.steps.batch_size {
        let show = |v: Option<u32>| v.map_or("unknown".to_owned(), |b| b.to_string());
        return Err(format!(
            "its batch is {} but the slow trace's is {}",
            show(measured.steps.batch_size),
            show(slow.steps.batch_size)
        ));
    }
    let levers = |r: &Option<serde_json::Value>| r.as_ref().and_then(|c| c.get("levers")).cloned();
    let (Some(mut want), Some(got)) = (levers(&a.engine_config), levers(&b.engine_config)) else {
        return Err(
            "it or the slow trace records no engine levers (not a gapscope-engine run)".into(),
        );
    };
    for (key, fast) in FAST {
        if (lever == "all" || lever == key)
            && let Some(h) = want.get_mut("hybrid").and_then(|h| h.as_object_mut())
        {
            h.insert(key.to_owned(), serde_json::Value::from(fast));
        }
    }
    if want != got {
        return Err(format!(
            "its engine levers are not the slow trace's with {} switched (want {}, found {})",
            if lever == "all" { "all three" } else { lever },
            want.get("hybrid")
                .map(|v| v.to_string())
                .unwrap_or_default(),
            got.get("hybrid").map(|v| v.to_string()).unwrap_or_default()
        ));
    }
    Ok(())
}

/// What one lever changes in a step.
struct Change {
    removed_ms: f64,
    added_ms: f64,
    launches_removed: f64,
    basis: String,
}

impl Change {
    fn none(basis: String) -> Self {
        Self {
            removed_ms: 0.0,
            added_ms: 0.0,
            launches_removed: 0.0,
            basis,
        }
    }
}

/// `out_proj=2d`: per-row launches become one linear per layer at the twin's time per call.
fn out_proj(r: &Report) -> Change {
    let rows = r.steps.batch_size.unwrap_or(1) as f64;
    let Some(o) = op(r, OUT_PROJ_OP) else {
        return Change::none("the trace has no out_proj".into());
    };
    let layers = (o.calls_per_step / rows).round();
    if rows <= 1.0 || layers < 1.0 || o.calls_per_step <= layers {
        return Change::none(format!(
            "out_proj already runs one launch per layer ({:.0} calls per step at batch {rows:.0})",
            o.calls_per_step
        ));
    }
    let flops = o.flops_per_step.unwrap_or(0.0);
    // The twin's FLOPs per call, known positive.
    let twin = op(r, OUT_PROJ_TWIN_OP).and_then(|t| {
        let per_call_flops = t.flops_per_step? / t.calls_per_step;
        (t.calls_per_step > 0.0 && per_call_flops > 0.0).then_some((t, per_call_flops))
    });
    let (added, basis) = match twin {
        Some((t, per_call_flops)) => {
            let per_call_ms = t.gpu_ms_per_step / t.calls_per_step;
            let scale = flops / layers / per_call_flops;
            (
                per_call_ms * scale * layers,
                format!(
                    "{:.0} per-row launches become {layers:.0}, each at {OUT_PROJ_TWIN_OP}'s {:.4} ms \
                     per call at this batch (x{scale:.2} its FLOPs)",
                    o.calls_per_step, per_call_ms
                ),
            )
        }
        None => {
            let (f, t) = [Bucket::GemmDense, Bucket::GemmQuant]
                .iter()
                .filter_map(|b| r.buckets.iter().find(|x| x.bucket == *b)?.cost)
                .fold((0.0, 0.0), |(f, t), c| {
                    (f + c.flops_per_step, t + c.costed_ms_per_step)
                });
            if f <= 0.0 || t <= 0.0 {
                return Change::none("no GEMM in the trace to time the 2-D out_proj by".into());
            }
            (
                flops / (f / t),
                format!(
                    "{:.0} per-row launches become {layers:.0} GEMMs at the trace's GEMM rate \
                     ({:.1} TFLOP/s)",
                    o.calls_per_step,
                    f / t / 1e9
                ),
            )
        }
    };
    Change {
        removed_ms: o.gpu_ms_per_step,
        added_ms: added,
        launches_removed: o.calls_per_step - layers,
        basis,
    }
}
