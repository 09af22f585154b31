//! Kernel evidence: the phase of a step whose marker does not say it, and whether the trace
//! is a training run.
//!
//! Only some kernel names tell the phase. Attention kernels often do (split-KV, paged and
//! XQA kernels are decode kernels; batch-prefill and context FMHA kernels are prefill
//! kernels); PyTorch's embedding gather does weakly (`indexSelectSmallIndex` gathers at most
//! 16 rows, `indexSelectLargeIndex` more: a prompt, or a decode batch above 16). Where no
//! name tells, several steps are compared: one with at least twice the median GEMM/attention
//! time is a prefill. A lone step without evidence stays a decode step, and the report says
//! the phase was assumed.

use std::sync::LazyLock;

use gapscope_traces::Phase;
use regex::Regex;

use super::{Step, short};
use crate::analysis::prepared::Prepared;
use crate::analysis::stats::upper_median;
use crate::bucket::Bucket;

/// A step whose GEMM/attention time is at least this multiple of the median is a prefill
/// (the periodic detector uses the same ratio).
const PREFILL_HEAVY_RATIO: f64 = 2.0;
/// Steps compared by GEMM/attention time only when there are at least this many.
const MIN_STEPS_TO_COMPARE: usize = 3;
/// A trace is training when backward kernels take at least this share of kernel time ...
const MIN_BACKWARD_SHARE: f64 = 0.02;
/// ... and there are at least this many of them.
const MIN_BACKWARD_KERNELS: usize = 3;
/// A trace is training when at least this many host scopes are autograd's backward nodes.
const MIN_AUTOGRAD_SCOPES: usize = 2;
/// The scope autograd's engine opens around each backward node it runs (PyTorch's
/// `torch/csrc/autograd/engine.cpp`); inference under `no_grad`/`inference_mode` runs none.
const AUTOGRAD_NODE: &str = "autograd::engine::evaluate_function: ";

/// What a kernel name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hint {
    Decode,
    Prefill,
    WeakDecode,
    WeakPrefill,
    Backward,
    /// An optimizer's update kernel (fused Adam/SGD/LAMB/Adagrad, AMP's gradient unscale).
    Optimizer,
}

/// Name patterns and what they say; the first match decides.
const HINTS: &[(&str, Hint)] = &[
    // Backward passes: autograd kernels, cuDNN data/weight gradients, batch-norm backward.
    (
        r"(?i)backward|_bwd|bwd_|dgrad|wgrad|bn_bw|grad_?input|accgradparameters",
        Hint::Backward,
    ),
    // Optimizer updates: fused Adam/AdamW (PyTorch's `FusedAdamMathFunctor`, apex's
    // `multi_tensor_adam`), SGD, LAMB, Adagrad, and AMP's gradient unscale before a step.
    (
        r"(?i)adamw?(math)?functor|fused_?adamw?|multi_tensor_(adam|sgd|lamb|novograd)|sgdfunctor|lambstage|lamb_?functor|adagrad|non_finite_check_and_unscale",
        Hint::Optimizer,
    ),
    // Decode attention: split-KV / flash-decoding, paged attention (vLLM V0, ROCm ll4mi),
    // TensorRT-LLM XQA and masked MHA, FlashInfer batch decode, trtllm-gen generation kernels.
    (
        r"(?i)splitkv|split_kv|flash_?decoding|paged_attention_(v1|v2|ll4mi)|xqa|masked_multihead_attention|\bmmha|batchdecode|decode_?attention|attention_?decode|attn_?decode|decode_?attn",
        Hint::Decode,
    ),
    (r"ForGen(_|$)", Hint::Decode),
    // Prefill attention: FlashInfer / ck_tile batch prefill, TensorRT-LLM context FMHA.
    (
        r"(?i)batchprefill|prefill_?attention|attention_?prefill|attn_?prefill|prefill_?attn|context_fmha|^fmha_v2_",
        Hint::Prefill,
    ),
    (r"^fmha\w*Kernel_\w*Context", Hint::Prefill),
    (r"indexSelectSmallIndex", Hint::WeakDecode),
    (r"indexSelectLargeIndex", Hint::WeakPrefill),
];

