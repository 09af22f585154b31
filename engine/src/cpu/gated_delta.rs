//! CPU reference of one decode step of a gated DeltaNet layer (the linear-attention layers of
//! Qwen3-Next and Qwen3.5), in f32: the short causal conv1d with its rolling state, the gates,
//! the gated delta rule recurrence and the gated output norm. The GPU kernels of the hybrid
//! levers are checked against these.
//!
//! Conventions, as the reference implementation (transformers' `Qwen3NextGatedDeltaNet` and its
//! PyTorch fallback `torch_recurrent_gated_delta_rule`) writes them:
//! - conv1d: depthwise over the q, k and v channels, kernel `K` (`linear_conv_kernel_dim`), no
//!   bias, SiLU after it. A decode step sees the last `K` inputs, oldest first; the state keeps
//!   the `K - 1` before the current one.
//! - q and k are L2-normalised per head (`x * rsqrt(sum(x^2) + 1e-6)`), then q is scaled by
//!   `1 / sqrt(dk)`. With more value heads than key heads, value head `h` reads key head
//!   `h / (v_heads / k_heads)`.
//! - gates: `g = -exp(A_log) * softplus(a + dt_bias)` (log of the decay), `beta = sigmoid(b)`.
//! - recurrence, per value head with state `S` of `dk x dv`: `S <- S * exp(g)`, then
//!   `S <- S + k (beta (v - S^T k))^T`, and the output is `o = S^T q`.
//! - output norm: `rms_norm(o) * weight * silu(z)` per value head (norm before gate, weights
//!   not offset by 1).

use super::ops::silu;

/// The eps of the q/k L2 norm.
pub const L2NORM_EPS: f32 = 1e-6;

/// L2-normalises `x` in place: `x * rsqrt(sum(x^2) + eps)`.
pub fn l2norm(x: &mut [f32], eps: f32) {
    let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f32>() + eps).sqrt();
    x.iter_mut().for_each(|v| *v *= inv);
}

/// `ln(1 + e^x)`, without overflow for large `x`.
pub fn softplus(x: f32) -> f32 {
    if x > 20.0 { x } else { x.exp().ln_1p() }
}

/// The logistic function.
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// The log of a head's decay for this step: `-exp(a_log) * softplus(a + dt_bias)`.
pub fn decay_log(a: f32, a_log: f32, dt_bias: f32) -> f32 {
    -a_log.exp() * softplus(a + dt_bias)
}

/// One step of the depthwise causal conv1d with SiLU, per channel `c`: `out[c]` from the
/// `kernel - 1` previous inputs in `state[c * (kernel - 1)..]` (oldest first) and `x[c]`, with
/// weights `weight[c * kernel..]` (oldest tap first). The state then rolls by one: it drops its
/// oldest input and keeps `x[c]`.
pub fn conv1d_step(state: &mut [f32], x: &[f32], weight: &[f32], kernel: usize, out: &mut [f32]) {
    let keep = kernel - 1;
    for (c, (&xc, o)) in x.iter().zip(out.iter_mut()).enumerate() {
        let s = &mut state[c * keep..(c + 1) * keep];
        let w = &weight[c * kernel..(c + 1) * kernel];
        let acc = s.iter().zip(w).map(|(a, b)| a * b).sum::<f32>() + xc * w[keep];
        *o = silu(acc);
        if keep > 0 {
            s.copy_within(1.., 0);
            s[keep - 1] = xc;
        }
    }
}

/// One step of the gated delta rule for one value head. `state` is `dk x dv` (row `i` is key
/// dimension `i`), `q` and `k` are already L2-normalised and `q` scaled; `g` is the log decay.
/// Writes `o = S^T q` (length `dv`) after the update.
pub fn delta_rule_step(
    state: &mut [f32],
    q: &[f32],
    k: &[f32],
    v: &[f32],
    g: f32,
    beta: f32,
    out: &mut [f32],
) {
    let dv = v.len();
    let decay = g.exp();
    state.iter_mut().for_each(|s| *s *= decay);
    // delta = beta * (v - S^T k)
    let mut delta = v.to_vec();
    for (i, &ki) in k.iter().enumerate() {
        let row = &state[i * dv..(i + 1) * dv];
        delta.iter_mut().zip(row).for_each(|(d, s)| *d -= s * ki);
    }
    delta.iter_mut().for_each(|d| *d *= beta);
    // S += k delta^T
    for (i, &ki) in k.iter().enumerate() {
        let row = &mut state[i * dv..(i + 1) * dv];
        row.iter_mut().zip(&delta).for_each(|(s, d)| *s += ki * d);
    }
    out.fill(0.0);
    for (i, &qi) in q.iter().enumerate() {
        let row = &state[i * dv..(i + 1) * dv];
        out.iter_mut().zip(row).for_each(|(o, s)| *o += s * qi);
    }
}

/// The gated output norm of one value head: `x * rsqrt(mean(x^2) + eps) * weight * silu(z)`.
pub fn gated_rms_norm(x: &[f32], z: &[f32], weight: &[f32], eps: f32, out: &mut [f32]) {
    let inv = 1.0 / (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32 + eps).sqrt();
    for (((o, &xv), &zv), &w) in out.iter_mut().zip(x).zip(z).zip(weight) {
        *o = xv * inv * w * silu(zv);
    }
}

