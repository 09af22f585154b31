//! The seven trace tables. Times carry their clock in the name (`gpu_*` or `host_*`) and
//! every quantity its unit. Sentinels instead of nulls keep columns dense: name id 0 is
//! "none", -1 is "unknown" for signed quantities, 0 is "none" for graph ids.

use crate::columnar_table;
use crate::strings::{NO_STR, StrId};

columnar_table! {
    /// GPU kernel executions.
    pub struct KernelTable / KernelRow {
        device: u32 => UInt32Type = 0,
        context: u32 => UInt32Type = 0,
        stream: u32 => UInt32Type = 0,
        /// Launch correlation id; several kernels share one under a CUDA graph launch.
        correlation: u64 => UInt64Type = 0,
        name: StrId => UInt32Type = NO_STR,
        gpu_start_ns: i64 => Int64Type = 0,
        gpu_end_ns: i64 => Int64Type = 0,
        grid_x: u32 => UInt32Type = 0,
        grid_y: u32 => UInt32Type = 0,
        grid_z: u32 => UInt32Type = 0,
        block_x: u32 => UInt32Type = 0,
        block_y: u32 => UInt32Type = 0,
        block_z: u32 => UInt32Type = 0,
        registers_per_thread: u32 => UInt32Type = 0,
        static_smem_bytes: u32 => UInt32Type = 0,
        dynamic_smem_bytes: u32 => UInt32Type = 0,
        /// CUDA graph id, 0 when the kernel was not launched from a graph.
        graph_id: u32 => UInt32Type = 0,
        graph_node_id: u64 => UInt64Type = 0,
        /// Engine traces: the op that launched the kernel (name id, 0 = none).
        op: StrId => UInt32Type = NO_STR,
        /// Engine traces: decoder layer, -1 when not per-layer.
        layer: i32 => Int32Type = -1,
        /// Engine traces: bucket name id assigned at launch (0 = classify by rules).
        bucket: StrId => UInt32Type = NO_STR,
        /// Engine traces: model-derived minimum bytes moved, -1 when unknown.
        bytes: i64 => Int64Type = -1,
        /// Engine traces: model-derived FLOPs, -1 when unknown.
        flops: i64 => Int64Type = -1,
    }
}

columnar_table! {
    /// Memory copies and sets.
    pub struct MemopTable / MemopRow {
        device: u32 => UInt32Type = 0,
        context: u32 => UInt32Type = 0,
        stream: u32 => UInt32Type = 0,
        correlation: u64 => UInt64Type = 0,
        name: StrId => UInt32Type = NO_STR,
        /// A [`MemopKind`] code.
        kind: u8 => UInt8Type = 0,
        bytes: u64 => UInt64Type = 0,
        gpu_start_ns: i64 => Int64Type = 0,
        gpu_end_ns: i64 => Int64Type = 0,
        graph_id: u32 => UInt32Type = 0,
        /// Engine traces: the op that issued the copy (name id, 0 = none); absent in traces
        /// written before it existed.
        op: StrId => UInt32Type = NO_STR,
        /// Engine traces: decoder layer, -1 when not per-layer.
        layer: i32 => Int32Type = -1,
    }
}

columnar_table! {
    /// Host-side API calls (kernel, memcpy and graph launches) for launch-gap analysis.
    pub struct LaunchTable / LaunchRow {
        pid: u32 => UInt32Type = 0,
        tid: u64 => UInt64Type = 0,
        correlation: u64 => UInt64Type = 0,
        name: StrId => UInt32Type = NO_STR,
        /// A [`LaunchApi`] code.
        api: u8 => UInt8Type = 0,
        host_start_ns: i64 => Int64Type = 0,
        host_end_ns: i64 => Int64Type = 0,
    }
}

columnar_table! {
    /// Step, phase, NVTX and annotation ranges. A range on the GPU timeline fills the
    /// `gpu_*` pair, one on the host timeline the `host_*` pair; the other pair is
    /// `i64::MIN`.
    pub struct MarkerTable / MarkerRow {
        name: StrId => UInt32Type = NO_STR,
        /// A [`MarkerSource`] code.
        source: u8 => UInt8Type = 0,
        /// A [`Phase`] code.
        phase: u8 => UInt8Type = 0,
        device: u32 => UInt32Type = 0,
        tid: u64 => UInt64Type = 0,
        host_start_ns: i64 => Int64Type = i64::MIN,
        host_end_ns: i64 => Int64Type = i64::MIN,
        gpu_start_ns: i64 => Int64Type = i64::MIN,
        gpu_end_ns: i64 => Int64Type = i64::MIN,
        /// Step index from the engine, -1 when unknown.
        step: i64 => Int64Type = -1,
        /// Sequences in the batch, 0 when unknown.
        batch_size: u32 => UInt32Type = 0,
        /// Tokens processed in the range, 0 when unknown.
        tokens: u32 => UInt32Type = 0,
    }
}

