//! The defect classes of issue 31 that gave wrong figures with exit 0 or let the gate pass a
//! broken run, each generated here from a real bundled trace (HF eager decode, H200) or a
//! real engine fixture, and run through the binary: exit 0 with figures that say what is
//! missing, or exit 2 with one line; the gate never exits 0 on a broken current.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

use gapscope_tests::{gzip, one_line_error, repo, run, s, stderr, stdout};
use serde_json::{Value, json};

const REAL: &str = "traces/reference/hf-qwen3-0.6b-npl1.json.gz";

/// The real trace's events, parsed once.
fn real() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let f = std::fs::File::open(repo(REAL)).expect("bundled trace");
        serde_json::from_reader(flate2::read::GzDecoder::new(f)).expect("JSON")
    })
}

fn is_gpu(e: &Value) -> bool {
    matches!(
        e["cat"].as_str(),
        Some("kernel" | "gpu_memcpy" | "gpu_memset" | "gpu_user_annotation")
    )
}

/// Writes `doc` (gzipped) as `name` in `dir`.
fn write(dir: &Path, name: &str, doc: &Value) -> PathBuf {
    let p = dir.join(name);
    let bytes = serde_json::to_vec(doc).expect("serialises");
    std::fs::write(&p, gzip(&bytes, flate2::Compression::fast())).expect("writes");
    p
}

/// The real trace with `f` applied to each kernel event, by its index among kernels.
fn with_kernels(f: impl Fn(usize, &mut serde_json::Map<String, Value>)) -> Value {
    let mut doc = real().clone();
    let mut k = 0;
    for e in doc["traceEvents"].as_array_mut().expect("events") {
        if e["cat"] == "kernel" {
            f(k, e.as_object_mut().expect("object"));
            k += 1;
        }
    }
    doc
}

