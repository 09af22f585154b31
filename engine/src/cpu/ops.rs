//! CPU definitions of every op, in f32 with the same roundings as the kernels (bf16 GEMM
//! inputs and KV cache, q8_1 activations for the int8 paths). The CUDA kernels are tested
//! against these.

use crate::quant::{Matrix, QK, quantize_q8_1, round_bf16};
use half::f16;

/// `bf16(x * rsqrt(mean(x^2) + eps) * w)` per row of `n`.
pub fn rms_norm(x: &[f32], w: &[f32], n: usize, eps: f32) -> Vec<f32> {
    let mut out = vec![0f32; x.len()];
    for (xr, or) in x.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
        let ss: f32 = xr.iter().map(|v| v * v).sum();
        let scale = 1.0 / (ss / n as f32 + eps).sqrt();
        for ((o, &v), &wv) in or.iter_mut().zip(xr).zip(w) {
            *o = round_bf16(v * scale * wv);
        }
    }
    out
}

/// RMSNorm of one head in place, f32 output (Qwen3 q/k norm).
pub fn head_norm(v: &mut [f32], w: &[f32], eps: f32) {
    let ss: f32 = v.iter().map(|x| x * x).sum();
    let scale = 1.0 / (ss / v.len() as f32 + eps).sqrt();
    for (x, &wv) in v.iter_mut().zip(w) {
        *x = *x * scale * wv;
    }
}

/// `y[r, o] = sum_k W[o, k] x[r, k]` for `rows` input rows of width `W.cols()`; f32 out.
/// bf16 weights use the bf16 activations directly; quantized weights see q8_1 activations and
/// integer block dot products, as the MMVQ/MMQ kernels do.
pub fn linear(w: &Matrix, x: &[f32], rows: usize) -> Vec<f32> {
    let (n, k) = (w.rows(), w.cols());
    assert_eq!(x.len(), rows * k, "linear input length");
    let mut y = vec![0f32; rows * n];
    match w {
        Matrix::Bf16 { .. } => {
            let wf = w.dequantize();
            for r in 0..rows {
                let xr = &x[r * k..(r + 1) * k];
                for o in 0..n {
                    let wr = &wf[o * k..(o + 1) * k];
                    y[r * n + o] = wr.iter().zip(xr).map(|(a, b)| a * b).sum();
                }
            }
        }
        Matrix::Q8_0 { qs, d, .. } => {
            for r in 0..rows {
                let qx = quantize_q8_1(&x[r * k..(r + 1) * k]);
                for o in 0..n {
                    let mut acc = 0f64;
                    for b in 0..k / QK {
                        let wq = &qs[o * k + b * QK..o * k + (b + 1) * QK];
                        let xq = &qx.qs[b * QK..(b + 1) * QK];
                        let s: i32 = wq
                            .iter()
                            .zip(xq)
                            .map(|(&a, &c)| i32::from(a) * i32::from(c))
                            .sum();
                        acc += f64::from(block_term_q8(
                            f16::from_bits(d[o * (k / QK) + b]).to_f32(),
                            qx.d[b],
                            s,
                        ));
                    }
                    y[r * n + o] = acc as f32;
                }
            }
        }
        Matrix::Q4_0 { qs, d, .. } => {
            for r in 0..rows {
                let qx = quantize_q8_1(&x[r * k..(r + 1) * k]);
                for o in 0..n {
                    let mut acc = 0f64;
                    for b in 0..k / QK {
                        let wq = &qs[(o * k + b * QK) / 2..(o * k + (b + 1) * QK) / 2];
                        let xq = &qx.qs[b * QK..(b + 1) * QK];
                        let mut s = 0i32;
                        for j in 0..QK / 2 {
                            s += i32::from(wq[j] & 0x0f) * i32::from(xq[j]);
                            s += i32::from(wq[j] >> 4) * i32::from(xq[j + QK / 2]);
                        }
                        let dw = f16::from_bits(d[o * (k / QK) + b]).to_f32();
                        acc += f64::from(block_term_q4(dw, qx.d[b], qx.s[b], s));
                    }
                    y[r * n + o] = acc as f32;
                }
            }
        }
    }
    y
}

/// One Q8_0 block's contribution, with the kernels' rounding: (dw * dx) * s, each step rounded
/// to f32 (Rust never contracts to FMA). Block terms are summed in f64, as on the GPU.
pub fn block_term_q8(dw: f32, dx: f32, s: i32) -> f32 {
    (dw * dx) * s as f32
}

