//! Roofline floors: what a decode step cannot beat on a given GPU, from a model spec and a
//! hardware spec. The CLI (`gapscope roofline`), SVG and trace overlay build on this.

pub mod bucket_floor;
pub mod hw;
pub mod model;
pub mod report;
pub mod tp;

use serde::Serialize;

pub use hw::{CeilingSource, HardwareSpec};
pub use model::{ModelSpec, WeightFormat};
pub use tp::{MAX_TP, TpChoice, TpSource};

/// The largest batch (sequences per step) the floors are computed for: 2^20.
pub const MAX_BATCH: u64 = 1 << 20;
/// The most batch sizes one report tabulates.
pub const MAX_BATCHES: usize = 256;
/// The longest context, tokens: 2^24.
pub const MAX_CTX: u64 = 1 << 24;

/// Floors of one decode step.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct StepFloor {
    pub batch: u64,
    pub ctx: u64,
    pub weight_bytes: f64,
    pub kv_bytes: f64,
    pub state_bytes: f64,
    pub flops: f64,
    /// Weight-read, KV-read (plus recurrent state) and compute floors, seconds.
    pub weight_floor_s: f64,
    pub kv_floor_s: f64,
    pub compute_floor_s: f64,
    /// max(memory floors summed, compute floor).
    pub step_floor_s: f64,
    pub max_tok_per_s: f64,
    pub ceilings: CeilingSource,
    /// Which floor sets the step floor.
    pub bound: Bound,
}

/// What limits a step at its floor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Bound {
    /// Reading the weights.
    Weights,
    /// Reading the KV cache and the recurrent state.
    Kv,
    /// The matmuls' FLOPs.
    Compute,
}

impl Bound {
    /// What sets a step's floor: compute when it exceeds the memory floors summed, else the
    /// larger memory floor.
    fn of(weight_s: f64, kv_s: f64, compute_s: f64) -> Self {
        if compute_s > weight_s + kv_s {
            Self::Compute
        } else if kv_s > weight_s {
            Self::Kv
        } else {
            Self::Weights
        }
    }
}

impl std::fmt::Display for Bound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Self::Weights => "weights",
            Self::Kv => "KV",
            Self::Compute => "compute",
        })
    }
}

/// A tensor-core path: what a weight format's matmuls run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TensorPath {
    Bf16,
    Fp8,
    Int8,
}

impl TensorPath {
    /// bf16 path for bf16, FP8 for fp8 and the 4-bit float formats, INT8 for the llama.cpp
    /// integer formats (MMQ runs int8 MMA).
    pub fn of(fmt: WeightFormat) -> Self {
        match fmt {
            WeightFormat::Bf16 => Self::Bf16,
            WeightFormat::Fp8 | WeightFormat::Nvfp4 | WeightFormat::Mxfp4 => Self::Fp8,
            WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q4K => Self::Int8,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Bf16 => "bf16",
            Self::Fp8 => "fp8",
            Self::Int8 => "int8",
        }
    }

    /// The spec's peak for this path, TFLOP/s (TOP/s for int8); 0 when absent.
    pub fn tflops(self, hw: &HardwareSpec) -> f64 {
        match self {
            Self::Bf16 => hw.bf16_tflops,
            Self::Fp8 => hw.fp8_tflops,
            Self::Int8 => hw.int8_tops,
        }
    }
}

impl std::fmt::Display for TensorPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The compute ceiling a weight format's floors use, and where it comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ComputePeak {
    /// The path the format's matmuls run on.
    pub wanted: TensorPath,
    /// The path whose peak is used: `wanted`, or bf16 when the GPU has no `wanted` path.
    pub path: TensorPath,
    pub tflops: f64,
    /// Measured (the profile) or datasheet (the built-in table).
    pub source: CeilingSource,
    /// Set when the figure is not the hardware spec's own peak of `wanted`: which one stands
    /// in, and why.
    pub note: Option<String>,
}

