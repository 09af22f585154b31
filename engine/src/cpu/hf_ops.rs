//! CPU definitions of the `hf-bf16` numerics ops (attention is `ops::attention_row` with `hf`) (`kernels/cuda/hf_numerics.cu`): HF
//! transformers' bf16 eager roundings, each product and sum rounded where torch rounds it.

#[cfg(test)]
use super::ops::attention_row;
use super::ops::silu;
use crate::quant::round_bf16 as r;

/// LlamaRMSNorm on bf16 rows of `n`: `bf16(w * bf16(x * rsqrt(mean(x^2) + eps)))`.
pub fn rms_norm(x: &[f32], w: &[f32], n: usize, eps: f32) -> Vec<f32> {
    let mut out = x.to_vec();
    for row in out.chunks_exact_mut(n) {
        head_norm(row, w, eps);
    }
    out
}

/// The same RMSNorm of one q or k head in place (Qwen3's q_norm / k_norm).
pub fn head_norm(v: &mut [f32], w: &[f32], eps: f32) {
    let ss: f32 = v.iter().map(|x| x * x).sum();
    let scale = 1.0 / (ss / v.len() as f32 + eps).sqrt();
    for (x, &wv) in v.iter_mut().zip(w) {
        *x = r(wv * r(*x * scale));
    }
}

/// apply_rotary_pos_emb in bf16: cos and sin rounded, then each product and the sum.
pub fn rope(head: &mut [f32], inv_freq: &[f32], pos: i32) {
    let half = head.len() / 2;
    for i in 0..half {
        let (s, c) = (pos as f32 * inv_freq[i]).sin_cos();
        let (s, c) = (r(s), r(c));
        let (x0, x1) = (head[i], head[i + half]);
        head[i] = r(r(x0 * c) - r(x1 * s));
        head[i + half] = r(r(x1 * c) + r(x0 * s));
    }
}

/// A linear's output as torch stores it: `bf16(acc)`.
pub fn store(acc: &mut [f32]) {
    for v in acc {
        *v = r(*v);
    }
}

/// The residual add after a linear: `dst = bf16(dst + bf16(acc))`.
pub fn accumulate(dst: &mut [f32], acc: &[f32]) {
    for (d, &a) in dst.iter_mut().zip(acc) {
        *d = r(*d + r(a));
    }
}

/// Interleaved gate/up outputs -> `bf16(bf16(silu(bf16(g))) * bf16(u))`.
pub fn swiglu(gu: &[f32]) -> Vec<f32> {
    gu.chunks_exact(2)
        .map(|p| r(r(silu(r(p[0]))) * r(p[1])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The product with the weight is taken of the already rounded normalised value, as
    /// torch does; over a sweep of weights some outputs tell that apart from one rounding.
    #[test]
    fn rms_norm_rounds_twice() {
        let x = [1.3f32, 0.7, -0.4, 2.1];
        let ss: f32 = x.iter().map(|v| v * v).sum();
        let scale = 1.0 / (ss / 4.0 + 1e-6).sqrt();
        let mut told_apart = 0;
        for i in 0..512 {
            let w = [1.0 + i as f32 / 512.0; 4];
            let y = rms_norm(&x, &w, 4, 1e-6);
            for j in 0..4 {
                let double = r(w[j] * r(x[j] * scale));
                assert_eq!(y[j], double, "weight {}", w[j]);
                if double != r(x[j] * scale * w[j]) {
                    told_apart += 1;
                }
            }
        }
        assert!(told_apart > 0, "no weight told the roundings apart");
    }

    #[test]
    fn every_output_is_a_bf16_value() {
        let x: Vec<f32> = (0..64)
            .map(|i| ((i * 37 % 29) as f32 - 14.0) / 9.0)
            .collect();
        let w: Vec<f32> = (0..64).map(|i| 1.0 + (i % 5) as f32 / 17.0).collect();
        let is_bf16 = |v: &f32| r(*v) == *v;
        assert!(rms_norm(&x, &w, 32, 1e-6).iter().all(is_bf16));
        let mut h = x[..32].to_vec();
        rope(&mut h, &[0.3; 16], 5);
        assert!(h.iter().all(is_bf16));
        assert!(swiglu(&x).iter().all(is_bf16));
        let kv: Vec<f32> = x.iter().map(|&v| r(v)).collect();
        let att = attention_row(&x[..32], &kv, &kv, 2, 2, 1, 16, true);
        assert!(att.iter().all(is_bf16));
        let mut d = x.clone();
        accumulate(&mut d, &w);
        assert!(d.iter().all(is_bf16));
    }

    /// One position: softmax is exactly 1 and the output is v itself.
    #[test]
    fn attention_of_one_position_returns_v() {
        let v: Vec<f32> = (0..8).map(|i| r(i as f32 / 3.0)).collect();
        let out = attention_row(&[0.5; 16], &[0.25; 8], &v, 1, 2, 1, 8, true);
        assert_eq!(&out[..8], &v[..]);
        assert_eq!(&out[8..], &v[..]);
    }

    /// The residual add rounds the linear's output before adding: bf16(2^-8 + 2^-17) is
    /// 2^-8, and 1 + 2^-8 is a tie that rounds to even (1.0); unrounded, it would round up.
    #[test]
    fn accumulate_rounds_the_addend_first() {
        let mut d = [1.0f32];
        let a = 1.0 / 256.0 + 1.0 / 131072.0;
        accumulate(&mut d, &[a]);
        assert_eq!(d[0], 1.0);
        assert_ne!(r(1.0 + a), 1.0);
    }
}
