//! The trace manifest: provenance, hardware and run facts that are not rows.

use serde::{Deserialize, Serialize};

/// The native format's version. Bump it on any schema change and add a golden fixture.
pub const FORMAT_VERSION: u32 = 1;

/// The value of [`Manifest::format`] in every native trace.
pub const FORMAT_NAME: &str = "gapscope-trace";

/// What a trace was made from ([`Manifest::source_format`]). Stored as its name (`kineto`,
/// `nsys-sqlite`, `engine`, `cupti`, `synthetic`); a name this build does not know (or none)
/// is kept as written.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum SourceFormat {
    /// A Kineto (PyTorch profiler) JSON trace.
    Kineto,
    /// An Nsight Systems SQLite export.
    NsysSqlite,
    /// gapscope-engine's own records.
    Engine,
    /// The gapscope CUPTI profiler.
    Cupti,
    /// Made up by a program (tests, examples).
    Synthetic,
    /// None given (stored empty).
    #[default]
    Unknown,
    /// A name this build does not know, kept as written.
    Other(String),
}

impl SourceFormat {
    /// The name stored in the manifest.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Kineto => "kineto",
            Self::NsysSqlite => "nsys-sqlite",
            Self::Engine => "engine",
            Self::Cupti => "cupti",
            Self::Synthetic => "synthetic",
            Self::Unknown => "",
            Self::Other(s) => s,
        }
    }
}

impl From<&str> for SourceFormat {
    fn from(s: &str) -> Self {
        match s {
            "kineto" => Self::Kineto,
            "nsys-sqlite" => Self::NsysSqlite,
            "engine" => Self::Engine,
            "cupti" => Self::Cupti,
            "synthetic" => Self::Synthetic,
            "" => Self::Unknown,
            other => Self::Other(other.to_owned()),
        }
    }
}

impl std::fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SourceFormat {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SourceFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(Self::from(String::deserialize(d)?.as_str()))
    }
}

/// One GPU seen in the trace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuInfo {
    pub device: u32,
    pub name: String,
    pub sm_count: Option<u32>,
    pub total_memory_bytes: Option<u64>,
    /// Peak DRAM bandwidth when the source states it (nsys `TARGET_INFO_GPU.memoryBandwidth`).
    pub memory_bandwidth_bytes_per_s: Option<f64>,
    pub compute_capability: Option<String>,
    pub l2_cache_bytes: Option<u64>,
    pub sm_clock_khz: Option<u64>,
    /// Threads per warp (wavefront) when the source states it: 64 on AMD's CDNA GPUs, 32 on
    /// NVIDIA's, which tells the two apart when the name is missing.
    pub warp_size: Option<u32>,
}

impl GpuInfo {
    /// An AMD GPU, by its 64-wide wavefronts (Kineto's `warpSize` on ROCm).
    pub fn is_amd(&self) -> bool {
        self.warp_size == Some(64)
    }

    /// How the GPU is named in reports: its name, or, when the trace gives none, the
    /// vendor and compute version; with its multiprocessors as SMs (NVIDIA) or CUs (AMD).
    pub fn label(&self) -> String {
        let name = if !self.name.trim().is_empty() {
            self.name.trim().to_owned()
        } else {
            let vendor = if self.is_amd() { "AMD GPU" } else { "GPU" };
            match &self.compute_capability {
                Some(cc) => format!("unnamed {vendor}, compute capability {cc}"),
                None => format!("unnamed {vendor}"),
            }
        };
        let unit = if self.is_amd() { "CUs" } else { "SMs" };
        match self.sm_count {
            Some(n) => format!("{}: {name} ({n} {unit})", self.device),
            None => format!("{}: {name}", self.device),
        }
    }
}