static COMPILED: LazyLock<Vec<(Regex, Hint)>> = LazyLock::new(|| {
    HINTS
        .iter()
        .map(|&(p, h)| (Regex::new(p).expect("constant regex"), h))
        .collect()
});

fn hint(name: &str) -> Option<Hint> {
    COMPILED
        .iter()
        .find(|(r, _)| r.is_match(name))
        .map(|&(_, h)| h)
}

/// The hint of every name id, computed once per distinct name.
struct Hints(Vec<Option<Option<Hint>>>);

impl Hints {
    fn new(p: &Prepared) -> Self {
        Self(vec![None; p.trace.strings.len()])
    }

    fn of(&mut self, p: &Prepared, name: u32) -> Option<Hint> {
        match self.0.get_mut(name as usize) {
            Some(Some(h)) => *h,
            Some(slot) => {
                let h = hint(p.trace.strings.get(name));
                *slot = Some(h);
                h
            }
            None => None,
        }
    }
}

/// Why a trace counts as training: the markers of an optimizer step or a backward pass, or
/// backward kernels.
pub(super) fn training(p: &Prepared, device: Option<u32>) -> Option<String> {
    let m = &p.trace.markers;
    let mut marker: Option<&str> = None;
    let mut seen = vec![false; p.trace.strings.len()];
    for i in 0..m.len {
        let id = m.name[i] as usize;
        if seen.get(id).copied().unwrap_or(true) {
            continue;
        }
        seen[id] = true;
        let n = p.trace.strings.get(m.name[i]);
        if n.starts_with("Optimizer.step#")
            || n.starts_with("Optimizer.zero_grad#")
            || n.eq_ignore_ascii_case("## backward ##")
        {
            marker = Some(n);
            break;
        }
    }
    if let Some(n) = marker {
        return Some(format!("optimizer/backward markers ({:?})", short(n)));
    }
    if let Some(why) = autograd_scopes(p) {
        return Some(why);
    }
    let d = device?;
    let k = &p.trace.kernels;
    let mut hints = Hints::new(p);
    let (mut total, mut backward, mut count) = (0i64, 0i64, 0usize);
    let mut example: Option<u32> = None;
    let mut optimizer: Option<u32> = None;
    for &i in p.kernels_on(d) {
        let i = i as usize;
        let dur = k.gpu_end_ns[i].saturating_sub(k.gpu_start_ns[i]).max(0);
        total = total.saturating_add(dur);
        match hints.of(p, k.name[i]) {
            Some(Hint::Backward) => {
                backward = backward.saturating_add(dur);
                count += 1;
                example.get_or_insert(k.name[i]);
            }
            Some(Hint::Optimizer) => {
                optimizer.get_or_insert(k.name[i]);
            }
            _ => {}
        }
    }
    if let Some(n) = optimizer {
        return Some(format!(
            "optimizer update kernels (e.g. {:?})",
            short(p.trace.strings.get(n))
        ));
    }
    let share = if total > 0 {
        backward as f64 / total as f64
    } else {
        0.0
    };
    (count >= MIN_BACKWARD_KERNELS && share >= MIN_BACKWARD_SHARE).then(|| {
        format!(
            "backward kernels take {:.1}% of kernel time (e.g. {:?})",
            100.0 * share,
            short(example.map_or("", |n| p.trace.strings.get(n)))
        )
    })
}

/// Autograd's backward nodes among the host scopes (`autograd::engine::evaluate_function:
/// MmBackward0`), which only a backward pass runs.
fn autograd_scopes(p: &Prepared) -> Option<String> {
    let sc = &p.trace.scopes;
    let mut is_node: Vec<Option<bool>> = vec![None; p.trace.strings.len()];
    let (mut count, mut example) = (0usize, None);
    for i in 0..sc.len {
        let id = sc.name[i];
        let Some(slot) = is_node.get_mut(id as usize) else {
            continue;
        };
        let node = *slot.get_or_insert_with(|| p.trace.strings.get(id).starts_with(AUTOGRAD_NODE));
        if node {
            count += 1;
            example.get_or_insert(id);
        }
    }
    (count >= MIN_AUTOGRAD_SCOPES).then(|| {
        let name = p.trace.strings.get(example.unwrap_or(0));
        format!(
            "autograd backward ops on the host ({count}, e.g. {:?})",
            short(name.strip_prefix(AUTOGRAD_NODE).unwrap_or(name))
        )
    })
}

