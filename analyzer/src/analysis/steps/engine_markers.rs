//! The step markers that engines and frameworks write, in one table: the name pattern, the
//! engine, what a range of that name is (a step, an iteration, never a step), the tier it is
//! tried in, and how its phase, batch and token counts are read from the name.
//!
//! Sources of the names (checked against the engines' code and real traces):
//! - vLLM V1 (`gpu_worker.py` `annotate_profile`): `execute_context_N(T)_generation_M(K)`
//!   (N context = prefill requests with T tokens, M generation = decode requests with K
//!   tokens; some builds write `(T_Q)` with a second figure), and with
//!   `detailed_trace_annotation` `execute_S_context_N(sqT…)_generation_M(sqK…)` (S scheduled
//!   tokens). Early V1 builds wrote `execute_new_N_cached_M`. V0 profiles are wrapped by hand
//!   in `execute_model`.
//! - SGLang: `step[DECODE bs=32]`, `step[EXTEND bs=15 toks=15360]` (the forward mode, batch
//!   size and tokens); CUDA-graph capture runs as `capture_N_DECODE` (vLLM: `capture_N_FULL`).
//! - TensorRT-LLM: the PyTorch executor's NVTX range `[Executor] _forward_step I: N ctx reqs,
//!   M gen reqs` (`py_executor.py`, some builds add `T ctx tokens`), the C++ runtime's
//!   `executeStep: N ctx reqs, M gen reqs` (`trtGptModelInflightBatching.cpp`).
//! - HF `generate` and hand-made decode loops: user annotations that name the phase
//!   (`decode_step`, `prefill`), inside a `generate` wrapper.
//! - PyTorch: `ProfilerStep#N` around each `profiler.step()` iteration; training sub-phases
//!   `Optimizer.step#SGD.step`, `Optimizer.zero_grad#…`, `DistributedDataParallel.forward`,
//!   `## forward ##`-style labels, and collectives (`nccl:all_reduce`).
//! - gapscope-engine: engine markers whose phase, batch and tokens are columns.

use std::sync::LazyLock;

use gapscope_traces::{MarkerSource, Phase};
use regex::{Captures, Regex};

use super::DEFAULT_STEP_REGEX;

/// What a marker range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// One model step of an inference engine or a user's decode loop.
    Step,
    /// One iteration of a profiled loop (`ProfilerStep#N`): the unit of training traces.
    Iteration,
    /// Never a step: graph capture, training sub-phases, collectives, compiled-graph calls.
    Exclude,
}

/// The order in which marker kinds are tried: the first tier with matching ranges delimits
/// the steps; inside a tier the innermost ranges win.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    /// Engine step markers that carry the step's phase and sizes.
    Engine,
    /// Engine step markers without metadata.
    EngineBare,
    /// Annotations that name a phase (`decode_step`, `prefill`).
    PhaseName,
    /// `ProfilerStep#N`.
    ProfilerStep,
    /// Other ranges whose name says step, forward or generate.
    Generic,
}

impl Tier {
    /// Tiers tried on inference traces, in order.
    pub const INFERENCE: [Tier; 5] = [
        Tier::Engine,
        Tier::EngineBare,
        Tier::PhaseName,
        Tier::ProfilerStep,
        Tier::Generic,
    ];
    /// Tiers tried on training traces: the iteration is the unit, not a forward pass.
    pub const TRAINING: [Tier; 2] = [Tier::ProfilerStep, Tier::Generic];
}

/// What a marker says about its step. `Phase::Unknown`, 0: not said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    pub phase: Phase,
    /// Requests (sequences) in the step.
    pub batch: u32,
    /// Tokens the step processes.
    pub tokens: u64,
    /// Mean KV-cache length of the step's decode requests, tokens (vLLM's detailed
    /// annotations: the generation group's `sk` over its request count).
    pub context: u64,
}

impl Default for Meta {
    fn default() -> Self {
        Self {
            phase: Phase::Unknown,
            batch: 0,
            tokens: 0,
            context: 0,
        }
    }
}

enum Reader {
    /// The name says nothing about the step.
    Nothing,
    /// gapscope-engine markers: phase, batch and tokens are columns of the marker row.
    Columns,
    /// The words prefill / decode / mixed in the name.
    PhaseWords,
    /// Counts parsed from the name's captures.
    Name(fn(&Captures) -> Meta),
}

