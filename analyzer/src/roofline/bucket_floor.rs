//! Per-bucket floors of measured decode steps. Engine traces declare bytes and FLOPs per
//! kernel, and each bucket is held against the work its kernels declare. Other traces (Kineto,
//! nsys) declare nothing; for them the minimum bytes and FLOPs come from the model spec, for
//! the buckets whose work the model fixes: the matmul buckets together (weights of the linear
//! layers and the LM head), attention (the KV cache at the step's context), linear attention
//! (the recurrent state) and the embedding gather (its rows). The rest (norm, rope,
//! act_elementwise, copy, sampling, other) have no model-derived minimum and get no floor.

use serde::Serialize;

use super::{HardwareSpec, ModelSpec, WeightFormat, peak_flops};
use crate::analysis::Report;
use crate::bucket::Bucket;

/// Where a bucket floor's bytes and FLOPs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FloorSource {
    /// The engine's launches declare bytes and FLOPs per kernel.
    DeclaredByEngine,
    /// Minimum bytes and FLOPs from the model spec (`--model`), for traces whose kernels
    /// declare none.
    DerivedFromModelSpec,
}

impl FloorSource {
    pub fn label(self) -> &'static str {
        match self {
            Self::DeclaredByEngine => "declared by engine",
            Self::DerivedFromModelSpec => "derived from model spec",
        }
    }
}

/// A bucket (or the matmul group of buckets) against the floor of its work.
#[derive(Debug, Clone, Serialize)]
pub struct BucketFloor {
    /// The bucket; for a group, the member with the most time.
    pub bucket: Bucket,
    /// Every bucket whose time this floor covers: one, except for the matmul group
    /// (gemv, gemm_quant, gemm_dense and, for MoE models, moe) of a derived floor.
    pub buckets: Vec<Bucket>,
    pub source: FloorSource,
    /// What the bytes are.
    pub basis: String,
    pub bytes_per_step: f64,
    pub flops_per_step: f64,
    /// Time per step: of the kernels that declare a cost (declared), or mean ms/step of the
    /// covered buckets (derived).
    pub ms_per_step: f64,
    /// max(bytes / bandwidth, FLOPs / peak), ms.
    pub floor_ms: f64,
    pub pct_of_floor: f64,
    /// Achieved bandwidth as % of the ceiling (bytes / time / bandwidth).
    pub pct_of_bandwidth: f64,
}

/// A bucket with decode time but no floor, and why.
#[derive(Debug, Clone, Serialize)]
pub struct NoFloor {
    pub bucket: Bucket,
    pub ms_per_step: f64,
    pub reason: String,
}

/// The minimum work of a group of buckets in one decode step, from the model spec.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelBucketCost {
    pub buckets: Vec<Bucket>,
    pub basis: String,
    pub bytes_per_step: f64,
    pub flops_per_step: f64,
}

/// The buckets that run the linear layers; a derived floor covers them together, since
/// engines split the same weights between GEMV and GEMM kernels differently.
pub const MATMUL_BUCKETS: [Bucket; 3] = [Bucket::Gemv, Bucket::GemmQuant, Bucket::GemmDense];

/// Model-derived minimum bytes and FLOPs per decode step of `batch` sequences at context
/// `ctx`, by bucket group. Consistent with [`super::step_floor`]: the groups' bytes sum to
/// its weight and KV bytes less the norms (which get no floor).
pub fn model_bucket_costs(
    m: &ModelSpec,
    fmt: WeightFormat,
    batch: u64,
    ctx: u64,
) -> Vec<ModelBucketCost> {
    let b = batch as f64;
    let mut matmul = MATMUL_BUCKETS.to_vec();
    if m.moe.is_some() {
        matmul.push(Bucket::Moe);
    }
    let mut v = vec![ModelBucketCost {
        buckets: matmul,
        basis: if m.moe.is_some() {
            "weights of the linear layers (experts the batch touches) and the LM head".into()
        } else {
            "weights of the linear layers and the LM head".into()
        },
        bytes_per_step: m.matmul_weight_bytes_per_step(fmt, batch),
        flops_per_step: b * m.matmul_flops_per_token(),
    }];
    if m.full_attention_layers() > 0 {
        v.push(ModelBucketCost {
            buckets: vec![Bucket::Attention],
            basis: format!("KV cache read at context {ctx}"),
            bytes_per_step: m.kv_bytes_per_step(batch, ctx, 2.0),
            flops_per_step: b * m.attention_flops_per_token(ctx),
        });
    }
    if m.linear_attention_layers() > 0 {
        v.push(ModelBucketCost {
            buckets: vec![Bucket::LinearAttnSsm],
            basis: "recurrent state read and written back".into(),
            bytes_per_step: 2.0 * b * m.recurrent_state_bytes() + m.linear_vector_bytes(),
            flops_per_step: b * m.recurrent_flops_per_token(),
        });
    }
    let rows = batch.min(m.vocab);
    v.push(ModelBucketCost {
        buckets: vec![Bucket::EmbedGather],
        basis: format!("{rows} embedding row{}", if rows == 1 { "" } else { "s" }),
        bytes_per_step: m.embedding_bytes_per_step(fmt, batch),
        flops_per_step: 0.0,
    });
    v
}