/// The compute ceiling for `fmt` on `hw`. The spec's own peak of the format's path when it
/// has one. Otherwise, for a measured profile (which reports 0 for a path it did not
/// measure): the datasheet peak of the same GPU (looked up by the profile's name) when the
/// table has one; the bf16 peak when the GPU has no such path, or, failing both, the measured
/// bf16 peak with a note that the floor is then overstated. Every fallback says so in `note`.
pub fn compute_peak(hw: &HardwareSpec, fmt: WeightFormat) -> ComputePeak {
    let wanted = TensorPath::of(fmt);
    let own = wanted.tflops(hw);
    let peak =
        |path: TensorPath, tflops: f64, source: CeilingSource, note: Option<String>| ComputePeak {
            wanted,
            path,
            tflops,
            source,
            note,
        };
    if own > 0.0 {
        return peak(wanted, own, hw.ceilings, None);
    }
    let bf16 = |note: String| peak(TensorPath::Bf16, hw.bf16_tflops, hw.ceilings, Some(note));
    match hw.ceilings {
        CeilingSource::Datasheet => bf16(format!(
            "{} has no {wanted} tensor path: {fmt} weights run on the bf16 path, whose peak the compute floor uses",
            hw.name
        )),
        CeilingSource::Measured => match hw::lookup(&hw.name) {
            Ok(d) if wanted.tflops(&d) > 0.0 => peak(
                wanted,
                wanted.tflops(&d),
                CeilingSource::Datasheet,
                Some(format!(
                    "the profile did not measure {wanted}: the compute floor uses the {} datasheet {wanted} peak ({:.0} TFLOP/s)",
                    d.name,
                    wanted.tflops(&d)
                )),
            ),
            Ok(d) => bf16(format!(
                "{} has no {wanted} tensor path: {fmt} weights run on the bf16 path, whose measured peak the compute floor uses",
                d.name
            )),
            Err(_) => bf16(format!(
                "the profile did not measure {wanted} and {:?} is not in the datasheet table: the compute floor uses the measured bf16 peak, which overstates it for {fmt} weights; pass --hw GPU for datasheet ceilings",
                hw.name
            )),
        },
    }
}

/// Peak tensor throughput, FLOP/s, used for a weight format: [`compute_peak`].
pub fn peak_flops(hw: &HardwareSpec, fmt: WeightFormat) -> f64 {
    compute_peak(hw, fmt).tflops * 1e12
}

/// The batch where the weight-read floor equals the compute floor:
/// M* = peak_flops x bytes_per_weight / (2 x bandwidth).
pub fn crossover_batch(hw: &HardwareSpec, fmt: WeightFormat) -> f64 {
    peak_flops(hw, fmt) * fmt.bytes_per_weight() / (2.0 * hw.hbm_bytes_per_s)
}

/// Floors for one decode step of `batch` sequences at context `ctx` (bf16 KV cache).
pub fn step_floor(
    m: &ModelSpec,
    hw: &HardwareSpec,
    fmt: WeightFormat,
    batch: u64,
    ctx: u64,
) -> StepFloor {
    let bw = hw.hbm_bytes_per_s;
    let weight_bytes = m.weight_bytes_per_step(fmt, batch);
    let kv_bytes = m.kv_bytes_per_step(batch, ctx, 2.0);
    // The recurrent state is read and written back every step.
    let state_bytes = 2.0 * batch as f64 * m.recurrent_state_bytes();
    let flops = batch as f64 * m.flops_per_token(ctx);
    let weight_floor_s = weight_bytes / bw;
    let kv_floor_s = (kv_bytes + state_bytes) / bw;
    let compute_floor_s = flops / peak_flops(hw, fmt);
    let step_floor_s = (weight_floor_s + kv_floor_s).max(compute_floor_s);
    StepFloor {
        batch,
        ctx,
        weight_bytes,
        kv_bytes,
        state_bytes,
        flops,
        weight_floor_s,
        kv_floor_s,
        compute_floor_s,
        step_floor_s,
        max_tok_per_s: batch as f64 / step_floor_s,
        ceilings: hw.ceilings,
        bound: Bound::of(weight_floor_s, kv_floor_s, compute_floor_s),
    }
}

