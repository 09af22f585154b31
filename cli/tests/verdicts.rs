//! Verdicts a CI job can trust: `gate`, `diff` and `report` on broken, incomparable and
//! implausible inputs made from the bundled real traces (the audit's reproductions).

use std::path::{Path, PathBuf};
use std::process::Output;

use gapscope_tests::{repo, run, s, stderr, stdout};
use gapscope_traces::{ReadOptions, Trace, read_trace, write_trace};

const HF_1B: &str = "traces/reference/hf-llama3.2-1b-npl8.json.gz";
const HF_QWEN: &str = "traces/reference/hf-qwen3-0.6b-npl1.json.gz";
const CPU_ONLY: &str = "traces/reference/hf-llama3.2-1b-cpuonly.json.gz";
const ENGINE_8B: &str = "traces/reference/engine-llama3-8b-npl1.gst";
const HF_8B: &str = "traces/reference/hf-llama3-8b-npl1.json.gz";

/// `o` exited with `code` and its stdout says `needle`.
fn exits_saying(o: &Output, code: i32, needle: &str) {
    assert_eq!(o.status.code(), Some(code), "{}", stderr(o));
    assert!(stdout(o).contains(needle), "{}", stdout(o));
}

/// The element of the JSON array `rows` whose `key` is `value`.
fn row<'a>(rows: &'a serde_json::Value, key: &str, value: &str) -> &'a serde_json::Value {
    rows.as_array()
        .unwrap_or_else(|| panic!("not an array: {rows:#}"))
        .iter()
        .find(|r| r[key] == value)
        .unwrap_or_else(|| panic!("no {key} = {value:?} in {rows:#}"))
}

/// Exit 2 with exactly one line on stderr that contains `needle`.
fn refused(o: &Output, needle: &str) {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(2), "stdout {} stderr {e}", stdout(o));
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains(needle), "{needle:?} not in {e}");
}

/// The 1B HF trace as a native trace in `dir`, loaded.
fn hf_1b(dir: &Path) -> (PathBuf, Trace) {
    let out = dir.join("1b.gst");
    let o = run(&["import", "-q", s(&repo(HF_1B)), "-o", s(&out)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = read_trace(&out, &ReadOptions::default()).unwrap();
    (out, t)
}

fn save(dir: &Path, name: &str, t: &Trace) -> PathBuf {
    let p = dir.join(name);
    write_trace(&p, t).unwrap();
    p
}

/// Every timestamp moved `factor` times further from the first kernel, every duration
/// kept: a pure host or launch-overhead regression with the same kernels.
fn stretched(t: &Trace, factor: f64) -> Trace {
    let mut t = t.clone();
    let t0 = *t.kernels.gpu_start_ns.iter().min().unwrap();
    let at = |v: i64| t0 + ((v - t0) as f64 * factor) as i64;
    let k = &mut t.kernels;
    for i in 0..k.len {
        let d = k.gpu_end_ns[i] - k.gpu_start_ns[i];
        k.gpu_start_ns[i] = at(k.gpu_start_ns[i]);
        k.gpu_end_ns[i] = k.gpu_start_ns[i] + d;
    }
    let m = &mut t.memops;
    for i in 0..m.len {
        let d = m.gpu_end_ns[i] - m.gpu_start_ns[i];
        m.gpu_start_ns[i] = at(m.gpu_start_ns[i]);
        m.gpu_end_ns[i] = m.gpu_start_ns[i] + d;
    }
    let mk = &mut t.markers;
    for v in [
        &mut mk.gpu_start_ns,
        &mut mk.gpu_end_ns,
        &mut mk.host_start_ns,
        &mut mk.host_end_ns,
    ] {
        v.iter_mut()
            .filter(|x| **x != i64::MIN)
            .for_each(|x| *x = at(*x));
    }
    let l = &mut t.launches;
    for v in [&mut l.host_start_ns, &mut l.host_end_ns] {
        v.iter_mut().for_each(|x| *x = at(*x));
    }
    t
}

/// The trace with only the kernels `keep` accepts (by index).
fn kernels_kept(t: &Trace, keep: impl Fn(usize, &str) -> bool) -> Trace {
    let mut out = t.clone();
    out.kernels = Default::default();
    for i in 0..t.kernels.len {
        if keep(i, t.strings.get(t.kernels.name[i])) {
            out.kernels.push(t.kernels.row(i));
        }
    }
    out
}

fn gate(base: &Path, cur: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["gate", "-q", "--baseline", s(base), "--current", s(cur)];
    args.extend_from_slice(extra);
    run(&args)
}

/// What `gate --allow-incomparable` compared despite: its JSON's `overridden_kinds`.
fn overridden(base: &Path, cur: &Path, extra: &[&str]) -> Vec<serde_json::Value> {
    let mut args = vec!["--allow-incomparable", "--json"];
    args.extend_from_slice(extra);
    let o = gate(base, cur, &args);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&o), stderr(&o)));
    assert_eq!(
        v["overridden"].as_array().map(Vec::len),
        v["overridden_kinds"].as_array().map(Vec::len),
        "a sentence for each: {v:#}"
    );
    v["overridden_kinds"].as_array().unwrap().clone()
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
    // Steps lost: five kernels and no markers leave nothing to find steps in.
    let mut few = kernels_kept(&t, |i, _| i < 5);
    few.markers = Default::default();
    let few = save(dir.path(), "few.gst", &few);
    let o = gate(&b1, &few, &[]);
    exits_saying(&o, 1, "the current trace has no decode steps");
    // Far fewer kernels per step than the baseline: keep one kernel in three.
    let thin = save(dir.path(), "thin.gst", &kernels_kept(&t, |i, _| i % 3 == 0));
    let o = gate(&b1, &thin, &[]);
    exits_saying(&o, 1, "kernels per step: FAILED");
    assert!(stdout(&o).contains("fewer than 50%"), "{}", stdout(&o));
    // B14: a bucket gone from the current trace is named so, not "no steps on one side".
    let no_argmax = save(
        dir.path(),
        "no-sampling.gst",
        &kernels_kept(&t, |_, n| !n.contains("ArgMax") && !n.contains("argmax")),
    );
    let o = gate(&b1, &no_argmax, &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let sampling = row(&v["buckets"], "bucket", "sampling");
    assert!(
        sampling["reason"]
            .as_str()
            .unwrap()
            .starts_with("absent from the current trace"),
        "{sampling}"
    );
}

