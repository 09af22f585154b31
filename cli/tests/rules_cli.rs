//! `gapscope buckets` and `--rules` end to end: the JSON rule list, memops under
//! `replace_builtin` (report, export, buckets and explain agree), rules-file errors that keep
//! their reason, files that are not regular, and a kernel name of 4M characters.

use gapscope_tests::{drain, gapscope, json, mkfifo, one_line_error, repo, run, run_within};
use std::process::{Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Runs `gapscope args` and returns its output and the CPU time it used (user and system,
/// from wait4). A bound on CPU time holds on a busy machine, where wall time grows with the
/// load (four busy loops on this two-core machine took the run below from 1.2 s to 8 s of
/// wall time). A run past two minutes is killed and fails the test.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which gives its own resource usage"
)]
fn run_cpu_timed(args: &[&str]) -> (Output, Duration) {
    use std::os::unix::process::ExitStatusExt;
    let mut child = gapscope()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("runs");
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let pid = i32::try_from(child.id()).expect("a pid");
    let done = Arc::new(AtomicBool::new(false));
    let watchdog = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let start = Instant::now();
            while !done.load(Ordering::SeqCst) {
                if start.elapsed() > Duration::from_secs(120) {
                    // SAFETY: kill(2) with a pid and a signal; the child is not reaped
                    // before `done` is set, so the pid is still the child's.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                    return true;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            false
        })
    };
    let mut status = 0;
    // SAFETY: rusage is plain data, valid when zeroed.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, not yet reaped (`child` is never waited on), with
    // valid pointers for the status and the usage.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    done.store(true, Ordering::SeqCst);
    assert_eq!(reaped, pid, "wait4");
    assert!(
        !watchdog.join().expect("watchdog"),
        "gapscope {args:?} ran past two minutes"
    );
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    let output = Output {
        status: std::process::ExitStatus::from_raw(status),
        stdout: out.join().expect("stdout"),
        stderr: err.join().expect("stderr"),
    };
    (output, tv(usage.ru_utime) + tv(usage.ru_stime))
}

#[test]
fn buckets_list_json() {
    let v = json(&["buckets", "--json"]);
    assert_eq!(v["schema_version"], 1);
    let rules = v["rules"].as_array().unwrap();
    assert!(rules.len() > 20, "{}", rules.len());
    assert_eq!(rules[0]["position"], 1);
    assert_eq!(rules[0]["kind"], "memop");
    assert!(rules.iter().any(|r| r["kind"] == "regex"
        && r["bucket"] == "gemm_dense"
        && r["pattern"].as_str().unwrap().contains("nvjet")));
    assert!(
        rules
            .iter()
            .all(|r| r["origin"].as_str().unwrap().starts_with("builtin:"))
    );
    // The built-in rules cover every memop kind.
    assert_eq!(v["memops_without_rule"], serde_json::json!([]));
    let e = json(&["buckets", "--json", "--explain", "DtoD"]);
    assert_eq!(e["schema_version"], 1);
    assert_eq!(e["bucket"], "copy");
    assert_eq!(e["memop"], "DtoD");
}

