//! The GPU selftest: every kernel against the CPU reference on fresh random inputs with
//! poisoned (NaN) outputs, and whole-model logits of the CUDA backend against the CPU backend.
//! Run on the GPU machine by `gapscope-engine selftest` and the ignored tests in
//! `tests/gpu.rs`; each check has a named tolerance.
//!
//! The checks are a table (`CHECKS`, `MODEL_CHECKS`) of one function per kernel family, so one
//! family can run alone (`op_checks_only`, `model_checks_only`). They launch through the same
//! argument builders the backend uses (`cuda::launch`, `cuda::linear`, `RopeArgs`, `AttnArgs`),
//! so a check exercises the call production makes. Run in table order from one seed, every
//! check sees the same random inputs on every run.

mod attention;
mod elementwise;
mod gated_delta;
mod linear;
mod model;
mod norm;
mod sample;

use crate::cuda::attention_args::{ROPE_BLOCK, RopeArgs};
use crate::cuda::{DevBuf, Device};
use crate::error::{EngineError, Result};
use crate::quant::round_bf16;
use crate::rng;
use gapscope_kernels::Kernel;
use half::bf16;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Check {
    pub name: String,
    /// max |gpu - cpu| / max |cpu|
    pub rel_err: f64,
    pub tolerance: f64,
    pub pass: bool,
}

/// bf16 rounding differences between two f32 sums can move a value by one bf16 ulp (2^-8).
pub const TOL_BF16: f64 = 1e-2;
/// f32 results of the same math in a different summation order.
pub const TOL_F32: f64 = 1e-4;
/// Whole-model logits with Q4_0 weights: one bf16 rounding flip in an activation moves its
/// q8_1 value by one step, and a 4-bit weight (step = 1/8 of the block range) turns that into a
/// larger logit change than Q8_0 or bf16 weights do.
pub const TOL_Q4_MODEL: f64 = 3e-2;
/// Whole-model logits with Q8_0 weights: the same mechanism with a 1/127 step. A fresh seed
/// measured 1.08e-2 on Qwen2 (every lever setting alike), so 1e-2 was too tight; a wrong kernel
/// is off by orders of magnitude more.
pub const TOL_Q8_MODEL: f64 = 2e-2;
/// Integer block dot products scaled in f32 (MMVQ/MMQ vs the CPU's identical math).
pub const TOL_INT8: f64 = 1e-4;

/// One kernel family's checks, appending to `Ctx`'s results.
pub type CheckFn = fn(&mut Ctx<'_>) -> Result<()>;
/// Opens the device a whole-model run uses (each run opens its own: the binary's opener honours
/// its kernel source settings).
pub type OpenDevice<'a> = &'a dyn Fn() -> Result<Device>;
/// One whole-model family's checks from a seed.
pub type ModelCheckFn = fn(u64, OpenDevice<'_>) -> Result<Vec<Check>>;

/// The kernel checks, in the order they run.
pub const CHECKS: &[(&str, CheckFn)] = &[
    ("get_rows", elementwise::get_rows),
    ("rms_norm", norm::rms_norm),
    ("qk_norm_rope", norm::qk_norm_rope),
    ("swiglu", elementwise::swiglu),
    ("linear", linear::linears),
    ("attention", attention::attention),
    ("gated_delta", gated_delta::gated_delta),
    ("argmax", sample::argmax),
];

/// The whole-model checks.
pub const MODEL_CHECKS: &[(&str, ModelCheckFn)] =
    &[("model", model::checks), ("hybrid", model::hybrid_checks)];

/// Every name `only` accepts, in run order.
pub fn names() -> Vec<&'static str> {
    CHECKS
        .iter()
        .map(|c| c.0)
        .chain(MODEL_CHECKS.iter().map(|c| c.0))
        .collect()
}

/// Whether the family `name` runs under `only`; an `only` that names no family is an error.
fn selected(name: &str, only: Option<&str>) -> Result<bool> {
    match only {
        None => Ok(true),
        Some(o) if names().contains(&o) => Ok(o == name),
        Some(o) => Err(EngineError::invalid(format!(
            "no selftest check named {o:?}; the checks are {}",
            names().join(", ")
        ))),
    }
}

/// Every kernel check.
pub fn op_checks(dev: &Device, seed: u64) -> Result<Vec<Check>> {
    op_checks_only(dev, seed, None)
}

/// The kernel checks, or only the family `only` names (a name from `names()`; a whole-model
/// name selects none of these).
pub fn op_checks_only(dev: &Device, seed: u64, only: Option<&str>) -> Result<Vec<Check>> {
    let mut c = Ctx {
        dev,
        seed,
        stream_id: 0,
        out: Vec::new(),
    };
    for &(name, check) in CHECKS {
        if selected(name, only)? {
            check(&mut c)?;
        }
    }
    Ok(c.out)
}

/// Every whole-model check, on device 0 with the built-in kernels.
pub fn model_checks(seed: u64) -> Result<Vec<Check>> {
    model_checks_only(seed, None, &|| Device::open(0))
}

/// The whole-model checks, or only the family `only` names (a kernel family's name selects
/// none of these).
pub fn model_checks_only(
    seed: u64,
    only: Option<&str>,
    open: OpenDevice<'_>,
) -> Result<Vec<Check>> {
    let mut out = Vec::new();
    for &(name, check) in MODEL_CHECKS {
        if selected(name, only)? {
            out.extend(check(seed, open)?);
        }
    }
    Ok(out)
}

pub(crate) fn rel_err(gpu: &[f32], cpu: &[f32]) -> f64 {
    if gpu.len() != cpu.len() {
        return f64::INFINITY;
    }
    let scale = cpu
        .iter()
        .fold(0f64, |m, v| m.max(f64::from(v.abs())))
        .max(1e-30);
    let mut worst = 0f64;
    for (g, c) in gpu.iter().zip(cpu) {
        let d = f64::from((g - c).abs());
        if !d.is_finite() {
            return f64::INFINITY; // NaN poison survived: the kernel skipped an output
        }
        worst = worst.max(d);
    }
    worst / scale
}

/// The device, the seed with a counter of random streams drawn from it, and the results.
pub struct Ctx<'a> {
    dev: &'a Device,
    seed: u64,
    stream_id: u64,
    out: Vec<Check>,
}

