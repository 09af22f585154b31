//! The launcher's argument handling and errors, without a GPU: each failure is one line on
//! stderr with exit status 2 (127 for a program that is not there), and a kept spool turns
//! into a trace with `--from-spool`.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::Path;
use std::process::{Command, Output};

fn record(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gapscope-record"))
        .args(args)
        .env("CUDA_HOME", "/nonexistent-cuda")
        .output()
        .unwrap()
}

fn one_line_error(o: &Output, code: i32, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(code), "stderr: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "stderr: {err}");
    assert!(
        err.starts_with("gapscope-record: ") && err.contains(needle),
        "stderr: {err}"
    );
}

#[test]
fn recorder_errors_are_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let fake_inject = d.path().join("libgapscope_profiler.so");
    std::fs::write(&fake_inject, b"x").unwrap();
    let inj = fake_inject.to_str().unwrap();
    let out = d.path().join("o.gst");
    let out = out.to_str().unwrap();

    // OPTIONS -o OUT -- true fails with one line naming NEEDLE.
    let rejects = |options: &[&str], needle: &str| {
        let mut args = options.to_vec();
        args.extend(["-o", out, "--", "true"]);
        one_line_error(&record(&args), 2, needle);
    };

    rejects(
        &[
            "--inject-lib",
            inj,
            "--cupti-lib",
            "/nonexistent/libcupti.so.13",
        ],
        "CUPTI library /nonexistent/libcupti.so.13: no such file",
    );
    rejects(
        &["--inject-lib", "/nonexistent/libinject.so"],
        "injection library /nonexistent/libinject.so not found",
    );
    rejects(
        &["--delay", "-1"],
        "--delay must be a non-negative number of seconds",
    );
    rejects(
        &["--capture-range", "cudaProfilerApi", "--api", "none"],
        "drop --api none",
    );
    rejects(
        &["--collect", "range"],
        "add --capture-range cudaProfilerApi",
    );
    // LD_PRELOAD cannot carry a path with a ':' in it.
    let odd_dir = d.path().join("a:b");
    std::fs::create_dir_all(&odd_dir).unwrap();
    let odd = odd_dir.join("libgapscope_profiler.so");
    std::fs::write(&odd, b"x").unwrap();
    rejects(
        &[
            "--inject-lib",
            odd.to_str().unwrap(),
            "--capture-range",
            "cudaProfilerApi",
            "--collect",
            "late",
        ],
        "LD_PRELOAD cannot name",
    );
    rejects(
        &["--buffer-mb", "0"],
        "--buffer-mb must be between 1 and 256",
    );
    // An output that is something else is never overwritten.
    let precious = d.path().join("notes.txt");
    std::fs::write(&precious, b"keep me").unwrap();
    let o = record(&["-o", precious.to_str().unwrap(), "--", "true"]);
    one_line_error(&o, 2, "exists and is not a gapscope trace");
    assert_eq!(std::fs::read(&precious).unwrap(), b"keep me");
    // No program: clap's usage error, exit 2.
    let o = record(&["-o", out]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("<CMD>"));
}

#[test]
fn kept_spool_becomes_a_trace() {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("plain.gst");
    let spool = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/plain-cuda13.0.spool");
    let o = record(&[
        "--from-spool",
        spool.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("36 kernels, 4 memops"), "{err}");
    let t = gapscope_traces::read_trace(&out, &Default::default()).unwrap();
    assert_eq!(t.kernels.len(), 36);
    // With the capture range, the seven kernels between cudaProfilerStart and Stop.
    let out2 = d.path().join("range.gst");
    let o = record(&[
        "--from-spool",
        spool.to_str().unwrap(),
        "--capture-range",
        "cudaProfilerApi",
        "-o",
        out2.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert_eq!(
        gapscope_traces::read_trace(&out2, &Default::default())
            .unwrap()
            .kernels
            .len(),
        7
    );
    // A file that is not a spool: one line naming it.
    let junk = d.path().join("junk.spool");
    std::fs::write(&junk, b"this is not a spool file").unwrap();
    let x = d.path().join("x.gst");
    let o = record(&[
        "--from-spool",
        junk.to_str().unwrap(),
        "-o",
        x.to_str().unwrap(),
    ]);
    one_line_error(&o, 2, "junk.spool: not a gapscope spool file");
}

#[test]
fn printed_layout_names_every_decoded_field() {
    let o = record(&["--print-layout"]);
    assert!(o.status.success());
    let s = String::from_utf8_lossy(&o.stdout);
    // 7 record sizes and the 69 fields the decoder reads.
    assert_eq!(s.lines().count(), 76);
    assert!(s.contains("CUpti_ActivityKernel10.name 104"));
}
