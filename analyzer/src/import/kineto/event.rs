//! Serde shapes of the Kineto events gapscope reads, and their mapping to trace rows.

use std::borrow::Cow;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};

use super::decimal::Nanos;

/// A pid/tid/id that Kineto writes as a number or a string ("stream 7", "Spans").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Id(pub u64);

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Id;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer or a string id")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Id, E> {
                Ok(Id(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Id, E> {
                Ok(Id(v as u64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Id, E> {
                Ok(Id(v as u64))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Id, E> {
                // "stream 7" -> 7; other strings hash to a stable id.
                let digits: String = v.chars().filter(|c| c.is_ascii_digit()).collect();
                if let Ok(n) = digits.parse::<u64>()
                    && !digits.is_empty()
                {
                    return Ok(Id(n));
                }
                let mut h: u64 = 0xcbf2_9ce4_8422_2325;
                for b in v.bytes() {
                    h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
                }
                Ok(Id(h))
            }
        }
        d.deserialize_any(V)
    }
}

/// A number Kineto may write as an integer, a float or a numeric string.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Num(pub f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Num, E> {
                v.trim()
                    .parse::<f64>()
                    .map(Num)
                    .map_err(|_| E::custom(format!("expected a number, found {v:?}")))
            }
        }
        d.deserialize_any(V)
    }
}

/// The fields of one trace event that matter here; everything else is skipped unparsed.
#[derive(Debug, Deserialize)]
pub(crate) struct Event<'a> {
    #[serde(borrow, default)]
    pub ph: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub name: Option<Cow<'a, str>>,
    /// The name's bytes when the fast walker read them unescaped and left the UTF-8 check to
    /// the importer's name cache (then `name` is `None`); serde never sets it.
    #[serde(skip)]
    pub name_raw: Option<&'a [u8]>,
    #[serde(default)]
    pub pid: Option<Id>,
    #[serde(default)]
    pub tid: Option<Id>,
    /// Microseconds, read exactly (see `decimal`).
    #[serde(default)]
    pub ts: Option<Nanos>,
    #[serde(default)]
    pub dur: Option<Nanos>,
    #[serde(borrow, default)]
    pub args: Option<Args<'a>>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Args<'a> {
    #[serde(default)]
    pub device: Option<Id>,
    #[serde(default)]
    pub context: Option<Id>,
    #[serde(default)]
    pub stream: Option<Id>,
    #[serde(default)]
    pub correlation: Option<Id>,
    #[serde(default, rename = "External id")]
    pub external_id: Option<Id>,
    #[serde(default, rename = "registers per thread")]
    pub registers: Option<Num>,
    #[serde(default, rename = "shared memory")]
    pub shared_memory: Option<Num>,
    #[serde(default)]
    pub grid: Option<Vec<Num>>,
    #[serde(default)]
    pub block: Option<Vec<Num>>,
    #[serde(default)]
    pub bytes: Option<Num>,
    #[serde(default, rename = "graph id")]
    pub graph_id: Option<Id>,
    #[serde(default, rename = "graph node id")]
    pub graph_node_id: Option<Id>,
    #[serde(borrow, default, rename = "kind")]
    pub kind: Option<Cow<'a, str>>,
    /// NCCL kernels (torch.distributed): the message's element count and element type.
    #[serde(default, rename = "In msg nelems")]
    pub in_msg_nelems: Option<Num>,
    #[serde(borrow, default)]
    pub dtype: Option<Cow<'a, str>>,
    /// `record_shapes`: each input's shape (kept only for the ops [`keeps_shapes`] names).
    #[serde(default, rename = "Input Dims")]
    pub input_dims: Option<InputDims>,
    /// What `export --chrome` adds (Kineto writes none of these): a kernel's declared FLOPs,
    /// a marker's source, phase, step, batch and tokens.
    #[serde(default)]
    pub flops: Option<Num>,
    #[serde(borrow, default, rename = "marker source")]
    pub marker_source: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    pub phase: Option<Cow<'a, str>>,
    #[serde(default)]
    pub step: Option<Num>,
    #[serde(default, rename = "batch size")]
    pub batch_size: Option<Num>,
    #[serde(default)]
    pub tokens: Option<Num>,
}

/// Kineto's `Input Dims`: each input's sizes when it is a flat list of numbers, and an empty
/// list otherwise (a scalar, a tensor list, an absent tensor).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct InputDims(pub Vec<Vec<i64>>);

impl<'de> Deserialize<'de> for InputDims {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Entry {
            Flat(Vec<Num>),
            Other(serde::de::IgnoredAny),
        }
        let v = Vec::<Entry>::deserialize(d)?;
        Ok(Self(
            v.into_iter()
                .map(|e| match e {
                    Entry::Flat(n) => n.into_iter().map(|x| x.0 as i64).collect(),
                    Entry::Other(_) => Vec::new(),
                })
                .collect(),
        ))
    }
}

