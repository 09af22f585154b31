//! The roofline report: floors per batch, the crossover batch, and measured decode steps
//! from traces placed against their floor.

use serde::Serialize;

use super::bucket_floor::bucket_floors;
pub use super::bucket_floor::{BucketFloor, FloorSource, NoFloor};
pub use super::tp::{MAX_TP, TpChoice, TpSource};
use super::{
    CeilingSource, ComputePeak, HardwareSpec, ModelSpec, StepFloor, WeightFormat, compute_peak,
    crossover_batch, step_floor,
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
    /// Context (KV length per sequence, tokens) the floors by batch are taken at.
    pub ctx: u64,
    /// Where `ctx` comes from.
    pub ctx_source: ContextSource,
    /// Tensor-parallel degree the floors by batch are taken at: the floors, bytes and FLOPs
    /// are one rank's (1/tp of the linear weights, the KV heads split with at least one per
    /// rank, norms and embedding rows whole).
    pub tp: u64,
    /// Where `tp` comes from.
    pub tp_source: TpSource,
    /// KV heads one rank holds at `tp`: ceil(kv_heads / tp).
    pub kv_heads_per_rank: u64,
    pub ceilings: CeilingSource,
    /// The compute ceiling of the weight format, and where it comes from.
    pub compute_peak: ComputePeak,
    /// Batch where the weight-read floor meets the compute floor.
    pub crossover_batch: f64,
    pub floors: Vec<StepFloor>,
    /// Speculative verify floors at `roofline --spec-k K`, per batch (empty otherwise).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub verify: Vec<super::VerifyFloor>,
    pub measured: Vec<MeasuredStep>,
    /// Traces given but not placed, each with the reason.
    pub not_placed: Vec<NotPlaced>,
}

/// Where a trace's batch size comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchSource {
    /// The trace's step markers carry it.
    TraceMarkers,
    /// Given by the caller (`--trace-batch`).
    Given,
    /// Nothing says; batch 1 is assumed.
    Assumed,
}

impl BatchSource {
    /// The batch of a trace's decode steps: its markers' batch size, else `given`, else 1
    /// (assumed).
    pub fn resolve(report: &Report, given: Option<u64>) -> (u64, Self) {
        match (report.steps.batch_size, given) {
            (Some(b), _) if b > 0 => (u64::from(b), Self::TraceMarkers),
            (_, Some(b)) => (b, Self::Given),
            _ => (1, Self::Assumed),
        }
    }
}

/// Where a context length (KV tokens per sequence) comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextSource {
    /// The trace's step markers carry it (vLLM's detailed annotations).
    TraceMarkers,
    /// Given by the caller (`--ctx`).
    Given,
    /// Nothing says; the default is assumed.
    Assumed,
}

/// The context the caller asks for: `tokens`, given explicitly or only a default that a
/// trace's own context replaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextChoice {
    pub tokens: u64,
    pub given: bool,
}

impl ContextChoice {
    /// `given` when the caller named a context, else `default` (assumed where a trace says
    /// nothing).
    pub fn new(given: Option<u64>, default: u64) -> Self {
        Self {
            tokens: given.unwrap_or(default),
            given: given.is_some(),
        }
    }
}

impl ContextSource {
    /// The context of a trace's decode steps: the caller's when given, else the trace's
    /// markers', else the default (assumed).
    pub fn resolve(report: &Report, choice: ContextChoice) -> (u64, Self) {
        match (choice.given, report.steps.context_tokens) {
            (true, _) => (choice.tokens, Self::Given),
            (false, Some(c)) if c > 0 => (c, Self::TraceMarkers),
            _ => (choice.tokens, Self::Assumed),
        }
    }
}

/// A trace to place against the floor, at its batch.
#[derive(Debug, Clone)]
pub struct TraceAtBatch<'a> {
    pub report: &'a Report,
    pub batch: u64,
    pub batch_source: BatchSource,
    /// Said with the trace's line (how the batch was chosen, what differs from the options).
    pub notes: Vec<String>,
}