impl Ctx<'_> {
    fn randf(&mut self, n: usize, scale: f32) -> Vec<f32> {
        self.stream_id += 1;
        let mut v = vec![0f32; n];
        rng::fill(&mut v, self.seed, self.stream_id, 0.0, scale);
        v
    }
    fn bf16_vals(&mut self, n: usize, scale: f32) -> Vec<f32> {
        self.randf(n, scale).into_iter().map(round_bf16).collect()
    }
    fn up<T: Copy>(&self, v: &[T]) -> Result<DevBuf> {
        DevBuf::upload(v, &self.dev.stream)
    }
    /// A buffer of `bytes` filled with 0xFF: NaN as f32 and as bf16.
    fn poisoned(&self, bytes: usize) -> Result<DevBuf> {
        self.up(&vec![0xFFu8; bytes])
    }
    fn read_f32(&self, b: &DevBuf, n: usize) -> Result<Vec<f32>> {
        b.read::<f32>(n, &self.dev.stream)
    }
    fn read_bf16(&self, b: &DevBuf, n: usize) -> Result<Vec<f32>> {
        Ok(b.read::<u16>(n, &self.dev.stream)?
            .into_iter()
            .map(|x| bf16::from_bits(x).to_f32())
            .collect())
    }
    /// `rope_kv_append_f32` as the backend launches it under the engine numerics.
    fn rope_kv_append(&self, rope: &RopeArgs, rows: usize) -> Result<()> {
        self.dev.launch(
            Kernel::RopeKvAppendF32,
            RopeArgs::grid(rows),
            ROPE_BLOCK,
            &rope.args(),
        )
    }
    fn check(&mut self, name: impl Into<String>, gpu: &[f32], cpu: &[f32], tol: f64) {
        let e = rel_err(gpu, cpu);
        self.out.push(Check {
            name: name.into(),
            rel_err: e,
            tolerance: tol,
            pass: e <= tol,
        });
    }
}

fn to_bf16_bits(v: &[f32]) -> Vec<u16> {
    v.iter().map(|&x| bf16::from_f32(x).to_bits()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_check_has_its_own_name() {
        let mut n = names();
        let len = n.len();
        n.sort_unstable();
        n.dedup();
        assert_eq!(n.len(), len);
    }

    #[test]
    fn only_selects_one_family_and_rejects_unknown_names() {
        assert!(selected("attention", None).unwrap());
        assert!(selected("attention", Some("attention")).unwrap());
        assert!(!selected("linear", Some("attention")).unwrap());
        assert!(!selected("attention", Some("model")).unwrap());
        assert!(selected("attention", Some("atention")).is_err());
    }

    #[test]
    fn rel_err_scales_by_the_reference_and_flags_nan() {
        assert_eq!(rel_err(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
        assert!((rel_err(&[1.0, 2.1], &[1.0, 2.0]) - 0.05).abs() < 1e-6);
        assert_eq!(rel_err(&[f32::NAN], &[1.0]), f64::INFINITY);
        assert_eq!(rel_err(&[1.0], &[1.0, 2.0]), f64::INFINITY);
    }
}