/// How a step got its phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// The marker's metadata (request counts, forward mode, engine columns, phase word).
    Marker,
    /// Phase-specific kernel names in the step.
    KernelNames,
    /// GEMM/attention time against the other steps.
    RelativeWork,
    /// A weak kernel-name hint (the embedding gather's size).
    WeakKernelNames,
    /// No evidence: taken as decode.
    Assumed,
}

impl Evidence {
    pub fn describe(self) -> &'static str {
        match self {
            Self::Marker => "marker metadata",
            Self::KernelNames => "phase-specific kernel names",
            Self::RelativeWork => "GEMM/attention time against the other steps",
            Self::WeakKernelNames => "the embedding gather's size (weak)",
            Self::Assumed => "assumed decode (no metadata, no phase-specific kernels)",
        }
    }
}

/// What the kernels of one step say.
#[derive(Default, Clone, Copy)]
struct StepWork {
    decode: usize,
    prefill: usize,
    weak_decode: usize,
    weak_prefill: usize,
    heavy_ns: i64,
    /// A phase-specific kernel name, for the report.
    example: Option<u32>,
}

/// Labels the steps whose phase is `Unknown` from kernel evidence; returns how each step's
/// phase was found (marker metadata for the others) and a phase-specific kernel name that
/// decided one, if any.
pub(super) fn label(
    p: &Prepared,
    device: Option<u32>,
    steps: &mut [Step],
) -> (Vec<Evidence>, Option<String>) {
    let mut evidence: Vec<Evidence> = steps
        .iter()
        .map(|s| match s.phase {
            Phase::Unknown => Evidence::Assumed,
            _ => Evidence::Marker,
        })
        .collect();
    let open: Vec<usize> = (0..steps.len())
        .filter(|&i| steps[i].phase == Phase::Unknown)
        .collect();
    if open.is_empty() {
        return (evidence, None);
    }
    let work = step_work(p, device, steps);
    let mut example = None;
    let mut undecided = Vec::new();
    for &i in &open {
        let w = &work[i];
        let phase = match (w.decode > 0, w.prefill > 0) {
            (true, true) => Phase::Mixed,
            (true, false) => Phase::Decode,
            (false, true) => Phase::Prefill,
            (false, false) => {
                undecided.push(i);
                continue;
            }
        };
        steps[i].phase = phase;
        evidence[i] = Evidence::KernelNames;
        if example.is_none() {
            example = w.example.map(|n| p.trace.strings.get(n).to_owned());
        }
    }
    if undecided.len() >= MIN_STEPS_TO_COMPARE {
        let mut heavy: Vec<i64> = undecided.iter().map(|&i| work[i].heavy_ns).collect();
        let median = upper_median(&mut heavy).unwrap_or(0) as f64;
        for &i in &undecided {
            let long = median > 0.0 && work[i].heavy_ns as f64 >= PREFILL_HEAVY_RATIO * median;
            steps[i].phase = if long { Phase::Prefill } else { Phase::Decode };
            evidence[i] = Evidence::RelativeWork;
        }
    } else {
        for &i in &undecided {
            let w = &work[i];
            let (phase, ev) = match (w.weak_decode > 0, w.weak_prefill > 0) {
                (false, true) => (Phase::Prefill, Evidence::WeakKernelNames),
                (true, false) => (Phase::Decode, Evidence::WeakKernelNames),
                _ => (Phase::Decode, Evidence::Assumed),
            };
            steps[i].phase = phase;
            evidence[i] = ev;
        }
    }
    (evidence, example)
}

