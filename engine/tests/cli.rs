//! The `gapscope-engine` binary on a machine without a GPU: CPU generation from a real
//! safetensors model directory with a tokenizer, teacher-forced logits, and the one-line errors.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use safetensors::Dtype;
use safetensors::tensor::TensorView;
use std::path::Path;
use std::process::Command;

fn engine() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gapscope-engine"))
}

/// A tiny Llama directory: config.json, model.safetensors (seeded values) and tokenizer.json.
fn tiny_model(dir: &Path) {
    let (h, inter, vocab, hd, nq, nkv) = (128usize, 128usize, 6usize, 64usize, 2usize, 1usize);
    let cfg = serde_json::json!({"model_type": "llama", "hidden_size": h, "intermediate_size": inter,
        "num_hidden_layers": 2, "num_attention_heads": nq, "num_key_value_heads": nkv, "head_dim": hd,
        "vocab_size": vocab, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": false});
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let mut tensors: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    let mut n = 0u64;
    let mut add = |name: String, shape: Vec<usize>, norm: bool| {
        let len: usize = shape.iter().product();
        n += 1;
        let bytes = (0..len)
            .flat_map(|i| {
                let u = gapscope_engine::rng::uniform(11, n, i as u64);
                (if norm { 1.0 + 0.1 * u } else { 0.2 * u }).to_le_bytes()
            })
            .collect();
        tensors.push((name, shape, bytes));
    };
    add("model.embed_tokens.weight".into(), vec![vocab, h], false);
    add("model.norm.weight".into(), vec![h], true);
    add("lm_head.weight".into(), vec![vocab, h], false);
    for l in 0..2 {
        let p = format!("model.layers.{l}");
        add(format!("{p}.input_layernorm.weight"), vec![h], true);
        add(
            format!("{p}.post_attention_layernorm.weight"),
            vec![h],
            true,
        );
        add(
            format!("{p}.self_attn.q_proj.weight"),
            vec![nq * hd, h],
            false,
        );
        add(
            format!("{p}.self_attn.k_proj.weight"),
            vec![nkv * hd, h],
            false,
        );
        add(
            format!("{p}.self_attn.v_proj.weight"),
            vec![nkv * hd, h],
            false,
        );
        add(
            format!("{p}.self_attn.o_proj.weight"),
            vec![h, nq * hd],
            false,
        );
        add(format!("{p}.mlp.gate_proj.weight"), vec![inter, h], false);
        add(format!("{p}.mlp.up_proj.weight"), vec![inter, h], false);
        add(format!("{p}.mlp.down_proj.weight"), vec![h, inter], false);
    }
    let views: Vec<(String, TensorView)> = tensors
        .iter()
        .map(|(n, s, b)| {
            (
                n.clone(),
                TensorView::new(Dtype::F32, s.clone(), b).unwrap(),
            )
        })
        .collect();
    safetensors::serialize_to_file(views, None, &dir.join("model.safetensors")).unwrap();
    let tok = serde_json::json!({"version": "1.0", "truncation": null, "padding": null,
        "added_tokens": [], "normalizer": null, "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": null, "decoder": null,
        "model": {"type": "WordLevel", "vocab": {"[UNK]": 0, "the": 1, "gpu": 2, "is": 3, "busy": 4, "idle": 5},
                  "unk_token": "[UNK]"}});
    std::fs::write(dir.join("tokenizer.json"), tok.to_string()).unwrap();
}

#[test]
fn cpu_generation_from_text_is_deterministic() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    let run = || {
        let out = engine()
            .args([
                "generate",
                "--backend",
                "cpu",
                "--max-new",
                "6",
                "--prompt",
                "the gpu is",
            ])
            .arg("--model")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let a = run();
    assert!(a.contains("prompt ids    [1, 2, 3]"), "{a}");
    assert!(a.contains("md5 ") && a.contains("text "), "{a}");
    assert_eq!(a, run());
}

/// `logits --backend cpu` on the tiny model in `dir` over 6 tokens (prompt 3), with `extra`
/// arguments; the output and the file's f32 values (empty when none were written).
fn cpu_logits(dir: &Path, name: &str, extra: &[&str]) -> (std::process::Output, Vec<f32>) {
    let toks = dir.join("tokens.json");
    std::fs::write(&toks, r#"{"prompt_len": 3, "tokens": [1, 2, 3, 4, 5, 1]}"#).unwrap();
    let out_file = dir.join(name);
    let out = engine()
        .args(["logits", "--backend", "cpu"])
        .args(extra)
        .arg("--model")
        .arg(dir)
        .arg("--tokens")
        .arg(&toks)
        .arg("--out")
        .arg(&out_file)
        .output()
        .unwrap();
    let vals = std::fs::read(&out_file)
        .unwrap_or_default()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    (out, vals)
}

#[test]
fn cpu_logits_have_one_row_per_position() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    let (out, vals) = cpu_logits(dir.path(), "logits.f32", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 3 teacher-forced rows (prefill, then 2 decode steps) of 6 logits.
    assert_eq!(vals.len(), 3 * 6);
}

/// `--out X.safetensors` writes a dump `gapscope numerics` reads: a row per token from the
/// prompt's last on (4 here), with those tokens, equal to the raw rows where both have one.
#[test]
fn cpu_logits_as_a_numerics_dump() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    let (out, _) = cpu_logits(dir.path(), "logits.safetensors", &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, raw) = cpu_logits(dir.path(), "logits.f32", &[]);
    let d = gapscope_numerics::Dump::open(&dir.path().join("logits.safetensors")).unwrap();
    assert_eq!(d.tokens, vec![3, 4, 5, 1]);
    assert_eq!((d.logits.rows, d.logits.cols), (4, 6));
    assert!(d.meta["engine"].starts_with("gapscope-engine cpu"));
    let mut rows = vec![0.0; 4 * 6];
    d.read_rows(&d.logits, 0, &mut Vec::new(), &mut rows)
        .unwrap();
    let raw: Vec<f64> = raw.iter().map(|&v| f64::from(v)).collect();
    assert_eq!(&rows[..3 * 6], &raw[..]);
    // Without --hidden, no hidden states.
    assert!(d.hidden.is_empty(), "{:?}", d.hidden);
}

/// bf16 rounding (to nearest even), as the engine rounds GEMM inputs and bf16 weights.
fn bf16(x: f32) -> f32 {
    half::bf16::from_f32(x).to_f32()
}

/// A tensor of the tiny model's safetensors file as f32 values.
fn tensor(dir: &Path, name: &str) -> Vec<f32> {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    st.tensor(name)
        .unwrap()
        .data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// `logits --hidden`: one `hidden.N` `[rows, hidden]` per layer, finite, each layer's rows
/// different; and the last layer's state through the final norm and the LM head gives the
/// dumped logits row for row (a row shifted by one position does not).
#[test]
fn cpu_logits_dump_with_hidden_states() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    let (out, _) = cpu_logits(dir.path(), "hidden.safetensors", &["--hidden"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("and 2 layers' hidden states"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let d = gapscope_numerics::Dump::open(&dir.path().join("hidden.safetensors")).unwrap();
    let (rows, h, v) = (4, 128, 6);
    assert_eq!(d.tokens, vec![3, 4, 5, 1]);
    assert_eq!(d.hidden.len(), 2);
    let mut buf = Vec::new();
    let mut layers = Vec::new();
    for (l, t) in d.hidden.iter().enumerate() {
        assert_eq!(t.name, format!("hidden.{l}"));
        assert_eq!((t.rows, t.cols), (rows, h));
        let mut x = vec![0.0; rows * h];
        d.read_rows(t, 0, &mut buf, &mut x).unwrap();
        assert!(x.iter().all(|v| v.is_finite()), "hidden.{l}");
        layers.push(x);
    }
    assert_ne!(layers[0], layers[1]);
    let mut logits = vec![0.0; rows * v];
    d.read_rows(&d.logits, 0, &mut buf, &mut logits).unwrap();

    // The final RMSNorm (eps 1e-5, output rounded to bf16) and the bf16 LM head, as the
    // engine's numerics compute them, over the last layer's rows.
    let norm = tensor(dir.path(), "model.norm.weight");
    let head: Vec<f32> = tensor(dir.path(), "lm_head.weight")
        .into_iter()
        .map(bf16)
        .collect();
    let last = &layers[1];
    let predicted: Vec<Vec<f64>> = last
        .chunks_exact(h)
        .map(|x| {
            let x: Vec<f32> = x.iter().map(|&v| v as f32).collect();
            let ss: f32 = x.iter().map(|v| v * v).sum();
            let scale = 1.0 / (ss / h as f32 + 1e-5).sqrt();
            let xn: Vec<f32> = x
                .iter()
                .zip(&norm)
                .map(|(&a, &w)| bf16(a * scale * w))
                .collect();
            head.chunks_exact(h)
                .map(|w| w.iter().zip(&xn).map(|(&a, &b)| f64::from(a * b)).sum())
                .collect()
        })
        .collect();
    let gap = |r: usize, p: &[f64]| {
        logits[r * v..(r + 1) * v]
            .iter()
            .zip(p)
            .fold(0f64, |m, (a, b)| m.max((a - b).abs()))
    };
    let scale = logits.iter().fold(0f64, |m, x| m.max(x.abs()));
    let tol = 1e-4 * scale.max(1.0);
    for (r, p) in predicted.iter().enumerate() {
        assert!(gap(r, p) <= tol, "row {r}: {} > {tol}", gap(r, p));
        // Misaligned by one position, the rows do not reproduce the logits.
        if r + 1 < rows {
            assert!(gap(r + 1, p) > 100.0 * tol, "row {r} against {}", r + 1);
        }
    }
}

/// `--hidden` needs a dump: a raw `.f32` output is refused, and nothing is written.
#[test]
fn cpu_logits_hidden_needs_a_safetensors_output() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    let (out, vals) = cpu_logits(dir.path(), "logits.f32", &["--hidden"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--hidden") && err.contains(".safetensors"),
        "{err}"
    );
    assert!(vals.is_empty());
}

/// `--numerics hf-bf16` on the CPU: every logit is a bf16 value (HF rounds its output), the
/// rows differ from the engine numerics' only by rounding, and quantized weights are refused.
#[test]
fn cpu_logits_with_hf_numerics_are_bf16_values() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    let run = |numerics: &str, weights: &str| {
        cpu_logits(
            dir.path(),
            &format!("logits-{numerics}-{weights}.f32"),
            &["--numerics", numerics, "--weights", weights],
        )
    };
    let (out, hf) = run("hf-bf16", "bf16");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("hf-bf16 numerics"));
    let (_, engine_vals) = run("engine", "bf16");
    assert_eq!(hf.len(), 3 * 6);
    assert_eq!(engine_vals.len(), hf.len());
    assert!(hf.iter().all(|&v| half::bf16::from_f32(v).to_f32() == v));
    assert_ne!(hf, engine_vals);
    let scale = engine_vals.iter().fold(0f32, |a, v| a.max(v.abs()));
    for (a, b) in hf.iter().zip(&engine_vals) {
        assert!((a - b).abs() <= 0.05 * scale, "{a} vs {b}");
    }
    let (out, _) = run("hf-bf16", "q8_0");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--weights bf16"), "{err}");
}

#[test]
fn errors_are_one_line_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let cases: Vec<Vec<String>> = vec![
        // a prompt with no tokenizer to read it
        vec![
            "generate".into(),
            "--backend".into(),
            "cpu".into(),
            "--prompt".into(),
            "hi".into(),
            "--model".into(),
            dir.path().display().to_string(),
        ],
        // a config that does not exist
        vec![
            "generate".into(),
            "--backend".into(),
            "cpu".into(),
            "--config".into(),
            "/nonexistent/config.json".into(),
        ],
        // an unknown weight format
        vec![
            "generate".into(),
            "--backend".into(),
            "cpu".into(),
            "--weights".into(),
            "fp3".into(),
            "--model".into(),
            dir.path().display().to_string(),
        ],
    ];
    let cases = cases.into_iter().chain([
        // run shapes that cannot run are refused before any weights load or a GPU opens
        vec![
            "bench".into(),
            "--config".into(),
            "/nonexistent/config.json".into(),
            "--npp".into(),
            "0".into(),
        ],
        vec![
            "bench".into(),
            "--config".into(),
            "/nonexistent/config.json".into(),
            "--npl".into(),
            "0,4".into(),
        ],
        vec![
            "levers".into(),
            "--config".into(),
            "/nonexistent/config.json".into(),
            "--ntg".into(),
            "0".into(),
        ],
    ]);
    for args in cases {
        let out = engine().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(
            err.trim_end()
                .lines()
                .filter(|l| l.starts_with("gapscope-engine:"))
                .count(),
            1,
            "{err}"
        );
    }
}

/// Without a GPU (CI), a CUDA command fails with one clear line rather than a panic.
#[test]
fn cuda_commands_without_a_driver_say_so() {
    if std::path::Path::new("/dev/nvidia0").exists() {
        return; // a GPU machine: the GPU tests cover this path
    }
    let out = engine().args(["kbench", "--reps", "1"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("CUDA") || err.contains("libcuda"), "{err}");
}

/// Usage errors name what would have been accepted, before any GPU is opened.
#[test]
fn usage_errors_list_the_valid_values() {
    for (args, want) in [
        (vec!["selftest", "--only", "nope"], "qk_norm_rope"),
        (
            vec!["bench", "--config", "x.json", "--dispatch", "nope=1"],
            "mmvq_b1_pair_min_rows_per_k",
        ),
        (
            vec![
                "bench",
                "--config",
                "x.json",
                "--dispatch",
                "attention_shape=4",
            ],
            "KW:SPLITS",
        ),
        (
            vec!["bench", "--config", "x.json", "--out-proj", "4d"],
            "2d",
        ),
        (
            vec!["bench", "--config", "x.json", "--state-read", "scatter"],
            "fused_ids",
        ),
    ] {
        let out = engine().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

/// The hybrid sweep is refused before any GPU opens: on a model without DeltaNet layers, and
/// without a directory for its traces.
#[test]
fn hybrid_sweep_refusals_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    let model = dir.path().display().to_string();
    let out = engine()
        .args(["bench", "--model", &model, "--hybrid-sweep", "-o"])
        .arg(dir.path().join("sweep"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("hybrid model"), "{err}");
    let hybrid = dir.path().join("hybrid.json");
    std::fs::write(
        &hybrid,
        r#"{"model_type":"qwen3_5_text","hidden_size":64,"intermediate_size":96,
            "num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":64,
            "vocab_size":97,"full_attention_interval":2,"linear_num_key_heads":2,
            "linear_num_value_heads":2,"linear_key_head_dim":32,"linear_value_head_dim":32}"#,
    )
    .unwrap();
    let out = engine()
        .args(["bench", "--config"])
        .arg(&hybrid)
        .arg("--hybrid-sweep")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("-o DIR"), "{err}");
}

/// `spec` refuses, before any GPU opens and in one line: a hybrid model, a setting whose
/// acceptance list does not match k, an unknown setting key, and a draft as deep as the model.
#[test]
fn spec_refusals_name_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    tiny_model(dir.path());
    let model = dir.path().display().to_string();
    let hybrid = dir.path().join("hybrid.json");
    std::fs::write(
        &hybrid,
        r#"{"model_type":"qwen3_5_text","hidden_size":64,"intermediate_size":96,
            "num_hidden_layers":2,"num_attention_heads":2,"num_key_value_heads":1,"head_dim":64,
            "vocab_size":97,"full_attention_interval":2,"linear_num_key_heads":2,
            "linear_num_value_heads":2,"linear_key_head_dim":32,"linear_value_head_dim":32}"#,
    )
    .unwrap();
    let hybrid = hybrid.display().to_string();
    for (args, want) in [
        (
            vec!["spec", "--config", &hybrid, "--draft-layers", "1"],
            "cannot be rolled back",
        ),
        (
            vec!["spec", "--model", &model, "--setting", "k=3,accept=0.9,0.5"],
            "k=3 needs 3 acceptance probabilities",
        ),
        (
            vec!["spec", "--model", &model, "--setting", "k=2,acept=argmax"],
            "unknown key \"acept\"",
        ),
        (
            vec!["spec", "--model", &model, "--draft-layers", "2"],
            "draft layers 2 of a 2-layer model",
        ),
        (
            vec![
                "spec",
                "--model",
                &model,
                "--setting",
                "k=2",
                "--setting",
                "k=1",
                "--trace",
            ],
            "",
        ),
    ] {
        let mut c = engine();
        c.args(&args);
        if want.is_empty() {
            c.arg(dir.path().join("t.gst"));
        }
        let out = c.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        let last = err.trim().lines().last().unwrap_or_default();
        assert!(
            last.starts_with("gapscope-engine: error: "),
            "{args:?}: {err}"
        );
        let want = if want.is_empty() {
            "--trace takes one setting"
        } else {
            want
        };
        assert!(last.contains(want), "{args:?}: {err}");
    }
}