fn report_json(p: &Path) -> Value {
    let o = run(&["report", "--json", "-q", s(p)]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    v["reports"][0].clone()
}

/// The gate of `current` against the real trace: never exit 0; stdout or the error line
/// names the current side and `what`.
fn gate_refuses(current: &Path, what: &str) -> Output {
    let o = run(&[
        "gate",
        "-q",
        "--baseline",
        s(&repo(REAL)),
        "--current",
        s(current),
    ]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_ne!(
        o.status.code(),
        Some(0),
        "the gate passed a broken run: {all}"
    );
    assert_ne!(o.status.code(), Some(101), "panic: {all}");
    assert!(all.contains(what), "{what:?} not said: {all}");
    if o.status.code() == Some(2) {
        one_line_error(&o);
    }
    o
}

/// Breaks one event in place.
type Breaker = fn(&mut serde_json::Map<String, Value>);

/// Class 1: `dur`/`ts` missing, null, "NaN" or a bare NaN are left out and counted, never
/// read as 0; the gate is inconclusive (exit 2) on such a current.
#[test]
fn missing_or_non_numeric_times_are_left_out_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let base = report_json(&repo(REAL));
    let kernels = base["source"]["kernels"].as_u64().unwrap();
    let cases: [(&str, Breaker); 5] = [
        ("no-dur", |e| {
            e.remove("dur");
        }),
        ("null-dur", |e| {
            e.insert("dur".into(), Value::Null);
        }),
        ("nan-string-dur", |e| {
            e.insert("dur".into(), json!("NaN"));
        }),
        ("no-ts", |e| {
            e.remove("ts");
        }),
        ("nan-string-ts", |e| {
            e.insert("ts".into(), json!("nan"));
        }),
    ];
    for (name, break_it) in cases {
        // Every 100th kernel.
        let doc = with_kernels(|i, e| {
            if i % 100 == 7 {
                break_it(e)
            }
        });
        let p = write(dir.path(), &format!("{name}.json.gz"), &doc);
        let r = report_json(&p);
        let left = r["source"]["untimed_events"].as_u64().unwrap();
        assert_eq!(left, kernels.div_ceil(100), "{name}");
        assert_eq!(
            r["source"]["kernels"].as_u64().unwrap(),
            kernels - left,
            "{name}"
        );
        assert!(
            r["warnings"].to_string().contains("ts or dur is missing"),
            "{name}: {}",
            r["warnings"]
        );
        gate_refuses(&p, "current trace left out");
    }
    // A bare NaN (not JSON, as Python's json writes it) is the same.
    let text = serde_json::to_string(real()).unwrap();
    let nan = text.replacen("\"dur\":", "\"dur\":NaN,\"was\":", 5);
    let p = dir.path().join("bare-nan.json");
    std::fs::write(&p, nan).unwrap();
    let r = report_json(&p);
    assert!(r["source"]["untimed_events"].as_u64().unwrap() > 0);
    // Every kernel without dur: no GPU work, and the gate fails it.
    let doc = with_kernels(|_, e| {
        e.remove("dur");
    });
    let p = write(dir.path(), "all-no-dur.json.gz", &doc);
    let r = report_json(&p);
    assert_eq!(r["source"]["kernels"], 0);
    let o = gate_refuses(&p, "current trace left out");
    assert_eq!(
        o.status.code(),
        Some(1),
        "fewer kernels per step: a regression"
    );
}

/// Class 2: a GPU clock that jumps back 5 ms, and two processes' events on one local device
/// 0, are found and make the gate inconclusive; the merge is not called early launch.
#[test]
fn clocks_that_jump_back_and_merged_ranks_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = real().clone();
    let events = doc["traceEvents"].as_array_mut().unwrap();
    let mut starts: Vec<f64> = events
        .iter()
        .filter(|e| is_gpu(e))
        .filter_map(|e| e["ts"].as_f64())
        .collect();
    starts.sort_by(f64::total_cmp);
    let mid = starts[starts.len() / 2];
    for e in events.iter_mut().filter(|e| is_gpu(e)) {
        if let Some(t) = e["ts"].as_f64().filter(|&t| t >= mid) {
            e["ts"] = json!(t - 5000.0);
        }
    }
    let p = write(dir.path(), "jump.json.gz", &doc);
    let r = report_json(&p);
    assert!(
        r["warnings"]
            .to_string()
            .contains("GPU clock that goes back"),
        "{}",
        r["warnings"]
    );
    gate_refuses(&p, "GPU clock that goes back");

    // Rank 1's copy of the run: host events in another process, GPU events on its own
    // device 0, 3 us later.
    let mut doc = real().clone();
    let events = doc["traceEvents"].as_array_mut().unwrap();
    let copy: Vec<Value> = events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            if !is_gpu(&e)
                && let Some(pid) = e["pid"].as_u64()
            {
                e["pid"] = json!(pid + 100_000);
            }
            if let Some(t) = e["ts"].as_f64() {
                e["ts"] = json!(t + 3.0);
            }
            e
        })
        .collect();
    events.extend(copy);
    let p = write(dir.path(), "merged.json.gz", &doc);
    let r = report_json(&p);
    let w = r["warnings"].to_string();
    assert!(w.contains("processes launching GPU work"), "{w}");
    assert!(!w.contains("programmatic dependent launch"), "{w}");
    gate_refuses(&p, "processes launching GPU work");

    // Two ranks' distributedInfo in one file.
    let mut doc = real().clone();
    doc["distributedInfo"] = json!({"backend": "nccl", "rank": 0, "world_size": 2});
    let text = serde_json::to_string(&doc).unwrap().replacen(
        "{",
        r#"{"distributedInfo":{"backend":"nccl","rank":1,"world_size":2},"#,
        1,
    );
    let p = dir.path().join("two-ranks.json");
    std::fs::write(&p, text).unwrap();
    let r = report_json(&p);
    assert!(r["warnings"].to_string().contains("several ranks"));
    gate_refuses(&p, "several ranks");
}