/// One kind of marker.
pub struct MarkerKind {
    pub id: &'static str,
    /// Engine or framework that writes it; `None` for annotations anyone may write.
    pub engine: Option<&'static str>,
    pub tier: Tier,
    pub role: Role,
    /// Only markers from this source (gapscope-engine markers are recognised by source).
    source: Option<MarkerSource>,
    pattern: &'static str,
    /// What the metadata in the name is, for the report (empty when it has none).
    pub says: &'static str,
    read: Reader,
}

/// The marker kinds, exclusions first: the first kind that matches a name decides.
pub static KINDS: &[MarkerKind] = &[
    MarkerKind {
        id: "graph_capture",
        engine: Some("SGLang/vLLM"),
        tier: Tier::Engine,
        role: Role::Exclude,
        source: None,
        pattern: r"(?i)^capture_\d+_|cuda_?graph_?capture",
        says: "",
        read: Reader::Nothing,
    },
    MarkerKind {
        id: "optimizer",
        engine: Some("PyTorch"),
        tier: Tier::Generic,
        role: Role::Exclude,
        source: None,
        pattern: r"^Optimizer\.\w+#",
        says: "",
        read: Reader::Nothing,
    },
    MarkerKind {
        id: "module_wrapper_forward",
        engine: Some("PyTorch"),
        tier: Tier::Generic,
        role: Role::Exclude,
        source: None,
        pattern: r"^(DistributedDataParallel|FullyShardedDataParallel|DataParallel)\.forward$",
        says: "",
        read: Reader::Nothing,
    },
    MarkerKind {
        // NVTX ranges a script pushes around each nn.Module call (named as torch.profiler's
        // with_modules names them): scopes, never steps, though "DecoderLayer" holds
        // "decode".
        id: "module_call",
        engine: Some("PyTorch"),
        tier: Tier::Generic,
        role: Role::Exclude,
        source: None,
        pattern: r"^nn\.Module: ",
        says: "",
        read: Reader::Nothing,
    },
    MarkerKind {
        id: "hash_label",
        engine: Some("PyTorch"),
        tier: Tier::Generic,
        role: Role::Exclude,
        source: None,
        pattern: r"^##.*##$",
        says: "",
        read: Reader::Nothing,
    },
    MarkerKind {
        id: "collective",
        engine: Some("PyTorch"),
        tier: Tier::Generic,
        role: Role::Exclude,
        source: None,
        pattern: r"^(nccl|rccl|gloo|c10d)[:_]",
        says: "",
        read: Reader::Nothing,
    },
    MarkerKind {
        id: "gapscope_engine",
        engine: Some("gapscope-engine"),
        tier: Tier::Engine,
        role: Role::Step,
        source: Some(MarkerSource::Engine),
        pattern: r"",
        says: "engine step records",
        read: Reader::Columns,
    },
    MarkerKind {
        id: "vllm_v1_detailed",
        engine: Some("vLLM V1"),
        tier: Tier::Engine,
        role: Role::Step,
        source: None,
        pattern: r"^execute_(\d+)_context_(\d+)\(sq(\d+)[^)]*\)_generation_(\d+)\(sq(\d+)(?:sk(\d+))?[^)]*\)$",
        says: "context/generation request counts",
        read: Reader::Name(vllm_detailed),
    },
    MarkerKind {
        id: "vllm_v1",
        engine: Some("vLLM V1"),
        tier: Tier::Engine,
        role: Role::Step,
        source: None,
        pattern: r"^execute_context_(\d+)\((\d+)[^)]*\)_generation_(\d+)\((\d+)[^)]*\)$",
        says: "context/generation request counts",
        read: Reader::Name(vllm_v1),
    },
    MarkerKind {
        id: "vllm_v1_new_cached",
        engine: Some("vLLM V1"),
        tier: Tier::Engine,
        role: Role::Step,
        source: None,
        pattern: r"^execute_new_(\d+)_cached_(\d+)$",
        says: "new/cached request counts",
        read: Reader::Name(vllm_new_cached),
    },
    MarkerKind {
        id: "sglang_step",
        engine: Some("SGLang"),
        tier: Tier::Engine,
        role: Role::Step,
        source: None,
        pattern: r"^step\[([A-Z_]+)((?:\s+\w+=\d+)*)\s*\]$",
        says: "forward mode and batch size",
        read: Reader::Name(sglang),
    },
    MarkerKind {
        id: "trtllm_forward_step",
        engine: Some("TensorRT-LLM"),
        tier: Tier::Engine,
        role: Role::Step,
        source: None,
        pattern: r"^\[Executor\] _forward_step \d+: (\d+) ctx reqs, (?:(\d+) ctx tokens, )?(\d+) gen reqs",
        says: "ctx/gen request counts",
        read: Reader::Name(trtllm_py),
    },
    MarkerKind {
        id: "trtllm_execute_step",
        engine: Some("TensorRT-LLM"),
        tier: Tier::Engine,
        role: Role::Step,
        source: None,
        pattern: r"^executeStep: (\d+) ctx reqs, (\d+) gen reqs",
        says: "ctx/gen request counts",
        read: Reader::Name(trtllm_cpp),
    },
    MarkerKind {
        id: "vllm_v0",
        engine: Some("vLLM V0"),
        tier: Tier::EngineBare,
        role: Role::Step,
        source: None,
        pattern: r"^execute_model$",
        says: "",
        read: Reader::Nothing,
    },
    MarkerKind {
        id: "phase_name",
        engine: None,
        tier: Tier::PhaseName,
        role: Role::Step,
        source: None,
        pattern: r"(?i)decode|prefill",
        says: "the phase word in the name",
        read: Reader::PhaseWords,
    },
    MarkerKind {
        id: "profiler_step",
        engine: Some("PyTorch profiler"),
        tier: Tier::ProfilerStep,
        role: Role::Iteration,
        source: None,
        pattern: r"^ProfilerStep#\d+$",
        says: "",
        read: Reader::Nothing,
    },
    MarkerKind {
        id: "generic",
        engine: None,
        tier: Tier::Generic,
        role: Role::Step,
        source: None,
        pattern: DEFAULT_STEP_REGEX,
        says: "",
        read: Reader::Nothing,
    },
];

