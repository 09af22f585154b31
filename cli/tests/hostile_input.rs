//! Hostile and broken trace inputs through the `gapscope` binary (issue 18, points 6 and 7):
//! each class ends in exit 0 with the right figures or exit 2 with one line on stderr; never
//! a panic (exit 101), an abort or a hang. Usage errors are one line too.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use gapscope_tests::{gzip, mkfifo, repo, run, stderr};
use std::path::{Path, PathBuf};
use std::process::Output;

/// Exit 2 with exactly one line on stderr; returns that line.
fn fails_with_one_line<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> String {
    let o = run(args);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.starts_with("gapscope: error: "), "{e}");
    e
}

fn succeeds<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> Output {
    let o = run(args);
    assert!(o.status.success(), "{}", stderr(&o));
    o
}

fn report_json(trace: &Path) -> serde_json::Value {
    let o = succeeds(&["report".as_ref(), "--json".as_ref(), trace.as_os_str()]);
    serde_json::from_slice(&o.stdout).expect("JSON")
}

fn kernels_of(trace: &Path) -> u64 {
    report_json(trace)["reports"][0]["source"]["kernels"]
        .as_u64()
        .expect("kernel count")
}

fn kernel(i: usize) -> String {
    format!(r#"{{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{i},"dur":1}}"#)
}

fn trace_json(events: &[String]) -> String {
    format!(r#"{{"traceEvents":[{}]}}"#, events.join(","))
}

#[test]
fn usage_errors_are_one_line_and_help_is_kept() {
    for args in [
        &["report", "--bogus"][..],
        &["report"],
        &["import", "x.json"],
        &["frobnicate"],
        &[],
        &["history"],
        &["report", "--top", "many", "x.json"],
    ] {
        let e = fails_with_one_line(args);
        assert!(e.contains("see --help"), "{args:?}: {e}");
    }
    let o = succeeds(&["--help"]);
    assert!(String::from_utf8_lossy(&o.stdout).lines().count() > 5);
    let o = succeeds(&["import", "--help"]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("--max-events"));
    let o = succeeds(&["--version"]);
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("gapscope "));
}

/// A copy of the golden v1 native trace.
fn golden_copy(dir: &Path) -> PathBuf {
    let out = dir.join("g.gst");
    std::fs::create_dir(&out).unwrap();
    for e in std::fs::read_dir(repo("traces/tests/golden/v1.gst")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), out.join(e.file_name())).unwrap();
    }
    out
}

/// The byte position of the first record batch's buffer list in an IPC stream.
fn first_batch_buffers(stream: &[u8]) -> usize {
    let mut at = 0;
    let mut message = 0;
    loop {
        let len_at = if stream[at..at + 4] == [0xff; 4] {
            at + 4
        } else {
            at
        };
        let len = i32::from_le_bytes(stream[len_at..len_at + 4].try_into().unwrap()) as usize;
        let meta = &stream[len_at + 4..len_at + 4 + len];
        let msg = gapscope_traces::arrow_ipc::root_as_message(meta).unwrap();
        if message == 1 {
            let buffers = msg.header_as_record_batch().unwrap().buffers().unwrap();
            return len_at + 4 + (buffers.bytes().as_ptr() as usize - meta.as_ptr() as usize);
        }
        at = len_at + 4 + len + msg.bodyLength() as usize;
        message += 1;
    }
}

#[test]
fn native_buffers_out_of_bounds_and_compressed_batches_are_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let g = golden_copy(tmp.path());
    assert_eq!(kernels_of(&g), 4);
    let k = g.join("kernels.arrows");
    let good = std::fs::read(&k).unwrap();
    let mut bad = good.clone();
    // Buffer 1 (the first column's values): length 2^40.
    let at = first_batch_buffers(&bad) + 16 + 8;
    bad[at..at + 8].copy_from_slice(&(1i64 << 40).to_le_bytes());
    std::fs::write(&k, &bad).unwrap();
    let e = fails_with_one_line(&["report".as_ref(), g.as_os_str()]);
    assert!(
        e.contains("kernels.arrows") && e.contains("outside the"),
        "{e}"
    );

    std::fs::copy(repo("traces/tests/data/kernels-lz4.arrows"), &k).unwrap();
    let e = fails_with_one_line(&["report".as_ref(), g.as_os_str()]);
    assert!(e.contains("compressed"), "{e}");
}

#[test]
fn extreme_timestamps_are_clamped_and_reported() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("extreme.json");
    std::fs::write(
        &p,
        trace_json(&[
            r#"{"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":-9.2e15,"dur":1.8e16}"#
                .to_owned(),
            r#"{"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"ts":1e300,"dur":-5}"#
                .to_owned(),
            kernel(10),
        ]),
    )
    .unwrap();
    let o = succeeds(&["report".as_ref(), p.as_os_str()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("untrusted times"), "{out}");
    let gst = tmp.path().join("extreme.gst");
    let o = succeeds(&[
        "import".as_ref(),
        p.as_os_str(),
        "-o".as_ref(),
        gst.as_os_str(),
    ]);
    assert!(stderr(&o).contains("untrusted times"));
    // The native copy holds the clamped times and reads back without a new warning.
    assert_eq!(kernels_of(&gst), 3);
    let o = succeeds(&["report".as_ref(), gst.as_os_str()]);
    assert!(!String::from_utf8_lossy(&o.stdout).contains("untrusted times"));
}

