//! The engine's CPU reference of the gated DeltaNet decode step against PyTorch: the fixture
//! `tests/data/gated-delta.json` was written by `scripts/engine/gated-delta-reference.py`
//! (plain PyTorch in float64 from the equations; transformers 5.17's
//! `torch_recurrent_gated_delta_rule` and `Qwen3NextRMSNormGated` agreed with it to 6e-7),
//! on the GPU machine with torch 2.11.

use gapscope_engine::cpu::gated_delta::{
    L2NORM_EPS, conv1d_step, decay_log, delta_rule_step, gated_rms_norm, key_head_of, l2norm,
    sigmoid,
};
use serde_json::Value;

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number") as f32)
        .collect()
}

#[test]
fn decode_steps_match_the_pytorch_reference() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/gated-delta.json");
    let f: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let dim = |k: &str| f["shape"][k].as_u64().unwrap() as usize;
    let (kh, vh, dk, dv, kw, steps) = (
        dim("k_heads"),
        dim("v_heads"),
        dim("dk"),
        dim("dv"),
        dim("kernel"),
        dim("steps"),
    );
    let eps_norm = f["shape"]["eps_norm"].as_f64().unwrap() as f32;
    let inp = |k: &str| floats(&f["inputs"][k]);
    let (x, conv_w, a, b) = (inp("x"), inp("conv_w"), inp("a"), inp("b"));
    let (a_log, dt_bias, z, norm_w) = (inp("a_log"), inp("dt_bias"), inp("z"), inp("norm_w"));
    let want = floats(&f["out"]);
    let want_state = floats(&f["final_state"]);
    let channels = 2 * kh * dk + vh * dv;
    assert_eq!(x.len(), steps * channels);

    let mut conv_state = vec![0.0f32; channels * (kw - 1)];
    let mut state = vec![0.0f32; vh * dk * dv];
    let mut y = vec![0.0f32; channels];
    let mut got = Vec::new();
    for t in 0..steps {
        conv1d_step(
            &mut conv_state,
            &x[t * channels..(t + 1) * channels],
            &conv_w,
            kw,
            &mut y,
        );
        let (q, rest) = y.split_at(kh * dk);
        let (k, v) = rest.split_at(kh * dk);
        for h in 0..vh {
            let kh_i = key_head_of(h, kh, vh);
            let mut qh = q[kh_i * dk..(kh_i + 1) * dk].to_vec();
            let mut khv = k[kh_i * dk..(kh_i + 1) * dk].to_vec();
            l2norm(&mut qh, L2NORM_EPS);
            l2norm(&mut khv, L2NORM_EPS);
            let scale = 1.0 / (dk as f32).sqrt();
            qh.iter_mut().for_each(|e| *e *= scale);
            let g = decay_log(a[t * vh + h], a_log[h], dt_bias[h]);
            let beta = sigmoid(b[t * vh + h]);
            let mut o = vec![0.0f32; dv];
            delta_rule_step(
                &mut state[h * dk * dv..(h + 1) * dk * dv],
                &qh,
                &khv,
                &v[h * dv..(h + 1) * dv],
                g,
                beta,
                &mut o,
            );
            let mut normed = vec![0.0f32; dv];
            let zt = &z[(t * vh + h) * dv..(t * vh + h + 1) * dv];
            gated_rms_norm(&o, zt, &norm_w, eps_norm, &mut normed);
            got.extend(normed);
        }
    }
    let worst = |a: &[f32], b: &[f32]| {
        let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs() / scale)
            .fold(0.0f32, f32::max)
    };
    assert_eq!(got.len(), want.len());
    let (e_out, e_state) = (worst(&got, &want), worst(&state, &want_state));
    assert!(
        e_out < 1e-5,
        "outputs: worst error {e_out:e} of the largest"
    );
    assert!(
        e_state < 1e-5,
        "state: worst error {e_state:e} of the largest"
    );
}