static COMPILED: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    KINDS
        .iter()
        .map(|k| Regex::new(k.pattern).expect("constant regex"))
        .collect()
});

/// The kind of a marker name from `source` (its index in [`KINDS`]) and what the name says.
/// Engine columns are not read here: see [`Classified::meta`].
pub fn classify(name: &str, source: MarkerSource) -> Option<(usize, Meta)> {
    KINDS.iter().enumerate().find_map(|(i, k)| {
        if k.source.is_some_and(|s| s != source) {
            return None;
        }
        let c = COMPILED[i].captures(name)?;
        let meta = match &k.read {
            Reader::Nothing | Reader::Columns => Meta::default(),
            Reader::PhaseWords => Meta {
                phase: phase_words(name),
                ..Meta::default()
            },
            Reader::Name(f) => f(&c),
        };
        Some((i, meta))
    })
}

/// Metadata of a marker row of kind `kind`: from the name, or from the row's columns for
/// gapscope-engine markers.
pub fn row_meta(kind: usize, from_name: Meta, phase: u8, batch: u32, tokens: u32) -> Meta {
    match KINDS[kind].read {
        Reader::Columns => Meta {
            phase: Phase::from_code(phase),
            batch,
            tokens: tokens as u64,
            ..Meta::default()
        },
        _ => from_name,
    }
}

/// Phase from the words in a name: prefill and decode both (or "mixed") is a mixed step.
pub fn phase_words(name: &str) -> Phase {
    // "decoder" (a model part) is not the decode phase.
    let n = name.to_ascii_lowercase().replace("decoder", "");
    let prefill = n.contains("prefill");
    let decode = n.contains("decode");
    if n.contains("mixed") || (prefill && decode) {
        Phase::Mixed
    } else if prefill {
        Phase::Prefill
    } else if decode {
        Phase::Decode
    } else {
        Phase::Unknown
    }
}

/// Phase from request counts: prefill (context) requests only, decode (generation) only, or
/// both in one step.
fn by_requests(prefill: u64, decode: u64) -> Phase {
    match (prefill > 0, decode > 0) {
        (true, true) => Phase::Mixed,
        (true, false) => Phase::Prefill,
        (false, true) => Phase::Decode,
        (false, false) => Phase::Unknown,
    }
}

fn num(c: &Captures, i: usize) -> u64 {
    c.get(i)
        .map(|m| m.as_str().parse::<u64>().unwrap_or(u64::MAX))
        .unwrap_or(0)
}

fn batch(a: u64, b: u64) -> u32 {
    u32::try_from(a.saturating_add(b)).unwrap_or(u32::MAX)
}

fn vllm_v1(c: &Captures) -> Meta {
    let (ctx, ctx_tok, generation, gen_tok) = (num(c, 1), num(c, 2), num(c, 3), num(c, 4));
    Meta {
        phase: by_requests(ctx, generation),
        batch: batch(ctx, generation),
        tokens: ctx_tok.saturating_add(gen_tok),
        ..Meta::default()
    }
}

