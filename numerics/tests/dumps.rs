//! Dumps written here, compared, and broken on purpose: every bad input is a one-line error
//! that says where.

use std::path::{Path, PathBuf};

use gapscope_numerics::dtype::DType;
use gapscope_numerics::write::{DumpData, write_dump};
use gapscope_numerics::{NumericsSettings, Verdict, compare};

const T: usize = 24;
const V: usize = 50;
const H: usize = 16;
const LAYERS: usize = 4;

/// A seeded model stand-in: logits and hidden states as smooth functions of the token,
/// with `fault` scaling the residual stream from that layer on.
fn data(seed: u64, fault: Option<(usize, f32)>, noise: f32) -> (Vec<i64>, Vec<f32>, Vec<Vec<f32>>) {
    let mut s = seed;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s % 10_000) as f32 / 10_000.0 - 0.5
    };
    let tokens: Vec<i64> = (0..T).map(|i| ((i * 7 + 3) % V) as i64).collect();
    let mut hidden = vec![vec![0f32; T * H]; LAYERS];
    for t in 0..T {
        let mut h: Vec<f32> = (0..H)
            .map(|j| ((tokens[t] as f32) * 0.1 + j as f32 * 0.3).sin())
            .collect();
        for (l, layer) in hidden.iter_mut().enumerate() {
            for (j, x) in h.iter_mut().enumerate() {
                *x = *x * 1.01 + ((l + j) as f32 * 0.2).cos() * 0.1 + noise * rnd();
                if let Some((fl, f)) = fault
                    && l == fl
                {
                    *x *= f;
                }
            }
            layer[t * H..(t + 1) * H].copy_from_slice(&h);
        }
    }
    let last = &hidden[LAYERS - 1];
    let logits: Vec<f32> = (0..T)
        .flat_map(|t| {
            let h = &last[t * H..(t + 1) * H];
            (0..V).map(move |v| {
                h.iter()
                    .enumerate()
                    .map(|(j, x)| x * ((v * 31 + j * 17) % 13) as f32 * 0.3)
                    .sum()
            })
        })
        .collect();
    (tokens, logits, hidden)
}

/// Writes a one-passage dump of `tokens`, `logits` (`vocab` wide) and `hidden` at `p`.
fn save(
    p: &Path,
    tokens: &[i64],
    logits: &[f32],
    vocab: usize,
    hidden: &[Vec<f32>],
    dtype: DType,
    meta: &[(&str, &str)],
) {
    let d = DumpData {
        meta,
        passages: 1,
        tokens,
        logits,
        vocab,
        hidden,
        hidden_size: H,
        dtype,
    };
    write_dump(p, &d).expect("written");
}

fn dump(dir: &Path, name: &str, seed: u64, fault: Option<(usize, f32)>, noise: f32) -> PathBuf {
    let (tokens, logits, hidden) = data(seed, fault, noise);
    let p = dir.join(name);
    save(
        &p,
        &tokens,
        &logits,
        V,
        &hidden,
        DType::F32,
        &[("engine", name), ("model", "synthetic")],
    );
    p
}

#[test]
fn identity_is_accept_and_a_planted_fault_is_found_at_its_layer() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let d = dir.path();
    let r = dump(d, "ref", 1, None, 0.0);
    let again = dump(d, "again", 1, None, 0.0);
    let faulty = dump(d, "fault", 1, Some((2, 1.05)), 0.0);
    let rep = compare(
        &r,
        &[again.clone(), faulty],
        Some((&r, &again)),
        &NumericsSettings::default(),
    )
    .expect("compared");
    let id = rep.identity.as_ref().expect("an identity pair");
    assert_eq!(id.verdict, Verdict::Accept);
    assert_eq!(id.summary.kl_max, 0.0);
    assert_eq!(rep.comparisons[0].verdict, Verdict::Accept);
    let f = &rep.comparisons[1];
    let l = f.layers.as_ref().expect("hidden states");
    assert_eq!(l.first_diverging, Some(2), "{:?}", l.error);
    assert_eq!(&l.error[..2], &[0.0, 0.0]);
    assert!(f.summary.kl_mean > 0.0);
}

#[test]
fn bad_inputs_are_one_line_errors_that_say_where() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let d = dir.path();
    let r = dump(d, "ref", 1, None, 0.0);
    let s = NumericsSettings::default();
    let err = |others: &[PathBuf]| {
        let e = compare(&r, others, None, &s)
            .expect_err("refused")
            .to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    };
    // A NaN, with its place.
    let (tokens, mut logits, hidden) = data(1, None, 0.0);
    logits[5 * V + 7] = f32::NAN;
    let nan = d.join("nan");
    save(&nan, &tokens, &logits, V, &hidden, DType::F32, &[]);
    assert!(err(&[nan]).ends_with("logits holds NaN at passage 0, position 5, index 7"));
    // Other tokens.
    let mut other_tokens = tokens.clone();
    other_tokens[3] += 1;
    let tok = d.join("tokens");
    save(&tok, &other_tokens, &logits, V, &hidden, DType::F32, &[]);
    assert!(err(&[tok]).contains("different tokens: passage 0, position 3"));
    // Another vocabulary; fewer layers.
    let (tokens, logits, hidden) = data(1, None, 0.0);
    let small: Vec<f32> = logits.chunks(V).flat_map(|c| c[..V - 1].to_vec()).collect();
    let voc = d.join("vocab");
    save(&voc, &tokens, &small, V - 1, &hidden, DType::F32, &[]);
    assert!(err(&[voc]).contains("vocabularies of 50 and 49 entries"));
    let lay = d.join("layers");
    save(&lay, &tokens, &logits, V, &hidden[..3], DType::F32, &[]);
    assert!(err(&[lay]).contains("4 and 3 hidden layers"));
    // Cut short, and not safetensors at all.
    let bytes = std::fs::read(&r).expect("read");
    let cut = d.join("cut");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).expect("written");
    assert!(err(&[cut]).contains("cut short"));
    let text = d.join("text");
    std::fs::write(&text, b"{\"not\": \"safetensors\"}").expect("written");
    assert!(err(&[text]).contains("not a readable safetensors dump"));
}