/// Class 6: a native trace cut to 79% of its kernel stream, one marked incomplete, and a
/// Kineto file read with --allow-truncated: the gate is inconclusive and says which side
/// and where.
#[test]
fn a_truncated_current_never_passes() {
    let dir = tempfile::tempdir().unwrap();
    let src = repo("traces/reference/engine-llama3-8b-npl1.gst");
    let copy = |name: &str| {
        let d = dir.path().join(name);
        std::fs::create_dir(&d).unwrap();
        for f in std::fs::read_dir(&src).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, d.join(f.file_name().unwrap())).unwrap();
        }
        d
    };
    let gate = |current: &Path, what: &str| {
        let o = run(&["gate", "-q", "--baseline", s(&src), "--current", s(current)]);
        let all = format!("{}{}", stdout(&o), stderr(&o));
        // Inconclusive (exit 2), or a regression when what is left lost the work (exit 1).
        match o.status.code() {
            Some(2) => {
                one_line_error(&o);
                assert!(stdout(&o).starts_with("gate: inconclusive"), "{all}");
            }
            Some(1) => assert!(stdout(&o).starts_with("gate: REGRESSION"), "{all}"),
            _ => panic!("{all}"),
        }
        assert!(all.contains("the current trace is truncated"), "{all}");
        assert!(all.contains(what), "{what:?}: {all}");
    };
    let cut = copy("cut.gst");
    let k = cut.join("kernels.arrows");
    let len = std::fs::metadata(&k).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&k).unwrap();
    f.set_len(len * 79 / 100).unwrap();
    gate(&cut, "kernels: truncated after");

    let open = copy("open.gst");
    let m = open.join("manifest.json");
    let mut manifest: Value = serde_json::from_slice(&std::fs::read(&m).unwrap()).unwrap();
    manifest["complete"] = json!(false);
    std::fs::write(&m, serde_json::to_vec(&manifest).unwrap()).unwrap();
    gate(&open, "never finished");

    // Kineto, cut in the middle, loaded with --allow-truncated.
    let text = serde_json::to_vec(real()).unwrap();
    let p = dir.path().join("cut.json");
    std::fs::write(&p, &text[..text.len() * 3 / 4]).unwrap();
    let o = run(&[
        "gate",
        "-q",
        "--allow-truncated",
        "--baseline",
        s(&repo(REAL)),
        "--current",
        s(&p),
    ]);
    // A quarter of the steps are gone: a regression or inconclusive, and said either way.
    assert!(matches!(o.status.code(), Some(1 | 2)), "{}", stderr(&o));
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(
        all.contains("the current trace is truncated (input ends early"),
        "{all}"
    );
    // The JUnit report fails the completeness case.
    let junit = dir.path().join("gate.xml");
    let o = run(&[
        "gate",
        "-q",
        "--baseline",
        s(&src),
        "--current",
        s(&open),
        "--junit",
        s(&junit),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let x = std::fs::read_to_string(&junit).unwrap();
    // A gate that cannot compare still writes a failing JUnit case.
    let refused = dir.path().join("refused.xml");
    let o = run(&[
        "gate",
        "-q",
        "--baseline",
        s(&src),
        "--current",
        s(&repo(REAL)),
        "--junit",
        s(&refused),
    ]);
    one_line_error(&o);
    let r = std::fs::read_to_string(&refused).unwrap();
    assert!(
        r.contains("classname=\"comparability\"") && r.contains("<failure"),
        "{r}"
    );
    assert!(
        x.contains("classname=\"completeness\"") && x.contains("<failure"),
        "{x}"
    );
}

/// Class 7 (GPU list): one device named twice differently is a defect; one side naming no
/// GPU is refused as incomparable; the GPU check is never skipped silently.
#[test]
fn an_empty_or_contradicting_gpu_list_is_never_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = real().clone();
    let props = doc["deviceProperties"]
        .as_array_mut()
        .expect("deviceProperties");
    let mut other = props[0].clone();
    other["name"] = json!("NVIDIA H100 80GB HBM3");
    props.push(other);
    let p = write(dir.path(), "two-names.json.gz", &doc);
    gate_refuses(&p, "names GPU 0 differently");

    let mut doc = real().clone();
    doc.as_object_mut().unwrap().remove("deviceProperties");
    let p = write(dir.path(), "no-gpu.json.gz", &doc);
    let o = gate_refuses(&p, "names no GPU");
    assert_eq!(o.status.code(), Some(2));
}