fn vllm_detailed(c: &Captures) -> Meta {
    let (total, ctx, generation) = (num(c, 1), num(c, 2), num(c, 4));
    // `sk`: the generation requests' KV lengths summed (`sqsk` weighs them by query length).
    let kv = num(c, 6);
    Meta {
        phase: by_requests(ctx, generation),
        batch: batch(ctx, generation),
        tokens: total,
        context: if generation > 0 && kv < u64::MAX {
            kv / generation
        } else {
            0
        },
    }
}

fn vllm_new_cached(c: &Captures) -> Meta {
    let (new, cached) = (num(c, 1), num(c, 2));
    Meta {
        phase: by_requests(new, cached),
        batch: batch(new, cached),
        tokens: 0,
        ..Meta::default()
    }
}

fn sglang(c: &Captures) -> Meta {
    let mode = c.get(1).map_or("", |m| m.as_str());
    let phase = match mode {
        "DECODE" | "TARGET_VERIFY" | "DRAFT_EXTEND" => Phase::Decode,
        "EXTEND" | "PREFILL" | "SPLIT_PREFILL" => Phase::Prefill,
        "MIXED" => Phase::Mixed,
        _ => Phase::Unknown,
    };
    let mut m = Meta {
        phase,
        ..Meta::default()
    };
    for field in c.get(2).map_or("", |f| f.as_str()).split_whitespace() {
        let Some((k, v)) = field.split_once('=') else {
            continue;
        };
        let v = v.parse::<u64>().unwrap_or(u64::MAX);
        match k {
            "bs" => m.batch = u32::try_from(v).unwrap_or(u32::MAX),
            "toks" => m.tokens = v,
            _ => {}
        }
    }
    m
}

fn trtllm_py(c: &Captures) -> Meta {
    let (ctx, ctx_tok, generation) = (num(c, 1), num(c, 2), num(c, 3));
    Meta {
        phase: by_requests(ctx, generation),
        batch: batch(ctx, generation),
        // Generation requests process one token each (without speculative decoding).
        tokens: if ctx_tok > 0 {
            ctx_tok.saturating_add(generation)
        } else {
            0
        },
        ..Meta::default()
    }
}