/// Host ops whose `Input Dims` the importer keeps (the rest lose their `args` unread): the
/// attention op, whose query rows and key length tell how many tokens a forward adds to the
/// KV cache (speculative decoding's tokens per step).
pub(crate) fn keeps_shapes(head: &[u8]) -> bool {
    static SDPA: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
        std::sync::LazyLock::new(|| {
            memchr::memmem::Finder::new(b"\"aten::scaled_dot_product_attention\"")
        });
    SDPA.find(head).is_some()
}

/// The event categories gapscope imports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    Kernel,
    Memcpy,
    Memset,
    Runtime,
    Driver,
    UserAnnotation,
    GpuUserAnnotation,
    /// A framework op on the host (`cpu_op`; `Operator` in old Kineto).
    CpuOp,
    /// A Python function or `nn.Module` call (`with_stack` / `with_modules` traces).
    PythonFunction,
    /// NVML samples as counters (`export --chrome` of a recording).
    Telemetry,
}

impl Category {
    /// The `cat` value Kineto writes for the category.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Kernel => "kernel",
            Self::Memcpy => "gpu_memcpy",
            Self::Memset => "gpu_memset",
            Self::Runtime => "cuda_runtime",
            Self::Driver => "cuda_driver",
            Self::UserAnnotation => "user_annotation",
            Self::GpuUserAnnotation => "gpu_user_annotation",
            Self::CpuOp => "cpu_op",
            Self::PythonFunction => "python_function",
            Self::Telemetry => "gpu_telemetry",
        }
    }
}

/// Maps a `cat` value to a category; case-insensitive so old Kineto ("Kernel", "Memcpy",
/// "Runtime") and ROCm builds import too.
pub(crate) fn category(cat: &[u8]) -> Option<Category> {
    let eq = |s: &str| cat.eq_ignore_ascii_case(s.as_bytes());
    if eq("kernel") {
        Some(Category::Kernel)
    } else if eq("gpu_memcpy") || eq("memcpy") {
        Some(Category::Memcpy)
    } else if eq("gpu_memset") || eq("memset") {
        Some(Category::Memset)
    } else if eq("cuda_runtime") || eq("runtime") || eq("hip_runtime") || eq("cuda_runtime_api") {
        Some(Category::Runtime)
    } else if eq("cuda_driver") || eq("driver") || eq("hip_driver") {
        Some(Category::Driver)
    } else if eq("user_annotation") {
        Some(Category::UserAnnotation)
    } else if eq("gpu_user_annotation") {
        Some(Category::GpuUserAnnotation)
    } else if eq("cpu_op") || eq("operator") {
        Some(Category::CpuOp)
    } else if eq("python_function") {
        Some(Category::PythonFunction)
    } else if eq("gpu_telemetry") {
        Some(Category::Telemetry)
    } else {
        None
    }
}

/// Memcpy direction from a Kineto/roctracer name such as "Memcpy DtoD (Device -> Device)"
/// or "CopyDeviceToHost".
pub(crate) fn memcpy_kind(name: &str) -> gapscope_traces::MemopKind {
    use gapscope_traces::MemopKind as K;
    let n = name.to_ascii_lowercase();
    let table: [(&str, K); 10] = [
        ("dtod", K::DtoD),
        ("htod", K::HtoD),
        ("dtoh", K::DtoH),
        ("htoh", K::HtoH),
        ("ptop", K::PtoP),
        ("devicetodevice", K::DtoD),
        ("hosttodevice", K::HtoD),
        ("devicetohost", K::DtoH),
        ("hosttohost", K::HtoH),
        ("peertopeer", K::PtoP),
    ];
    table
        .iter()
        .find(|(k, _)| n.contains(k))
        .map(|(_, v)| *v)
        .unwrap_or(K::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_accept_numbers_and_strings() {
        let e: Event = serde_json::from_str(
            r#"{"pid":"stream 7","tid":3,"ts":1.5,"dur":"2","args":{"grid":[1,2,3]}}"#,
        )
        .unwrap();
        assert_eq!(e.pid, Some(Id(7)));
        assert_eq!(e.tid, Some(Id(3)));
        assert_eq!(e.ts.map(Nanos::round), Some(1_500));
        assert_eq!(e.dur.map(Nanos::round), Some(2_000));
    }

    #[test]
    fn memcpy_kinds_from_names() {
        use gapscope_traces::MemopKind as K;
        assert_eq!(memcpy_kind("Memcpy DtoD (Device -> Device)"), K::DtoD);
        assert_eq!(memcpy_kind("Memcpy HtoD (Pageable -> Device)"), K::HtoD);
        assert_eq!(memcpy_kind("CopyDeviceToHost"), K::DtoH);
        assert_eq!(memcpy_kind("Memcpy"), K::Unknown);
    }
}
