//! Bucket rules: ordered regexes over demangled kernel names plus memop-kind rules, loaded
//! from the embedded `rules/builtin.toml` and optionally a user file placed in front.

use std::path::Path;

use gapscope_traces::MemopKind;
use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::bucket::Bucket;
use crate::error::{AnalyzerError, Result};

/// The built-in rules, shipped inside the binary.
pub const BUILTIN_RULES: &str = include_str!("../rules/builtin.toml");

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    /// A user file with `replace_builtin = true` drops the built-in rules entirely.
    #[serde(default)]
    replace_builtin: bool,
    #[serde(default)]
    rule: Vec<RuleSpec>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleSpec {
    name: String,
    #[serde(default)]
    set: Option<String>,
    bucket: String,
    #[serde(default)]
    regex: Option<String>,
    #[serde(default)]
    memop: Option<String>,
}

/// What a rule matches.
#[derive(Debug, Clone)]
pub enum Matcher {
    Kernel(Regex),
    Memop(Vec<MemopKind>),
}

/// One compiled rule, with where it came from for `--explain`.
#[derive(Debug, Clone)]
pub struct Rule {
    pub name: String,
    pub set: String,
    pub bucket: Bucket,
    pub matcher: Matcher,
    /// `builtin` or the user file's path, plus the rule's 1-based position there.
    pub origin: String,
}

/// Why a name landed in its bucket.
#[derive(Debug, Clone, Serialize)]
pub struct Explanation {
    pub name: String,
    pub bucket: Bucket,
    /// The winning rule, or `None` when nothing matched (bucket `other`).
    pub rule: Option<RuleMatch>,
    /// Later rules that also match but lose to the first one.
    pub shadowed: Vec<RuleMatch>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RuleMatch {
    pub position: usize,
    pub rule: String,
    pub set: String,
    pub bucket: Bucket,
    pub origin: String,
    pub pattern: String,
    /// The part of the name the regex matched.
    pub matched: String,
}

/// An ordered rule list; first match wins.
#[derive(Debug, Clone)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
}

impl RuleSet {
    /// The built-in rules only.
    pub fn builtin() -> Self {
        // The embedded file is tested; failing here is a build defect, not bad input.
        Self {
            rules: parse_rules(BUILTIN_RULES, "builtin")
                .map(|(_, r)| r)
                .unwrap_or_else(|e| panic!("built-in rules are invalid: {e}")),
        }
    }

    /// Built-ins with the rules of `path` in front (or instead, with `replace_builtin`).
    pub fn with_user_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| AnalyzerError::io(path, e))?;
        let (replace, mut rules) = parse_rules(&text, &path.display().to_string())?;
        if !replace {
            rules.extend(Self::builtin().rules);
        }
        Ok(Self { rules })
    }

    pub fn classify_kernel(&self, name: &str) -> Bucket {
        self.rules
            .iter()
            .find(|r| matches!(&r.matcher, Matcher::Kernel(re) if re.is_match(name)))
            .map(|r| r.bucket)
            .unwrap_or(Bucket::Other)
    }

    pub fn classify_memop(&self, kind: MemopKind) -> Bucket {
        self.rules
            .iter()
            .find(|r| matches!(&r.matcher, Matcher::Memop(k) if k.contains(&kind)))
            .map(|r| r.bucket)
            .unwrap_or(Bucket::Copy)
    }

    /// Explains a kernel name, or a memop when `name` is a memop kind such as `DtoD`.
    pub fn explain(&self, name: &str) -> Explanation {
        let memop = MemopKind::parse(name);
        let mut hits = self.rules.iter().enumerate().filter_map(|(i, r)| {
            let (pattern, matched) = match (&r.matcher, memop) {
                (Matcher::Kernel(re), None) => {
                    let m = re.find(name)?;
                    (re.as_str().to_owned(), m.as_str().to_owned())
                }
                (Matcher::Memop(kinds), Some(k)) if kinds.contains(&k) => (
                    kinds
                        .iter()
                        .map(|k| k.as_str())
                        .collect::<Vec<_>>()
                        .join("|"),
                    k.as_str().to_owned(),
                ),
                _ => return None,
            };
            Some(RuleMatch {
                position: i + 1,
                rule: r.name.clone(),
                set: r.set.clone(),
                bucket: r.bucket,
                origin: r.origin.clone(),
                pattern,
                matched,
            })
        });
        let rule = hits.next();
        let shadowed = hits.collect();
        Explanation {
            name: name.to_owned(),
            bucket: rule.as_ref().map(|r| r.bucket).unwrap_or(Bucket::Other),
            rule,
            shadowed,
        }
    }
}