/// One Q4_0 block's contribution: dw * (dx * s - 8 * sx), each step rounded to f32.
pub fn block_term_q4(dw: f32, dx: f32, sx: f32, s: i32) -> f32 {
    dw * (dx * s as f32 - 8.0 * sx)
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// Interleaved gate/up pairs -> bf16(silu(gate) * up).
pub fn swiglu(gu: &[f32]) -> Vec<f32> {
    gu.chunks_exact(2)
        .map(|p| round_bf16(silu(p[0]) * p[1]))
        .collect()
}

/// Rotates one head (rotate_half convention) at position `pos`.
pub fn rope(head: &mut [f32], inv_freq: &[f32], pos: i32) {
    let half = head.len() / 2;
    for i in 0..half {
        let (s, c) = (pos as f32 * inv_freq[i]).sin_cos();
        let (x0, x1) = (head[i], head[i + half]);
        head[i] = x0 * c - x1 * s;
        head[i + half] = x1 * c + x0 * s;
    }
}

/// Attention of one row's query heads over `len` cached positions of K and V (rows of
/// `kv_dim`, bf16 values). Output bf16 values `[nq * hd]`. With `hf`, HF's eager roundings
/// (the hf-bf16 numerics): scores `bf16(bf16(q.k) * scale)` and probabilities
/// `bf16(softmax)` normalised before they weight V (the engine normalises the weighted sum
/// instead).
#[allow(clippy::too_many_arguments)]
pub fn attention_row(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    len: usize,
    nq: usize,
    nkv: usize,
    hd: usize,
    hf: bool,
) -> Vec<f32> {
    let g = nq / nkv;
    let scale = 1.0 / (hd as f32).sqrt();
    let kv_dim = nkv * hd;
    let r = |x: f32| if hf { round_bf16(x) } else { x };
    let mut out = vec![0f32; nq * hd];
    let mut scores = vec![0f32; len];
    for h in 0..nq {
        let kvh = h / g;
        let qh = &q[h * hd..(h + 1) * hd];
        let mut mx = f32::NEG_INFINITY;
        for (p, s) in scores.iter_mut().enumerate() {
            let kr = &k[p * kv_dim + kvh * hd..p * kv_dim + (kvh + 1) * hd];
            *s = r(r(qh.iter().zip(kr).map(|(a, b)| a * b).sum::<f32>()) * scale);
            mx = mx.max(*s);
        }
        let mut sum = 0f32;
        for s in scores.iter_mut() {
            *s = (*s - mx).exp();
            sum += *s;
        }
        if hf {
            for s in scores.iter_mut() {
                *s = round_bf16(*s / sum);
            }
        }
        let o = &mut out[h * hd..(h + 1) * hd];
        for (p, &s) in scores.iter().enumerate() {
            let vr = &v[p * kv_dim + kvh * hd..p * kv_dim + (kvh + 1) * hd];
            for (od, &vd) in o.iter_mut().zip(vr) {
                *od += s * vd;
            }
        }
        for od in o.iter_mut() {
            *od = round_bf16(if hf { *od } else { *od / sum });
        }
    }
    out
}

/// Index of the largest value, ties to the lowest index.
pub fn argmax(row: &[f32]) -> i32 {
    let mut best = 0usize;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quant::WeightFormat;

    #[test]
    fn rms_norm_hand_computed() {
        // mean(x^2) = (9 + 16) / 2 = 12.5
        let y = rms_norm(&[3.0, 4.0], &[1.0, 2.0], 2, 0.0);
        let s = 1.0 / 12.5f32.sqrt();
        assert_eq!(y, vec![round_bf16(3.0 * s), round_bf16(8.0 * s)]);
    }

    #[test]
    fn quantized_linear_tracks_the_f32_product() {
        let (n, k) = (3, 64);
        let w: Vec<f32> = (0..n * k)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0)
            .collect();
        let x: Vec<f32> = (0..k)
            .map(|i| round_bf16(((i * 5 % 11) as f32 - 5.0) / 7.0))
            .collect();
        let exact: Vec<f32> = (0..n)
            .map(|o| (0..k).map(|i| w[o * k + i] * x[i]).sum())
            .collect();
        for (fmt, tol) in [
            (WeightFormat::Bf16, 0.01),
            (WeightFormat::Q8_0, 0.02),
            (WeightFormat::Q4_0, 0.15),
        ] {
            let m = Matrix::from_f32(fmt, n, k, &w);
            let y = linear(&m, &x, 1);
            let scale = exact.iter().fold(0f32, |a, v| a.max(v.abs()));
            for (a, b) in y.iter().zip(&exact) {
                assert!((a - b).abs() <= tol * scale, "{fmt:?}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn attention_of_one_position_returns_v() {
        let v: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let out = attention_row(&[1.0; 16], &[0.5; 8], &v, 1, 2, 1, 8, false);
        assert_eq!(&out[..8], &v[..]);
        assert_eq!(&out[8..], &v[..]);
    }

    #[test]
    fn argmax_ties_to_lowest() {
        assert_eq!(argmax(&[1.0, 3.0, 3.0, 2.0]), 1);
    }

    #[test]
    fn rope_at_zero_is_identity_and_preserves_norm() {
        let mut h = vec![1.0, 2.0, 3.0, 4.0];
        rope(&mut h, &[1.0, 0.01], 0);
        assert_eq!(h, vec![1.0, 2.0, 3.0, 4.0]);
        rope(&mut h, &[1.0, 0.01], 7);
        let n: f32 = h.iter().map(|x| x * x).sum();
        assert!((n - 30.0).abs() < 1e-4);
    }
}