/// A trace that could not be placed against the floor.
#[derive(Debug, Clone, Serialize)]
pub struct NotPlaced {
    pub trace: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ModelSummary {
    pub model_type: String,
    pub params: u64,
    pub layers: u64,
    pub full_attention_layers: u64,
    pub linear_attention_layers: u64,
    /// KV heads of the whole model (a rank holds `kv_heads_per_rank` of them).
    pub kv_heads: u64,
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
    pub batch_source: BatchSource,
    /// Context (KV tokens per sequence) the trace's floors are taken at, and its source.
    pub ctx: u64,
    pub ctx_source: ContextSource,
    /// Tensor-parallel degree the trace's floors are taken at (one rank's), and its source.
    pub tp: u64,
    pub tp_source: TpSource,
    /// How the batch was chosen, and anything else to read with this trace's figures.
    pub notes: Vec<String>,
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

/// Builds the report for `batches`, placing each analysed trace at the batch given with it
/// (taken as given by the caller) and at context `ctx`.
pub fn roofline(
    m: &ModelSpec,
    hw: &HardwareSpec,
    fmt: WeightFormat,
    batches: &[u64],
    ctx: u64,
    traces: &[(Report, u64)],
) -> RooflineReport {
    let traces: Vec<TraceAtBatch> = traces
        .iter()
        .map(|(report, batch)| TraceAtBatch {
            report,
            batch: *batch,
            batch_source: BatchSource::Given,
            notes: Vec::new(),
        })
        .collect();
    roofline_of(m, hw, fmt, batches, ctx, &traces)
}

/// Builds the report for `batches`, placing each trace at its batch and at context `ctx`.
pub fn roofline_of(
    m: &ModelSpec,
    hw: &HardwareSpec,
    fmt: WeightFormat,
    batches: &[u64],
    ctx: u64,
    traces: &[TraceAtBatch],
) -> RooflineReport {
    let choice = ContextChoice {
        tokens: ctx,
        given: true,
    };
    roofline_at(m, hw, fmt, batches, choice, TpChoice::new(Some(1)), traces)
}

/// Builds the report for `batches`, placing each trace at its batch, at its context
/// ([`ContextSource::resolve`]) and at its tensor-parallel degree ([`TpSource::resolve`]).
/// Without a given context (degree), the floors by batch are taken at the first placed
/// trace's own context (world size) when it carries one.
pub fn roofline_at(
    m: &ModelSpec,
    hw: &HardwareSpec,
    fmt: WeightFormat,
    batches: &[u64],
    choice: ContextChoice,
    tp_choice: TpChoice,
    traces: &[TraceAtBatch],
) -> RooflineReport {
    let (ctx, ctx_source) = traces
        .iter()
        .map(|t| ContextSource::resolve(t.report, choice))
        .find(|&(_, s)| s == ContextSource::TraceMarkers)
        .unwrap_or(if choice.given {
            (choice.tokens, ContextSource::Given)
        } else {
            (choice.tokens, ContextSource::Assumed)
        });
    let (tp, tp_source) = traces
        .iter()
        .map(|t| TpSource::resolve(t.report, tp_choice))
        .find(|&(_, s)| s == TpSource::TraceWorldSize)
        .unwrap_or(if tp_choice.given {
            (tp_choice.ranks, TpSource::Given)
        } else {
            (tp_choice.ranks, TpSource::Assumed)
        });
    let rank = m.per_rank(tp);
    let floors = batches
        .iter()
        .map(|&b| step_floor(&rank, hw, fmt, b, ctx))
        .collect();
    let mut measured = Vec::new();
    let mut not_placed = Vec::new();
    for t in traces {
        let r = t.report;
        let batch = t.batch.max(1);
        let tpot = r
            .steps
            .tpot_ms
            .filter(|t| t.median > 0.0 && t.p10 > 0.0 && t.median.is_finite());
        let Some(tpot) = tpot else {
            not_placed.push(NotPlaced {
                trace: r.source.path.clone(),
                reason: format!(
                    "no decode-step time (TPOT) to place: {} decode steps",
                    r.steps.decode_steps
                ),
            });
            continue;
        };
        let (trace_ctx, trace_ctx_source) = ContextSource::resolve(r, choice);
        let (trace_tp, trace_tp_source) = TpSource::resolve(r, tp_choice);
        let trace_rank = m.per_rank(trace_tp);
        let floor = step_floor(&trace_rank, hw, fmt, batch, trace_ctx).step_floor_s * 1e3;
        let (buckets, buckets_without_floor) =
            bucket_floors(r, &trace_rank, hw, fmt, batch, trace_ctx);
        measured.push(MeasuredStep {
            trace: r.source.path.clone(),
            batch,
            batch_source: t.batch_source,
            ctx: trace_ctx,
            ctx_source: trace_ctx_source,
            tp: trace_tp,
            tp_source: trace_tp_source,
            notes: t.notes.clone(),
            decode_steps: r.steps.decode_steps,
            tpot_median_ms: tpot.median,
            tpot_p10_ms: tpot.p10,
            tok_per_s: batch as f64 / (tpot.median / 1e3),
            floor_ms: floor,
            pct_of_floor_median: 100.0 * floor / tpot.median,
            pct_of_floor_p10: 100.0 * floor / tpot.p10,
            buckets,
            buckets_without_floor,
        });
    }
    RooflineReport {
        schema_version: ROOFLINE_SCHEMA_VERSION,
        model: ModelSummary {
            model_type: m.model_type.clone(),
            params: m.params(),
            layers: m.layers,
            full_attention_layers: m.full_attention_layers(),
            linear_attention_layers: m.linear_attention_layers(),
            kv_heads: m.kv_heads,
            moe_experts: m.moe.as_ref().map(|x| x.experts),
            moe_top_k: m.moe.as_ref().map(|x| x.top_k),
            kv_bytes_per_token: m.kv_bytes_per_token(2.0),
            recurrent_state_bytes_per_seq: m.recurrent_state_bytes(),
        },
        hardware: hw.clone(),
        weights: fmt,
        ctx,
        ctx_source,
        tp,
        tp_source,
        kv_heads_per_rank: rank.kv_heads,
        ceilings: hw.ceilings,
        compute_peak: compute_peak(hw, fmt),
        crossover_batch: crossover_batch(hw, fmt),
        floors,
        verify: Vec::new(),
        measured,
        not_placed,
    }
}