/// Per step: its phase-specific kernels and GEMM/attention time (kernels that start in it).
fn step_work(p: &Prepared, device: Option<u32>, steps: &[Step]) -> Vec<StepWork> {
    let mut work = vec![StepWork::default(); steps.len()];
    let Some(d) = device else {
        return work;
    };
    let k = &p.trace.kernels;
    // Steps in start order; kernels arrive start-sorted.
    let mut order: Vec<usize> = (0..steps.len()).collect();
    order.sort_by_key(|&i| (steps[i].gpu_start_ns, steps[i].gpu_end_ns));
    let mut hints = Hints::new(p);
    let mut sp = 0usize;
    for &i in p.kernels_on(d) {
        let i = i as usize;
        let t = k.gpu_start_ns[i];
        while sp < order.len() && steps[order[sp]].gpu_end_ns <= t {
            sp += 1;
        }
        if sp >= order.len() || steps[order[sp]].gpu_start_ns > t {
            continue;
        }
        let w = &mut work[order[sp]];
        let b = Bucket::ALL
            .get(p.kernel_bucket[i] as usize)
            .copied()
            .unwrap_or(Bucket::Other);
        if matches!(
            b,
            Bucket::Gemv
                | Bucket::GemmQuant
                | Bucket::GemmDense
                | Bucket::Moe
                | Bucket::Attention
                | Bucket::LinearAttnSsm
        ) {
            w.heavy_ns = w
                .heavy_ns
                .saturating_add(k.gpu_end_ns[i].saturating_sub(t).max(0));
        }
        match hints.of(p, k.name[i]) {
            Some(Hint::Decode) => {
                w.decode += 1;
                w.example.get_or_insert(k.name[i]);
            }
            Some(Hint::Prefill) => {
                w.prefill += 1;
                w.example.get_or_insert(k.name[i]);
            }
            Some(Hint::WeakDecode) => w.weak_decode += 1,
            Some(Hint::WeakPrefill) => w.weak_prefill += 1,
            _ => {}
        }
    }
    work
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_say_what_they_can() {
        for (n, h) in [
            (
                "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4>>",
                Some(Hint::Decode),
            ),
            (
                "void paged_attention_ll4mi_QKV_mfma16_kernel<0, __hip_bfloat16>",
                Some(Hint::Decode),
            ),
            (
                "void vllm::paged_attention_v2_kernel<__nv_bfloat16>",
                Some(Hint::Decode),
            ),
            (
                "void flashinfer::BatchDecodeWithPagedKVCacheKernel<128>",
                Some(Hint::Decode),
            ),
            ("kernel_mha_xqa_sm90", Some(Hint::Decode)),
            (
                "fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausalP16VarSeqQ128Kv128PersistentContext",
                Some(Hint::Prefill),
            ),
            (
                "_ZN7ck_tile6kentryILi2ENS_38FmhaBatchPrefillWithPagedKVCacheKernelE",
                Some(Hint::Prefill),
            ),
            (
                "fmha_v2_flash_attention_bf16_64_128_S_qkv_128_causal_sm90_kernel",
                Some(Hint::Prefill),
            ),
            (
                "void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long>",
                Some(Hint::WeakPrefill),
            ),
            (
                "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>",
                Some(Hint::Backward),
            ),
            (
                "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128>",
                Some(Hint::Backward),
            ),
            // Optimizer updates (PyTorch's fused Adam, apex, AMP's unscale before a step).
            (
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::FusedOptimizerTensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, double, double, double, bool, bool, float const*, float const*>",
                Some(Hint::Optimizer),
            ),
            (
                "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float>",
                Some(Hint::Optimizer),
            ),
            (
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<1>, at::native::(anonymous namespace)::_amp_foreach_non_finite_check_and_unscale_cuda_(c10::ArrayRef<at::Tensor>, at::Tensor&, at::Tensor const&)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, float>",
                Some(Hint::Optimizer),
            ),
            // A foreach add runs in inference too (and in the HTA MI250 trace's SGD step).
            (
                "void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<2>, at::native::(anonymous namespace)::BinaryOpListAlphaFunctor<float, 2, 2, 0>, std::plus<float>, float>",
                None,
            ),
            // Generic attention kernels run both phases: no hint.
            ("kernel_unified_attention_2d", None),
            ("attn_fwd", None),
            (
                "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16",
                None,
            ),
            ("nvjet_sm90_tst_8x64_64x16_2x1_v_bz_TNN", None),
        ] {
            assert_eq!(hint(n), h, "{n}");
        }
    }
}