/// Class 4: the hybrid what-if refuses a measured trace of another model or another lever
/// set, and never predicts a step shorter than the GPU work left in it.
#[test]
fn what_if_refuses_mismatched_measurements_and_stays_possible() {
    let dir = repo("traces/reference/engine-qwen3.5-4l-q8_0-npl8-levers");
    let slow = dir.join("slow-npl8.gst");
    for (arg, what) in [
        (
            format!(
                "all={}",
                s(&repo("traces/reference/engine-llama3-8b-npl1.gst"))
            ),
            "another model",
        ),
        (
            format!("state_read={}", s(&dir.join("all-npl8.gst"))),
            "not the slow trace's with state_read switched",
        ),
        (
            format!("out_proj={}", s(&dir.join("slow-npl8.gst"))),
            "not the slow trace's with out_proj switched",
        ),
    ] {
        let o = run(&[
            "diff",
            "-q",
            s(&slow),
            "--what-if",
            "hybrid",
            "--measured",
            &arg,
        ]);
        let e = one_line_error(&o);
        assert!(e.contains(what), "{e}");
    }
    let o = run(&["diff", "-q", s(&slow), "--what-if", "hybrid", "--json"]);
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    for l in v["levers"].as_array().unwrap() {
        let p = l["predicted_step_ms"].as_f64().unwrap();
        assert!(p.is_finite() && p > 0.0, "{l}");
    }
    // Class 14: --measured without --what-if, and --hw with it, are refused.
    let o = run(&[
        "diff",
        s(&slow),
        s(&dir.join("all-npl8.gst")),
        "--measured",
        &format!("all={}", s(&dir.join("all-npl8.gst"))),
    ]);
    assert!(one_line_error(&o).contains("--what-if"));
    let o = run(&["diff", s(&slow), "--what-if", "hybrid", "--hw", "h200"]);
    assert!(one_line_error(&o).contains("--hw"));
    let o = run(&[
        "roofline",
        "--model",
        s(&repo("models/llama-3-8b.json")),
        "--hw",
        "h200",
        "--svg",
        "-",
    ]);
    assert!(one_line_error(&o).contains("--svg -"));
    assert!(!Path::new("-").exists());
}

/// Class 5: hardware profiles outside physical ranges are refused; nothing prints inf/NaN.
#[test]
fn absurd_hardware_profiles_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let model = repo("models/llama-3-8b.json");
    let good = json!({"id": "x", "name": "x", "hbm_bytes_per_s": 4.0e12, "bf16_tflops": 700.0,
        "fp8_tflops": 0.0, "int8_tops": 0.0, "sm_count": 132, "l2_bytes": 52428800,
        "source": "x", "ceilings": "measured"});
    let p = dir.path().join("good.json");
    std::fs::write(&p, good.to_string()).unwrap();
    let o = run(&[
        "roofline",
        "--model",
        s(&model),
        "--hw-profile",
        s(&p),
        "--weights",
        "q8_0",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o).to_lowercase();
    assert!(!out.contains("inf") && !out.contains("nan"), "{out}");
    for (field, value) in [
        ("hbm_bytes_per_s", json!(1e-300)),
        ("hbm_bytes_per_s", json!(1e300)),
        ("hbm_bytes_per_s", json!(0)),
        ("bf16_tflops", json!(1e-300)),
        ("bf16_tflops", json!(-5)),
        ("fp8_tflops", json!(1e-12)),
        ("int8_tops", json!(1e12)),
    ] {
        let mut h = good.clone();
        h[field] = value.clone();
        let p = dir.path().join(format!("{field}.json"));
        std::fs::write(&p, h.to_string()).unwrap();
        let o = run(&["roofline", "--model", s(&model), "--hw-profile", s(&p)]);
        let e = one_line_error(&o);
        assert!(e.contains(field), "{field}={value}: {e}");
    }
}

/// Class 9: a GPU name and a file name with terminal controls reach no output raw.
#[test]
fn control_characters_from_inputs_never_reach_the_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let mut doc = real().clone();
    doc["deviceProperties"][0]["name"] = json!("NVIDIA\u{1b}[2J H200\nforged row\u{9b}");
    let p = write(dir.path(), "evil-gpu.json.gz", &doc);
    let evil = dir.path().join("evil\u{1b}]0;title\u{7}.json.gz");
    std::fs::copy(&p, &evil).unwrap();
    let clean = |o: &Output| {
        for text in [stdout(o), stderr(o)] {
            assert!(
                !text
                    .chars()
                    .any(|c| c.is_control() && c != '\n' && c != '\t'),
                "{text:?}"
            );
        }
    };
    for args in [
        vec!["report", "-q", s(&p)],
        vec!["report", "-q", "--markdown", s(&p)],
        vec!["report", "-q", "--json", s(&p)],
        vec!["report", "-q", s(&evil)],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        clean(&o);
    }
    // The GPU name in the gate's error line (the GPUs differ).
    let o = run(&[
        "gate",
        "-q",
        "--baseline",
        s(&repo(REAL)),
        "--current",
        s(&p),
    ]);
    one_line_error(&o);
    clean(&o);
    // A missing file whose name holds controls.
    let o = run(&["report", "-q", s(&dir.path().join("gone\u{1b}[31m.json"))]);
    one_line_error(&o);
    clean(&o);
}