/// Everything about a trace that is not a table row. Unknown fields from newer writers are
/// ignored and missing ones default, so old manifests keep loading.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Manifest {
    pub format: String,
    pub format_version: u32,
    /// Set by the writer's `finish`; a manifest left `false` means the writer never finished.
    pub complete: bool,
    pub tool_version: String,
    /// What wrote the trace: `kineto`, `nsys-sqlite`, `engine`, `cupti` or `synthetic`.
    pub source_format: SourceFormat,
    pub source_path: Option<String>,
    pub command_line: Option<String>,
    pub gpus: Vec<GpuInfo>,
    pub driver_version: Option<String>,
    pub cuda_version: Option<String>,
    pub model_config: Option<serde_json::Value>,
    pub engine_config: Option<serde_json::Value>,
    /// Records the capture tool reported as dropped.
    pub dropped_records: u64,
    /// The source (or this file) ended early; tables hold what could be read.
    pub truncated: bool,
    /// Where and how the input ended early, one clause per table or stream (also in `notes`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub truncation: Vec<String>,
    /// Source events left out because their time was missing or not a number (a Kineto
    /// complete event without a numeric `ts` or `dur`). Figures then miss their work.
    #[serde(skip_serializing_if = "is_zero")]
    pub untimed_events: u64,
    /// The ranks the source says it holds (Kineto `distributedInfo.rank`), in the order
    /// read; more than one means several ranks' events share this trace.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<u32>,
    /// The run's rank count, when the source gives it (Kineto `distributedInfo.world_size`,
    /// or the recorded process's `WORLD_SIZE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub world_size: Option<u32>,
    /// The recorded process's rank on its host (its `LOCAL_RANK`), when it had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local_rank: Option<u32>,
    /// Free-form facts worth showing a user (for example "no NVML").
    pub notes: Vec<String>,
    /// Time the capture tool itself took inside the recorded span, by kind, ns (CUPTI
    /// overhead records: "command buffer full", "CUPTI buffer flush", ...). Timings of a
    /// recording whose overhead is a noticeable share of its span are distorted.
    pub capture_overhead_ns: std::collections::BTreeMap<String, u64>,
    /// The source's own epoch offset (Kineto `baseTimeNanoseconds`), kept as given; table
    /// times are the source's timeline in ns.
    pub source_base_time_ns: Option<i64>,
    /// Record batches per table, written by `finish` so a reader can tell a stream cut at a
    /// batch boundary from a complete one.
    pub batches: std::collections::BTreeMap<String, u64>,
    /// Kernel and memop names as the source spelled them, keyed by the canonical name the
    /// importer gave them (mangled, another demangler's spelling, Kineto's memop names);
    /// only names that differ are kept. Absent when none differ.
    #[serde(skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub raw_names: std::collections::BTreeMap<String, String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Default for Manifest {
    fn default() -> Self {
        Self {
            format: FORMAT_NAME.to_owned(),
            format_version: FORMAT_VERSION,
            complete: false,
            tool_version: env!("CARGO_PKG_VERSION").to_owned(),
            source_format: SourceFormat::default(),
            source_path: None,
            command_line: None,
            gpus: Vec::new(),
            driver_version: None,
            cuda_version: None,
            model_config: None,
            engine_config: None,
            dropped_records: 0,
            truncated: false,
            truncation: Vec::new(),
            untimed_events: 0,
            ranks: Vec::new(),
            world_size: None,
            local_rank: None,
            notes: Vec::new(),
            capture_overhead_ns: Default::default(),
            source_base_time_ns: None,
            batches: Default::default(),
            raw_names: Default::default(),
        }
    }
}

impl Manifest {
    pub fn new(source_format: impl Into<SourceFormat>) -> Self {
        Self {
            source_format: source_format.into(),
            ..Self::default()
        }
    }

    /// GPU info for `device`, when the source described it.
    pub fn gpu(&self, device: u32) -> Option<&GpuInfo> {
        self.gpus.iter().find(|g| g.device == device)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_formats_are_stored_by_name_and_unknown_names_kept() {
        for name in [
            "kineto",
            "nsys-sqlite",
            "engine",
            "cupti",
            "synthetic",
            "",
            "kineto-json",
        ] {
            let f = SourceFormat::from(name);
            assert_eq!(f.as_str(), name);
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("{name:?}"));
            assert_eq!(serde_json::from_str::<SourceFormat>(&json).unwrap(), f);
        }
        assert_eq!(SourceFormat::from("engine"), SourceFormat::Engine);
        assert_eq!(Manifest::default().source_format, SourceFormat::Unknown);
    }
}
