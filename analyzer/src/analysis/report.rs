//! The typed report that leaves the analyzer: every renderer (table, JSON, CSV, Markdown)
//! reads this, nothing else.

use serde::Serialize;

use super::stats::Summary;
use super::steps::{PhaseSource, StepKind, StepSource};
use super::telemetry::TelemetryReport;
use crate::bucket::Bucket;

/// Version of the JSON report schema; bump on any breaking change.
pub const REPORT_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub source: SourceInfo,
    pub warnings: Vec<String>,
    /// Whether the step set looks like real decode iterations; `gate` and `diff` refuse
    /// reports whose steps are implausible.
    pub plausibility: super::plausibility::Plausibility,
    pub devices: Vec<DeviceBusy>,
    pub steps: StepReport,
    /// Speculative decoding: draft and verify forwards, tokens per step and acceptance
    /// (absent for a plain run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub speculative: Option<super::spec::SpecReport>,
    /// What `buckets` covers.
    pub bucket_scope: BucketScope,
    /// Per-bucket decomposition of the decode steps; of the iterations on a training trace;
    /// of all steps when none is a decode step; of the whole trace without steps.
    pub buckets: Vec<BucketRow>,
    /// Per-bucket decomposition of prefill steps, when any were found.
    pub prefill_buckets: Vec<BucketRow>,
    pub other: OtherReport,
    /// NVML clocks, power and throttling during the decode steps; `None` (JSON `null`) when
    /// the trace carries no telemetry samples.
    pub telemetry: Option<TelemetryReport>,
    /// The capture tool's own overhead when it distorts the timings (more than 1% of the
    /// recorded span); `None` otherwise. Also the first warning.
    pub distortion: Option<super::distortion::Distortion>,
    /// Why the GPU sat idle in the steps, from the host side (launch records and host
    /// scopes); `None` without steps or launch records.
    pub host_idle: Option<super::host::HostIdleReport>,
    /// `report --by`: GPU and host time grouped by scope, op, module or layer.
    pub groups: Option<super::host::GroupReport>,
    /// Communication kernels in the steps: their time includes waiting for the other ranks,
    /// which one trace cannot tell from transfer (absent without them).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub communication: Option<CommunicationTime>,
}

/// The communication bucket of a one-rank report, marked as waiting included.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CommunicationTime {
    /// Median ms/step of communication kernels (waiting and transfer together).
    pub ms_per_step: f64,
    pub calls_per_step: Option<f64>,
    pub share_of_step_pct: Option<f64>,
    /// Always true on one trace: the kernels' time includes waiting for peers.
    pub includes_waiting: bool,
    /// The messages against the GPU links' floor, when the trace gives the messages' sizes
    /// and the rank count and the GPU table knows the link.
    pub floor: Option<super::ranks::collectives::MessageFloor>,
}

impl CommunicationTime {
    /// From the report's bucket rows, when communication kernels ran in its steps.
    pub fn of(buckets: &[BucketRow]) -> Option<Self> {
        let b = buckets
            .iter()
            .find(|b| b.bucket == crate::Bucket::Comm && b.calls > 0)?;
        Some(Self {
            ms_per_step: b.ms_per_step.map_or(b.total_ms, |s| s.median),
            calls_per_step: b.calls_per_step,
            share_of_step_pct: b.share_of_step_pct,
            includes_waiting: true,
            floor: None,
        })
    }
}

/// The steps the bucket table is taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BucketScope {
    /// Per decode step.
    DecodeSteps,
    /// Per training iteration.
    TrainingIterations,
    /// Per step, over every step (the trace has prefill or mixed steps but no pure decode).
    AllSteps,
    /// Over the whole trace (no steps found).
    WholeTrace,
}

