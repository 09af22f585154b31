//! Weights on the device.

use super::device::DevBuf;
use crate::error::Result;
use crate::quant::{Matrix, WeightFormat};
use crate::weights::ModelWeights;
use cudarc::driver::CudaStream;

/// A linear weight on the device: values (bf16 bits, int8 or packed nibbles) and scales.
pub struct DevLinear {
    pub format: WeightFormat,
    pub rows: usize,
    pub cols: usize,
    pub values: DevBuf,
    pub scales: Option<DevBuf>,
    pub bytes: u64,
}

impl DevLinear {
    pub fn upload(m: &Matrix, stream: &CudaStream) -> Result<Self> {
        let (values, scales) = match m {
            Matrix::Bf16 { data, .. } => (DevBuf::upload(data, stream)?, None),
            Matrix::Q8_0 { qs, d, .. } => (
                DevBuf::upload(qs, stream)?,
                Some(DevBuf::upload(d, stream)?),
            ),
            Matrix::Q4_0 { qs, d, .. } => (
                DevBuf::upload(qs, stream)?,
                Some(DevBuf::upload(d, stream)?),
            ),
        };
        Ok(Self {
            format: m.format(),
            rows: m.rows(),
            cols: m.cols(),
            values,
            scales,
            bytes: m.bytes(),
        })
    }

    pub fn scales_ptr(&self) -> u64 {
        self.scales.as_ref().map_or(0, |s| s.ptr)
    }
}

/// A gated DeltaNet layer's conv weights, gates and output-norm weight.
pub struct DevDelta {
    pub conv: DevBuf,
    pub a_log: DevBuf,
    pub dt_bias: DevBuf,
    pub norm: DevBuf,
}

pub struct DevLayer {
    pub attn_norm: DevBuf,
    pub wqkv: DevLinear,
    pub bqkv: Option<DevBuf>,
    pub q_norm: Option<DevBuf>,
    pub k_norm: Option<DevBuf>,
    pub wo: DevLinear,
    pub w_gate: Option<DevLinear>,
    pub delta: Option<DevDelta>,
    pub ffn_norm: DevBuf,
    pub w_gate_up: DevLinear,
    pub w_down: DevLinear,
}

pub struct DevWeights {
    pub embed: DevBuf,
    pub layers: Vec<DevLayer>,
    pub final_norm: DevBuf,
    pub lm_head: DevLinear,
    pub linear_bytes: u64,
}

impl DevWeights {
    pub fn upload(w: &ModelWeights, stream: &CudaStream) -> Result<Self> {
        let opt = |v: &Option<Vec<f32>>| -> Result<Option<DevBuf>> {
            v.as_ref().map(|v| DevBuf::upload(v, stream)).transpose()
        };
        let layers = w
            .layers
            .iter()
            .map(|l| {
                Ok(DevLayer {
                    attn_norm: DevBuf::upload(&l.attn_norm, stream)?,
                    wqkv: DevLinear::upload(&l.wqkv, stream)?,
                    bqkv: opt(&l.bqkv)?,
                    q_norm: opt(&l.q_norm)?,
                    k_norm: opt(&l.k_norm)?,
                    wo: DevLinear::upload(&l.wo, stream)?,
                    w_gate: l
                        .w_gate
                        .as_ref()
                        .map(|m| DevLinear::upload(m, stream))
                        .transpose()?,
                    delta: l
                        .delta
                        .as_ref()
                        .map(|d| -> Result<DevDelta> {
                            Ok(DevDelta {
                                conv: DevBuf::upload(&d.conv, stream)?,
                                a_log: DevBuf::upload(&d.a_log, stream)?,
                                dt_bias: DevBuf::upload(&d.dt_bias, stream)?,
                                norm: DevBuf::upload(&d.norm, stream)?,
                            })
                        })
                        .transpose()?,
                    ffn_norm: DevBuf::upload(&l.ffn_norm, stream)?,
                    w_gate_up: DevLinear::upload(&l.w_gate_up, stream)?,
                    w_down: DevLinear::upload(&l.w_down, stream)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embed: DevBuf::upload(&w.embed, stream)?,
            layers,
            final_norm: DevBuf::upload(&w.final_norm, stream)?,
            lm_head: DevLinear::upload(&w.lm_head, stream)?,
            linear_bytes: w.linear_bytes(),
        })
    }
}
