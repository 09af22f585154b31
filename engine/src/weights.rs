//! Model weights in the engine's prepared layout: q, k and v fused into one matrix, gate and up
//! interleaved row by row (so a GEMV warp can apply SwiGLU in its epilogue), linear weights in
//! the chosen format. Loaded from safetensors or generated from a seed.

use crate::config::{HybridConfig, InProjLayout, ModelConfig};
use crate::error::{EngineError, Result};
use crate::quant::{Matrix, WeightFormat};
use crate::rng;
use half::{bf16, f16};
use safetensors::{Dtype, SafeTensors};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The non-linear weights of a gated DeltaNet layer (its projections are the layer's `wqkv`
/// and `wo`).
#[derive(Debug, Clone, PartialEq)]
pub struct DeltaWeights {
    /// `[conv_channels, conv_kernel]`, oldest tap first.
    pub conv: Vec<f32>,
    /// Per value head: `A_log` and `dt_bias` of the decay gate.
    pub a_log: Vec<f32>,
    pub dt_bias: Vec<f32>,
    /// `[v_dim]`, the gated output norm's weight (not offset by 1).
    pub norm: Vec<f32>,
}

#[derive(Debug, Clone)]
pub struct LayerWeights {
    pub attn_norm: Vec<f32>,
    /// `[q_dim + 2 kv_dim, hidden]`; in a gated DeltaNet layer the fused input projection
    /// `[conv_channels + value_width + 2 v_heads, hidden]` (q, k, v, then z, then b, then a).
    pub wqkv: Matrix,
    pub bqkv: Option<Vec<f32>>,
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    /// `[hidden, q_dim]`; in a gated DeltaNet layer the output projection
    /// `[hidden, value_width]`.
    pub wo: Matrix,
    /// `[q_dim, hidden]`: the attention output gate (hybrid full-attention layers).
    pub w_gate: Option<Matrix>,
    /// Gated DeltaNet layers only.
    pub delta: Option<DeltaWeights>,
    pub ffn_norm: Vec<f32>,
    /// `[2 intermediate, hidden]`, row 2i = gate_i, row 2i+1 = up_i.
    pub w_gate_up: Matrix,
    /// `[hidden, intermediate]`
    pub w_down: Matrix,
}

#[derive(Debug, Clone)]
pub struct ModelWeights {
    pub format: WeightFormat,
    /// `[vocab, hidden]` bf16 bits; read by rows only.
    pub embed: Vec<u16>,
    pub layers: Vec<LayerWeights>,
    pub final_norm: Vec<f32>,
    /// `[vocab, hidden]`
    pub lm_head: Matrix,
}

/// Standard deviation-like amplitude of random linear weights.
const WEIGHT_SCALE: f32 = 0.035;

impl ModelWeights {
    /// Bytes one decode step must read for the weights (embedding by rows only: one row per
    /// sequence, counted by the caller).
    pub fn linear_bytes(&self) -> u64 {
        self.lm_head.bytes()
            + self
                .layers
                .iter()
                .map(|l| {
                    l.wqkv.bytes()
                        + l.wo.bytes()
                        + l.w_gate.as_ref().map_or(0, Matrix::bytes)
                        + l.w_gate_up.bytes()
                        + l.w_down.bytes()
                })
                .sum::<u64>()
    }

    /// Seeded random weights of the config's shapes. Decode timing does not depend on values,
    /// and the values are a pure function of the seed, so a CPU reference can rebuild them.
    pub fn random(cfg: &ModelConfig, format: WeightFormat, seed: u64) -> Self {
        let counter = std::cell::Cell::new(0u64);
        let next = || {
            counter.set(counter.get() + 1);
            counter.get()
        };
        let h = cfg.hidden;
        let mat = |rows: usize, cols: usize| {
            let mut v = vec![0f32; rows * cols];
            rng::fill(&mut v, seed, next(), 0.0, WEIGHT_SCALE);
            Matrix::from_f32(format, rows, cols, &v)
        };
        let norm = |n: usize| {
            let mut v = vec![0f32; n];
            rng::fill(&mut v, seed, 1_000_000 + next(), 1.0, 0.1);
            v
        };
        let mut embed_f = vec![0f32; cfg.vocab * h];
        rng::fill(&mut embed_f, seed, 999_999, 0.0, WEIGHT_SCALE);
        let embed: Vec<u16> = embed_f
            .iter()
            .map(|&x| bf16::from_f32(x).to_bits())
            .collect();
        drop(embed_f);
        let layers = (0..cfg.layers)
            .map(|l| {
                if let Some(hy) = cfg.hybrid.as_ref().filter(|_| cfg.is_linear(l)) {
                    let attn_norm = norm(h);
                    let wqkv = mat(hy.in_proj_rows(), h);
                    let mut conv = vec![0f32; hy.conv_channels() * hy.conv_kernel];
                    rng::fill(&mut conv, seed, 3_000_000 + l as u64, 0.0, 0.5);
                    let mut a_log = vec![0f32; hy.v_heads];
                    rng::fill(&mut a_log, seed, 4_000_000 + l as u64, 0.0, 0.5);
                    let mut dt_bias = vec![0f32; hy.v_heads];
                    rng::fill(&mut dt_bias, seed, 5_000_000 + l as u64, 0.0, 0.5);
                    return LayerWeights {
                        attn_norm,
                        wqkv,
                        bqkv: None,
                        q_norm: None,
                        k_norm: None,
                        wo: mat(h, hy.value_width()),
                        w_gate: None,
                        delta: Some(DeltaWeights {
                            conv,
                            a_log,
                            dt_bias,
                            norm: norm(hy.v_dim),
                        }),
                        ffn_norm: norm(h),
                        w_gate_up: mat(2 * cfg.intermediate, h),
                        w_down: mat(h, cfg.intermediate),
                    };
                }
                let bias = cfg.attention_bias.then(|| {
                    let mut b = vec![0f32; cfg.qkv_dim()];
                    rng::fill(&mut b, seed, 2_000_000 + l as u64, 0.0, 0.02);
                    b
                });
                LayerWeights {
                    attn_norm: norm(h),
                    wqkv: mat(cfg.qkv_dim(), h),
                    bqkv: bias,
                    q_norm: cfg.qk_norm.then(|| norm(cfg.head_dim)),
                    k_norm: cfg.qk_norm.then(|| norm(cfg.head_dim)),
                    wo: mat(h, cfg.q_dim()),
                    w_gate: cfg.attn_output_gate.then(|| mat(cfg.q_dim(), h)),
                    delta: None,
                    ffn_norm: norm(h),
                    w_gate_up: mat(2 * cfg.intermediate, h),
                    w_down: mat(h, cfg.intermediate),
                }
            })
            .collect();
        let final_norm = norm(h);
        let lm_head = if cfg.tie_embeddings {
            let v: Vec<f32> = embed.iter().map(|&b| bf16::from_bits(b).to_f32()).collect();
            Matrix::from_f32(format, cfg.vocab, h, &v)
        } else {
            mat(cfg.vocab, h)
        };
        Self {
            format,
            embed,
            layers,
            final_norm,
            lm_head,
        }
    }

    /// Loads HF safetensors weights (a single `model.safetensors` or shards listed in
    /// `model.safetensors.index.json`) and converts them to `format`.
    pub fn from_safetensors(dir: &Path, cfg: &ModelConfig, format: WeightFormat) -> Result<Self> {
        let store = TensorStore::open(dir)?;
        let h = cfg.hidden;
        let get = |name: &str, shape: &[usize]| store.f32(name, shape);
        let embed_f = get("model.embed_tokens.weight", &[cfg.vocab, h])?;
        let embed: Vec<u16> = embed_f
            .iter()
            .map(|&x| bf16::from_f32(x).to_bits())
            .collect();
        // Zero-centred norms (Qwen3-Next) store `w` for `x * (1 + w)`.
        let offset = if cfg.zero_centred_norms() { 1.0 } else { 0.0 };
        let norm = |name: &str, n: usize| -> Result<Vec<f32>> {
            Ok(get(name, &[n])?.into_iter().map(|x| x + offset).collect())
        };
        let mut layers = Vec::with_capacity(cfg.layers);
        for l in 0..cfg.layers {
            let p = format!("model.layers.{l}");
            let gate = get(&format!("{p}.mlp.gate_proj.weight"), &[cfg.intermediate, h])?;
            let up = get(&format!("{p}.mlp.up_proj.weight"), &[cfg.intermediate, h])?;
            let mut gu = Vec::with_capacity(2 * gate.len());
            for (g, u) in gate.chunks_exact(h).zip(up.chunks_exact(h)) {
                gu.extend_from_slice(g);
                gu.extend_from_slice(u);
            }
            let mixer = match cfg.hybrid.as_ref().filter(|_| cfg.is_linear(l)) {
                Some(hy) => delta_mixer(&store, &p, cfg, hy, format)?,
                None => attention_mixer(&store, &p, cfg, format, offset)?,
            };
            layers.push(LayerWeights {
                attn_norm: norm(&format!("{p}.input_layernorm.weight"), h)?,
                wqkv: mixer.wqkv,
                bqkv: mixer.bqkv,
                q_norm: mixer.q_norm,
                k_norm: mixer.k_norm,
                wo: mixer.wo,
                w_gate: mixer.w_gate,
                delta: mixer.delta,
                ffn_norm: norm(&format!("{p}.post_attention_layernorm.weight"), h)?,
                w_gate_up: Matrix::from_f32(format, 2 * cfg.intermediate, h, &gu),
                w_down: Matrix::from_f32(
                    format,
                    h,
                    cfg.intermediate,
                    &get(&format!("{p}.mlp.down_proj.weight"), &[h, cfg.intermediate])?,
                ),
            });
        }
        let lm = if cfg.tie_embeddings || !store.contains("lm_head.weight") {
            embed_f
        } else {
            get("lm_head.weight", &[cfg.vocab, h])?
        };
        Ok(Self {
            format,
            embed,
            layers,
            final_norm: norm("model.norm.weight", h)?,
            lm_head: Matrix::from_f32(format, cfg.vocab, h, &lm),
        })
    }
}

/// A layer's token mixer: its projections and, by kind, the attention or DeltaNet extras.
struct Mixer {
    wqkv: Matrix,
    bqkv: Option<Vec<f32>>,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    wo: Matrix,
    w_gate: Option<Matrix>,
    delta: Option<DeltaWeights>,
}

/// `self_attn.*`: q, k and v fused; with an output gate, HF's q projection holds each head's
/// query rows followed by its gate rows, which are split apart here.
fn attention_mixer(
    store: &TensorStore,
    p: &str,
    cfg: &ModelConfig,
    format: WeightFormat,
    norm_offset: f32,
) -> Result<Mixer> {
    let h = cfg.hidden;
    let get = |name: &str, shape: &[usize]| store.f32(name, shape);
    let q_rows = if cfg.attn_output_gate { 2 } else { 1 } * cfg.q_dim();
    let q_full = get(&format!("{p}.self_attn.q_proj.weight"), &[q_rows, h])?;
    let (q, w_gate) = if cfg.attn_output_gate {
        let (mut q, mut g) = (Vec::with_capacity(q_full.len() / 2), Vec::new());
        for head in q_full.chunks_exact(2 * cfg.head_dim * h) {
            let (a, b) = head.split_at(cfg.head_dim * h);
            q.extend_from_slice(a);
            g.extend_from_slice(b);
        }
        (q, Some(Matrix::from_f32(format, cfg.q_dim(), h, &g)))
    } else {
        (q_full, None)
    };
    let k = get(&format!("{p}.self_attn.k_proj.weight"), &[cfg.kv_dim(), h])?;
    let v = get(&format!("{p}.self_attn.v_proj.weight"), &[cfg.kv_dim(), h])?;
    let qkv = [q, k, v].concat();
    let bqkv = if cfg.attention_bias {
        let qb = get(&format!("{p}.self_attn.q_proj.bias"), &[cfg.q_dim()])?;
        let kb = get(&format!("{p}.self_attn.k_proj.bias"), &[cfg.kv_dim()])?;
        let vb = get(&format!("{p}.self_attn.v_proj.bias"), &[cfg.kv_dim()])?;
        Some([qb, kb, vb].concat())
    } else {
        None
    };
    let head_norm = |n: &str| -> Result<Option<Vec<f32>>> {
        if !cfg.qk_norm {
            return Ok(None);
        }
        let w = get(&format!("{p}.self_attn.{n}.weight"), &[cfg.head_dim])?;
        Ok(Some(w.into_iter().map(|x| x + norm_offset).collect()))
    };
    Ok(Mixer {
        wqkv: Matrix::from_f32(format, cfg.qkv_dim(), h, &qkv),
        bqkv,
        q_norm: head_norm("q_norm")?,
        k_norm: head_norm("k_norm")?,
        wo: Matrix::from_f32(
            format,
            h,
            cfg.q_dim(),
            &get(&format!("{p}.self_attn.o_proj.weight"), &[h, cfg.q_dim()])?,
        ),
        w_gate,
        delta: None,
    })
}

/// `linear_attn.*`: the input projections fused into `[q | k | v | z | b | a]` rows, from
/// Qwen3.5's four matrices or Qwen3-Next's two key-head-grouped ones.
fn delta_mixer(
    store: &TensorStore,
    p: &str,
    cfg: &ModelConfig,
    hy: &HybridConfig,
    format: WeightFormat,
) -> Result<Mixer> {
    let h = cfg.hidden;
    let get = |name: &str, shape: &[usize]| store.f32(name, shape);
    let (kd, vd) = (hy.k_heads * hy.k_dim, hy.value_width());
    let fused = match hy.in_proj {
        InProjLayout::Split => [
            get(
                &format!("{p}.linear_attn.in_proj_qkv.weight"),
                &[2 * kd + vd, h],
            )?,
            get(&format!("{p}.linear_attn.in_proj_z.weight"), &[vd, h])?,
            get(
                &format!("{p}.linear_attn.in_proj_b.weight"),
                &[hy.v_heads, h],
            )?,
            get(
                &format!("{p}.linear_attn.in_proj_a.weight"),
                &[hy.v_heads, h],
            )?,
        ]
        .concat(),
        InProjLayout::GroupedQkvzBa => {
            let r = hy.v_heads / hy.k_heads;
            let qkvz = get(
                &format!("{p}.linear_attn.in_proj_qkvz.weight"),
                &[2 * kd + 2 * vd, h],
            )?;
            let ba = get(
                &format!("{p}.linear_attn.in_proj_ba.weight"),
                &[2 * hy.v_heads, h],
            )?;
            ungroup_qkvz_ba(&qkvz, &ba, hy.k_heads, [hy.k_dim, r * hy.v_dim, r], h)
        }
    };
    let conv = get(
        &format!("{p}.linear_attn.conv1d.weight"),
        &[hy.conv_channels(), 1, hy.conv_kernel],
    )?;
    Ok(Mixer {
        wqkv: Matrix::from_f32(format, hy.in_proj_rows(), h, &fused),
        bqkv: None,
        q_norm: None,
        k_norm: None,
        wo: Matrix::from_f32(
            format,
            h,
            vd,
            &get(&format!("{p}.linear_attn.out_proj.weight"), &[h, vd])?,
        ),
        w_gate: None,
        delta: Some(DeltaWeights {
            conv,
            a_log: get(&format!("{p}.linear_attn.A_log"), &[hy.v_heads])?,
            dt_bias: get(&format!("{p}.linear_attn.dt_bias"), &[hy.v_heads])?,
            norm: get(&format!("{p}.linear_attn.norm.weight"), &[hy.v_dim])?,
        }),
    })
}

/// Qwen3-Next's grouped rows (per key head `[q, k, v, z]` and `[b, a]`, widths
/// `[dk, dk, dvr, dvr]` and `[r, r]`) to the fused `[q | k | v | z | b | a]` order.
fn ungroup_qkvz_ba(
    qkvz: &[f32],
    ba: &[f32],
    k_heads: usize,
    [dk, dvr, r]: [usize; 3],
    cols: usize,
) -> Vec<f32> {
    let group = (2 * dk + 2 * dvr) * cols;
    let part = |g: usize, start: usize, len: usize| {
        &qkvz[g * group + start * cols..g * group + (start + len) * cols]
    };
    let mut out = Vec::with_capacity(qkvz.len() + ba.len());
    for (start, len) in [(0, dk), (dk, dk), (2 * dk, dvr), (2 * dk + dvr, dvr)] {
        for g in 0..k_heads {
            out.extend_from_slice(part(g, start, len));
        }
    }
    for start in [0, r] {
        for g in 0..k_heads {
            let base = g * 2 * r * cols;
            out.extend_from_slice(&ba[base + start * cols..base + (start + r) * cols]);
        }
    }
    out
}

/// Memory-mapped safetensors files and which file holds each tensor.
struct TensorStore {
    files: Vec<(PathBuf, memmap2::Mmap)>,
    index: BTreeMap<String, usize>,
}

impl TensorStore {
    fn open(dir: &Path) -> Result<Self> {
        let single = dir.join("model.safetensors");
        let index_path = dir.join("model.safetensors.index.json");
        let names: Vec<PathBuf> = if index_path.exists() {
            let text = std::fs::read_to_string(&index_path)
                .map_err(|e| EngineError::io(&index_path, e))?;
            let v: serde_json::Value =
                serde_json::from_str(&text).map_err(|e| EngineError::Weights {
                    path: index_path.clone(),
                    message: format!("not valid JSON: {e}"),
                })?;
            let map = v
                .get("weight_map")
                .and_then(|m| m.as_object())
                .ok_or_else(|| EngineError::Weights {
                    path: index_path.clone(),
                    message: "no weight_map object".into(),
                })?;
            let mut files: Vec<String> = map
                .values()
                .filter_map(|f| f.as_str().map(str::to_owned))
                .collect();
            files.sort();
            files.dedup();
            files.into_iter().map(|f| dir.join(f)).collect()
        } else if single.exists() {
            vec![single]
        } else {
            return Err(EngineError::Weights {
                path: dir.to_path_buf(),
                message: "no model.safetensors or model.safetensors.index.json".into(),
            });
        };
        let mut files = Vec::new();
        let mut index = BTreeMap::new();
        for path in names {
            let file = std::fs::File::open(&path).map_err(|e| EngineError::io(&path, e))?;
            // SAFETY: the file is opened read-only and not modified while mapped by us.
            let map =
                unsafe { memmap2::Mmap::map(&file) }.map_err(|e| EngineError::io(&path, e))?;
            let (_, meta) = SafeTensors::read_metadata(&map).map_err(|e| EngineError::Weights {
                path: path.clone(),
                message: format!("not a safetensors file: {e}"),
            })?;
            for name in meta.tensors().keys() {
                index.insert(name.clone(), files.len());
            }
            files.push((path, map));
        }
        Ok(Self { files, index })
    }

    fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    fn f32(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>> {
        let &fi = self.index.get(name).ok_or_else(|| EngineError::Weights {
            path: self.files.first().map(|f| f.0.clone()).unwrap_or_default(),
            message: format!("tensor {name} is missing"),
        })?;
        let (path, map) = &self.files[fi];
        let err = |message: String| EngineError::Weights {
            path: path.clone(),
            message,
        };
        let st = SafeTensors::deserialize(map).map_err(|e| err(format!("{e}")))?;
        let t = st.tensor(name).map_err(|e| err(format!("{name}: {e}")))?;
        if t.shape() != shape {
            return Err(err(format!(
                "{name} has shape {:?}, the config implies {shape:?}",
                t.shape()
            )));
        }
        let data = t.data();
        Ok(match t.dtype() {
            Dtype::BF16 => data
                .chunks_exact(2)
                .map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::F16 => data
                .chunks_exact(2)
                .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
                .collect(),
            Dtype::F32 => data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            other => {
                return Err(err(format!(
                    "{name} has dtype {other:?}; expected bf16, f16 or f32"
                )));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(name, shape, little-endian f32 bytes)` tensors as `dir/model.safetensors`.
    fn write_f32_safetensors(dir: &Path, tensors: &[(String, Vec<usize>, Vec<u8>)]) {
        use safetensors::tensor::TensorView;
        let views: Vec<(String, TensorView)> = tensors
            .iter()
            .map(|(n, s, b)| {
                (
                    n.clone(),
                    TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
                )
            })
            .collect();
        safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
    }

    pub(crate) fn tiny() -> ModelConfig {
        ModelConfig::from_json(&serde_json::json!({
            "model_type": "qwen2", "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "vocab_size": 50, "rms_norm_eps": 1e-6
        }))
        .unwrap()
    }

    #[test]
    fn random_weights_have_config_shapes_and_are_reproducible() {
        let cfg = tiny();
        let a = ModelWeights::random(&cfg, WeightFormat::Q8_0, 1);
        assert_eq!(a.layers.len(), 2);
        assert_eq!(a.layers[0].wqkv.rows(), cfg.qkv_dim());
        assert_eq!(a.layers[0].w_gate_up.rows(), 2 * cfg.intermediate);
        assert_eq!(a.layers[0].w_down.cols(), cfg.intermediate);
        assert!(a.layers[0].bqkv.is_some());
        let b = ModelWeights::random(&cfg, WeightFormat::Q8_0, 1);
        assert_eq!(a.layers[1].w_down, b.layers[1].w_down);
        assert_eq!(a.embed, b.embed);
        let c = ModelWeights::random(&cfg, WeightFormat::Q8_0, 2);
        assert_ne!(a.layers[1].w_down, c.layers[1].w_down);
    }

    /// Qwen3-Next's per-key-head groups `[q, k, v, z]` and `[b, a]` become the fused
    /// `[q | k | v | z | b | a]` rows: with 2 key heads, dk 1, 2 value rows per head (r 2,
    /// dv 1), each row a single column holding its name.
    #[test]
    fn grouped_qkvz_ba_are_ungrouped() {
        // Group g: q_g, k_g, v_g0, v_g1, z_g0, z_g1 (values 10g + 0..6).
        let qkvz: Vec<f32> = (0..2)
            .flat_map(|g| (0..6).map(move |i| (10 * g + i) as f32))
            .collect();
        // Group g: b_g0, b_g1, a_g0, a_g1 (values 100 + 10g + 0..4).
        let ba: Vec<f32> = (0..2)
            .flat_map(|g| (0..4).map(move |i| (100 + 10 * g + i) as f32))
            .collect();
        let got = ungroup_qkvz_ba(&qkvz, &ba, 2, [1, 2, 2], 1);
        let want = [
            0., 10., // q
            1., 11., // k
            2., 3., 12., 13., // v
            4., 5., 14., 15., // z
            100., 101., 110., 111., // b
            102., 103., 112., 113., // a
        ];
        assert_eq!(got, want);
    }

    /// A Qwen3.5 checkpoint: the DeltaNet layer's four input projections fused in order, the
    /// attention layer's per-head query|gate rows split into q and gate, zero-centred norms
    /// offset by 1 (not the gated norm). Each tensor's rows hold their row index plus an offset
    /// naming the tensor, so every row's origin can be read back.
    #[test]
    fn qwen35_safetensors_fuse_split_and_offset() {
        use crate::cpu::tests::tiny_hybrid;
        let cfg = tiny_hybrid();
        let hy = cfg.hybrid.clone().unwrap();
        let h = cfg.hidden;
        let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
        // Row r of a tensor with tag t holds t + r in every column.
        let mut add = |name: String, shape: Vec<usize>, tag: f32| {
            let cols: usize = shape[1..].iter().product::<usize>().max(1);
            let rows = if shape.len() == 1 { 1 } else { shape[0] };
            let n = if shape.len() == 1 {
                shape[0]
            } else {
                rows * cols
            };
            let bytes = (0..n)
                .flat_map(|i| {
                    let v = if shape.len() == 1 {
                        tag
                    } else {
                        tag + (i / cols) as f32
                    };
                    v.to_le_bytes()
                })
                .collect();
            tensors.push((name, shape, bytes));
        };
        add("model.embed_tokens.weight".into(), vec![cfg.vocab, h], 0.0);
        add("model.norm.weight".into(), vec![h], 0.5);
        let (kd, vd) = (hy.k_heads * hy.k_dim, hy.value_width());
        for l in 0..cfg.layers {
            let p = format!("model.layers.{l}");
            add(format!("{p}.input_layernorm.weight"), vec![h], 0.25);
            add(
                format!("{p}.post_attention_layernorm.weight"),
                vec![h],
                0.25,
            );
            add(
                format!("{p}.mlp.gate_proj.weight"),
                vec![cfg.intermediate, h],
                0.0,
            );
            add(
                format!("{p}.mlp.up_proj.weight"),
                vec![cfg.intermediate, h],
                0.0,
            );
            add(
                format!("{p}.mlp.down_proj.weight"),
                vec![h, cfg.intermediate],
                0.0,
            );
            if cfg.is_linear(l) {
                let la = format!("{p}.linear_attn");
                add(
                    format!("{la}.in_proj_qkv.weight"),
                    vec![2 * kd + vd, h],
                    0.0,
                );
                add(format!("{la}.in_proj_z.weight"), vec![vd, h], 400.0);
                add(format!("{la}.in_proj_b.weight"), vec![hy.v_heads, h], 600.0);
                add(format!("{la}.in_proj_a.weight"), vec![hy.v_heads, h], 700.0);
                add(
                    format!("{la}.conv1d.weight"),
                    vec![hy.conv_channels(), 1, hy.conv_kernel],
                    0.0,
                );
                add(format!("{la}.A_log"), vec![hy.v_heads], 0.5);
                add(format!("{la}.dt_bias"), vec![hy.v_heads], 1.0);
                add(format!("{la}.norm.weight"), vec![hy.v_dim], 0.75);
                add(format!("{la}.out_proj.weight"), vec![h, vd], 0.0);
            } else {
                let sa = format!("{p}.self_attn");
                add(format!("{sa}.q_proj.weight"), vec![2 * cfg.q_dim(), h], 0.0);
                add(format!("{sa}.k_proj.weight"), vec![cfg.kv_dim(), h], 0.0);
                add(format!("{sa}.v_proj.weight"), vec![cfg.kv_dim(), h], 0.0);
                add(format!("{sa}.o_proj.weight"), vec![h, cfg.q_dim()], 0.0);
                add(format!("{sa}.q_norm.weight"), vec![cfg.head_dim], 0.125);
                add(format!("{sa}.k_norm.weight"), vec![cfg.head_dim], 0.125);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        write_f32_safetensors(dir.path(), &tensors);
        let w = ModelWeights::from_safetensors(dir.path(), &cfg, WeightFormat::Q8_0).unwrap();
        // Column 0 of each fused row; Q8_0 keeps these values to within 0.4.
        let first_col = |m: &Matrix| -> Vec<f32> {
            let d = m.dequantize();
            (0..m.rows()).map(|r| d[r * m.cols()]).collect()
        };
        let near = |got: f32, want: f32| (got - want).abs() < 1.0;
        let delta = &w.layers[0];
        let rows = first_col(&delta.wqkv);
        assert_eq!(rows.len(), hy.in_proj_rows());
        let z_at = 2 * kd + vd;
        assert!(near(rows[0], 0.0) && near(rows[z_at - 1], (z_at - 1) as f32));
        assert!(near(rows[z_at], 400.0) && near(rows[z_at + vd], 600.0));
        assert!(near(rows[z_at + vd + hy.v_heads], 700.0));
        let dw = delta.delta.as_ref().unwrap();
        assert_eq!((dw.a_log[0], dw.dt_bias[0], dw.norm[0]), (0.5, 1.0, 0.75));
        assert_eq!(delta.attn_norm[0], 1.25, "zero-centred norms get their 1");
        // Layer 2 is the full-attention layer: per head, q_proj rows are [query | gate].
        let full = &w.layers[2];
        let (q, g) = (
            first_col(&full.wqkv),
            first_col(full.w_gate.as_ref().unwrap()),
        );
        let hd = cfg.head_dim as f32;
        assert!(near(q[0], 0.0) && near(q[cfg.head_dim], 2.0 * hd));
        assert!(near(g[0], hd) && near(g[cfg.head_dim], 3.0 * hd));
        assert_eq!(full.q_norm.as_ref().unwrap()[0], 1.125);
        assert_eq!(w.final_norm[0], 1.5);
    }

    #[test]
    fn safetensors_round_trip_fuses_and_interleaves() {
        let cfg = tiny();
        let h = cfg.hidden;
        let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
        let mut add = |name: String, shape: Vec<usize>, f: &dyn Fn(usize) -> f32| {
            let n: usize = shape.iter().product();
            let bytes: Vec<u8> = (0..n).flat_map(|i| f(i).to_le_bytes()).collect();
            tensors.push((name, shape, bytes));
        };
        add(
            "model.embed_tokens.weight".into(),
            vec![cfg.vocab, h],
            &|i| i as f32 * 1e-3,
        );
        add("model.norm.weight".into(), vec![h], &|_| 1.0);
        add("lm_head.weight".into(), vec![cfg.vocab, h], &|i| {
            -(i as f32) * 1e-3
        });
        for l in 0..cfg.layers {
            let p = format!("model.layers.{l}");
            add(format!("{p}.input_layernorm.weight"), vec![h], &|_| 1.0);
            add(
                format!("{p}.post_attention_layernorm.weight"),
                vec![h],
                &|_| 1.0,
            );
            for (n, r) in [("q", cfg.q_dim()), ("k", cfg.kv_dim()), ("v", cfg.kv_dim())] {
                add(
                    format!("{p}.self_attn.{n}_proj.weight"),
                    vec![r, h],
                    &|_| 0.5,
                );
                add(format!("{p}.self_attn.{n}_proj.bias"), vec![r], &|_| 0.25);
            }
            add(
                format!("{p}.self_attn.o_proj.weight"),
                vec![h, cfg.q_dim()],
                &|_| 0.0,
            );
            add(
                format!("{p}.mlp.gate_proj.weight"),
                vec![cfg.intermediate, h],
                &|_| 1.0,
            );
            add(
                format!("{p}.mlp.up_proj.weight"),
                vec![cfg.intermediate, h],
                &|_| 2.0,
            );
            add(
                format!("{p}.mlp.down_proj.weight"),
                vec![h, cfg.intermediate],
                &|_| 0.0,
            );
        }
        let dir = tempfile::tempdir().unwrap();
        write_f32_safetensors(dir.path(), &tensors);
        let w = ModelWeights::from_safetensors(dir.path(), &cfg, WeightFormat::Bf16).unwrap();
        let gu = w.layers[0].w_gate_up.dequantize();
        assert_eq!(gu[0], 1.0);
        assert_eq!(gu[h], 2.0); // row 1 is up_0
        assert_eq!(w.layers[1].bqkv.as_ref().unwrap().len(), cfg.qkv_dim());
        assert!((w.lm_head.dequantize()[1] + 1e-3).abs() < 1e-5);

        // A shape mismatch names the tensor and the file.
        let bad = ModelConfig {
            intermediate: 128,
            ..cfg
        };
        let err = ModelWeights::from_safetensors(dir.path(), &bad, WeightFormat::Bf16).unwrap_err();
        assert!(
            err.to_string().contains("gate_proj") && err.to_string().contains("model.safetensors")
        );
        let missing =
            ModelWeights::from_safetensors(Path::new("/nonexistent"), &bad, WeightFormat::Bf16);
        assert!(missing.unwrap_err().to_string().contains("/nonexistent"));
    }
}
