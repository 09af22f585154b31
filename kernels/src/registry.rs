//! The typed registry of kernel modules and kernel names.

/// Helpers prepended to every module (bf16/f16 conversion, warp reductions, dp4a, output modes).
pub const COMMON: &str = include_str!("../cuda/common.cuh");

/// One `.cu` file: the unit NVRTC compiles and the driver loads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Module {
    pub name: &'static str,
    pub source: &'static str,
    pub kernels: &'static [Kernel],
}

impl Module {
    /// The text handed to NVRTC with the module and the common helpers read from `dir` where
    /// it has `{name}.cu` or `common.cuh`: kernel work compares a variant against the built-in
    /// source in one run without rebuilding. Returns the text and whether any file was used.
    pub fn source_from(&self, dir: &std::path::Path) -> std::io::Result<(String, bool)> {
        let read = |name: &str| -> std::io::Result<Option<String>> {
            match std::fs::read_to_string(dir.join(name)) {
                Ok(s) => Ok(Some(s)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(e),
            }
        };
        let common = read("common.cuh")?;
        let module = read(&format!("{}.cu", self.name))?;
        let used = common.is_some() || module.is_some();
        let common = common.as_deref().unwrap_or(COMMON);
        let module = module.as_deref().unwrap_or(self.source);
        Ok((format!("{common}\n{module}"), used))
    }

    /// The text handed to NVRTC: the common helpers, then the module.
    pub fn full_source(&self) -> String {
        let mut s = String::with_capacity(COMMON.len() + self.source.len() + 1);
        s.push_str(COMMON);
        s.push('\n');
        s.push_str(self.source);
        s
    }
}

/// Declares every module and its kernels once: the `Kernel` enum, `Kernel::ALL`,
/// `Kernel::name` (the `extern "C"` symbol) and `MODULES` all come from this one list.
macro_rules! kernels {
    ($($module:literal => [$($kernel:ident = $symbol:literal),* $(,)?]),* $(,)?) => {
        /// Every kernel the engine launches, named `{op}_{dtype}` as in the `extern "C"` source.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Kernel {
            $($($kernel,)*)*
        }

        impl Kernel {
            pub const ALL: [Kernel; [$($(Kernel::$kernel),*),*].len()] = [$($(Kernel::$kernel),*),*];

            /// The symbol in the compiled module.
            pub fn name(self) -> &'static str {
                match self {
                    $($(Kernel::$kernel => $symbol,)*)*
                }
            }
        }

        /// All modules, in a stable order.
        pub const MODULES: &[Module] = &[
            $(Module {
                name: $module,
                source: include_str!(concat!("../cuda/", $module, ".cu")),
                kernels: &[$(Kernel::$kernel),*],
            }),*
        ];
    };
}

kernels! {
    "get_rows" => [
        GetRowsBf16 = "get_rows_bf16",
        GetRowsF32 = "get_rows_f32",
        KvGatherBf16 = "kv_gather_bf16",
    ],
    "norm" => [
        RmsNormF32 = "rms_norm_f32",
        HeadRmsNormF32 = "head_rms_norm_f32",
    ],
    "rope" => [RopeKvAppendF32 = "rope_kv_append_f32"],
    "elementwise" => [
        SwigluF32 = "swiglu_f32",
        AddBiasF32 = "add_bias_f32",
    ],
    "gemv" => [
        GemvBf16 = "gemv_bf16",
        GemvBf16B1 = "gemv_bf16_b1",
        GemvBf16B1Swiglu = "gemv_bf16_b1_swiglu",
        GemvBf16B1Norm = "gemv_bf16_b1_norm",
        GemvBf16B1SwigluNorm = "gemv_bf16_b1_swiglu_norm",
        GemmBf16Small = "gemm_bf16_small",
    ],
    "quantize" => [
        QuantizeQ8_1Bf16 = "quantize_q8_1_bf16",
        QuantizeQ8_1Bf16KMajor = "quantize_q8_1_bf16_kmajor",
    ],
    "mmvq" => [
        MmvqQ8_0 = "mmvq_q8_0",
        MmvqQ8_0B1 = "mmvq_q8_0_b1",
        MmvqQ8_0B1Swiglu = "mmvq_q8_0_b1_swiglu",
        MmvqQ8_0B1KSplit = "mmvq_q8_0_b1_ksplit",
        MmvqQ8_0B1Pair = "mmvq_q8_0_b1_pair",
        MmvqQ4_0 = "mmvq_q4_0",
        MmvqQ4_0B1 = "mmvq_q4_0_b1",
        MmvqQ4_0B1Swiglu = "mmvq_q4_0_b1_swiglu",
    ],
    "mmq" => [
        MmqQ8_0 = "mmq_q8_0",
        MmqQ4_0 = "mmq_q4_0",
        MmqQ8_0KMajor = "mmq_q8_0_kmajor",
        MmqQ4_0KMajor = "mmq_q4_0_kmajor",
    ],
    "attention" => [
        AttnDecodeBf16 = "attn_decode_bf16",
        AttnDecodeKwHd64Bf16 = "attn_decode_kw_hd64_bf16",
        AttnDecodeKwHd128Bf16 = "attn_decode_kw_hd128_bf16",
        AttnDecodeKwHd256Bf16 = "attn_decode_kw_hd256_bf16",
    ],
    "gated_delta" => [
        ConvStepF32 = "conv_step_f32",
        DeltaRuleDk32F32 = "delta_rule_dk32_f32",
        DeltaRuleDk64F32 = "delta_rule_dk64_f32",
        DeltaRuleDk128F32 = "delta_rule_dk128_f32",
        GatedNormF32 = "gated_norm_f32",
        StateGatherF32 = "state_gather_f32",
        SigmoidGateBf16 = "sigmoid_gate_bf16",
    ],
    "sample" => [ArgmaxF32 = "argmax_f32"],
    // Not an op: calibrates the latency of the per-launch timing events (engine recorder).
    "timing" => [TimingProbe = "timing_probe"],
    // Not on the fast path: the `hf-bf16` numerics mode (HF transformers' bf16 roundings).
    "hf_numerics" => [
        RmsNormHf = "rms_norm_hf",
        HeadRmsNormHf = "head_rms_norm_hf",
        RopeKvAppendHf = "rope_kv_append_hf",
        AttnHfBf16 = "attn_hf_bf16",
        HfLinearEpilogue = "hf_linear_epilogue",
    ],
}

