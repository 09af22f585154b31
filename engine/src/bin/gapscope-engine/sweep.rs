//! `gapscope-engine bench --hybrid-sweep -o DIR`: the hybrid levers measured one at a time
//! from the all-slow setting, each at each npl on its own, weights generated once. Writes
//! `DIR/{setting}-npl{N}.gst` for `gapscope diff DIR/slow-npl{N}.gst --what-if hybrid
//! --measured state_update=DIR/state_update-npl{N}.gst ...`.

use crate::bench::{BenchArgs, manifest, print_rows, run_traced};
use crate::env::open_device;
use gapscope_engine::bench::{self, BenchSettings};
use gapscope_engine::cuda::{Capacity, CudaBackend, Timing};
use gapscope_engine::dispatch::{HybridLevers, OutProjLayout, StateRead, StateUpdate};
use gapscope_engine::records::TraceOut;
use gapscope_engine::{EngineError, ModelConfig, ModelWeights, Result};
use std::path::Path;

/// The sweep's settings: all slow, each lever alone switched to its fast side (named for
/// the lever, as `gapscope diff --measured` names them), and all fast.
pub fn settings() -> [(&'static str, HybridLevers); 5] {
    let slow = HybridLevers::SLOW;
    [
        ("slow", slow),
        (
            "state_update",
            HybridLevers {
                state_update: StateUpdate::Inplace,
                ..slow
            },
        ),
        (
            "state_read",
            HybridLevers {
                state_read: StateRead::FusedIds,
                ..slow
            },
        ),
        (
            "out_proj",
            HybridLevers {
                out_proj: OutProjLayout::TwoD,
                ..slow
            },
        ),
        ("all", HybridLevers::default()),
    ]
}

pub fn run(
    a: &BenchArgs,
    cfg: &ModelConfig,
    w: &ModelWeights,
    prompt: Option<Vec<i32>>,
    mode: Timing,
) -> Result<serde_json::Value> {
    if cfg.hybrid.is_none() {
        return Err(EngineError::invalid(
            "--hybrid-sweep needs a hybrid model (gated DeltaNet layers)",
        ));
    }
    let dir = a.output.as_deref().ok_or_else(|| {
        EngineError::invalid("--hybrid-sweep writes one trace per setting and npl: give -o DIR")
    })?;
    std::fs::create_dir_all(dir).map_err(|e| EngineError::io(dir, e))?;
    let cap = Capacity::for_bench(&a.npl, a.npp, a.ntg);
    let base = a.levers.levers()?;
    let mut out = Vec::new();
    for (name, hybrid) in settings() {
        let lv = base.with_hybrid(hybrid);
        let mut be = CudaBackend::new(open_device(a.levers.device)?, cfg, w, lv, cap, mode)?;
        be.rec.sample_every = a.timing_sample.max(1);
        let event_latency = bench::calibrate_event_latency(&mut be, &[mode], a.raw_event_timing)?;
        for &n in &a.npl {
            let settings = BenchSettings {
                npl: vec![n],
                npp: a.npp,
                ntg: a.ntg,
                reps: a.reps,
                warmup: a.warmup,
                seed: a.model.seed,
                prompt: prompt.clone(),
            };
            let path = dir.join(format!("{name}-npl{n}.gst"));
            let extra = serde_json::json!({"levers": lv, "setting": name, "settings": settings, "weights": a.model.weights, "timing": mode, "timing_sample": a.timing_sample, "capacity": cap, "event_latency": event_latency});
            let trace = (mode != Timing::Off)
                .then(|| {
                    TraceOut::create(
                        &path,
                        manifest(&be, cfg, extra, (mode, lv.graphs), &event_latency),
                    )
                })
                .transpose()?
                .map(|t| (t, path.as_path()));
            eprintln!("{name} npl {n}:");
            let rows = run_traced(&mut be, &settings, None, trace, a.timing_sample)?;
            print_rows(&format!("{mode:?} {name}").to_lowercase(), &rows);
            out.push(serde_json::json!({"setting": name, "hybrid": hybrid, "npl": n, "trace": trace_name(&path), "rows": rows}));
        }
    }
    Ok(serde_json::json!({"hybrid_sweep": out}))
}

fn trace_name(p: &Path) -> String {
    p.file_name()
        .map_or(String::new(), |f| f.to_string_lossy().into_owned())
}