fn parse_rules(text: &str, origin: &str) -> Result<(bool, Vec<Rule>)> {
    let err = |message: String| AnalyzerError::Rules {
        origin: origin.to_owned(),
        message,
    };
    let file: RuleFile = toml::from_str(text).map_err(|e| {
        err(format!(
            "invalid rules TOML: {}",
            e.to_string().lines().next().unwrap_or("")
        ))
    })?;
    let mut out = Vec::with_capacity(file.rule.len());
    for (i, spec) in file.rule.into_iter().enumerate() {
        let at = format!("rule {} ({:?})", i + 1, spec.name);
        let bucket = Bucket::parse(&spec.bucket).ok_or_else(|| {
            err(format!(
                "{at}: unknown bucket {:?}; known: {}",
                spec.bucket,
                Bucket::ALL.map(|b| b.as_str()).join(", ")
            ))
        })?;
        let matcher = match (&spec.regex, &spec.memop) {
            (Some(re), None) => Matcher::Kernel(Regex::new(re).map_err(|e| {
                err(format!(
                    "{at}: bad regex: {}",
                    e.to_string().replace('\n', " ")
                ))
            })?),
            (None, Some(m)) => {
                let kinds = m
                    .split('|')
                    .map(|k| {
                        MemopKind::parse(k).ok_or_else(|| {
                            err(format!("{at}: unknown memop kind {k:?} (use HtoD, DtoH, DtoD, HtoH, PtoP, Memset, Unknown)"))
                        })
                    })
                    .collect::<Result<Vec<_>>>()?;
                Matcher::Memop(kinds)
            }
            _ => return Err(err(format!("{at}: give exactly one of `regex` or `memop`"))),
        };
        out.push(Rule {
            name: spec.name,
            set: spec.set.unwrap_or_else(|| "user".to_owned()),
            bucket,
            matcher,
            origin: format!("{origin}:{}", i + 1),
        });
    }
    Ok((file.replace_builtin, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(name: &str) -> Bucket {
        RuleSet::builtin().classify_kernel(name)
    }

    #[test]
    fn builtin_sets_cover_the_engines() {
        // llama.cpp CUDA backend
        assert_eq!(
            b("void mul_mat_vec_q<(ggml_type)8, 1>(void const*, void const*)"),
            Bucket::Gemv
        );
        assert_eq!(
            b("void mul_mat_q<(ggml_type)8, 64, false>(char const*)"),
            Bucket::GemmQuant
        );
        assert_eq!(
            b("void quantize_mmq_q8_1<(mmq_q8_1_ds_layout)1>(float const*)"),
            Bucket::GemmQuant
        );
        assert_eq!(
            b("void k_get_rows_float<float, float>(float const*)"),
            Bucket::EmbedGather
        );
        assert_eq!(
            b("void flash_attn_ext_f16<128, 128, 4>(char const*)"),
            Bucket::Attention
        );
        assert_eq!(
            b("void rms_norm_f32<1024, true>(float const*)"),
            Bucket::Norm
        );
        assert_eq!(
            b("void rope_neox<true, false, float>(float const*)"),
            Bucket::Rope
        );
        assert_eq!(
            b("void cpy_flt<cpy_1_flt<float, __half> >(char const*)"),
            Bucket::Copy
        );
        assert_eq!(
            b("void gated_delta_net_cuda<128>(float const*)"),
            Bucket::LinearAttnSsm
        );
        assert_eq!(
            b("void k_bin_bcast<&op_add, float, float, float>(float const*)"),
            Bucket::ActElementwise
        );
        // vLLM / FlashInfer / FlashAttention
        assert_eq!(
            b("void vllm::rms_norm_kernel<c10::BFloat16, 8, 1>(c10::BFloat16*)"),
            Bucket::Norm
        );
        assert_eq!(
            b("void vllm::reshape_and_cache_flash_kernel<__nv_bfloat16>(...)"),
            Bucket::Copy
        );
        assert_eq!(
            b("void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128> >(...)"),
            Bucket::Attention
        );
        assert_eq!(
            b("void flashinfer::BatchDecodeWithPagedKVCacheKernel<...>(...)"),
            Bucket::Attention
        );
        assert_eq!(
            b("void flashinfer::sampling::TopKTopPSamplingFromProbKernel<...>(...)"),
            Bucket::Sampling
        );
        assert_eq!(b("fused_moe_kernel"), Bucket::Moe);
        assert_eq!(
            b("void vllm::rotary_embedding_kernel<c10::BFloat16, true>(...)"),
            Bucket::Rope
        );
        assert_eq!(
            b("void vllm::act_and_mul_kernel<c10::BFloat16, &vllm::silu_kernel>(...)"),
            Bucket::ActElementwise
        );
        assert_eq!(
            b("chunk_gated_delta_rule_fwd_kernel_h_blockdim64"),
            Bucket::LinearAttnSsm
        );
        // PyTorch / cuBLAS / cuDNN
        assert_eq!(
            b("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"),
            Bucket::GemmDense
        );
        assert_eq!(
            b("void gemv2T_kernel_val<int, int, __nv_bfloat16, float, 128, 16>(...)"),
            Bucket::Gemv
        );
        assert_eq!(
            b("cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35"),
            Bucket::Attention
        );
        assert_eq!(
            b(
                "void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long>(...)"
            ),
            Bucket::EmbedGather
        );
        assert_eq!(
            b("void at::native::(anonymous namespace)::CatArrayBatchedCopy<OpaqueType<2u>>(...)"),
            Bucket::Copy
        );
        // NCCL, ROCm
        assert_eq!(
            b("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            Bucket::Comm
        );
        assert_eq!(
            b("Cijk_Alik_Bljk_BBS_BH_MT128x128x64_MI32x32x8x1_SN"),
            Bucket::GemmDense
        );
        assert_eq!(
            b("wvSplitK_hf_sml_<__hip_bfloat16, 64, 2, 16, 8, 2, 1>"),
            Bucket::Gemv
        );
        // gapscope engine
        assert_eq!(b("mmvq_q8_0"), Bucket::Gemv);
        assert_eq!(b("mmq_q4_0"), Bucket::GemmQuant);
        assert_eq!(b("attn_decode_paged_bf16"), Bucket::Attention);
        assert_eq!(b("kv_append_bf16"), Bucket::Copy);
        assert_eq!(b("totally_unknown_kernel"), Bucket::Other);
    }

    #[test]
    fn memops_and_explain() {
        let r = RuleSet::builtin();
        assert_eq!(r.classify_memop(MemopKind::DtoD), Bucket::Copy);
        assert_eq!(r.classify_memop(MemopKind::PtoP), Bucket::Comm);
        let e = r.explain("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT");
        assert_eq!(e.bucket, Bucket::GemmDense);
        let m = e.rule.unwrap();
        assert_eq!(m.matched.to_lowercase(), "nvjet");
        assert!(m.origin.starts_with("builtin:"));
        let e = r.explain("DtoD");
        assert_eq!(e.bucket, Bucket::Copy);
        assert!(r.explain("zzz").rule.is_none());
    }

    #[test]
    fn user_rules_override_and_errors_name_the_rule() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.toml");
        std::fs::write(&p, "[[rule]]\nname='mine'\nregex='^nvjet'\nbucket='gemv'\n").unwrap();
        let r = RuleSet::with_user_file(&p).unwrap();
        assert_eq!(r.classify_kernel("nvjet_x"), Bucket::Gemv);
        assert_eq!(r.classify_kernel("void rms_norm_f32<1>"), Bucket::Norm);
        std::fs::write(
            &p,
            "replace_builtin=true\n[[rule]]\nname='x'\nregex='^a'\nbucket='norm'\n",
        )
        .unwrap();
        let r = RuleSet::with_user_file(&p).unwrap();
        assert_eq!(r.classify_kernel("void rms_norm_f32<1>"), Bucket::Other);
        std::fs::write(&p, "[[rule]]\nname='bad'\nregex='('\nbucket='norm'\n").unwrap();
        let e = RuleSet::with_user_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("rule 1") && e.contains("bad regex") && e.contains("r.toml"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        std::fs::write(&p, "[[rule]]\nname='bad'\nregex='x'\nbucket='nope'\n").unwrap();
        assert!(
            RuleSet::with_user_file(&p)
                .unwrap_err()
                .to_string()
                .contains("unknown bucket")
        );
    }
}