/// The module that defines `kernel`.
pub fn module_of(kernel: Kernel) -> &'static Module {
    MODULES
        .iter()
        .find(|m| m.kernels.contains(&kernel))
        .expect("every Kernel is listed in exactly one module (tested)")
}

/// A stable 64-bit FNV-1a hash of the compile inputs, the key of the on-disk NVRTC cache.
/// Stable across Rust versions and platforms, unlike `DefaultHasher`.
pub fn source_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for &b in part.as_bytes().iter().chain(std::iter::once(&0u8)) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// A variant directory replaces only the files it has; an empty one changes nothing.
    #[test]
    fn source_from_overrides_only_present_files() {
        let dir = std::env::temp_dir().join(format!("gapscope-kvar-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = MODULES.iter().find(|m| m.name == "norm").unwrap();
        let (src, used) = m.source_from(&dir).unwrap();
        assert!(!used);
        assert_eq!(src, m.full_source());
        std::fs::write(dir.join("norm.cu"), "// variant\n").unwrap();
        let (src, used) = m.source_from(&dir).unwrap();
        assert!(used);
        assert!(src.starts_with(COMMON) && src.ends_with("// variant\n"));
        let other = MODULES.iter().find(|m| m.name == "rope").unwrap();
        assert_eq!(
            other.source_from(&dir).unwrap(),
            (other.full_source(), false)
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The kernels an entry macro defines: `MMVQ_ENTRY(name, ...)` at the start of a line.
    fn entry_macro_uses(src: &str) -> impl Iterator<Item = &str> {
        src.lines().filter_map(|l| {
            let (mac, rest) = l.split_once('(')?;
            let is_entry =
                mac.ends_with("_ENTRY") && mac.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            is_entry.then(|| rest.split(',').next().unwrap_or("").trim())
        })
    }

    #[test]
    fn every_kernel_is_defined_once_in_its_module() {
        for k in Kernel::ALL {
            let owners: Vec<_> = MODULES.iter().filter(|m| m.kernels.contains(&k)).collect();
            assert_eq!(owners.len(), 1, "{k:?} must be in exactly one module");
            let needle = format!("__global__ void {}(", k.name());
            let bounded = format!(") {}(", k.name());
            let src = owners[0].source;
            assert!(
                src.contains(&needle)
                    || src.contains(&bounded)
                    || entry_macro_uses(src).any(|n| n == k.name()),
                "{} is not defined in {}.cu",
                k.name(),
                owners[0].name
            );
        }
    }

    #[test]
    fn every_extern_c_kernel_in_a_source_is_registered() {
        let names: BTreeSet<&str> = Kernel::ALL.iter().map(|k| k.name()).collect();
        for m in MODULES {
            for name in entry_macro_uses(m.source) {
                assert!(
                    names.contains(name),
                    "{}.cu defines unregistered kernel {name}",
                    m.name
                );
            }
            // A macro's definition (its lines end in `\`) declares no kernel itself.
            for line in m.source.lines().filter(|l| !l.ends_with('\\')) {
                if let Some(rest) = line
                    .trim_start()
                    .strip_prefix("extern \"C\" __global__ void ")
                {
                    let rest = match rest.strip_prefix("__launch_bounds__(") {
                        Some(b) => b.split_once(") ").map(|(_, r)| r).unwrap_or(b),
                        None => rest,
                    };
                    let name = rest.split('(').next().unwrap_or("").trim();
                    assert!(
                        names.contains(name),
                        "{}.cu defines unregistered kernel {name}",
                        m.name
                    );
                }
            }
        }
    }

    #[test]
    fn braces_balance_in_every_module() {
        for m in MODULES.iter().map(|m| m.full_source()) {
            let open = m.matches('{').count();
            let close = m.matches('}').count();
            assert_eq!(open, close);
        }
    }

    #[test]
    fn source_hash_is_stable_and_input_sensitive() {
        assert_eq!(source_hash(&[]), 0xcbf2_9ce4_8422_2325);
        assert_ne!(source_hash(&["a", "b"]), source_hash(&["ab"]));
        assert_ne!(source_hash(&["x", "sm_90"]), source_hash(&["x", "sm_80"]));
    }
}
