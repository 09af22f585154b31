//! Bucket rules: ordered regexes over demangled kernel names plus memop-kind rules, loaded
//! from the embedded `rules/builtin.toml` and optionally a user file placed in front.
//!
//! One first-match-wins walk over the rule list serves classification and `--explain`
//! alike, for kernels and memops, so the two cannot disagree. A kernel or memop that no
//! rule matches is `other`; with `replace_builtin = true` that includes every memop kind
//! the user file has no `memop` rule for.
//!
//! Kernel regexes are ASCII-only (`\w`, `\b`, `(?i)` and classes work on ASCII; kernel
//! names are C++ identifiers) and see at most the first [`CLASSIFY_PREFIX_BYTES`] of a name,
//! so classifying a name costs a bounded time whatever its length and content.

use std::path::Path;

use gapscope_traces::MemopKind;
use regex::bytes::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};

use crate::bucket::Bucket;
use crate::config_file::{MAX_CONFIG_BYTES, parse_toml, read_config};
use crate::error::{AnalyzerError, Result};

/// The built-in rules, shipped inside the binary.
pub const BUILTIN_RULES: &str = include_str!("../rules/builtin.toml");

/// Kernel rules match the first this many bytes of a name (cut back to a character
/// boundary). Real demangled names are far shorter; the longest in the bundled traces is
/// under 1 KiB.
pub const CLASSIFY_PREFIX_BYTES: usize = 16 * 1024;

/// Compiled-program size limit for one rule's regex.
const REGEX_SIZE_LIMIT: usize = 4 << 20;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    /// A user file with `replace_builtin = true` drops the built-in rules entirely,
    /// memop rules included.
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
    #[serde(default)]
    scope: Option<String>,
}

/// What a rule matches.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// An ASCII-mode regex over the kernel name's first [`CLASSIFY_PREFIX_BYTES`].
    Kernel(Regex),
    Memop(Vec<MemopKind>),
    /// An ASCII-mode regex over the names of the host scopes around a kernel's launch (its
    /// framework ops, Python functions, annotations and NVTX ranges, innermost first, up to
    /// and including the innermost `nn.Module`).
    Scope(Regex),
}

impl Matcher {
    /// The pattern as written in the rules file (`regex`, or the memop kinds `|`-joined).
    pub fn pattern(&self) -> String {
        match self {
            Self::Kernel(re) | Self::Scope(re) => re.as_str().to_owned(),
            Self::Memop(kinds) => kinds
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join("|"),
        }
    }
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
    /// The memop kind the name was read as, when it names a memop (`DtoD`, or a report's
    /// `[memop] Memcpy DtoD (Device -> Device)`); `None` for a kernel name.
    pub memop: Option<String>,
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

/// Version of the JSON schema of `gapscope buckets --json` (list and `--explain`).
pub const RULES_SCHEMA_VERSION: u32 = 1;

/// The rule list as `gapscope buckets` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct RuleListing {
    pub schema_version: u32,
    pub rules: Vec<ListedRule>,
    /// Memop kinds no rule lists; they are `other`, like kernels no rule matches.
    pub memops_without_rule: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ListedRule {
    pub position: usize,
    pub bucket: Bucket,
    pub set: String,
    pub name: String,
    /// `regex`, `memop` or `scope`.
    pub kind: &'static str,
    pub pattern: String,
    pub origin: String,
}

/// What is being classified.
#[derive(Debug, Clone, Copy)]
enum Subject<'a> {
    Kernel(&'a [u8]),
    Memop(MemopKind),
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
        let file: RuleFile = toml::from_str(BUILTIN_RULES)
            .unwrap_or_else(|e| panic!("built-in rules are invalid: {e}"));
        Self {
            rules: compile_rules(file.rule, "builtin")
                .unwrap_or_else(|e| panic!("built-in rules are invalid: {e}")),
        }
    }

    /// Built-ins with the rules of `path` in front (or instead, with `replace_builtin`).
    /// The file is read with [`read_config`] (a regular file of at most
    /// [`MAX_CONFIG_BYTES`]).
    pub fn with_user_file(path: &Path) -> Result<Self> {
        let text = read_config(path, "rules file", MAX_CONFIG_BYTES)?;
        let file: RuleFile = parse_toml(path, &text, "rules file")?;
        let mut rules = compile_rules(file.rule, &path.display().to_string())?;
        tracing::debug!(
            path = %path.display(),
            rules = rules.len(),
            replace_builtin = file.replace_builtin,
            "rule file loaded"
        );
        if !file.replace_builtin {
            rules.extend(Self::builtin().rules);
        }
        Ok(Self { rules })
    }