/// The key head a value head reads when there are more value heads than key heads.
pub fn key_head_of(v_head: usize, k_heads: usize, v_heads: usize) -> usize {
    v_head / (v_heads / k_heads)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f32], b: &[f32]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (x - y).abs() <= 1e-6 * (1.0 + y.abs()))
    }

    #[test]
    fn one_step_from_zero_state_stores_v_along_k() {
        // dk 2, dv 3; k = e0; q = e0; no decay; beta 1: S = e0 v^T, o = v.
        let (k, q, v) = ([1.0, 0.0], [1.0, 0.0], [0.5, -1.0, 2.0]);
        let mut s = vec![0.0; 6];
        let mut o = vec![0.0; 3];
        delta_rule_step(&mut s, &q, &k, &v, 0.0, 1.0, &mut o);
        assert!(close(&s, &[0.5, -1.0, 2.0, 0.0, 0.0, 0.0]), "{s:?}");
        assert!(close(&o, &v), "{o:?}");
        // A query orthogonal to every stored key reads nothing.
        delta_rule_step(
            &mut s,
            &[0.0, 1.0],
            &[0.0, 1.0],
            &[0.0; 3],
            0.0,
            0.0,
            &mut o,
        );
        assert!(close(&o, &[0.0; 3]), "{o:?}");
    }

    #[test]
    fn the_delta_rule_replaces_what_a_key_held() {
        // beta 1 with a unit key writes v exactly, whatever the key held before (plain linear
        // attention would add the two values).
        let k = [0.6, 0.8];
        let mut s = vec![0.0; 4];
        let mut o = vec![0.0; 2];
        delta_rule_step(&mut s, &k, &k, &[1.0, 2.0], 0.0, 1.0, &mut o);
        delta_rule_step(&mut s, &k, &k, &[-3.0, 0.5], 0.0, 1.0, &mut o);
        assert!(close(&o, &[-3.0, 0.5]), "{o:?}");
        // beta 0.5 moves half way from what the key reads to v.
        delta_rule_step(&mut s, &k, &k, &[1.0, 1.5], 0.0, 0.5, &mut o);
        assert!(close(&o, &[-1.0, 1.0]), "{o:?}");
    }

    #[test]
    fn the_decay_scales_the_state_before_the_update() {
        let k = [1.0, 0.0];
        let mut s = vec![0.0; 2];
        let mut o = vec![0.0; 1];
        delta_rule_step(&mut s, &k, &k, &[4.0], 0.0, 1.0, &mut o);
        // Halved, then read with beta 0: nothing written, half remains.
        delta_rule_step(&mut s, &k, &k, &[100.0], 0.5f32.ln(), 0.0, &mut o);
        assert!(close(&o, &[2.0]), "{o:?}");
        // Hand-computed: S = 2 decays to 1 (g = ln 0.5), delta = 0.25 (6 - 1) = 1.25, S = 2.25.
        delta_rule_step(&mut s, &k, &k, &[6.0], 0.5f32.ln(), 0.25, &mut o);
        assert!(close(&o, &[2.25]), "{o:?}");
    }

    #[test]
    fn conv1d_rolls_its_state_and_applies_silu() {
        // 1 channel, kernel 3, taps oldest first [1, 2, 3].
        let w = [1.0, 2.0, 3.0];
        let mut state = vec![0.0; 2];
        let mut out = [0.0];
        let mut ys = Vec::new();
        for x in [1.0, -1.0, 0.5] {
            conv1d_step(&mut state, &[x], &w, 3, &mut out);
            ys.push(out[0]);
        }
        // pre-activations: 3*1 = 3; 2*1 + 3*(-1) = -1; 1*1 + 2*(-1) + 3*0.5 = 0.5
        let want: Vec<f32> = [3.0f32, -1.0, 0.5].iter().map(|&a| silu(a)).collect();
        assert!(close(&ys, &want), "{ys:?}");
        assert_eq!(state, [-1.0, 0.5]);
    }

    #[test]
    fn gates_and_norms_match_their_formulas() {
        assert!((softplus(0.0) - 2f32.ln()).abs() < 1e-7);
        assert_eq!(softplus(50.0), 50.0);
        assert!((sigmoid(0.0) - 0.5).abs() < 1e-7);
        // A_log = 0 and a + dt_bias = 0: g = -ln 2, a decay of one half.
        assert!((decay_log(0.3, 0.0, -0.3).exp() - 0.5).abs() < 1e-6);
        let mut x = [3.0, 4.0];
        l2norm(&mut x, 0.0);
        assert!(close(&x, &[0.6, 0.8]), "{x:?}");
        // rms of [3, 4] is sqrt(12.5); weight 2; silu(z) with z large is z.
        let mut o = [0.0; 2];
        gated_rms_norm(&[3.0, 4.0], &[30.0, 30.0], &[2.0, 2.0], 0.0, &mut o);
        let r = 12.5f32.sqrt();
        assert!(
            close(
                &o,
                &[3.0 / r * 2.0 * silu(30.0), 4.0 / r * 2.0 * silu(30.0)]
            ),
            "{o:?}"
        );
        assert_eq!(
            (0..4).map(|h| key_head_of(h, 2, 4)).collect::<Vec<_>>(),
            [0, 0, 1, 1]
        );
    }
}