#[test]
fn gate_catches_step_time_regressions_with_the_same_kernels() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    for (factor, name) in [(1.5, "x1.5.gst"), (1.1, "x1.1.gst")] {
        let cur = save(dir.path(), name, &stretched(&t, factor));
        let o = gate(&b1, &cur, &[]);
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(1), "{factor}: {out}{}", stderr(&o));
        assert!(
            out.lines()
                .any(|l| l.starts_with("TPOT") && l.contains("REGRESSION")),
            "{factor}: {out}"
        );
        assert!(out.contains("regression: TPOT median +"), "{out}");
    }
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
    assert_eq!(
        overridden(&b1, &other, &[]),
        [serde_json::json!({
            "kind": "gpu_differs",
            "baseline": "NVIDIA H200",
            "current": "NVIDIA H100 80GB HBM3"
        })]
    );
    // Batch sizes differ where the markers say.
    let mut b2 = t.clone();
    b2.markers.batch_size.iter_mut().for_each(|b| *b = 2);
    let mut b8 = t.clone();
    b8.markers.batch_size.iter_mut().for_each(|b| *b = 8);
    let (b2, b8) = (
        save(dir.path(), "b2.gst", &b2),
        save(dir.path(), "b8.gst", &b8),
    );
    refused(&gate(&b8, &b2, &[]), "cannot compare");
    assert_eq!(
        overridden(&b8, &b2, &[]),
        [serde_json::json!({"kind": "batch_differs", "baseline": 8, "current": 2})]
    );
    // Steps cut by markers against steps found automatically.
    let o = gate(&b1, &b1, &["--no-markers"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut unmarked = t.clone();
    unmarked.markers = Default::default();
    let unmarked = save(dir.path(), "unmarked.gst", &unmarked);
    refused(&gate(&b1, &unmarked, &[]), "cannot compare");
    let cut = &overridden(&b1, &unmarked, &[])[0];
    assert_eq!(cut["kind"], "steps_cut_differently", "{cut}");
    assert_eq!(cut["baseline"]["source"]["kind"], "markers", "{cut}");
    assert_eq!(cut["current"]["kind"], "automatic", "{cut}");
}

/// The 1B trace whose step markers cover only the first tenth of each step.
fn short_markers(t: &Trace) -> Trace {
    let mut out = t.clone();
    let m = &mut out.markers;
    for i in 0..m.len {
        for (s, e) in [
            (&mut m.gpu_start_ns, &mut m.gpu_end_ns),
            (&mut m.host_start_ns, &mut m.host_end_ns),
        ] {
            if s[i] != i64::MIN {
                e[i] = s[i] + (e[i] - s[i]) / 10;
            }
        }
    }
    out
}

#[test]
fn implausible_steps_are_flagged_by_report_and_refused_by_gate_and_diff() {
    let dir = tempfile::tempdir().unwrap();
    let (b1, t) = hf_1b(dir.path());
    let bad = save(dir.path(), "short-markers.gst", &short_markers(&t));
    let o = run(&["report", "-q", s(&bad)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("WARNING") && out.lines().next().unwrap().contains("implausible"),
        "{out}"
    );
    let o = run(&["report", "-q", "--json", s(&bad)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
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
    // The real traces are plausible.
    for r in [HF_1B, HF_QWEN, HF_8B, ENGINE_8B] {
        let o = run(&["report", "-q", "--json", s(&repo(r))]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["reports"][0]["plausibility"]["plausible"], true, "{r}");
    }
    refused(
        &gate(&b1, &bad, &[]),
        "the current's steps look implausible",
    );
    let why = overridden(&b1, &bad, &[]);
    assert_eq!(why.len(), 1, "{why:?}");
    assert_eq!(
        (&why[0]["kind"], &why[0]["side"]),
        (&"implausible".into(), &"current".into())
    );
    assert_eq!(why[0]["problems"][0]["check"], "coverage", "{why:?}");
    refused(
        &run(&["diff", "-q", s(&bad), s(&b1)]),
        "steps look implausible",
    );
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
    // B4: the engine files its linear layers under gemv, HF under gemm_dense. No what-if
    // may rank a single bucket of a group the two sides file differently.
    for (a, b) in [(ENGINE_8B, HF_8B), (HF_8B, ENGINE_8B)] {
        let o = run(&["diff", "-q", "--json", s(&repo(a)), s(&repo(b))]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let grouped: Vec<Vec<String>> = v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["grouped"] == true)
            .map(|g| {
                g["buckets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_str().unwrap().to_owned())
                    .collect()
            })
            .collect();
        assert!(
            grouped.iter().any(|g| g.contains(&"gemv".to_owned())),
            "linear layers not grouped: {v:#}"
        );
        for w in v["what_if"].as_array().unwrap() {
            if w["kind"] == "bucket" {
                let bk = w["bucket"].as_str().unwrap().to_owned();
                assert!(
                    !grouped.iter().any(|g| g.contains(&bk)),
                    "lever {bk} splits a grouped bucket: {w}"
                );
            }
        }
        // Every lever's gain is what the groups and buckets support.
        let linear = row(&v["groups"], "group", "linear layers");
        let lw = row(&v["what_if"], "lever", "linear layers");
        assert_eq!(lw["gain_as_b_ms"], linear["delta_ms"]);
        assert!(linear["delta_ms"].as_f64().unwrap().abs() < 1.0, "{linear}");
    }
    // HF against the engine: the lever is the idle time, not a kernel bucket.
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
    let o = run(&["diff", "-q", "--json", s(&a), s(&a)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
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
        let o = run(&["report", "-q", s(p)]);
        let out = stdout(&o);
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
    let o = run(&[
        "report",
        "-q",
        s(&repo("analyzer/tests/data/nsys/nsys-2025.3.sqlite")),
    ]);
    let out = stdout(&o);
    assert!(
        out.contains("TPOT           n/a: TPOT needs two consecutive decode steps"),
        "{out}"
    );
    // B24: graph kernels in a trace without launch records.
    let o = run(&["report", "-q", s(&repo(ENGINE_8B))]);
    let out = stdout(&o);
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
    let o = run(&["report", "-q", s(&rec)]);
    let out = stdout(&o);
    let warning = out
        .lines()
        .find(|l| l.starts_with("warning") && l.contains("timings are distorted"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        warning.contains("command buffer full 600.0 ms"),
        "{warning}"
    );
    let o = run(&["report", "-q", "--json", s(&rec)]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["reports"][0]["distortion"]["share_pct"].as_f64().unwrap() > 30.0);
    let o = gate(&b1, &rec, &[]);
    exits_saying(&o, 0, "warning: current: timings are distorted");
    // The undistorted trace carries no such warning.
    let o = run(&["report", "-q", s(&b1)]);
    assert!(!stdout(&o).contains("distorted"));
}