fn no_floor_reason(b: Bucket) -> &'static str {
    match b {
        Bucket::Norm | Bucket::Rope | Bucket::ActElementwise => {
            "no model-derived minimum (activation traffic, which fusion removes)"
        }
        Bucket::Copy => "no model-derived minimum (copies are not part of the model's work)",
        Bucket::Sampling => "no model-derived minimum (depends on the sampler)",
        Bucket::Attention => "no model-derived minimum (the model has no full-attention layers)",
        Bucket::LinearAttnSsm => {
            "no model-derived minimum (the model has no linear-attention layers)"
        }
        Bucket::Moe => "no model-derived minimum (the model has no MoE layers)",
        _ => "no model-derived minimum",
    }
}

#[allow(clippy::too_many_arguments)]
fn row(
    bucket: Bucket,
    buckets: Vec<Bucket>,
    source: FloorSource,
    basis: String,
    bytes: f64,
    flops: f64,
    ms: f64,
    hw: &HardwareSpec,
    fmt: WeightFormat,
) -> BucketFloor {
    let floor_ms = (bytes / hw.hbm_bytes_per_s).max(flops / peak_flops(hw, fmt)) * 1e3;
    BucketFloor {
        bucket,
        buckets,
        source,
        basis,
        bytes_per_step: bytes,
        flops_per_step: flops,
        ms_per_step: ms,
        floor_ms,
        pct_of_floor: 100.0 * floor_ms / ms,
        pct_of_bandwidth: 100.0 * bytes / (ms / 1e3) / hw.hbm_bytes_per_s,
    }
}

