//! The CPU ops whose rounding depends on the numerics, picked once when the backend is built:
//! the engine's f32 math (`ops`) or HF's bf16 roundings (`hf_ops`). The backend's per-op
//! methods call through this table and never look at `Numerics` themselves.

use super::{hf_ops, ops};
use crate::Numerics;

/// One implementation per numerics-dependent step of the forward.
#[derive(Clone, Copy)]
pub(super) struct CpuOps {
    pub rms_norm: fn(&[f32], &[f32], usize, f32) -> Vec<f32>,
    pub head_norm: fn(&mut [f32], &[f32], f32),
    pub rope: fn(&mut [f32], &[f32], i32),
    /// A linear's stored output (after its bias).
    pub store: fn(&mut [f32]),
    /// The residual add of a linear's output onto its destination.
    pub accumulate: fn(&mut [f32], &[f32]),
    pub swiglu: fn(&[f32]) -> Vec<f32>,
    /// `ops::attention_row`'s `hf` flag: scores and probabilities rounded to bf16.
    pub hf_attention: bool,
}

impl CpuOps {
    pub fn of(numerics: Numerics) -> Self {
        match numerics {
            Numerics::Engine => Self {
                rms_norm: ops::rms_norm,
                head_norm: ops::head_norm,
                rope: ops::rope,
                store: keep,
                accumulate: add,
                swiglu: ops::swiglu,
                hf_attention: false,
            },
            Numerics::HfBf16 => Self {
                rms_norm: hf_ops::rms_norm,
                head_norm: hf_ops::head_norm,
                rope: hf_ops::rope,
                store: hf_ops::store,
                accumulate: hf_ops::accumulate,
                swiglu: hf_ops::swiglu,
                hf_attention: true,
            },
        }
    }
}

/// The engine keeps a linear's f32 output as it is.
fn keep(_: &mut [f32]) {}

/// The engine's residual add in f32.
fn add(dst: &mut [f32], acc: &[f32]) {
    for (a, b) in dst.iter_mut().zip(acc) {
        *a += b;
    }
}