/// Class 10: more steps than `--max-steps` keeps the first ones, warns, and never passes the
/// gate; more events than `--max-events` is refused for a native trace as for any other.
#[test]
fn limits_cut_steps_with_a_defect_and_refuse_events() {
    let o = run(&["report", "-q", "--json", "--max-steps", "5", REAL_PATH()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let r = &v["reports"][0];
    assert_eq!(r["steps"]["decode_steps"], 5, "{}", r["steps"]);
    assert_eq!(r["source"]["defects"][0]["kind"], "steps_cut");
    assert!(
        r["warnings"]
            .to_string()
            .contains("more than the 5 analysed")
    );
    let o = run(&[
        "gate",
        "-q",
        "--max-steps",
        "5",
        "--baseline",
        REAL_PATH(),
        "--current",
        REAL_PATH(),
    ]);
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert_ne!(o.status.code(), Some(0), "{all}");
    assert!(
        all.contains("current trace has 16 steps, more than the 5"),
        "{all}"
    );
    // 0 lifts the limit.
    let o = run(&["report", "-q", "--json", "--max-steps", "0", REAL_PATH()]);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["reports"][0]["source"]["defects"], json!([]));
    let native = repo("traces/reference/engine-llama3-8b-npl1.gst");
    let o = run(&["report", "-q", "--max-events", "500", s(&native)]);
    let e = one_line_error(&o);
    assert!(e.contains("--max-events"), "{e}");
}

#[allow(non_snake_case)]
fn REAL_PATH() -> &'static str {
    static P: OnceLock<String> = OnceLock::new();
    P.get_or_init(|| s(&repo(REAL)).to_owned())
}

/// Seeded mutations of the real trace, several at once (times removed, nulled, made NaN,
/// shifted back, huge or negative; events moved to another process; events duplicated):
/// every run ends in exit 0 or 2 with one line (never a panic), and the gate never exits 0
/// on a current whose report lists a defect.
#[test]
fn seeded_mutations_keep_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    for case in 0..12 {
        let mut doc = real().clone();
        let events = doc["traceEvents"].as_array_mut().unwrap();
        let mut extra = Vec::new();
        for e in events.iter_mut() {
            if !is_gpu(e) || next(200) != 0 {
                continue;
            }
            let o = e.as_object_mut().unwrap();
            match next(8) {
                0 => {
                    o.remove("dur");
                }
                1 => {
                    o.insert("ts".into(), Value::Null);
                }
                2 => {
                    o.insert("dur".into(), json!("NaN"));
                }
                3 => {
                    let t = o["ts"].as_f64().unwrap_or(0.0);
                    o.insert("ts".into(), json!(t - 5000.0));
                }
                4 => {
                    o.insert("ts".into(), json!(1e30));
                }
                5 => {
                    o.insert("dur".into(), json!(-1e9));
                }
                6 => {
                    o.insert("pid".into(), json!(12345));
                }
                _ => extra.push(Value::Object(o.clone())),
            }
        }
        events.extend(extra);
        let p = write(dir.path(), &format!("m{case}.json.gz"), &doc);
        let o = run(&["report", "-q", "--json", s(&p)]);
        match o.status.code() {
            Some(0) => {}
            Some(2) => {
                one_line_error(&o);
                continue;
            }
            c => panic!("case {case}: exit {c:?}: {}", stderr(&o)),
        }
        let v: Value = serde_json::from_slice(&o.stdout).unwrap();
        let defects = &v["reports"][0]["source"]["defects"];
        let o = run(&[
            "gate",
            "-q",
            "--baseline",
            s(&repo(REAL)),
            "--current",
            s(&p),
        ]);
        let code = o.status.code();
        assert!(matches!(code, Some(0..=2)), "case {case}: {}", stderr(&o));
        if code == Some(2) {
            one_line_error(&o);
        }
        if code == Some(0) {
            assert_eq!(
                defects,
                &json!([]),
                "case {case}: the gate passed a broken run"
            );
        }
        assert_ne!(defects, &json!([]), "case {case}: mutations went unnoticed");
    }
}