/// Floors of a trace's decode-step buckets at `batch` sequences and context `ctx`. A trace
/// whose kernels declare bytes/FLOPs (any bucket with a cost: engine traces) keeps the
/// declared costs; any other trace gets the model-derived ones of [`model_bucket_costs`].
/// Buckets with decode time but no floor come back in the second list, each with a reason.
pub fn bucket_floors(
    r: &Report,
    m: &ModelSpec,
    hw: &HardwareSpec,
    fmt: WeightFormat,
    batch: u64,
    ctx: u64,
) -> (Vec<BucketFloor>, Vec<NoFloor>) {
    let timed: Vec<(&crate::analysis::BucketRow, f64)> = r
        .buckets
        .iter()
        .filter_map(|b| Some((b, b.ms_per_step.as_ref()?.mean)))
        .filter(|(_, ms)| *ms > 0.0)
        .collect();
    let mut floors = Vec::new();
    let mut none = Vec::new();
    if r.buckets.iter().any(|b| b.cost.is_some()) {
        for (b, ms) in timed {
            match b.cost {
                Some(c) if c.costed_ms_per_step > 0.0 => floors.push(row(
                    b.bucket,
                    vec![b.bucket],
                    FloorSource::DeclaredByEngine,
                    "per-kernel bytes and FLOPs".into(),
                    c.bytes_per_step,
                    c.flops_per_step,
                    c.costed_ms_per_step,
                    hw,
                    fmt,
                )),
                _ => none.push(NoFloor {
                    bucket: b.bucket,
                    ms_per_step: ms,
                    reason: if b.bucket == Bucket::Copy {
                        "no declared bytes or FLOPs (copies and memsets carry none)".into()
                    } else {
                        "its kernels declare no bytes or FLOPs".into()
                    },
                }),
            }
        }
        return (floors, none);
    }
    let mut covered = Vec::new();
    for c in model_bucket_costs(m, fmt, batch, ctx) {
        let members: Vec<(Bucket, f64)> = timed
            .iter()
            .filter(|(b, _)| c.buckets.contains(&b.bucket))
            .map(|(b, ms)| (b.bucket, *ms))
            .collect();
        let Some(lead) = members.iter().max_by(|x, y| x.1.total_cmp(&y.1)) else {
            continue;
        };
        let ms: f64 = members.iter().map(|x| x.1).sum();
        floors.push(row(
            lead.0,
            members.iter().map(|x| x.0).collect(),
            FloorSource::DerivedFromModelSpec,
            c.basis,
            c.bytes_per_step,
            c.flops_per_step,
            ms,
            hw,
            fmt,
        ));
        covered.extend(members.iter().map(|x| x.0));
    }
    for (b, ms) in timed {
        if !covered.contains(&b.bucket) {
            none.push(NoFloor {
                bucket: b.bucket,
                ms_per_step: ms,
                reason: no_floor_reason(b.bucket).into(),
            });
        }
    }
    (floors, none)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::roofline::model::tests::{tiny_mixtral, tiny_qwen3_next};
    use serde_json::json;

    #[test]
    fn llama3_8b_costs_by_hand_and_consistent_with_the_step_floor() {
        let m = ModelSpec::from_hf_config(&json!({
            "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
            "vocab_size": 128256
        }))
        .unwrap();
        let c = model_bucket_costs(&m, WeightFormat::Bf16, 1, 160);
        let buckets: Vec<Vec<Bucket>> = c.iter().map(|x| x.buckets.clone()).collect();
        assert_eq!(
            buckets,
            vec![
                MATMUL_BUCKETS.to_vec(),
                vec![Bucket::Attention],
                vec![Bucket::EmbedGather]
            ]
        );
        // Layers 13,958,643,712 B + LM head 1,050,673,152 B; 2 FLOPs per weight.
        assert_eq!(c[0].bytes_per_step, 15_009_316_864.0);
        assert_eq!(c[0].flops_per_step, 2.0 * 7_504_658_432.0);
        // KV at ctx 160: 160 * 131,072 B; 4 * 160 * 32 * 128 * 32 FLOPs.
        assert_eq!(c[1].bytes_per_step, 20_971_520.0);
        assert_eq!(c[1].flops_per_step, 83_886_080.0);
        assert_eq!(c[1].basis, "KV cache read at context 160");
        assert_eq!(c[2].bytes_per_step, 8_192.0);
        assert_eq!(c[2].basis, "1 embedding row");
        // The groups cover the step floor's bytes except the norms (no floor).
        let f = super::super::step_floor(
            &m,
            &super::super::hw::lookup("h200").unwrap(),
            WeightFormat::Bf16,
            1,
            160,
        );
        let sum: f64 = c.iter().map(|x| x.bytes_per_step).sum();
        assert_eq!(sum + m.norm_bytes(), f.weight_bytes + f.kv_bytes);
        let flops: f64 = c.iter().map(|x| x.flops_per_step).sum();
        assert_eq!(flops, f.flops);
    }

    #[test]
    fn moe_and_hybrid_models_widen_the_groups() {
        let moe = tiny_mixtral();
        let c = model_bucket_costs(&moe, WeightFormat::Q4_0, 3, 10);
        assert!(c[0].buckets.contains(&Bucket::Moe));
        assert!(c[0].basis.contains("experts"));
        assert_eq!(c.last().unwrap().basis, "3 embedding rows");
        let hybrid = tiny_qwen3_next();
        let c = model_bucket_costs(&hybrid, WeightFormat::Bf16, 2, 10);
        let ssm = c
            .iter()
            .find(|x| x.buckets == [Bucket::LinearAttnSsm])
            .unwrap();
        // State 3 * (2,048 + 576) B per sequence, read and written, for 2 sequences; plus the
        // DeltaNet vectors 3 * 16 * 2 B.
        assert_eq!(ssm.bytes_per_step, 2.0 * 2.0 * 3.0 * 2624.0 + 96.0);
        assert_eq!(ssm.flops_per_step, 2.0 * 3.0 * 4.0 * 512.0);
        let f = super::super::step_floor(
            &hybrid,
            &super::super::hw::lookup("h200").unwrap(),
            WeightFormat::Bf16,
            2,
            10,
        );
        let sum: f64 = c.iter().map(|x| x.bytes_per_step).sum();
        let want = f.weight_bytes + f.kv_bytes + f.state_bytes - hybrid.norm_bytes();
        assert!((sum - want).abs() < 1e-6, "{sum} vs {want}");
    }
}