columnar_table! {
    /// NVML telemetry samples.
    pub struct SampleTable / SampleRow {
        device: u32 => UInt32Type = 0,
        host_ns: i64 => Int64Type = 0,
        sm_clock_mhz: u32 => UInt32Type = 0,
        mem_clock_mhz: u32 => UInt32Type = 0,
        power_mw: u32 => UInt32Type = 0,
        temperature_c: u32 => UInt32Type = 0,
        gpu_util_pct: u32 => UInt32Type = 0,
        mem_util_pct: u32 => UInt32Type = 0,
        /// NVML clocks-event (throttle) reason bit mask.
        throttle_reasons: u64 => UInt64Type = 0,
    }
}

columnar_table! {
    /// Host-side scopes: framework ops (Kineto `cpu_op`), Python functions and `nn.Module`
    /// calls (`python_function`). They nest by time on their thread; analysis reads them
    /// together with the host-side markers (CPU annotations, NVTX) to name what the host was
    /// doing while the GPU sat idle, and to attribute each kernel to the scopes around its
    /// launch. Traces without host events have none.
    pub struct ScopeTable / ScopeRow {
        pid: u32 => UInt32Type = 0,
        tid: u64 => UInt64Type = 0,
        name: StrId => UInt32Type = NO_STR,
        /// A [`ScopeKind`] code.
        kind: u8 => UInt8Type = 0,
        host_start_ns: i64 => Int64Type = 0,
        host_end_ns: i64 => Int64Type = 0,
    }
}

columnar_table! {
    /// Input shapes of selected host ops (Kineto's `Input Dims` with `record_shapes`), one row
    /// per axis: which scope, which input, which axis, its size. Only ops whose shapes an
    /// analysis reads are kept (attention: query rows and key length give the tokens each
    /// forward adds to the KV cache); traces without shapes have none.
    pub struct InputDimTable / InputDimRow {
        /// Row of the op in the scope table.
        scope: u32 => UInt32Type = 0,
        /// Position of the input in the op's argument list.
        input: u16 => UInt16Type = 0,
        axis: u16 => UInt16Type = 0,
        size: i64 => Int64Type = 0,
    }
}

/// How torch.profiler's `with_modules` names an `nn.Module` call (`nn.Module: LlamaAttention_0`);
/// NVTX ranges pushed around module calls use the same names.
pub const MODULE_CALL_PREFIX: &str = "nn.Module: ";

/// What a host scope is, stored in [`ScopeTable::kind`]. Codes only grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum ScopeKind {
    Other = 0,
    /// A framework op (`aten::mm`, `vllm::unified_attention`).
    Op = 1,
    /// An `nn.Module` call (`nn.Module: LlamaAttention_0`).
    Module = 2,
    /// A Python function (`modeling_llama.py(120): forward`).
    Python = 3,
    /// A user annotation or NVTX range on the host.
    Annotation = 4,
}

impl ScopeKind {
    pub const ALL: [ScopeKind; 5] = [
        Self::Other,
        Self::Op,
        Self::Module,
        Self::Python,
        Self::Annotation,
    ];

    pub fn from_code(c: u8) -> Self {
        Self::ALL.get(c as usize).copied().unwrap_or(Self::Other)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Other => "other",
            Self::Op => "op",
            Self::Module => "module",
            Self::Python => "python",
            Self::Annotation => "annotation",
        }
    }
}

/// Kind of a memory operation, stored as `u8` in [`MemopTable::kind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum MemopKind {
    Unknown = 0,
    HtoD = 1,
    DtoH = 2,
    DtoD = 3,
    HtoH = 4,
    PtoP = 5,
    Memset = 6,
}

impl MemopKind {
    pub const ALL: [MemopKind; 7] = [
        Self::Unknown,
        Self::HtoD,
        Self::DtoH,
        Self::DtoD,
        Self::HtoH,
        Self::PtoP,
        Self::Memset,
    ];

    pub fn from_code(c: u8) -> Self {
        Self::ALL.get(c as usize).copied().unwrap_or(Self::Unknown)
    }

    /// The short name used in rules and reports (`DtoD`, `Memset`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "Unknown",
            Self::HtoD => "HtoD",
            Self::DtoH => "DtoH",
            Self::DtoD => "DtoD",
            Self::HtoH => "HtoH",
            Self::PtoP => "PtoP",
            Self::Memset => "Memset",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|k| k.as_str().eq_ignore_ascii_case(s))
    }
}

/// Which host API a launch record is, stored in [`LaunchTable::api`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum LaunchApi {
    Other = 0,
    Runtime = 1,
    Driver = 2,
}

/// Where a marker came from, stored in [`MarkerTable::source`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MarkerSource {
    Other = 0,
    Engine = 1,
    Nvtx = 2,
    KinetoGpuAnnotation = 3,
    KinetoUserAnnotation = 4,
}

impl MarkerSource {
    pub fn from_code(c: u8) -> Self {
        match c {
            1 => Self::Engine,
            2 => Self::Nvtx,
            3 => Self::KinetoGpuAnnotation,
            4 => Self::KinetoUserAnnotation,
            _ => Self::Other,
        }
    }