#[test]
fn bfloat16_logits_against_float32_are_close_but_not_exact() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let d = dir.path();
    let r = dump(d, "ref", 1, None, 0.0);
    let (tokens, logits, hidden) = data(1, None, 0.0);
    let bf = d.join("bf16");
    save(
        &bf,
        &tokens,
        &logits,
        V,
        &hidden,
        DType::BF16,
        &[("dtype", "bfloat16")],
    );
    let rep = compare(&r, &[bf], None, &NumericsSettings::default()).expect("compared");
    let c = &rep.comparisons[0];
    assert!(
        c.summary.kl_mean > 0.0 && c.summary.kl_mean < 1e-3,
        "{:?}",
        c.summary
    );
    let l = c.layers.as_ref().expect("layers");
    // Without an identity pair every layer that is not exact has diverged: layer 0 here.
    assert_eq!(l.first_diverging, Some(0));
    assert!(l.error.iter().all(|&e| e > 0.0 && e < 1e-2));
}

/// A dump's header edited by `edit` (the JSON) and its length word set by `len` (the real
/// one when `None`), written beside `r`.
fn edited(
    r: &Path,
    name: &str,
    len: Option<u64>,
    edit: impl FnOnce(&mut serde_json::Value),
) -> PathBuf {
    let bytes = std::fs::read(r).expect("read");
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).expect("json");
    edit(&mut header);
    // Padded to the old length, so the data stays where the offsets say.
    let mut text = serde_json::to_vec(&header).expect("json");
    if text.len() < n {
        text.resize(n, b' ');
    }
    let mut out = len.unwrap_or(text.len() as u64).to_le_bytes().to_vec();
    out.extend(&text);
    out.extend(&bytes[8 + n..]);
    let p = r.with_file_name(name);
    std::fs::write(&p, out).expect("written");
    p
}

/// Headers that lie (shapes, offsets, types, a layer missing, the length word) are refused on
/// one line whichever side they are on, never a panic or an allocation of what they claim.
#[test]
fn lying_headers_are_refused_on_one_line() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let r = dump(dir.path(), "ref", 1, None, 0.0);
    let s = NumericsSettings::default();
    let set = |name: &'static str, key: &'static str, v: serde_json::Value| {
        move |h: &mut serde_json::Value| h[name][key] = v
    };
    let huge = 1u64 << 40;
    let cases: Vec<(&str, PathBuf)> = vec![
        (
            "huge shape",
            edited(
                &r,
                "a",
                None,
                set("logits", "shape", serde_json::json!([huge, V])),
            ),
        ),
        (
            "overflowing shape",
            edited(
                &r,
                "b",
                None,
                set("logits", "shape", serde_json::json!([u64::MAX, u64::MAX])),
            ),
        ),
        (
            "offsets past the end",
            edited(
                &r,
                "c",
                None,
                set("logits", "data_offsets", serde_json::json!([0, huge])),
            ),
        ),
        (
            "offsets backwards",
            edited(
                &r,
                "d",
                None,
                set("logits", "data_offsets", serde_json::json!([400, 8])),
            ),
        ),
        (
            "unknown dtype",
            edited(
                &r,
                "e",
                None,
                set("logits", "dtype", serde_json::json!("F64")),
            ),
        ),
        (
            "tokens of another shape",
            edited(
                &r,
                "f",
                None,
                set("tokens", "shape", serde_json::json!([T * 1000])),
            ),
        ),
        (
            "a layer missing",
            edited(&r, "g", None, |h| {
                h.as_object_mut().expect("object").remove("hidden.1");
            }),
        ),
        (
            "a length word past the file",
            edited(&r, "h", Some(1 << 30), |_| {}),
        ),
        (
            "a length word of 2^63",
            edited(&r, "i", Some(1 << 63), |_| {}),
        ),
    ];
    for (what, bad) in cases {
        for (a, b) in [(&r, &bad), (&bad, &r)] {
            let e = compare(a, std::slice::from_ref(b), None, &s)
                .expect_err(what)
                .to_string();
            assert!(!e.contains('\n'), "{what}: {e}");
            assert!(
                e.contains(&*bad.to_string_lossy()),
                "{what}: the error names the file: {e}"
            );
        }
    }
}
