#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
//! End-to-end tests of the `gapscope` binary over bundled real traces and corrupt inputs: what
//! each command prints, its exit codes and refusals, and its flags.

use gapscope_tests::traces::{kernels_kept, save, short_markers, stretched};
use gapscope_tests::{
    corpus, gapscope, gate_history_args, json, one_line_error, output_of_fresh_executable, repo,
    run, s, stderr, stdout, success,
};
use gapscope_traces::{ReadOptions, Trace, read_trace};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const HF: &str = "traces/reference/hf-llama3.2-1b-npl8.json.gz";

fn bucket_of(name: &str) -> String {
    let v = json(&["buckets", "--explain", name, "--json"]);
    v["bucket"].as_str().unwrap().to_owned()
}

#[test]
fn hf_trace_known_answers() {
    let path = repo(HF);
    let p = path.to_str().unwrap();
    let v = json(&["report", "--json", p]);
    assert_eq!(v["schema_version"], 1);
    let r = &v["reports"][0];
    assert_eq!(r["source"]["kernels"], 21_728);
    assert_eq!(r["steps"]["decode_steps"], 32);
    assert_eq!(r["steps"]["source_kind"]["ranges"], "gpu_user_annotation");
    let busy = r["devices"][0]["busy_pct"].as_f64().unwrap();
    assert!((busy - 3.75).abs() <= 0.05, "busy {busy}");
    let other = r["other"]["share_of_kernel_time_pct"].as_f64().unwrap();
    assert!(other < 5.0, "other {other}");
    // Shares of busy close to 100%.
    let total: f64 = r["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["share_of_busy_pct"].as_f64().unwrap())
        .sum();
    assert!((total - 100.0).abs() < 1e-6);

    let v = json(&["report", "--json", "--no-markers", p]);
    let r = &v["reports"][0];
    assert_eq!(r["steps"]["decode_steps"], 32);
    assert_eq!(r["steps"]["source_kind"]["kind"], "periodic");

    assert_eq!(
        bucket_of(
            "void at::native::(anonymous namespace)::indexSelectSmallIndex<c10::BFloat16, long, unsigned int, 2, 2, -2>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>)"
        ),
        "embed_gather"
    );
    assert_eq!(
        bucket_of("nvjet_sm90_tst_64x8_64x16_4x1_v_bz_TNT"),
        "gemm_dense"
    );
    assert_eq!(
        bucket_of(
            "cudnn_generated_fort_native_sdpa_sm80_flash_fprop_wmma_f16_knob_35_16x128x64_1x4x1_cga1x1x1_kernel0_0"
        ),
        "attention"
    );
    assert_eq!(
        bucket_of(
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous namespace)::OpaqueType<2u>, unsigned int, 4, 64, 64>(int)"
        ),
        "copy"
    );
}

#[test]
fn own_reference_traces_find_their_steps_both_ways() {
    for (t, steps) in [
        ("traces/reference/hf-qwen3-0.6b-npl1.json.gz", 16),
        ("traces/reference/hf-llama3-8b-npl1.json.gz", 32),
    ] {
        let p = repo(t);
        let p = p.to_str().unwrap();
        for extra in [None, Some("--no-markers")] {
            let mut args = vec!["report", "--json", p];
            args.extend(extra);
            let v = json(&args);
            assert_eq!(
                v["reports"][0]["steps"]["decode_steps"], steps,
                "{t} {extra:?}"
            );
        }
    }
}