    /// The name an export writes (`export --chrome`'s `marker source` argument).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Other => "other",
            Self::Engine => "engine",
            Self::Nvtx => "nvtx",
            Self::KinetoGpuAnnotation => "gpu_user_annotation",
            Self::KinetoUserAnnotation => "user_annotation",
        }
    }

    /// The source an [`as_str`](Self::as_str) name stands for.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Other,
            Self::Engine,
            Self::Nvtx,
            Self::KinetoGpuAnnotation,
            Self::KinetoUserAnnotation,
        ]
        .into_iter()
        .find(|m| m.as_str() == s)
    }
}

/// Phase of a marker range or step, stored in [`MarkerTable::phase`]. Codes only grow:
/// a file written with a newer code reads as `Unknown` in an older build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum Phase {
    Unknown = 0,
    Prefill = 1,
    Decode = 2,
    Sample = 3,
    /// One engine step that runs prefill (context) and decode (generation) requests together.
    Mixed = 4,
    /// One training iteration (forward, backward and optimizer step).
    Train = 5,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Self::Unknown,
        Self::Prefill,
        Self::Decode,
        Self::Sample,
        Self::Mixed,
        Self::Train,
    ];

    pub fn from_code(c: u8) -> Self {
        Self::ALL.get(c as usize).copied().unwrap_or(Self::Unknown)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Prefill => "prefill",
            Self::Decode => "decode",
            Self::Sample => "sample",
            Self::Mixed => "mixed",
            Self::Train => "train",
        }
    }

    /// The phase an [`as_str`](Self::as_str) name stands for.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == s)
    }
}

/// The kernel columns analysis reads; a projected read of just these keeps a 100M-kernel
/// trace within memory.
pub const KERNEL_ANALYSIS_COLUMNS: &[&str] = &[
    "device",
    "stream",
    "correlation",
    "name",
    "gpu_start_ns",
    "gpu_end_ns",
    "graph_id",
    "bucket",
    "bytes",
    "flops",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_roundtrip_keeps_rows() {
        let mut t = KernelTable::default();
        for i in 0..5 {
            t.push(KernelRow {
                correlation: i,
                gpu_start_ns: i as i64 * 10,
                gpu_end_ns: i as i64 * 10 + 5,
                layer: i as i32,
                ..Default::default()
            });
        }
        let b = t.to_batch(1..4).unwrap();
        assert_eq!(b.num_rows(), 3);
        let mut r = KernelTable::default();
        r.append_batch(&b).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r.row(0), t.row(1));
        assert!(r.is_complete());
        let projected = b.project(&[5, 6]).unwrap();
        let mut p = KernelTable::default();
        p.append_batch(&projected).unwrap();
        assert_eq!(p.len(), 3);
        assert!(!p.is_complete());
        assert_eq!(p.gpu_end_ns, vec![15, 25, 35]);
    }

    /// A sparse column stays empty while every value is its default, and is filled in with
    /// the default for the rows before the first batch that holds another value.
    #[test]
    fn sparse_columns_load_only_when_they_hold_a_value() {
        let mut t = KernelTable::default();
        for i in 0..6 {
            t.push(KernelRow {
                correlation: i,
                bytes: if i == 4 { 4096 } else { -1 },
                ..Default::default()
            });
        }
        let sparse = ["bytes", "flops", "graph_id"];
        let mut r = KernelTable::default();
        for range in [0..2, 2..4, 4..6] {
            r.append_batch_sparse(&t.to_batch(range).unwrap(), &sparse)
                .unwrap();
        }
        assert_eq!(r.len(), 6);
        assert_eq!(r.bytes, t.bytes);
        assert!(r.flops.is_empty() && r.graph_id.is_empty());
        assert_eq!(r.correlation, t.correlation);
        assert_eq!(r.layer, t.layer, "not sparse: loaded although all default");
    }

    #[test]
    fn memop_kind_codes_roundtrip() {
        for k in MemopKind::ALL {
            assert_eq!(MemopKind::from_code(k as u8), k);
            assert_eq!(MemopKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(MemopKind::from_code(200), MemopKind::Unknown);
    }

    #[test]
    fn phase_codes_roundtrip_and_old_codes_keep_their_meaning() {
        for p in Phase::ALL {
            assert_eq!(Phase::from_code(p as u8), p);
        }
        // Codes written by older builds.
        assert_eq!(Phase::from_code(0), Phase::Unknown);
        assert_eq!(Phase::from_code(1), Phase::Prefill);
        assert_eq!(Phase::from_code(2), Phase::Decode);
        assert_eq!(Phase::from_code(3), Phase::Sample);
        assert_eq!(Phase::from_code(4), Phase::Mixed);
        assert_eq!(Phase::from_code(5), Phase::Train);
        assert_eq!(Phase::from_code(200), Phase::Unknown);
    }
}
