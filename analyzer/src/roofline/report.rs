//! The roofline report: floors per batch, the crossover batch, and measured decode steps
//! from traces placed against their floor.

use serde::Serialize;

use super::bucket_floor::bucket_floors;
pub use super::bucket_floor::{BucketFloor, FloorSource, NoFloor};
use super::{
    CeilingSource, HardwareSpec, ModelSpec, StepFloor, WeightFormat, crossover_batch, step_floor,
};
use crate::analysis::Report;

/// Version of the JSON roofline schema.
pub const ROOFLINE_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct RooflineReport {
    pub schema_version: u32,
    pub model: ModelSummary,
    pub hardware: HardwareSpec,
    pub weights: WeightFormat,
    pub ctx: u64,
    pub ceilings: CeilingSource,
    /// Batch where the weight-read floor meets the compute floor.
    pub crossover_batch: f64,
    pub floors: Vec<StepFloor>,
    pub measured: Vec<MeasuredStep>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelSummary {
    pub model_type: String,
    pub params: u64,
    pub layers: u64,
    pub full_attention_layers: u64,
    pub linear_attention_layers: u64,
    pub moe_experts: Option<u64>,
    pub moe_top_k: Option<u64>,
    pub kv_bytes_per_token: f64,
    pub recurrent_state_bytes_per_seq: f64,
}

/// A trace's decode steps against the floor at its batch.
#[derive(Debug, Clone, Serialize)]
pub struct MeasuredStep {
    pub trace: String,
    pub batch: u64,
    pub decode_steps: usize,
    pub tpot_median_ms: f64,
    pub tpot_p10_ms: f64,
    pub tok_per_s: f64,
    pub floor_ms: f64,
    /// floor / median TPOT, %.
    pub pct_of_floor_median: f64,
    /// floor / p10 TPOT (the faster steps), %.
    pub pct_of_floor_p10: f64,
    /// Buckets against their own floor: declared by the engine's kernels (engine traces) or
    /// derived from the model spec (other traces); see [`bucket_floors`].
    pub buckets: Vec<BucketFloor>,
    /// Buckets with decode time but no floor, each with the reason.
    pub buckets_without_floor: Vec<NoFloor>,
}

/// Builds the report for `batches`, placing each analysed trace at its batch and at
/// context `ctx`.
pub fn roofline(
    m: &ModelSpec,
    hw: &HardwareSpec,
    fmt: WeightFormat,
    batches: &[u64],
    ctx: u64,
    traces: &[(Report, u64)],
) -> RooflineReport {
    let floors = batches
        .iter()
        .map(|&b| step_floor(m, hw, fmt, b, ctx))
        .collect();
    let measured = traces
        .iter()
        .filter_map(|(r, batch)| {
            let t = r.steps.tpot_ms?;
            let floor = step_floor(m, hw, fmt, *batch, ctx).step_floor_s * 1e3;
            let (buckets, buckets_without_floor) = bucket_floors(r, m, hw, fmt, *batch, ctx);
            Some(MeasuredStep {
                trace: r.source.path.clone(),
                batch: *batch,
                decode_steps: r.steps.decode_steps,
                tpot_median_ms: t.median,
                tpot_p10_ms: t.p10,
                tok_per_s: *batch as f64 / (t.median / 1e3),
                floor_ms: floor,
                pct_of_floor_median: 100.0 * floor / t.median,
                pct_of_floor_p10: 100.0 * floor / t.p10,
                buckets,
                buckets_without_floor,
            })
        })
        .collect();
    RooflineReport {
        schema_version: ROOFLINE_SCHEMA_VERSION,
        model: ModelSummary {
            model_type: m.model_type.clone(),
            params: m.params(),
            layers: m.layers,
            full_attention_layers: m.full_attention_layers(),
            linear_attention_layers: m.linear_attention_layers(),
            moe_experts: m.moe.as_ref().map(|x| x.experts),
            moe_top_k: m.moe.as_ref().map(|x| x.top_k),
            kv_bytes_per_token: m.kv_bytes_per_token(2.0),
            recurrent_state_bytes_per_seq: m.recurrent_state_bytes(),
        },
        hardware: hw.clone(),
        weights: fmt,
        ctx,
        ceilings: hw.ceilings,
        crossover_batch: crossover_batch(hw, fmt),
        floors,
        measured,
    }
}
