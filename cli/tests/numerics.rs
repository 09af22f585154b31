//! `gapscope numerics` on dumps written here: the text, JSON and Markdown forms, the
//! identity pair's floor, a planted fault found at its layer, and one-line errors.

use std::path::{Path, PathBuf};

use gapscope_numerics::dtype::DType;
use gapscope_numerics::write::{DumpData, write_dump};
use gapscope_tests::{run, s, stderr, stdout};

const T: usize = 16;
const V: usize = 40;
const H: usize = 8;

/// Logits and four layers of hidden state from the tokens, layer `fault` scaled by 1.05.
fn dump(dir: &Path, name: &str, passages: usize, fault: Option<usize>) -> PathBuf {
    dump_scaled(dir, name, passages, fault, 1.05)
}

fn dump_scaled(
    dir: &Path,
    name: &str,
    passages: usize,
    fault: Option<usize>,
    scale: f32,
) -> PathBuf {
    let tokens: Vec<i64> = (0..passages * T)
        .map(|i| ((i * 11 + 5) % V) as i64)
        .collect();
    let mut hidden = vec![vec![0f32; passages * T * H]; 4];
    let mut logits = vec![0f32; passages * T * V];
    for (i, &tok) in tokens.iter().enumerate() {
        let mut h: Vec<f32> = (0..H)
            .map(|j| ((tok as f32) * 0.2 + j as f32).sin())
            .collect();
        for (l, layer) in hidden.iter_mut().enumerate() {
            for (j, x) in h.iter_mut().enumerate() {
                *x = *x * 1.02 + ((l * 3 + j) as f32 * 0.1).cos() * 0.2;
                if fault == Some(l) {
                    *x *= scale;
                }
            }
            layer[i * H..(i + 1) * H].copy_from_slice(&h);
        }
        for v in 0..V {
            logits[i * V + v] = h
                .iter()
                .enumerate()
                .map(|(j, x)| x * ((v * 7 + j * 3) % 11) as f32 * 0.4)
                .sum();
        }
    }
    let p = dir.join(format!("{name}.safetensors"));
    write_dump(
        &p,
        &DumpData {
            meta: &[("engine", name), ("model", "synthetic")],
            passages,
            tokens: &tokens,
            logits: &logits,
            vocab: V,
            hidden: &hidden,
            hidden_size: H,
            dtype: DType::F32,
        },
    )
    .expect("written");
    p
}

#[test]
fn a_fault_is_found_at_its_layer_against_the_identity_floor() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let d = dir.path();
    let r = dump(d, "ref", 3, None);
    let again = dump(d, "again", 3, None);
    let fault = dump(d, "fault", 3, Some(2));
    let o = run(&["numerics", s(&r), s(&fault), "--identity", s(&r), s(&again)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(
        text.contains("noise floor (identity pair):\nagain (float32): ACCEPT"),
        "{text}"
    );
    assert!(text.contains("layers: first diverging 2;"), "{text}");
    assert!(text.contains("95% CI"), "{text}");
    let o = run(&["numerics", s(&r), s(&fault), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(j["schema_version"], 1);
    let c = &j["comparisons"][0];
    assert_eq!(c["layers"]["first_diverging"], 2);
    assert_eq!(c["positions"].as_array().map(Vec::len), Some(3 * T));
    assert!(j["identity"].is_null());
    let o = run(&["numerics", s(&r), s(&again), s(&fault), "--markdown"]);
    let md = stdout(&o);
    assert!(md.contains("| again | float32 | **ACCEPT** |"), "{md}");
    // --reference picks the reference among the dumps.
    let o = run(&["numerics", s(&fault), s(&r), "--reference", s(&r), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(j["comparisons"][0]["other"]["engine"], "fault");
}

#[test]
fn bad_inputs_and_thresholds_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let d = dir.path();
    let r = dump(d, "ref", 1, None);
    let two = dump(d, "two", 2, None);
    let one_line = |args: &[&str], want: &str| {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = stderr(&o);
        assert_eq!(e.trim().lines().count(), 1, "{e}");
        assert!(e.contains(want), "{e}");
    };
    one_line(
        &["numerics", s(&r), s(&two)],
        "1 passages of 16 tokens against 2 of 16",
    );
    one_line(
        &[
            "numerics",
            s(&r),
            s(&r),
            "--max-dppl",
            "3",
            "--marginal-dppl",
            "2",
        ],
        "thresholds",
    );
    one_line(&["numerics", s(&r), s(&r)], "nothing to compare");
    let missing = d.join("missing.safetensors");
    one_line(&["numerics", s(&r), s(&missing)], "missing.safetensors");
}

#[test]
fn the_numerics_gate_passes_the_same_numbers_and_fails_a_fault_naming_its_layer() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let d = dir.path();
    let base = dump(d, "base", 2, None);
    let same = dump(d, "same", 2, None);
    let broken = dump_scaled(d, "broken", 2, Some(1), 3.0);
    let o = run(&["gate", "--numerics", s(&base), s(&same)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("numerics gate: PASS: same against base: ACCEPT"));
    let o = run(&["gate", "--numerics", s(&base), s(&broken)]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("numerics gate: FAIL: broken against base: REJECT"),
        "{out}"
    );
    assert!(out.contains("first diverging layer 1"), "{out}");
    let o = run(&["gate", "--numerics", s(&base), s(&broken), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    assert_eq!(j["gate"]["passed"], false);
    let o = run(&[
        "gate",
        "--numerics",
        s(&base),
        s(&same),
        "--numerics-verdict",
        "reject",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("accept or marginal"));
    let o = run(&[
        "gate",
        "--numerics",
        s(&base),
        s(&same),
        "--current",
        s(&same),
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn the_html_page_draws_the_layers_and_positions_and_never_overwrites_a_dump() {
    let dir = tempfile::tempdir().expect("a temporary folder");
    let d = dir.path();
    let r = dump(d, "ref", 2, None);
    let again = dump(d, "again", 2, None);
    let fault = dump(d, "fault", 2, Some(2));
    let page = d.join("numerics.html");
    let o = run(&[
        "numerics",
        s(&r),
        s(&fault),
        "--identity",
        s(&r),
        s(&again),
        "--html",
        s(&page),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let html = std::fs::read_to_string(&page).expect("written");
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert!(html.contains("Residual stream, layer by layer"));
    assert!(html.contains("fault: first diverging layer 2"), "{html}");
    // The floor (dashed), the fault's layers, the fault's positions.
    assert_eq!(html.matches("<polyline").count(), 3);
    assert!(html.contains("stroke-dasharray"));
    assert!(!html.contains("<script"));
    let o = run(&["numerics", s(&r), s(&fault), "--html", s(&fault)]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("input"), "{}", stderr(&o));
}