#[test]
fn replace_builtin_memops_agree_across_report_export_and_buckets() {
    let dir = tempfile::tempdir().unwrap();
    let rules = dir.path().join("repl.toml");
    std::fs::write(
        &rules,
        "replace_builtin = true\n[[rule]]\nname = \"nvjet\"\nregex = '^nvjet'\nbucket = \"gemm_dense\"\n",
    )
    .unwrap();
    let r = rules.to_str().unwrap();
    let trace = repo("traces/reference/hf-qwen3-0.6b-npl1.json.gz");
    let t = trace.to_str().unwrap();

    // buckets: the one rule, and the memops that fall through to `other`.
    let list = json(&["buckets", "--json", "--rules", r]);
    assert_eq!(list["rules"].as_array().unwrap().len(), 1);
    let without: Vec<&str> = list["memops_without_rule"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_str().unwrap())
        .collect();
    assert!(
        without.contains(&"Memset") && without.contains(&"DtoD"),
        "{without:?}"
    );
    let text = String::from_utf8(run(&["buckets", "--rules", r]).stdout).unwrap();
    assert!(
        text.contains("memops no rule lists") && text.contains("Memset"),
        "{text}"
    );
    for name in ["Memset", "[memop] Memset (Device)"] {
        let e = json(&["buckets", "--json", "--rules", r, "--explain", name]);
        assert_eq!(e["bucket"], "other", "{name}: {e}");
        assert_eq!(e["memop"], "Memset");
    }

    // report: the memset is listed under `other`, and under no other bucket.
    let v = json(&["report", "--json", "--rules", r, "--top", "50", t]);
    let rep = &v["reports"][0];
    let mut memop_buckets = Vec::new();
    for b in rep["buckets"].as_array().unwrap() {
        for n in b["top"].as_array().into_iter().flatten() {
            if n["name"].as_str().unwrap().starts_with("[memop]") {
                memop_buckets.push(b["bucket"].as_str().unwrap().to_owned());
            }
        }
    }
    for n in rep["other"]["top"].as_array().into_iter().flatten() {
        if n["name"].as_str().unwrap().starts_with("[memop] Memset") {
            memop_buckets.push("other".to_owned());
        }
    }
    assert!(!memop_buckets.is_empty(), "the trace has memops: {rep:#}");
    assert!(
        memop_buckets.iter().all(|b| b == "other"),
        "{memop_buckets:?}"
    );

    // export --parquet: the memops' bucket column says `other` too.
    let pq = dir.path().join("out.parquet");
    let o = run(&["export", t, "--rules", r, "--parquet", pq.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    use parquet::file::reader::FileReader;
    let f = std::fs::File::open(&pq).unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(f).unwrap();
    let mut memops = 0;
    for row in reader.get_row_iter(None).unwrap() {
        let row = row.unwrap();
        let cols: Vec<(String, String)> = row
            .get_column_iter()
            .map(|(k, v)| (k.clone(), v.to_string()))
            .collect();
        let get = |k: &str| cols.iter().find(|c| c.0 == k).map(|c| c.1.clone());
        if get("kind").unwrap().contains("mem") {
            memops += 1;
            assert_eq!(get("bucket").unwrap(), "\"other\"", "{cols:?}");
        }
    }
    assert!(memops > 0);
}

#[test]
fn rules_file_errors_keep_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("r.toml");
    std::fs::write(&f, "[[rule]\nname = 'x'\n").unwrap();
    let e = one_line_error(&run(&["buckets", "--rules", f.to_str().unwrap()]));
    assert!(e.contains("r.toml: invalid rules file: "), "{e}");
    assert!(e.contains("line 1"), "{e}");
    // The reason, not only the position.
    let reason = e.split("invalid rules file: ").nth(1).unwrap();
    assert!(!reason.starts_with("(line"), "{e}");
    std::fs::write(
        &f,
        "[[rule]]\nname = 'x'\nregex = 'a'\nbucket = 'norm'\nfoo = 1\n",
    )
    .unwrap();
    let e = one_line_error(&run(&["buckets", "--rules", f.to_str().unwrap()]));
    assert!(
        e.contains("unknown field `foo`") && e.contains("line 5"),
        "{e}"
    );
}

#[cfg(unix)]
#[test]
fn rules_from_fifos_and_devices_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("rules.toml");
    mkfifo(&fifo);
    for path in [fifo.to_str().unwrap(), "/dev/zero"] {
        let o = run_within(&["buckets", "--rules", path], Duration::from_secs(20));
        let e = one_line_error(&o);
        assert!(e.contains("must be a regular file"), "{e}");
    }
    let big = dir.path().join("big.toml");
    std::fs::write(&big, vec![b'#'; 5 << 20]).unwrap();
    let e = one_line_error(&run(&["buckets", "--rules", big.to_str().unwrap()]));
    assert!(e.contains("limit"), "{e}");
}

#[test]
fn a_kernel_name_of_4m_non_ascii_characters_is_classified_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("long.json");
    let name = "é".repeat(4_000_000);
    let doc = format!(
        "{{\"traceEvents\":[{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"{name}\",\"ts\":1,\"dur\":2,\"pid\":0,\"tid\":7,\"args\":{{\"device\":0,\"stream\":7}}}},{{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"nvjet_x\",\"ts\":5,\"dur\":2,\"pid\":0,\"tid\":7,\"args\":{{\"device\":0,\"stream\":7}}}}]}}"
    );
    std::fs::write(&trace, doc).unwrap();
    let (o, cpu) = run_cpu_timed(&["report", "--json", trace.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["reports"][0]["source"]["kernels"], 2);
    // Built-in rules over the whole name took ~10 s in a release build; bounded, it is the
    // import that costs (about 1.2 s).
    assert!(cpu < Duration::from_secs(5), "{cpu:?} of CPU time");
}