fn trtllm_cpp(c: &Captures) -> Meta {
    let (ctx, generation) = (num(c, 1), num(c, 2));
    Meta {
        phase: by_requests(ctx, generation),
        batch: batch(ctx, generation),
        tokens: 0,
        ..Meta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(name: &str) -> Option<(&'static str, Meta)> {
        classify(name, MarkerSource::KinetoUserAnnotation).map(|(i, m)| (KINDS[i].id, m))
    }

    fn meta(phase: Phase, batch: u32, tokens: u64) -> Meta {
        Meta {
            phase,
            batch,
            tokens,
            ..Meta::default()
        }
    }

    #[test]
    fn vllm_v1_markers_say_phase_batch_and_tokens() {
        // B200 trace: one prefill request of 888 tokens (the second figure is 888²).
        assert_eq!(
            kind("execute_context_1(888_788544)_generation_0(0)"),
            Some(("vllm_v1", meta(Phase::Prefill, 1, 888)))
        );
        assert_eq!(
            kind("execute_context_0(0)_generation_64(64)"),
            Some(("vllm_v1", meta(Phase::Decode, 64, 64)))
        );
        assert_eq!(
            kind("execute_context_2(300)_generation_30(30)"),
            Some(("vllm_v1", meta(Phase::Mixed, 32, 330)))
        );
        assert_eq!(
            kind(
                "execute_32_context_0(sq0sk0sqsq0sqsk0)_generation_32(sq32sk55086sqsq32sqsk55086)"
            ),
            Some((
                "vllm_v1_detailed",
                Meta {
                    // 55,086 KV tokens over 32 decode requests.
                    context: 1721,
                    ..meta(Phase::Decode, 32, 32)
                }
            ))
        );
        assert_eq!(
            kind(
                "execute_8192_context_9(sq8155sk8430sqsq7475785sqsk7671310)_generation_37(sq37sk34489sqsq37sqsk34489)"
            ),
            Some((
                "vllm_v1_detailed",
                Meta {
                    context: 932,
                    ..meta(Phase::Mixed, 46, 8192)
                }
            ))
        );
        assert_eq!(
            kind("execute_new_4_cached_0"),
            Some(("vllm_v1_new_cached", meta(Phase::Prefill, 4, 0)))
        );
        assert_eq!(kind("execute_model").map(|k| k.0), Some("vllm_v0"));
    }

    #[test]
    fn sglang_markers_say_the_forward_mode() {
        assert_eq!(
            kind("step[DECODE bs=32]"),
            Some(("sglang_step", meta(Phase::Decode, 32, 0)))
        );
        assert_eq!(
            kind("step[EXTEND bs=15 toks=15360]"),
            Some(("sglang_step", meta(Phase::Prefill, 15, 15360)))
        );
        assert_eq!(
            kind("step[MIXED bs=8 toks=900]"),
            Some(("sglang_step", meta(Phase::Mixed, 8, 900)))
        );
        for n in [
            "nn.Module: Qwen3NextDecoderLayer_0",
            "nn.Module: LlamaForCausalLM_0",
        ] {
            let (i, _) = classify(n, MarkerSource::Nvtx).unwrap();
            assert_eq!(KINDS[i].role, Role::Exclude, "{n}");
        }
        assert_eq!(phase_words("TransformerDecoderLayer"), Phase::Unknown);
        assert_eq!(phase_words("decoder_decode_step"), Phase::Decode);
        // Graph capture is never a step, though its name says DECODE.
        for n in ["capture_32_DECODE", "capture_512_FULL", "capture_1_decode"] {
            let (i, _) = classify(n, MarkerSource::KinetoUserAnnotation).unwrap();
            assert_eq!(KINDS[i].role, Role::Exclude, "{n}");
        }
    }

    #[test]
    fn trtllm_markers_say_ctx_and_gen_requests() {
        assert_eq!(
            kind("[Executor] _forward_step 17: 0 ctx reqs, 64 gen reqs"),
            Some(("trtllm_forward_step", meta(Phase::Decode, 64, 0)))
        );
        assert_eq!(
            kind("[Executor] _forward_step 3: 2 ctx reqs, 1024 ctx tokens, 6 gen reqs"),
            Some(("trtllm_forward_step", meta(Phase::Mixed, 8, 1030)))
        );
        assert_eq!(
            kind("executeStep: 1 ctx reqs, 0 gen reqs"),
            Some(("trtllm_execute_step", meta(Phase::Prefill, 1, 0)))
        );
    }

    #[test]
    fn framework_names_find_their_tier_and_role() {
        let tier_role = |n: &str| {
            let (i, m) = classify(n, MarkerSource::KinetoUserAnnotation).unwrap();
            (KINDS[i].tier, KINDS[i].role, m.phase)
        };
        assert_eq!(
            tier_role("decode_step"),
            (Tier::PhaseName, Role::Step, Phase::Decode)
        );
        assert_eq!(
            tier_role("prefill"),
            (Tier::PhaseName, Role::Step, Phase::Prefill)
        );
        assert_eq!(
            tier_role("ProfilerStep#12"),
            (Tier::ProfilerStep, Role::Iteration, Phase::Unknown)
        );
        assert_eq!(
            tier_role("generate"),
            (Tier::Generic, Role::Step, Phase::Unknown)
        );
        for n in [
            "Optimizer.step#SGD.step",
            "Optimizer.zero_grad#SGD.zero_grad",
            "DistributedDataParallel.forward",
            "## forward ##",
            "## Call CompiledFxGraph fabc ##",
            "nccl:all_reduce",
        ] {
            assert_eq!(tier_role(n).1, Role::Exclude, "{n}");
        }
        assert!(classify("aten::mm", MarkerSource::KinetoUserAnnotation).is_none());
    }

    #[test]
    fn engine_markers_are_recognised_by_source_and_read_from_columns() {
        let (i, m) = classify("decode", MarkerSource::Engine).unwrap();
        assert_eq!(KINDS[i].id, "gapscope_engine");
        let m = row_meta(i, m, Phase::Decode as u8, 8, 8);
        assert_eq!(m, meta(Phase::Decode, 8, 8));
        // The same name from an annotation is a phase-named annotation.
        let (i, _) = classify("decode", MarkerSource::Nvtx).unwrap();
        assert_eq!(KINDS[i].id, "phase_name");
    }

    #[test]
    fn hostile_counts_saturate() {
        let (_, m) = classify(
            "execute_context_99999999999999999999999(1)_generation_1(1)",
            MarkerSource::Nvtx,
        )
        .unwrap();
        assert_eq!(m.batch, u32::MAX);
        assert_eq!(m.phase, Phase::Mixed);
    }
}