#[test]
fn output_formats() {
    let p = repo(HF);
    let p = p.to_str().unwrap();
    let o = run(&["report", p]);
    assert!(o.status.success());
    let s = String::from_utf8(o.stdout).unwrap();
    assert!(
        s.contains("buckets per decode step") && s.contains("gemm_dense") && s.contains("other")
    );
    let o = run(&["report", "--csv", p]);
    let s = String::from_utf8(o.stdout).unwrap();
    assert!(s.starts_with("trace,phase,bucket,ms_per_step_median"));
    assert!(s.lines().any(|l| l.contains(",decode,attention,")));
    let o = run(&["report", "--markdown", p]);
    let s = String::from_utf8(o.stdout).unwrap();
    assert!(s.contains("| bucket | ms/step |") && s.contains("## gapscope report"));
    let o = run(&["report", "--json", "--csv", p]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn import_export_roundtrip() {
    let dir = tempfile::tempdir().unwrap();
    let p = repo(HF);
    let p = p.to_str().unwrap();
    let gst = dir.path().join("hf.gst");
    let o = run(&["import", p, "-o", gst.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let a = json(&["report", "--json", p]);
    let b = json(&["report", "--json", gst.to_str().unwrap()]);
    assert_eq!(a["reports"][0]["buckets"], b["reports"][0]["buckets"]);
    assert_eq!(a["reports"][0]["devices"], b["reports"][0]["devices"]);

    let chrome = dir.path().join("out.json");
    let pq = dir.path().join("out.parquet");
    let o = run(&[
        "export",
        gst.to_str().unwrap(),
        "--chrome",
        chrome.to_str().unwrap(),
        "--parquet",
        pq.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&chrome).unwrap()).unwrap();
    let ev = v["traceEvents"].as_array().unwrap();
    let kernels = ev.iter().filter(|e| e["cat"] == "kernel").count();
    assert_eq!(kernels, 21_728);
    // The exported Chrome JSON imports back with the same busy figure.
    let c = json(&["report", "--json", chrome.to_str().unwrap()]);
    assert_eq!(c["reports"][0]["source"]["kernels"], 21_728);
    let busy_a = a["reports"][0]["devices"][0]["busy_pct"].as_f64().unwrap();
    let busy_c = c["reports"][0]["devices"][0]["busy_pct"].as_f64().unwrap();
    assert!((busy_a - busy_c).abs() < 0.01);

    use parquet::file::reader::FileReader;
    let f = std::fs::File::open(&pq).unwrap();
    let r = parquet::file::reader::SerializedFileReader::new(f).unwrap();
    assert_eq!(r.metadata().file_metadata().num_rows(), 21_728 + 32);
}

#[test]
fn bad_inputs_exit_2_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let full = std::fs::read(repo(HF)).unwrap();
    std::fs::write(d.join("truncated.json.gz"), &full[..full.len() / 3]).unwrap();
    std::fs::write(
        d.join("truncated.json"),
        br#"{"traceEvents":[{"ph":"X","cat":"kernel","name":"a","ts":1,"dur":1},{"ph":"X","ca"#,
    )
    .unwrap();
    // Events gapscope reads are fully parsed; skipped ones (cpu_op, flows) only structurally.
    std::fs::write(
        d.join("invalid.json"),
        br#"{"traceEvents":[{"ph":"X","cat":"kernel",,}]}"#,
    )
    .unwrap();
    let mut rnd = Vec::new();
    let mut x: u64 = 0x9e3779b97f4a7c15;
    for _ in 0..4096 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        rnd.push(x as u8);
    }
    std::fs::write(d.join("random.bin"), &rnd).unwrap();
    // gzip magic followed by garbage
    let mut badgz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
    badgz.extend_from_slice(&rnd);
    std::fs::write(d.join("corrupt.json.gz"), &badgz).unwrap();
    std::fs::write(d.join("empty.json"), b"").unwrap();
    std::fs::write(d.join("object.json"), b"{\"a\": 1}").unwrap();
    std::fs::create_dir(d.join("adir")).unwrap();
    let cases = [
        ("truncated.json.gz", "truncated"),
        ("truncated.json", "truncated"),
        ("invalid.json", "invalid"),
        ("random.bin", "unrecognised format"),
        ("corrupt.json.gz", "gzip"),
        ("empty.json", "empty"),
        ("object.json", "no traceEvents"),
        ("adir", "directory"),
        ("missing.json", "No such file"),
    ];
    let mut paths: Vec<(PathBuf, &str)> = cases.iter().map(|(f, w)| (d.join(f), *w)).collect();
    paths.push((repo("analyzer/tests/data/nsys/not-nsys.sqlite"), "nsys"));
    for (p, want) in paths {
        let o = run(&["report", p.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", p.display());
        assert_eq!(err.trim_end().lines().count(), 1, "{}: {err}", p.display());
        assert!(
            !err.contains("panicked") && !err.contains("backtrace"),
            "{err}"
        );
        let name = p.file_name().unwrap().to_str().unwrap();
        assert!(err.contains(name), "message names the file: {err}");
        assert!(
            err.to_lowercase().contains(&want.to_lowercase()),
            "{}: {err}",
            p.display()
        );
    }
    // With --allow-truncated the readable part loads and the report says so.
    let o = run(&[
        "report",
        "--allow-truncated",
        d.join("truncated.json").to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("TRUNCATED"));
}

#[test]
fn user_rules_and_explain() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[rule]]\nname = \"HF SDPA as other\"\nregex = 'sdpa'\nbucket = \"other\"\n",
    )
    .unwrap();
    let o = run(&[
        "buckets",
        "--explain",
        "cudnn_generated_fort_native_sdpa_x",
        "--rules",
        rules.to_str().unwrap(),
    ]);
    let s = String::from_utf8(o.stdout).unwrap();
    assert!(
        s.contains("bucket:  other") && s.contains("HF SDPA as other"),
        "{s}"
    );
    assert!(s.contains("also:"), "shadowed built-in shown: {s}");
    let p = repo(HF);
    let v = json(&[
        "report",
        "--json",
        "--rules",
        rules.to_str().unwrap(),
        p.to_str().unwrap(),
    ]);
    let r = &v["reports"][0];
    assert!(r["other"]["share_of_kernel_time_pct"].as_f64().unwrap() > 1.0);
    assert!(
        r["other"]["top"][0]["name"]
            .as_str()
            .unwrap()
            .contains("sdpa")
    );
    let o = run(&["buckets", "--explain", "mystery_kernel"]);
    assert!(String::from_utf8(o.stdout).unwrap().contains("none of the"));
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[rule]]\nname='x'\nregex='('\nbucket='gemv'\n").unwrap();
    let o = run(&["buckets", "--rules", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bad.toml"));
}

#[test]
fn diff_of_two_real_traces_closes_to_100_percent() {
    let a = repo("traces/reference/hf-llama3-8b-npl1.json.gz");
    let b = repo(HF);
    let v = json(&["diff", "--json", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert_eq!(v["schema_version"], 2);
    let total: f64 = v["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["share_of_gap_pct"].as_f64().unwrap())
        .sum::<f64>()
        + v["residual_share_pct"].as_f64().unwrap();
    assert!((total - 100.0).abs() <= 0.5, "{total}");
    assert!(v["gap_ms"].as_f64().unwrap() > 0.0);
    let o = run(&[
        "diff",
        "--markdown",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
    ]);
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(
        md.contains("## gapscope diff") && md.contains("| gemm_dense |"),
        "{md}"
    );
}

const ENGINE_8B: &str = "traces/reference/engine-llama3-8b-npl1.gst";
const HF_8B: &str = "traces/reference/hf-llama3-8b-npl1.json.gz";

#[test]
fn diff_engine_vs_hf_eager_attributes_the_whole_gap() {
    // Two engines on the same shapes (Llama-3-8B, batch 1, H200): gapscope-engine's native
    // trace against HF transformers eager (Kineto). The engine trace may be re-captured, so
    // this checks properties, not timings.
    let a = repo(ENGINE_8B);
    let b = repo(HF_8B);
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let v = json(&["diff", "--json", a, b]);
    assert_eq!(v["schema_version"], 2);
    assert_eq!(v["a"]["decode_steps"], 32);
    assert_eq!(v["b"]["decode_steps"], 32);
    let (sa, sb) = (
        v["a"]["step_ms"].as_f64().unwrap(),
        v["b"]["step_ms"].as_f64().unwrap(),
    );
    assert!(sa > 0.0 && sb > 0.0);
    let gap = v["gap_ms"].as_f64().unwrap();
    assert!((gap - (sa - sb)).abs() < 1e-9);
    let buckets = v["buckets"].as_array().unwrap();
    let shares: f64 = buckets
        .iter()
        .map(|x| x["share_of_gap_pct"].as_f64().unwrap())
        .sum();
    let residual = v["residual_share_pct"].as_f64().unwrap();
    assert!(
        (shares + residual - 100.0).abs() <= 0.5,
        "{shares} + {residual}"
    );
    // The residual is the idle part: the gap less every bucket's delta.
    let deltas: f64 = buckets
        .iter()
        .map(|x| x["delta_ms"].as_f64().unwrap())
        .sum();
    assert!((v["residual_ms"].as_f64().unwrap() - (gap - deltas)).abs() < 1e-9);
    let a_ms = |name: &str| {
        buckets
            .iter()
            .find(|x| x["bucket"] == name)
            .and_then(|x| x["a_ms_per_step"].as_f64())
            .unwrap_or(0.0)
    };
    for bucket in ["gemv", "attention", "norm", "rope"] {
        assert!(a_ms(bucket) > 0.0, "engine side has no {bucket}: {v:#}");
    }
    assert_eq!(
        v["structural"]["graph_replays_kind"], "gained_in_a",
        "the engine replays CUDA graphs, HF eager does not"
    );

    let o = run(&["diff", "--markdown", "--hw", "h200", a, b]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let md = String::from_utf8(o.stdout).unwrap();
    assert!(md.starts_with("## gapscope diff\n"), "{md}");
    assert!(
        md.contains("| bucket | A ms/step | B ms/step | delta ms | % of gap | A calls | B calls |"),
        "{md}"
    );
    for x in buckets {
        let row = format!("| {} |", x["bucket"].as_str().unwrap());
        assert!(md.contains(&row), "no row {row}: {md}");
    }
    assert!(md.contains("| residual (idle) |"), "{md}");
    assert!(
        md.contains("- **CUDA graph replays**: gained in A (A replays CUDA graphs, B does not)"),
        "{md}"
    );
    let total: f64 = md
        .split("Shares sum to ")
        .nth(1)
        .and_then(|t| t.split('%').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no share total in {md}"));
    assert!((total - 100.0).abs() <= 0.5, "{total}");
    // With --hw, the engine's declared bytes give its linear layers (gemv here, gemm_dense
    // in HF, so one lever) a floor in the what-if table.
    let gemv_what_if = md
        .lines()
        .find(|l| l.starts_with("| linear layers |") && l.matches('|').count() == 6)
        .unwrap_or_else(|| panic!("no linear-layers what-if row: {md}"));
    assert!(
        !gemv_what_if.trim_end().ends_with("| - |"),
        "{gemv_what_if}"
    );
    // Kernel names are code spans, so C++ templates are not read as HTML.
    assert!(md.contains("`nvjet_sm90"), "{md}");
}

#[test]
fn gate_exit_codes_markdown_and_junit() {
    let dir = tempfile::tempdir().unwrap();
    let base = repo(HF);
    let b = base.to_str().unwrap();
    let o = run(&["gate", "--baseline", b, "--current", b, "--markdown"]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stdout).contains("## gapscope gate: **pass**"));
    let slow = repo("traces/reference/hf-llama3-8b-npl1.json.gz");
    let junit = dir.path().join("gate.xml");
    let o = run(&[
        "gate",
        "--baseline",
        b,
        "--current",
        slow.to_str().unwrap(),
        "--junit",
        junit.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("<testsuite name=\"gapscope gate\"") && xml.contains("<failure"),
        "{xml}"
    );
    let policy = dir.path().join("gate.toml");
    std::fs::write(&policy, "min_effect = \"lots\"\n").unwrap();
    let o = run(&[
        "gate",
        "--baseline",
        b,
        "--current",
        b,
        "--policy",
        policy.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("gate.toml"));
}

#[test]
fn history_then_gate_against_accepted_runs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.sqlite");
    let db = db.to_str().unwrap();
    let base = repo(HF);
    let b = base.to_str().unwrap();
    for label in ["a", "b"] {
        let o = run(&[
            "history",
            "--db",
            db,
            "add",
            b,
            "--label",
            label,
            "--accepted",
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let v = json(&["history", "--db", db, "--json", "list"]);
    assert_eq!(v["runs"].as_array().unwrap().len(), 2);
    let v = json(&[
        "history",
        "--db",
        db,
        "--json",
        "trend",
        "--bucket",
        "gemm_dense",
    ]);
    assert_eq!(v["points"].as_array().unwrap().len(), 2);
    let o = run(&gate_history_args(db, b));
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
    let slow = repo("traces/reference/hf-llama3-8b-npl1.json.gz");
    let o = run(&gate_history_args(db, s(&slow)));
    assert_eq!(o.status.code(), Some(1));
    let refused = |db: &str, why: &str| {
        let o = run(&gate_history_args(db, b));
        assert_eq!(o.status.code(), Some(2));
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(why), "{e}");
    };
    let empty = dir.path().join("empty.sqlite");
    let empty = s(&empty);
    refused(empty, "no history database at");
    // A database with runs but none accepted.
    let o = run(&["history", "add", "--db", empty, b]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    refused(empty, "no accepted runs");
}

/// `gapscope join`: the engine's reference trace joined onto a "recording" of the same run
/// made from it the way another tool would see it: no engine metadata or markers, its own
/// clock (shifted), and one foreign kernel on the stream. The joined recording must report the
/// engine's buckets and steps.
#[test]
fn join_puts_engine_metadata_onto_a_recording() {
    use gapscope_traces::{KernelRow, NO_STR, ReadOptions, read_trace, write_trace};
    let engine =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../traces/reference/engine-llama3-8b-npl1.gst");
    let mut rec = read_trace(&engine, &ReadOptions::default()).unwrap();
    rec.manifest.source_format = "cupti".into();
    let k = &mut rec.kernels;
    for i in 0..k.len() {
        k.op[i] = NO_STR;
        k.bucket[i] = NO_STR;
        k.layer[i] = -1;
        k.bytes[i] = -1;
        k.flops[i] = -1;
        k.gpu_start_ns[i] += 1_000_000_000;
        k.gpu_end_ns[i] += 1_000_000_000;
    }
    let foreign = rec.strings.intern("some_other_kernel");
    let at = rec.kernels.gpu_start_ns[2000] - 1; // inside a decode step (no cuBLAS there)
    rec.kernels.push(KernelRow {
        name: foreign,
        stream: rec.kernels.stream[0],
        gpu_start_ns: at,
        gpu_end_ns: at,
        ..KernelRow::default()
    });
    rec.markers.clear();
    for i in 0..rec.memops.len() {
        rec.memops.gpu_start_ns[i] += 1_000_000_000;
        rec.memops.gpu_end_ns[i] += 1_000_000_000;
    }
    let dir = tempfile::tempdir().unwrap();
    let rec_path = dir.path().join("recorded.gst");
    write_trace(&rec_path, &rec).unwrap();
    let out_path = dir.path().join("joined.gst");
    let out = success(
        gapscope()
            .arg("join")
            .arg(&engine)
            .arg(&rec_path)
            .arg("-o")
            .arg(&out_path)
            .arg("--json"),
    );
    let rep: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rep["joined"], rep["engine_launches"], "{rep}");
    assert_eq!(rep["unmatched_engine"], 0);
    assert_eq!(rep["skipped_recorded"], 1);
    assert_eq!(rep["steps"], 33); // 1 prefill + 32 decode
    // Every engine copy (the sampled tokens fed back, one per step) lands on its recording.
    assert!(rep["engine_memops"].as_u64().unwrap_or(0) > 0, "{rep}");
    assert_eq!(rep["joined_memops"], rep["engine_memops"], "{rep}");
    let report = success(gapscope().arg("report").arg(&out_path).arg("--json"));
    let text = String::from_utf8_lossy(&report.stdout);
    for bucket in [
        "\"gemv\"",
        "\"attention\"",
        "\"norm\"",
        "\"rope\"",
        "\"copy\"",
    ] {
        assert!(
            text.contains(bucket),
            "{bucket} missing from the joined report"
        );
    }

    // An engine trace is required on the left.
    let bad = gapscope()
        .arg("join")
        .arg(&rec_path)
        .arg(&rec_path)
        .arg("-o")
        .arg(dir.path().join("x.gst"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("not a gapscope-engine trace"));
}

/// A recorder-style native trace: one prefill and eight 0.8 ms decode steps (engine
/// markers, GPU timeline) with NVML samples every 200 µs on the same timeline. Inside the
/// decode steps (2.0 to 9.8 ms, 40 samples) ten samples carry SwPowerCap and one shows the
/// SM clock at 1200 of 1980 MHz; a thermal-throttled sample in the prefill and one after the
/// last step must not count.
fn telemetry_trace(with_samples: bool) -> gapscope_traces::Trace {
    use gapscope_traces::{KernelRow, Manifest, MarkerRow, MarkerSource, Phase, SampleRow, Trace};
    let mut t = Trace::new(Manifest::new("cupti"));
    let gemv = t.strings.intern("gemv_bf16");
    let attn = t.strings.intern("flash_fwd_splitkv_kernel");
    let step = |t: &mut Trace, name: &str, phase: Phase, start: i64, end: i64| {
        let name = t.strings.intern(name);
        t.markers.push(MarkerRow {
            name,
            source: MarkerSource::Engine as u8,
            phase: phase as u8,
            gpu_start_ns: start,
            gpu_end_ns: end,
            ..MarkerRow::default()
        });
        for (n, s, e) in [
            (gemv, start, start + 300_000),
            (attn, start + 300_000, end - 100_000),
        ] {
            t.kernels.push(KernelRow {
                name: n,
                gpu_start_ns: s,
                gpu_end_ns: e,
                ..KernelRow::default()
            });
        }
    };
    step(&mut t, "prefill", Phase::Prefill, 0, 1_000_000);
    for i in 0..8 {
        let s = 2_000_000 + i * 1_000_000;
        step(&mut t, "decode", Phase::Decode, s, s + 800_000);
    }
    if with_samples {
        for k in 0..60u32 {
            let (sm, reasons) = match k {
                2 => (900, 0x40),         // HwThermalSlowdown, in the prefill
                20..=29 => (1980, 0x4),   // SwPowerCap
                35 => (1200, 0),          // clock dip
                55 => (1980, 0x20 | 0x1), // SwThermalSlowdown, after the last step
                _ => (1980, 0x1),         // GpuIdle: benign
            };
            t.samples.push(SampleRow {
                host_ns: k as i64 * 200_000,
                sm_clock_mhz: sm,
                mem_clock_mhz: 2619,
                power_mw: 300_000 + k * 1000,
                temperature_c: 50 + k / 4,
                throttle_reasons: reasons,
                ..SampleRow::default()
            });
        }
    }
    t
}

#[test]
fn report_flags_throttling_and_clock_drops_inside_the_decode_steps() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("telemetry.gst");
    gapscope_traces::write_trace(&path, &telemetry_trace(true)).unwrap();
    let p = path.to_str().unwrap();
    let v = json(&["report", "--json", p]);
    let r = &v["reports"][0];
    assert_eq!(r["steps"]["decode_steps"], 8);
    let t = &r["telemetry"];
    assert_eq!(t["samples_total"], 60);
    assert_eq!(t["samples_in_steps"], 40);
    assert_eq!(t["window"]["scope"], "decode_steps");
    assert_eq!(t["window"]["start_ns"], 2_000_000);
    assert_eq!(t["window"]["end_ns"], 9_800_000);
    assert_eq!(t["throttled_samples"], 10);
    assert_eq!(
        t["throttle_reasons_seen"],
        serde_json::json!(["SwPowerCap"])
    );
    assert_eq!(t["sm_clock_mhz"]["median"], 1980.0);
    assert_eq!(t["clock_drop"]["min_mhz"], 1200.0);
    assert_eq!(t["clock_drop"]["max_mhz"], 1980.0);
    assert_eq!(t["clock_drop"]["samples_below"], 1);
    assert_eq!(t["temperature_c_max"], 62); // k = 49, the last in-step sample
    let warnings: Vec<&str> = r["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w.as_str())
        .collect();
    let throttle: Vec<&&str> = warnings
        .iter()
        .filter(|w| w.contains("throttled"))
        .collect();
    assert_eq!(throttle.len(), 1, "{warnings:?}");
    assert!(
        throttle[0].contains("SwPowerCap")
            && throttle[0].contains("10 of 40")
            && throttle[0].contains("25%"),
        "{}",
        throttle[0]
    );
    assert!(
        !warnings.iter().any(|w| w.contains("Thermal")),
        "{warnings:?}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("SM clock dropped") && w.contains("1200 MHz")),
        "{warnings:?}"
    );

    let table = String::from_utf8(run(&["report", p]).stdout).unwrap();
    assert!(table.contains("Telemetry (NVML)"), "{table}");
    assert!(table.contains("SwPowerCap in 10 of 40 samples"), "{table}");
    let md = String::from_utf8(run(&["report", "--markdown", p]).stdout).unwrap();
    assert!(md.contains("### Telemetry (NVML)"), "{md}");
    assert!(md.contains("min 1200 / median 1980 / max 1980 MHz"), "{md}");

    // The same trace without samples: the section is null and nothing is said about it.
    let bare = dir.path().join("bare.gst");
    gapscope_traces::write_trace(&bare, &telemetry_trace(false)).unwrap();
    let b = bare.to_str().unwrap();
    let v = json(&["report", "--json", b]);
    let r = &v["reports"][0];
    assert!(r.as_object().unwrap().contains_key("telemetry"));
    assert!(r["telemetry"].is_null());
    assert_eq!(r["warnings"], serde_json::json!([]));
    let table = String::from_utf8(run(&["report", b]).stdout).unwrap();
    assert!(!table.contains("Telemetry"), "{table}");
}

/// A copy of `gapscope` alone in a fresh folder, optionally beside a fake `gapscope-gui`
/// script that prints its arguments and exits with 7.
fn lone_gapscope(with_gui: bool) -> (tempfile::TempDir, PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("gapscope");
    std::fs::copy(env!("CARGO_BIN_EXE_gapscope"), &exe).unwrap();
    if with_gui {
        let gui = dir.path().join("gapscope-gui");
        std::fs::write(&gui, "#!/bin/sh\necho \"gui:$*\"\nexit 7\n").unwrap();
        std::fs::set_permissions(&gui, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, exe)
}

#[test]
fn gui_starts_gapscope_gui_beside_it_with_every_argument() {
    let (_dir, exe) = lone_gapscope(true);
    let o = output_of_fresh_executable(
        Command::new(&exe)
            .args([
                "gui",
                "a.gst",
                "b.json.gz",
                "--view",
                "diff",
                "--step-aligned",
            ])
            .env("PATH", "")
            .env("GAPSCOPE_NO_CONFIG", "1")
            .env_remove("GAPSCOPE_HW")
            .env_remove("GAPSCOPE_RULES"),
    );
    assert_eq!(
        o.status.code(),
        Some(7),
        "the explorer's exit code comes back"
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        "gui:a.gst b.json.gz --view diff --step-aligned"
    );
}

/// The `--hw` and `--rules` defaults reach the explorer as flags, before the arguments;
/// a flag given wins.
#[test]
fn gui_passes_the_defaults_on_as_flags() {
    let (dir, exe) = lone_gapscope(true);
    let rules = dir.path().join("rules.toml");
    std::fs::write(&rules, "").unwrap();
    let gui = |args: &[&str]| {
        let o = output_of_fresh_executable(
            Command::new(&exe)
                .args(args)
                .env("PATH", "")
                .env("GAPSCOPE_NO_CONFIG", "1")
                .env("GAPSCOPE_HW", "h200")
                .env("GAPSCOPE_RULES", &rules),
        );
        assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
        String::from_utf8_lossy(&o.stdout).trim().to_owned()
    };
    let r = rules.to_str().unwrap();
    assert_eq!(
        gui(&["gui", "a.gst"]),
        format!("gui:--rules {r} --hw h200 a.gst")
    );
    assert_eq!(
        gui(&["gui", "a.gst", "--hw", "b200"]),
        format!("gui:--rules {r} a.gst --hw b200")
    );
}

#[test]
fn gui_without_the_explorer_says_how_to_build_it() {
    let (_dir, exe) = lone_gapscope(false);
    let o = output_of_fresh_executable(
        Command::new(&exe)
            .args(["gui", "a.gst"])
            .env("PATH", "")
            .env("GAPSCOPE_NO_CONFIG", "1"),
    );
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(
        e.contains("gapscope-gui not found") && e.contains("cargo build --release -p gapscope-gui"),
        "{e}"
    );
}

// The command line's side of the analysis tests in analyzer/tests/ (auto_steps, engine_steps,
// hybrid_levers, verdicts, corpus_buckets, host_scopes): the text and JSON the commands print,
// their exit codes and one-line refusals, and their flags. The decisions themselves are
// checked there, on the library's typed reports.

const HF_QWEN: &str = "traces/reference/hf-qwen3-0.6b-npl1.json.gz";
const CPU_ONLY: &str = "traces/reference/hf-llama3.2-1b-cpuonly.json.gz";

/// `o` exited with `code` and its stdout says `needle`.
fn exits_saying(o: &Output, code: i32, needle: &str) {
    assert_eq!(o.status.code(), Some(code), "{}", stderr(o));
    assert!(stdout(o).contains(needle), "{}", stdout(o));
}

/// Exit 2 with exactly one line on stderr that contains `needle`.
fn refused(o: &Output, needle: &str) {
    let e = one_line_error(o);
    assert!(e.contains(needle), "{needle:?} not in {e}");
}

/// The 1B HF trace converted by `gapscope import` into `dir`, loaded.
fn hf_1b(dir: &Path) -> (PathBuf, Trace) {
    let out = dir.join("1b.gst");
    let o = run(&["import", "-q", s(&repo(HF)), "-o", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = read_trace(&out, &ReadOptions::default()).unwrap();
    (out, t)
}

/// `gate -q --baseline BASE --current CUR` plus `extra`.
fn gate(base: &Path, cur: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["gate", "-q", "--baseline", s(base), "--current", s(cur)];
    args.extend_from_slice(extra);
    run(&args)
}

/// `report -q` in text.
fn report_text(args: &[&str]) -> String {
    let mut all = vec!["report", "-q"];
    all.extend_from_slice(args);
    let o = run(&all);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    stdout(&o)
}

#[test]
fn engine_prefill_is_a_prefill_without_markers_in_the_text() {
    let text = report_text(&["--no-markers", s(&repo(ENGINE_8B))]);
    assert!(text.contains("32 decode, 1 prefill"), "{text}");
    assert!(text.contains("buckets per prefill step"), "{text}");
}

#[test]
fn report_text_counts_mixed_steps_and_training_iterations() {
    let t = report_text(&[s(&corpus(
        "vllm_mi300x_gptoss_prefilldecode_piecewise.json.gz",
    ))]);
    assert!(t.contains("0 decode, 0 prefill, 1 mixed"), "{t}");
    assert!(t.contains("\nmixed "), "{t}");
    let t = report_text(&[s(&corpus("hta_a100_train_nccl.json.gz"))]);
    assert!(t.contains("3 training iterations"), "{t}");
    assert!(t.contains("not TPOT"), "{t}");
    assert!(!t.contains("\nTPOT "), "{t}");
}

/// The JSON report carries each decision as a sentence and as a value: how steps and phases
/// were found, the idle cause and its scope, where grouped keys came from.
#[test]
fn report_json_says_how_steps_phases_and_idle_were_found() {
    let r = |args: &[&str]| {
        let mut all = vec!["report", "-q", "--json"];
        all.extend_from_slice(args);
        json(&all)["reports"][0].clone()
    };
    let engine = r(&[s(&repo(ENGINE_8B))]);
    let st = &engine["steps"];
    assert_eq!(st["source_kind"]["kind"], "markers", "{st}");
    assert_eq!(st["phase_source"], "marker metadata (engine step records)");
    let st = &r(&["--no-markers", s(&repo(ENGINE_8B))])["steps"];
    assert_eq!(st["source_kind"]["kind"], "periodic", "{st}");
    assert_eq!(st["source_kind"]["prefills"], 1, "{st}");
    let hf = r(&[s(&repo(HF))]);
    assert_eq!(
        hf["steps"]["phase_source_kind"],
        serde_json::json!({
            "kind": "evidence",
            "counts": [{"evidence": "marker", "steps": 32}],
            "example": null,
            "says": "the phase word in the name"
        })
    );
    let h = &hf["host_idle"];
    assert_eq!(h["lever"]["cause"], "host_compute", "{h}");
    assert_eq!(h["lever"]["scope"]["kind"], "op", "{h}");
    assert_eq!(h["top_scopes"][0]["kind"], "op", "{h}");
    let st = &r(&[s(&corpus("sglang_mi300x_qwen3_8b_decode.json.gz"))])["steps"];
    assert_eq!(
        st["source_kind"]["names"],
        serde_json::json!(["step[DECODE bs=32]"]),
        "{st}"
    );
    let g = &r(&[
        "--by",
        "module",
        s(&repo("traces/reference/hf-qwen3next-small-npl1.json.gz")),
    ])["groups"];
    assert_eq!(g["by"], "module", "{g}");
    assert_eq!(g["source"], "host scopes", "{g}");
}

/// `export --chrome -` files every kernel under a bucket (what corpus_buckets' shares read).
#[test]
fn chrome_export_to_stdout_files_every_kernel_in_a_bucket() {
    let v = json(&[
        "export",
        "-q",
        "--chrome",
        "-",
        s(&corpus("sglang_mi300x_qwen3_8b_decode.json.gz")),
    ]);
    let events = v["traceEvents"].as_array().expect("an event array");
    let kernels: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == "kernel")
        .collect();
    assert_eq!(kernels.len(), 555);
    for k in kernels {
        assert!(k["args"]["bucket"].is_string(), "{k}");
        assert!(k["dur"].is_number(), "{k}");
    }
}

const LEVERS: &str = "traces/reference/engine-qwen3.5-4l-q8_0-npl8-levers";

fn lever_trace(setting: &str) -> String {
    s(&repo(&format!("{LEVERS}/{setting}-npl8.gst"))).to_owned()
}

/// `diff --what-if hybrid --measured LEVER=TRACE ...`: each measured trace is put beside its
/// lever's prediction in the JSON.
#[test]
fn what_if_json_puts_each_measured_lever_beside_its_prediction() {
    let slow = lever_trace("slow");
    let measured: Vec<String> = ["state_update", "state_read", "out_proj", "all"]
        .iter()
        .map(|l| format!("{l}={}", lever_trace(l)))
        .collect();
    let mut args = vec!["diff", "-q", "--json", &slow, "--what-if", "hybrid"];
    for m in &measured {
        args.extend(["--measured", m.as_str()]);
    }
    let w = json(&args);
    assert_eq!(w["batch_size"], 8);
    let levers: Vec<&str> = w["levers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["lever"].as_str().unwrap())
        .collect();
    assert_eq!(
        levers,
        [
            "state_update=inplace",
            "state_read=fused_ids",
            "out_proj=2d",
            "all"
        ]
    );
    let measured: Vec<&str> = w["measured"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["lever"].as_str().unwrap())
        .collect();
    assert_eq!(measured, levers);
}

#[test]
fn the_text_table_names_every_lever_and_its_basis() {
    let slow = lever_trace("slow");
    let o = run(&["diff", "-q", &slow, "--what-if", "hybrid"]);
    assert!(o.status.success(), "{o:?}");
    let t = stdout(&o);
    for l in [
        "state_update=inplace",
        "state_read=fused_ids",
        "out_proj=2d",
        "all",
    ] {
        assert!(t.contains(l), "{t}");
    }
    assert!(
        t.contains("o_proj"),
        "the out_proj basis names its twin: {t}"
    );
}

#[test]
fn what_if_errors_name_the_problem() {
    let slow = lever_trace("slow");
    let e = one_line_error(&run(&["diff", "-q", &slow, "--what-if", "moe"]));
    assert!(e.contains("unknown lever set"), "{e}");
    let bad = format!("fused={}", lever_trace("all"));
    let e = one_line_error(&run(&[
        "diff",
        "-q",
        &slow,
        "--what-if",
        "hybrid",
        "--measured",
        &bad,
    ]));
    assert!(
        e.contains("no such lever") && e.contains("state_update"),
        "{e}"
    );
    // A trace without the engine's op columns cannot be predicted from.
    let llama = s(&repo("traces/reference/llamacpp-qwen3.5-9b-q4_0-npl1.gst")).to_owned();
    let e = one_line_error(&run(&["diff", "-q", &llama, "--what-if", "hybrid"]));
    assert!(e.contains("engine"), "{e}");
    let e = one_line_error(&run(&["diff", "-q", &slow]));
    assert!(e.contains("--what-if"), "{e}");
}

/// The slow lever setting against the fast one fails the gate (exit 1); the fast one against
/// itself passes (exit 0).
#[test]
fn the_gate_flags_the_levers_buckets_and_the_new_copies() {
    let (slow, all) = (lever_trace("slow"), lever_trace("all"));
    let o = run(&["gate", "-q", "--current", &slow, "--baseline", &all]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    let o = run(&["gate", "-q", "--current", &all, "--baseline", &all]);
    assert_eq!(o.status.code(), Some(0), "{o:?}");
}

#[test]
fn gate_fails_runs_without_gpu_work_steps_or_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    // B1: the current run has no GPU work.
    let o = gate(&repo(HF_QWEN), &repo(CPU_ONLY), &[]);
    exits_saying(
        &o,
        1,
        "regression: GPU work and steps: the current trace has no GPU work",
    );
    // A baseline without GPU work cannot be compared.
    let o = gate(&repo(CPU_ONLY), &repo(CPU_ONLY), &[]);
    refused(&o, "cannot compare: the baseline has no GPU work");
    // Far fewer kernels per step than the baseline: keep one kernel in three.
    let thin = save(dir.path(), "thin.gst", &kernels_kept(&t, |i, _| i % 3 == 0));
    let o = gate(&b1, &thin, &[]);
    exits_saying(&o, 1, "kernels per step: FAILED");
    assert!(stdout(&o).contains("fewer than 50%"), "{}", stdout(&o));
}

#[test]
fn gate_catches_step_time_regressions_with_the_same_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let cur = save(dir.path(), "x1.5.gst", &stretched(&t, 1.5));
    let o = gate(&b1, &cur, &[]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}{}", stderr(&o));
    assert!(
        out.lines()
            .any(|l| l.starts_with("TPOT") && l.contains("REGRESSION")),
        "{out}"
    );
    assert!(out.contains("regression: TPOT median +"), "{out}");
    // The same trace against itself still passes, step metrics included.
    let o = gate(&b1, &b1, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).lines().any(|l| l.starts_with("launch gaps")));
}

#[test]
fn gate_refuses_incomparable_traces_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let mut other = t.clone();
    other.manifest.gpus[0].name = "NVIDIA H100 80GB HBM3".into();
    let other = save(dir.path(), "h100.gst", &other);
    let o = gate(&b1, &other, &[]);
    refused(
        &o,
        "GPU differs (baseline NVIDIA H200, current NVIDIA H100 80GB HBM3)",
    );
    let o = gate(&b1, &other, &["--allow-incomparable"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("compared despite: GPU differs"));
    // JSON: a sentence and a value for each difference compared despite.
    let o = gate(&b1, &other, &["--allow-incomparable", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&o), stderr(&o)));
    assert_eq!(
        v["overridden"],
        serde_json::json!(["GPU differs (baseline NVIDIA H200, current NVIDIA H100 80GB HBM3)"])
    );
    assert_eq!(
        v["overridden_kinds"],
        serde_json::json!([{
            "kind": "gpu_differs",
            "baseline": "NVIDIA H200",
            "current": "NVIDIA H100 80GB HBM3"
        }])
    );
    // Steps cut by markers against steps found automatically; --no-markers cuts both alike.
    let o = gate(&b1, &b1, &["--no-markers"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut unmarked = t.clone();
    unmarked.markers = Default::default();
    let unmarked = save(dir.path(), "unmarked.gst", &unmarked);
    refused(&gate(&b1, &unmarked, &[]), "cannot compare");
    let o = gate(&b1, &unmarked, &["--allow-incomparable", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let cut = &v["overridden_kinds"][0];
    assert_eq!(cut["kind"], "steps_cut_differently", "{cut}");
    assert_eq!(cut["baseline"]["source"]["kind"], "markers", "{cut}");
    assert_eq!(cut["current"]["kind"], "automatic", "{cut}");
}

#[test]
fn implausible_steps_are_flagged_by_report_and_refused_by_gate_and_diff() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let bad = save(dir.path(), "short-markers.gst", &short_markers(&t));
    let out = report_text(&[s(&bad)]);
    assert!(
        out.starts_with("WARNING") && out.lines().next().unwrap().contains("implausible"),
        "{out}"
    );
    let v = json(&["report", "-q", "--json", s(&bad)]);
    let p = &v["reports"][0]["plausibility"];
    assert_eq!(p["plausible"], false, "{p}");
    assert!(
        p["problems"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["check"] == "coverage"),
        "{p}"
    );
    refused(
        &gate(&b1, &bad, &[]),
        "the current's steps look implausible",
    );
    let o = run(&["diff", "-q", s(&bad), s(&b1)]);
    refused(&o, "steps look implausible");
    refused(&o, "(--allow-implausible diffs them anyway)");
    let o = run(&["diff", "-q", "--allow-implausible", s(&bad), s(&b1)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn gate_policy_values_are_checked_and_toml_errors_keep_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let b = repo(HF_QWEN);
    let pol = dir.path().join("pol.toml");
    std::fs::write(&pol, "min_effect = inf\n").unwrap();
    refused(
        &gate(&b, &b, &["--policy", s(&pol)]),
        "min_effect = inf is outside",
    );
    std::fs::write(&pol, "min_effect = 0.10\nfoo = 1\n").unwrap();
    refused(&gate(&b, &b, &["--policy", s(&pol)]), "unknown field `foo`");
}

#[test]
fn diff_refuses_a_side_without_steps_and_levers_follow_the_grouping() {
    // B5: a side without decode steps.
    refused(
        &run(&["diff", "-q", s(&repo(CPU_ONLY)), s(&repo(HF_QWEN))]),
        "has no decode steps",
    );
    // HF against the engine: the first lever is the idle time, not a kernel bucket.
    let o = run(&["diff", "-q", s(&repo(HF_8B)), s(&repo(ENGINE_8B))]);
    let out = stdout(&o);
    let first = out
        .lines()
        .skip_while(|l| !l.starts_with("what-if"))
        .nth(1)
        .unwrap_or_default();
    assert!(first.trim_start().starts_with("launch gaps"), "{out}");
    // The text prints the groups' totals that JSON carries (B13).
    assert!(out.contains("linear layers together (gemv + gemm_quant + gemm_dense)"));
    // JSON: the linear layers are one lever, the group's delta its gain.
    let v = json(&["diff", "-q", "--json", s(&repo(ENGINE_8B)), s(&repo(HF_8B))]);
    let group = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["group"] == "linear layers")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(group["grouped"], true, "{group}");
    let lever = v["what_if"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["lever"] == "linear layers")
        .unwrap_or_else(|| panic!("{v:#}"));
    assert_eq!(lever["kind"], "group", "{lever}");
    assert_eq!(lever["gain_as_b_ms"], group["delta_ms"]);
}

#[test]
fn diff_of_a_trace_with_itself_has_no_shares_and_no_levers() {
    let a = repo(HF_QWEN);
    let o = run(&["diff", "-q", s(&a), s(&a)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("shares sum to"), "{out}");
    assert!(out.contains("no shares: the gap is under"), "{out}");
    assert!(out.contains("what-if: no lever"), "{out}");
    assert!(!out.contains("gain 0.0000"), "{out}");
    let v = json(&["diff", "-q", "--json", s(&a), s(&a)]);
    assert_eq!(v["gap_is_meaningful"], false);
    assert!(v["residual_share_pct"].is_null());
}

#[test]
fn diff_list_shows_every_name_it_was_asked_for() {
    // B12: --list 20 shows all 7 names only in A, in text as in JSON.
    let (a, b) = (repo(ENGINE_8B), repo(HF_8B));
    let o = run(&["diff", "-q", "--list", "20", s(&a), s(&b)]);
    let out = stdout(&o);
    assert!(out.contains("only in A (7):"), "{out}");
    for n in ["argmax_f32", "get_rows_bf16", "gemv_bf16_b1"] {
        assert!(out.contains(n), "{n} missing: {out}");
    }
    let v = json(&["diff", "-q", "--json", "--list", "20", s(&a), s(&b)]);
    assert_eq!(
        v["structural"]["only_in_a"].as_array().map(Vec::len),
        Some(7)
    );
    assert_eq!(v["structural"]["only_in_a_total"], 7);
    let o = run(&["diff", "-q", "--list", "3", s(&a), s(&b)]);
    assert!(stdout(&o).contains("and 4 more"), "{}", stdout(&o));
}

#[test]
fn report_names_the_file_given_and_says_what_it_was_converted_from() {
    // B8.
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let copy = save(dir.path(), "other-name.gst", &t);
    for p in [&b1, &copy] {
        let out = report_text(&[s(p)]);
        let first = out.lines().next().unwrap();
        assert!(first.contains(s(p)), "{first}");
        let from = out.lines().find(|l| l.starts_with("source")).unwrap();
        assert!(
            from.contains("converted from ") && from.ends_with("hf-llama3.2-1b-npl8.json.gz"),
            "{out}"
        );
    }
    let o = run(&["diff", "-q", s(&b1), s(&copy)]);
    let out = stdout(&o);
    assert!(
        out.starts_with(&format!("A: {}", s(&b1))) && out.contains(&format!("B: {}", s(&copy))),
        "{out}"
    );
}

#[test]
fn report_lines_for_one_step_and_for_graph_kernels_without_launches() {
    // B26: one decode step has no TPOT.
    let out = report_text(&[s(&repo("analyzer/tests/data/nsys/nsys-2025.3.sqlite"))]);
    assert!(
        out.contains("TPOT           n/a: TPOT needs two consecutive decode steps"),
        "{out}"
    );
    // B24: graph kernels in a trace without launch records.
    let out = report_text(&[s(&repo(ENGINE_8B))]);
    assert!(
        out.contains("0 launches, 33 markers; 8,320 kernels carry a CUDA graph id (host launches not recorded)"),
        "{out}"
    );
    assert!(!out.contains("0 graph launches"), "{out}");
}

#[test]
fn trace_text_is_escaped_in_every_output() {
    let dir = tempfile::tempdir().unwrap();
    let (_, t) = hf_1b(dir.path());
    let mut evil = t.clone();
    let name = evil
        .strings
        .intern("\u{1b}[2J\u{1b}]0;pwned\u{7}evil\r![x](http://e.invalid/x.png)\0kernel");
    // Rename the most frequent kernel (the top of its bucket) to the hostile name.
    let mut counts = std::collections::HashMap::new();
    for &n in &t.kernels.name {
        *counts.entry(n).or_insert(0usize) += 1;
    }
    let target = *counts.iter().max_by_key(|(_, c)| **c).unwrap().0;
    evil.kernels
        .name
        .iter_mut()
        .filter(|n| **n == target)
        .for_each(|n| *n = name);
    let evil = save(dir.path(), "evil.gst", &evil);
    for fmt in [&[][..], &["--markdown"], &["--csv"]] {
        let mut args = vec!["report", "-q", "--top", "50"];
        args.extend_from_slice(fmt);
        args.push(s(&evil));
        let o = run(&args);
        assert!(o.status.success(), "{}", stderr(&o));
        let out = stdout(&o);
        assert!(
            !out.contains('\u{1b}') && !out.contains('\r') && !out.contains('\0'),
            "{fmt:?}: raw control characters in {out:?}"
        );
        assert!(out.contains("\\u{1b}"), "{fmt:?}: {out}");
        if fmt == ["--markdown"] {
            assert!(!outside_code(&out).contains("![x](http"), "{out}");
        }
    }
    let o = run(&["diff", "-q", "--markdown", s(&evil), s(&repo(HF_QWEN))]);
    let out = stdout(&o);
    assert!(!out.contains('\u{1b}'), "{out}");
    assert!(!outside_code(&out).contains("![x](http"), "{out}");
}

/// Markdown with its inline code spans removed: what a renderer would interpret.
fn outside_code(md: &str) -> String {
    md.split('`').step_by(2).collect()
}

#[test]
fn join_refuses_a_recording_of_another_run() {
    // B3: the engine trace against an HF recording of another run matched 1.5% of the
    // engine's launches and exited 0.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("j.gst");
    let (e, h) = (repo(ENGINE_8B), repo(HF_8B));
    // `join -q ENGINE HF -o OUT` plus `extra`.
    let join = |out: &Path, extra: &[&str]| {
        let mut args = vec!["join", "-q", s(&e), s(&h), "-o", s(out)];
        args.extend_from_slice(extra);
        run(&args)
    };
    let o = join(&out, &[]);
    refused(
        &o,
        "of 8613 engine launches (1.5%) matched a recorded kernel",
    );
    assert!(!out.exists(), "a refused join wrote its output");
    let o = join(&out, &["--min-match", "0.01"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // A huge --max-skip is bounded by the recording, not by its value.
    let t = std::time::Instant::now();
    let o = join(
        &dir.path().join("k.gst"),
        &["--max-skip", "18446744073709551615"],
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(t.elapsed().as_secs() < 60, "{:?}", t.elapsed());
}

#[test]
fn distorted_recordings_are_warned_about_in_report_and_gate() {
    // The audit's case: 5.2 s of CUPTI "command buffer full" overhead in a 14 s recording
    // sat among the notes. Here a third of the 1.8 s span.
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let mut rec = t.clone();
    rec.manifest
        .capture_overhead_ns
        .insert("command buffer full".into(), 600_000_000);
    let rec = save(dir.path(), "distorted.gst", &rec);
    let out = report_text(&[s(&rec)]);
    let warning = out
        .lines()
        .find(|l| l.starts_with("warning") && l.contains("timings are distorted"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        warning.contains("command buffer full 600.0 ms"),
        "{warning}"
    );
    let v = json(&["report", "-q", "--json", s(&rec)]);
    assert!(v["reports"][0]["distortion"]["share_pct"].as_f64().unwrap() > 30.0);
    let o = gate(&b1, &rec, &[]);
    exits_saying(&o, 0, "warning: current: timings are distorted");
    // The undistorted trace carries no such warning.
    assert!(!report_text(&[s(&b1)]).contains("distorted"));
}