    /// The bucket of a kernel name: the first kernel rule whose regex matches the name's
    /// first [`CLASSIFY_PREFIX_BYTES`], else `other`.
    pub fn classify_kernel(&self, name: &str) -> Bucket {
        self.first(Subject::Kernel(classified_part(name)))
    }

    /// Whether any rule matches on host scopes.
    pub fn has_scope_rules(&self) -> bool {
        self.rules
            .iter()
            .any(|r| matches!(r.matcher, Matcher::Scope(_)))
    }

    /// The position of the first kernel rule matching `name`, if any.
    pub fn first_kernel_rule(&self, name: &str) -> Option<usize> {
        self.matches(Subject::Kernel(classified_part(name)))
            .next()
            .map(|(i, _, _)| i)
    }

    /// The position of the first scope rule matching one scope name, if any.
    pub fn first_scope_rule(&self, scope: &str) -> Option<usize> {
        let s = classified_part(scope);
        self.rules.iter().position(|r| match &r.matcher {
            Matcher::Scope(re) => re.is_match(s),
            _ => false,
        })
    }

    /// The bucket of the rule at `position`, `other` for none.
    pub fn bucket_at(&self, position: Option<usize>) -> Bucket {
        position
            .and_then(|i| self.rules.get(i))
            .map_or(Bucket::Other, |r| r.bucket)
    }

    /// The bucket of a kernel launched inside `scopes` (innermost first, as the analysis
    /// walks them): the first rule in list order that matches, a scope rule matching any
    /// of the scopes or a kernel rule matching the name.
    pub fn classify_kernel_in(&self, name: &str, scopes: &[&str]) -> Bucket {
        let scope = scopes.iter().filter_map(|s| self.first_scope_rule(s)).min();
        let kernel = self.first_kernel_rule(name);
        let first = match (scope, kernel) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.bucket_at(first)
    }

    /// The scope rules matching a scope name, for `buckets --explain-scope`.
    pub fn explain_scope(&self, scope: &str) -> Vec<RuleMatch> {
        let s = classified_part(scope);
        self.rules
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match &r.matcher {
                Matcher::Scope(re) => re.find(s).map(|m| RuleMatch {
                    position: i + 1,
                    rule: r.name.clone(),
                    set: r.set.clone(),
                    bucket: r.bucket,
                    origin: r.origin.clone(),
                    pattern: r.matcher.pattern(),
                    matched: String::from_utf8_lossy(m.as_bytes()).into_owned(),
                }),
                _ => None,
            })
            .collect()
    }

    /// The bucket of a memop: the first memop rule listing its kind, else `other`.
    pub fn classify_memop(&self, kind: MemopKind) -> Bucket {
        self.first(Subject::Memop(kind))
    }

    fn first(&self, s: Subject) -> Bucket {
        self.matches(s)
            .next()
            .map(|(_, r, _)| r.bucket)
            .unwrap_or(Bucket::Other)
    }

    /// Every rule matching `s`, in order, with its 0-based position and the matched text.
    fn matches<'a>(
        &'a self,
        s: Subject<'a>,
    ) -> impl Iterator<Item = (usize, &'a Rule, String)> + 'a {
        self.rules
            .iter()
            .enumerate()
            .filter_map(move |(i, r)| match (&r.matcher, s) {
                (Matcher::Kernel(re), Subject::Kernel(name)) => re
                    .find(name)
                    .map(|m| (i, r, String::from_utf8_lossy(m.as_bytes()).into_owned())),
                (Matcher::Memop(kinds), Subject::Memop(k)) if kinds.contains(&k) => {
                    Some((i, r, k.as_str().to_owned()))
                }
                _ => None,
            })
    }

    /// The rules in order, and the memop kinds that fall through to `other`.
    pub fn listing(&self) -> RuleListing {
        RuleListing {
            schema_version: RULES_SCHEMA_VERSION,
            rules: self
                .rules
                .iter()
                .enumerate()
                .map(|(i, r)| ListedRule {
                    position: i + 1,
                    bucket: r.bucket,
                    set: r.set.clone(),
                    name: r.name.clone(),
                    kind: match r.matcher {
                        Matcher::Kernel(_) => "regex",
                        Matcher::Memop(_) => "memop",
                        Matcher::Scope(_) => "scope",
                    },
                    pattern: r.matcher.pattern(),
                    origin: r.origin.clone(),
                })
                .collect(),
            memops_without_rule: MemopKind::ALL
                .into_iter()
                .filter(|&k| self.matches(Subject::Memop(k)).next().is_none())
                .map(|k| k.as_str().to_owned())
                .collect(),
        }
    }

    /// Explains a kernel name, or a memop when `name` is a memop kind such as `DtoD` or a
    /// report's memop name such as `[memop] Memset (Device)`.
    pub fn explain(&self, name: &str) -> Explanation {
        let memop = memop_kind_of(name);
        let subject = match memop {
            Some(k) => Subject::Memop(k),
            None => Subject::Kernel(classified_part(name)),
        };
        let mut hits = self.matches(subject).map(|(i, r, matched)| RuleMatch {
            position: i + 1,
            rule: r.name.clone(),
            set: r.set.clone(),
            bucket: r.bucket,
            origin: r.origin.clone(),
            pattern: r.matcher.pattern(),
            matched,
        });
        let rule = hits.next();
        let shadowed = hits.collect();
        Explanation {
            name: name.to_owned(),
            memop: memop.map(|k| k.as_str().to_owned()),
            bucket: rule.as_ref().map(|r| r.bucket).unwrap_or(Bucket::Other),
            rule,
            shadowed,
        }
    }
}