#[test]
fn whitespace_padding_streams_and_the_event_limit_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let pad = " ".repeat(16 << 20);
    let text = format!(
        r#"{{"traceEvents":[{}{pad},{pad}{}]}}"#,
        kernel(1),
        kernel(5)
    );
    let p = tmp.path().join("pad.json.gz");
    std::fs::write(&p, gzip(text.as_bytes(), flate2::Compression::fast())).unwrap();
    assert_eq!(kernels_of(&p), 2);

    let p = tmp.path().join("four.json");
    std::fs::write(&p, trace_json(&(0..4).map(kernel).collect::<Vec<_>>())).unwrap();
    let out = tmp.path().join("four.gst");
    let args = |n: &str| {
        vec![
            "import".into(),
            p.clone().into_os_string(),
            "-o".into(),
            out.clone().into_os_string(),
            "--max-events".into(),
            n.into(),
        ]
    };
    let e = fails_with_one_line(&args("3"));
    assert!(
        e.contains("more than 3 events") && e.contains("--max-events"),
        "{e}"
    );
    assert!(!out.exists(), "a refused import writes nothing");
    succeeds(&args("0"));
    assert_eq!(kernels_of(&out), 4);
}

#[test]
fn gzip_corruption_fails_and_truncation_needs_the_flag() {
    let tmp = tempfile::tempdir().unwrap();
    let events: Vec<String> = (0..2000).map(kernel).collect();
    let good = gzip(trace_json(&events).as_bytes(), flate2::Compression::none());
    let mut crc = good.clone();
    let n = crc.len();
    crc[n - 6] ^= 0x40;
    let p = tmp.path().join("crc.json.gz");
    std::fs::write(&p, &crc).unwrap();
    for extra in [None, Some("--allow-truncated")] {
        let mut args = vec!["report".into(), p.clone().into_os_string()];
        args.extend(extra.map(Into::into));
        let e = fails_with_one_line(&args);
        assert!(e.contains("corrupt gzip data"), "{e}");
    }

    let p = tmp.path().join("cut.json.gz");
    std::fs::write(&p, &good[..good.len() / 2]).unwrap();
    let e = fails_with_one_line(&["report".as_ref(), p.as_os_str()]);
    assert!(e.contains("truncated"), "{e}");
    let o = succeeds(&[
        "report".as_ref(),
        "--allow-truncated".as_ref(),
        p.as_os_str(),
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("trace is truncated"), "{out}");
}

#[test]
fn json_shapes_bom_trailing_data_and_nested_cat() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bom.json");
    let mut bytes = b"\xEF\xBB\xBF".to_vec();
    bytes.extend_from_slice(trace_json(&[kernel(1)]).as_bytes());
    std::fs::write(&p, bytes).unwrap();
    assert_eq!(kernels_of(&p), 1);

    let p = tmp.path().join("tail.json");
    std::fs::write(&p, format!("{} garbage", trace_json(&[kernel(1)]))).unwrap();
    let e = fails_with_one_line(&["report".as_ref(), p.as_os_str()]);
    assert!(e.contains("after the end of the JSON document"), "{e}");

    let p = tmp.path().join("cat.json");
    std::fs::write(
        &p,
        trace_json(&[
            r#"{"ph":"X","args":{"cat":"kernel"},"cat":"cpu_op","name":"op","pid":0,"tid":1,"ts":1,"dur":1}"#.to_owned(),
            kernel(3),
        ]),
    )
    .unwrap();
    assert_eq!(kernels_of(&p), 1);
}

#[cfg(unix)]
#[test]
fn fifos_and_odd_paths() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["t.json", "t.sqlite"] {
        let p = tmp.path().join(name);
        mkfifo(&p);
        let e = fails_with_one_line(&["report".as_ref(), p.as_os_str()]);
        assert!(e.contains("FIFO"), "{e}");
    }

    // An nsys export under a name that is not UTF-8, with a -wal file beside it.
    use std::os::unix::ffi::OsStrExt;
    let p = tmp
        .path()
        .join(std::ffi::OsStr::from_bytes(b"r\xfcn.sqlite"));
    std::fs::copy(repo("analyzer/tests/data/nsys/nsys-2025.3.sqlite"), &p).unwrap();
    assert_eq!(kernels_of(&p), 6);
    let mut wal = p.clone().into_os_string();
    wal.push("-wal");
    std::fs::write(&wal, [0u8; 4096]).unwrap();
    let o = succeeds(&["report".as_ref(), p.as_os_str()]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("-wal holds 4096 bytes"), "{out}");
}

#[cfg(unix)]
#[test]
fn import_output_never_writes_through_links() {
    let tmp = tempfile::tempdir().unwrap();
    let input = repo("traces/tests/golden/v1.gst");
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();

    // An existing trace whose stream files are links to somewhere else.
    let out = tmp.path().join("out.gst");
    succeeds(&[
        "import".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    for f in ["kernels.arrows", "strings.arrows"] {
        std::fs::remove_file(out.join(f)).unwrap();
        std::os::unix::fs::symlink(&victim, out.join(f)).unwrap();
    }
    succeeds(&[
        "import".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert!(
        !std::fs::symlink_metadata(out.join("kernels.arrows"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(kernels_of(&out), 4);

    // A directory that is not a trace, and a link as the output, are refused.
    let home = tmp.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(home.join("notes"), b"mine").unwrap();
    let e = fails_with_one_line(&[
        "import".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        home.as_os_str(),
    ]);
    assert!(e.contains("not a gapscope trace"), "{e}");
    let link = tmp.path().join("link.gst");
    std::os::unix::fs::symlink(&home, &link).unwrap();
    let e = fails_with_one_line(&[
        "import".as_ref(),
        input.as_os_str(),
        "-o".as_ref(),
        link.as_os_str(),
    ]);
    assert!(e.contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read_dir(&home).unwrap().count(), 1);
}