impl BucketScope {
    /// The table's title.
    pub fn title(self) -> &'static str {
        match self {
            Self::DecodeSteps => "buckets per decode step",
            Self::TrainingIterations => "buckets per training iteration",
            Self::AllSteps => "buckets per step (no pure decode step: prefill and mixed steps)",
            Self::WholeTrace => "buckets over the whole trace",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SourceInfo {
    /// The file analysed (as given), or the manifest's source path when none was given.
    pub path: String,
    /// The file a native trace was converted from, when it differs from `path`.
    pub converted_from: Option<String>,
    pub format: String,
    pub gpus: Vec<String>,
    /// Model name of the GPU the steps and buckets refer to, when the trace names it.
    pub step_gpu: Option<String>,
    pub kernels: usize,
    pub memops: usize,
    pub launches: usize,
    pub markers: usize,
    /// Host scopes (framework ops, Python functions, nn.Module calls) in the trace.
    pub scopes: usize,
    /// Host graph-launch calls (cudaGraphLaunch, cuGraphLaunch, hipGraphLaunch).
    pub graph_launches: usize,
    /// Kernels replayed from a CUDA/HIP graph (graph id set, or launched by a graph launch).
    pub graph_kernels: usize,
    /// The input ended early: the tables hold only what could be read (the `truncated`
    /// defect says where).
    pub truncated: bool,
    /// Events left out because their time was missing or not a number.
    pub untimed_events: u64,
    /// Decoder layers the model ran, counted from the layer numbers of its module scopes
    /// (`LlamaDecoderLayer_31`) or the engine's layer column; absent when the trace names
    /// none. Two runs of different depths are different models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decoder_layers: Option<u32>,
    /// The run's rank count when the trace gives it (Kineto's `distributedInfo.world_size`,
    /// the recorded `WORLD_SIZE`): the roofline's tensor-parallel degree unless `--tp` says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// The model and the engine settings the run recorded (gapscope-engine traces): what
    /// says whether two traces are runs of one model and which levers each had.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model_config: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_config: Option<serde_json::Value>,
    /// What makes the trace unfit to vouch for its figures; the gate never passes a trace
    /// with one.
    pub defects: Vec<crate::import::defects::SourceDefect>,
    pub notes: Vec<String>,
}

/// Overlap-correct GPU busy time of one device over its span (first to last activity).
#[derive(Debug, Clone, Serialize)]
pub struct DeviceBusy {
    pub device: u32,
    pub span_ns: i64,
    pub kernel_busy_ns: i64,
    /// Kernels plus memcpys and memsets.
    pub busy_ns: i64,
    pub kernel_busy_pct: f64,
    pub busy_pct: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    /// How steps were found. JSON: `source`, the sentence, and `source_kind`, the value.
    #[serde(flatten, serialize_with = "step_source_fields")]
    pub source: StepSource,
    /// What the steps are: `inference_steps` (prefill, decode and mixed steps) or
    /// `training_iterations` (then the decode fields are empty and `iteration_ms` holds the
    /// iterations; the idle figures below cover the iterations).
    pub kind: StepKind,
    /// Engine or framework whose step markers delimit the steps (`vLLM V1`, `SGLang`,
    /// `TensorRT-LLM`, `PyTorch profiler`, ...), when markers do.
    pub engine: Option<String>,
    /// How the steps' phases were found (marker metadata, kernel names, ...). JSON:
    /// `phase_source`, the sentence (empty when not described), and `phase_source_kind`.
    #[serde(flatten, serialize_with = "phase_source_fields")]
    pub phase_source: PhaseSource,
    /// Why the trace counts as training (optimizer markers, backward kernels), when it does.
    pub training: Option<String>,
    /// The device steps and the decomposition refer to.
    pub device: Option<u32>,
    /// Pure decode steps (the TPOT samples come from these only).
    pub decode_steps: usize,
    pub prefill_steps: usize,
    /// Steps that run prefill and decode requests together; not in TPOT.
    pub mixed_steps: usize,
    /// Training iterations (0 on inference traces).
    pub iterations: usize,
    /// Sequences per decode step, when the markers say (engine markers carry it).
    pub batch_size: Option<u32>,
    /// Median KV-cache length of a decode request, tokens, when the markers say (vLLM's
    /// detailed annotations); the roofline's context unless `--ctx` is given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u64>,
    /// Time per output token: start-to-start period of consecutive decode steps, ms.
    pub tpot_ms: Option<Summary>,
    /// Decode step durations (first to last GPU activity of each step window), ms; the only
    /// step-time figure when a trace holds a single decode step.
    pub decode_span_ms: Option<Summary>,
    /// Training iteration durations (each iteration's GPU window), ms.
    pub iteration_ms: Option<Summary>,
    /// Start-to-start period of consecutive training iterations, ms.
    pub iteration_period_ms: Option<Summary>,
    /// GPU busy (kernels + memops, interval union) over the decode window (the iterations
    /// on a training trace), %.
    pub decode_busy_pct: Option<f64>,
    /// Idle inside steps (between the first and last GPU activity of a step), ms/step.
    pub launch_gap_ms_per_step: Option<f64>,
    /// Idle between consecutive decode steps (iterations), ms/step.
    pub host_gap_ms_per_step: Option<f64>,
    pub launch_gap_pct: Option<f64>,
    pub host_gap_pct: Option<f64>,
    pub worst_stall: Option<Stall>,
    /// Prefill step durations, ms.
    pub prefill_ms: Option<Summary>,
    /// Mixed (prefill + decode) step durations, ms.
    pub mixed_ms: Option<Summary>,
    /// Per-step series behind the summaries (for the gate's statistics; not in JSON).
    #[serde(skip)]
    pub series: StepSeries,
}

fn step_source_fields<S: serde::Serializer>(v: &StepSource, s: S) -> Result<S::Ok, S::Error> {
    crate::text::text_and_kind(v, s, "source", "source_kind")
}

fn phase_source_fields<S: serde::Serializer>(v: &PhaseSource, s: S) -> Result<S::Ok, S::Error> {
    crate::text::text_and_kind(v, s, "phase_source", "phase_source_kind")
}

/// Per-step samples of the decode steps, in step order.
#[derive(Debug, Clone, Default)]
pub struct StepSeries {
    /// Start-to-start periods of consecutive decode steps, ms (the TPOT samples).
    pub tpot_ms: Vec<f64>,
    /// GPU idle inside each decode step with GPU work, ms.
    pub launch_gap_ms: Vec<f64>,
    /// GPU idle between consecutive decode steps with GPU work, ms.
    pub host_gap_ms: Vec<f64>,
}

/// The longest GPU idle stretch inside the decode window.
#[derive(Debug, Clone, Serialize)]
pub struct Stall {
    pub ms: f64,
    /// Decode step index (0-based) the stall ends in.
    pub step: usize,
    pub gpu_start_ns: i64,
    /// Whether it sits between steps (host gap) or inside one (launch gap).
    pub between_steps: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct BucketRow {
    pub bucket: Bucket,
    pub total_ms: f64,
    /// Distribution over steps; `None` when the trace has no steps.
    pub ms_per_step: Option<Summary>,
    pub calls: u64,
    pub calls_per_step: Option<f64>,
    /// Share of summed GPU activity time in scope, %.
    pub share_of_busy_pct: f64,
    /// Mean ms/step over mean TPOT, %.
    pub share_of_step_pct: Option<f64>,
    pub top: Vec<NameTime>,
    /// ms of this bucket in each step, in step order (for the gate's statistics; not in
    /// JSON, where it would dwarf everything else on long traces).
    #[serde(skip)]
    pub per_step_ms: Vec<f64>,
    /// Engine traces: the model-derived cost of the bucket's kernels.
    pub cost: Option<BucketCost>,
}

/// Bytes and FLOPs per step that engine launches declare, and the time of those kernels.
#[derive(Debug, Clone, Copy, Serialize, PartialEq)]
pub struct BucketCost {
    pub bytes_per_step: f64,
    pub flops_per_step: f64,
    pub costed_ms_per_step: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct NameTime {
    pub name: String,
    pub ms: f64,
    pub calls: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct OtherReport {
    /// `other` kernels' share of kernel time in scope, %.
    pub share_of_kernel_time_pct: f64,
    pub top: Vec<NameTime>,
}

impl SourceInfo {
    /// Names the file the report was made from: `path` becomes it, and the source the
    /// trace was converted from (a `.gst` made by `import`) moves to `converted_from`.
    pub fn set_input_path(&mut self, input: &str) {
        if self.path != input {
            if !self.path.is_empty() {
                self.converted_from = Some(std::mem::take(&mut self.path));
            }
            self.path = input.to_owned();
        }
    }
}