/// The part of a kernel name the rules see: its first [`CLASSIFY_PREFIX_BYTES`], cut back to
/// a character boundary.
fn classified_part(name: &str) -> &[u8] {
    let mut end = name.len().min(CLASSIFY_PREFIX_BYTES);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name.as_bytes()[..end]
}

/// A memop kind (`DtoD`), or a report's memop name (`[memop] Memcpy DtoD (Device -> Device)`,
/// `[memop] Memset (Device)`: the first kind named in it, else `Unknown`).
fn memop_kind_of(name: &str) -> Option<MemopKind> {
    if let Some(k) = MemopKind::parse(name) {
        return Some(k);
    }
    let rest = name.trim_start().strip_prefix("[memop]")?;
    let words: Vec<&str> = rest
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    Some(
        words
            .iter()
            .find_map(|w| MemopKind::parse(w).filter(|k| *k != MemopKind::Unknown))
            .unwrap_or(MemopKind::Unknown),
    )
}

fn compile_rules(specs: Vec<RuleSpec>, origin: &str) -> Result<Vec<Rule>> {
    let err = |message: String| AnalyzerError::Rules {
        origin: origin.to_owned(),
        message,
    };
    let mut out = Vec::with_capacity(specs.len());
    for (i, spec) in specs.into_iter().enumerate() {
        let at = format!("rule {} ({:?})", i + 1, spec.name);
        let bucket = Bucket::parse(&spec.bucket).ok_or_else(|| {
            err(format!(
                "{at}: unknown bucket {:?}; known: {}",
                spec.bucket,
                Bucket::ALL.map(|b| b.as_str()).join(", ")
            ))
        })?;
        let bad = |e: regex::Error| {
            err(format!(
                "{at}: bad regex: {}",
                e.to_string().replace('\n', " ")
            ))
        };
        let matcher = match (&spec.regex, &spec.memop, &spec.scope) {
            (Some(re), None, None) => Matcher::Kernel(compile_regex(re).map_err(bad)?),
            (None, None, Some(re)) => Matcher::Scope(compile_regex(re).map_err(bad)?),
            (None, Some(m), None) => {
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
            _ => {
                return Err(err(format!(
                    "{at}: give exactly one of `regex`, `memop` or `scope`"
                )));
            }
        };
        out.push(Rule {
            name: spec.name,
            set: spec.set.unwrap_or_else(|| "user".to_owned()),
            bucket,
            matcher,
            origin: format!("{origin}:{}", i + 1),
        });
    }
    Ok(out)
}

/// ASCII mode: `\b`, `\w`, classes and `(?i)` act on ASCII only, which keeps every rule
/// within the DFA engines (a Unicode `\b` sends non-ASCII names to a slow fallback).
fn compile_regex(re: &str) -> std::result::Result<Regex, regex::Error> {
    RegexBuilder::new(re)
        .unicode(false)
        .size_limit(REGEX_SIZE_LIMIT)
        .build()
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
            Bucket::Quantize
        );
        assert_eq!(
            b("void k_get_rows_float<float, float>(float const*)"),
            Bucket::EmbedGather
        );
        assert_eq!(
            b("void flash_attn_ext_f16<128, 128, 4>(char const*)"),
            Bucket::Attention
        );
        // Flash attention off: KQ and KQV on the f16 KV cache; bf16 weights stay GEMV.
        assert_eq!(
            b("void mul_mat_vec_f<__half, float, 1, 64, false, false>(__half const*)"),
            Bucket::Attention
        );
        assert_eq!(
            b("void mul_mat_f<__half, 32, 8, false>(__half const*)"),
            Bucket::Attention
        );
        assert_eq!(
            b("void mul_mat_vec_f<nv_bfloat16, float, 1, 128, false, false>(nv_bfloat16 const*)"),
            Bucket::Gemv
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
        assert_eq!(b("conv_step_f32"), Bucket::Conv);
        assert_eq!(b("delta_rule_dk128_f32"), Bucket::LinearAttnSsm);
        assert_eq!(b("gated_norm_f32"), Bucket::Norm);
        assert_eq!(b("state_gather_f32"), Bucket::EmbedGather);
        assert_eq!(b("sigmoid_gate_bf16"), Bucket::ActElementwise);
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

    #[test]
    fn memop_classification_and_explain_agree_with_replace_builtin() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("repl.toml");
        std::fs::write(
            &p,
            "replace_builtin = true\n[[rule]]\nname='nvjet'\nregex='^nvjet'\nbucket='gemm_dense'\n",
        )
        .unwrap();
        let repl = RuleSet::with_user_file(&p).unwrap();
        assert_eq!(repl.rules.len(), 1);
        // No memop rule in the file: memops are `other`, in classification and explain alike.
        assert_eq!(repl.classify_memop(MemopKind::Memset), Bucket::Other);
        assert_eq!(repl.explain("Memset").bucket, Bucket::Other);
        assert_eq!(
            repl.explain("[memop] Memset (Device)").bucket,
            Bucket::Other
        );
        std::fs::write(
            &p,
            "replace_builtin = true\n[[rule]]\nname='sets'\nmemop='Memset'\nbucket='norm'\n",
        )
        .unwrap();
        let sets = RuleSet::with_user_file(&p).unwrap();
        for rules in [RuleSet::builtin(), repl, sets] {
            for k in MemopKind::ALL {
                let e = rules.explain(k.as_str());
                assert_eq!(e.bucket, rules.classify_memop(k), "{k:?}");
                assert_eq!(e.memop.as_deref(), Some(k.as_str()));
                assert_eq!(
                    e.rule.as_ref().map(|r| r.bucket).unwrap_or(Bucket::Other),
                    e.bucket
                );
            }
        }
        // A report's memop names are explained as memops.
        let b = RuleSet::builtin();
        let e = b.explain("[memop] Memcpy DtoD (Device -> Device)");
        assert_eq!(e.memop.as_deref(), Some("DtoD"));
        assert_eq!(e.bucket, b.classify_memop(MemopKind::DtoD));
        assert_eq!(b.explain("[memop] Memset (Device)").bucket, Bucket::Copy);
    }

    #[test]
    fn rules_file_toml_errors_keep_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("r.toml");
        std::fs::write(&p, "[[rule]\nname='x'\n").unwrap();
        let e = RuleSet::with_user_file(&p).unwrap_err().to_string();
        assert!(e.contains("r.toml: invalid rules file: "), "{e}");
        assert!(e.contains("line 1"), "{e}");
        assert!(!e.contains('\n'), "{e}");
        std::fs::write(&p, "[[rule]]\nname='x'\nregex='a'\nbucket='norm'\nfoo=1\n").unwrap();
        let e = RuleSet::with_user_file(&p).unwrap_err().to_string();
        assert!(
            e.contains("unknown field `foo`") && e.contains("line 5"),
            "{e}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn rules_from_a_device_are_refused() {
        let e = RuleSet::with_user_file(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("regular file"), "{e}");
    }

    #[test]
    fn huge_non_ascii_names_classify_in_bounded_time() {
        let rules = RuleSet::builtin();
        // 4M characters of non-ASCII text (8 MiB): today's worst case for the built-in rules.
        let name = "é".repeat(4_000_000);
        let t = std::time::Instant::now();
        assert_eq!(rules.classify_kernel(&name), Bucket::Other);
        let e = rules.explain(&name);
        let took = t.elapsed();
        assert_eq!(e.bucket, Bucket::Other);
        assert!(took.as_secs_f64() < 1.0, "{took:?}");
        // Rules see the name's first CLASSIFY_PREFIX_BYTES only, cut at a char boundary.
        let late = format!("{}nvjet", "é".repeat(CLASSIFY_PREFIX_BYTES));
        assert_eq!(rules.classify_kernel(&late), Bucket::Other);
        let early = format!("nvjet{}", "é".repeat(CLASSIFY_PREFIX_BYTES));
        assert_eq!(rules.classify_kernel(&early), Bucket::GemmDense);
        let odd = format!("x{}", "é".repeat(CLASSIFY_PREFIX_BYTES));
        assert_eq!(classified_part(&odd).len(), CLASSIFY_PREFIX_BYTES - 1);
    }
}