/// A speculative verify forward of `k + 1` rows for each of `batch` sequences, against a
/// plain decode step of the same batch: the weights are read once whatever the rows, the
/// KV cache once per sequence (attention kernels tile a sequence's rows over it), and the
/// FLOPs grow with the rows.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct VerifyFloor {
    pub batch: u64,
    pub k: u64,
    pub verify: StepFloor,
    pub plain: StepFloor,
    /// The verify's floor over the plain step's.
    pub ratio: f64,
}

/// The verify floor at `k` drafts per sequence (see [`VerifyFloor`]).
pub fn verify_floor(
    m: &ModelSpec,
    hw: &HardwareSpec,
    fmt: WeightFormat,
    batch: u64,
    k: u64,
    ctx: u64,
) -> VerifyFloor {
    let plain = step_floor(m, hw, fmt, batch, ctx);
    let rows = batch.saturating_mul(k + 1);
    let bw = hw.hbm_bytes_per_s;
    // An MoE reads the experts its rows route to: as many as a batch of `rows` does.
    let weight_bytes = m.weight_bytes_per_step(fmt, rows);
    let flops = rows as f64 * m.flops_per_token(ctx);
    let weight_floor_s = weight_bytes / bw;
    let kv_floor_s = plain.kv_floor_s;
    let compute_floor_s = flops / peak_flops(hw, fmt);
    let step_floor_s = (weight_floor_s + kv_floor_s).max(compute_floor_s);
    let verify = StepFloor {
        batch: rows,
        weight_bytes,
        flops,
        weight_floor_s,
        compute_floor_s,
        step_floor_s,
        max_tok_per_s: rows as f64 / step_floor_s,
        bound: Bound::of(weight_floor_s, kv_floor_s, compute_floor_s),
        ..plain.clone()
    };
    VerifyFloor {
        batch,
        k,
        ratio: verify.step_floor_s / plain.step_floor_s,
        verify,
        plain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verify_at_batch_one_costs_a_plain_step_until_compute_binds() {
        let m = ModelSpec::from_hf_config(&serde_json::json!({
            "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        let h = hw::lookup("h200").unwrap_or_else(|e| panic!("{e}"));
        let v = verify_floor(&m, &h, WeightFormat::Bf16, 1, 4, 1024);
        // Five rows read the weights once: the same floor as one (but for the embedding
        // rows each token reads).
        assert!((v.ratio - 1.0).abs() < 1e-4, "{}", v.ratio);
        assert_eq!(v.verify.bound, Bound::Weights);
        // At batch 128, 5 rows each pass the crossover: compute binds, and costs more.
        let big = verify_floor(&m, &h, WeightFormat::Bf16, 128, 4, 1024);
        assert_eq!(big.verify.bound, Bound::Compute);
        assert!(big.ratio > 1.4, "{}", big.ratio);
    }

    #[test]
    fn llama3_8b_bf16_on_h100_sxm_by_hand() {
        let m = ModelSpec::from_hf_config(&serde_json::json!({
            "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256
        }))
        .unwrap();
        let h = hw::lookup("h100-sxm").unwrap();
        let f = step_floor(&m, &h, WeightFormat::Bf16, 1, 0);
        // 15,009,857,536 bytes / 3.35e12 B/s = 4.48055 ms -> 223.19 tok/s.
        let hand = 15_009_857_536.0 / 3.35e12;
        assert!((f.weight_floor_s - hand).abs() / hand < 0.005);
        assert!((f.weight_floor_s * 1e3 - 4.48055).abs() < 1e-4);
        assert!((f.max_tok_per_s - 223.19).abs() < 0.05);
        assert_eq!(f.ceilings, CeilingSource::Datasheet);
        // M*: bf16 989.4e12 * 2 / (2 * 3.35e12) = 295.34; Q4_0 on INT8 1978.9e12 * 0.5625 /
        // 6.7e12 = 166.14.
        assert!((crossover_batch(&h, WeightFormat::Bf16) - 989.4e12 * 2.0 / 6.7e12).abs() < 1e-9);
        assert!((crossover_batch(&h, WeightFormat::Bf16) - 295.34).abs() < 0.01);
        assert!((crossover_batch(&h, WeightFormat::Q4_0) - 166.14).abs() < 0.01);
        // Far above M* the step is compute-bound.
        let big = step_floor(&m, &h, WeightFormat::Bf16, 1024, 0);
        assert!(big.compute_floor_s > big.weight_floor_s);
    }

    #[test]
    fn compute_peak_says_which_ceiling_stands_in() {
        // Datasheet GPU with the path: its own peak, no note.
        let h200 = hw::lookup("h200").unwrap();
        let p = compute_peak(&h200, WeightFormat::Fp8);
        assert_eq!(
            (p.path, p.tflops, p.note.as_deref()),
            (TensorPath::Fp8, 1978.9, None)
        );
        assert_eq!(TensorPath::of(WeightFormat::Q4K), TensorPath::Int8);
        // A measured profile without fp8 (as `gapscope-engine calibrate` writes it): the datasheet
        // fp8 peak of the same GPU, said so.
        let mut measured = h200.clone();
        measured.name = "NVIDIA H200".into();
        measured.ceilings = CeilingSource::Measured;
        measured.bf16_tflops = 776.7;
        measured.fp8_tflops = 0.0;
        for fmt in [WeightFormat::Fp8, WeightFormat::Nvfp4, WeightFormat::Mxfp4] {
            let p = compute_peak(&measured, fmt);
            assert_eq!(p.path, TensorPath::Fp8);
            assert_eq!(p.source, CeilingSource::Datasheet);
            assert_eq!(p.tflops, 1978.9);
            assert!(p.note.unwrap().contains("did not measure fp8"));
            assert_eq!(peak_flops(&measured, fmt), 1978.9e12);
        }
        // bf16 was measured: used as is.
        let p = compute_peak(&measured, WeightFormat::Bf16);
        assert_eq!(
            (p.tflops, p.source, p.note),
            (776.7, CeilingSource::Measured, None)
        );
        // Unknown GPU: the measured bf16 peak, with the warning that the floor is overstated.
        measured.name = "Mystery GPU".into();
        let p = compute_peak(&measured, WeightFormat::Fp8);
        assert_eq!((p.path, p.tflops), (TensorPath::Bf16, 776.7));
        assert!(p.note.unwrap().contains("overstates"));
        // A GPU without fp8 (A100): the bf16 path is its ceiling, said so.
        let a100 = hw::lookup("a100-80").unwrap();
        assert_eq!(a100.fp8_tflops, 0.0);
        let p = compute_peak(&a100, WeightFormat::Fp8);
        assert_eq!((p.path, p.tflops), (TensorPath::Bf16, a100.bf16_tflops));
        assert!(p.note.unwrap().contains("has no fp8 tensor path"));
        // CLI spellings.
        let names: Vec<String> = WeightFormat::ALL.iter().map(|f| f.to_string()).collect();
        assert_eq!(
            names,
            ["bf16", "fp8", "q8_0", "q4_0", "q4_k", "nvfp4", "mxfp4"]
        );
        for f in WeightFormat::ALL {
            assert_eq!(WeightFormat::parse(f.as_str()), Some(f));
            assert_eq!(serde_json::to_value(f).unwrap(), f.as_str());
        }
        assert_eq!(CeilingSource::Measured.to_string(), "measured");
    }
}
