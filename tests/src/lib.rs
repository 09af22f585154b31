//! Helpers the integration tests of every gapscope crate share, in the manner of ripgrep's
//! `tests/util.rs`: the repository's files, the `gapscope` binary and what it printed. The
//! cross-crate tests themselves are in `tests/`.
//!
//! This crate depends on no gapscope crate, so any of them can use it as a dev-dependency;
//! its `traces` feature adds the `traces` module: the trace transforms that the analyzer's and
//! the CLI's tests both make their inputs with.

#![forbid(unsafe_code)]
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a fixture that cannot be made fails the test that asked for it"
)]

pub mod sqlite;
#[cfg(feature = "traces")]
pub mod traces;

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A path inside the repository.
pub fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

/// A trace of the committed corpus of real public traces (`traces/corpus/`, sources and
/// licences in its SOURCES.md); a missing file fails the test (it never passes without its
/// input).
pub fn corpus(name: &str) -> PathBuf {
    let p = repo(&format!("traces/corpus/{name}"));
    assert!(
        p.is_file(),
        "missing corpus trace {}: the corpus commit provides traces/corpus/ (sources and \
         licences in its SOURCES.md)",
        p.display()
    );
    p
}

/// A path as `&str`, for argument lists.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The `gapscope` binary cargo built for this test run: next to the `deps/` folder that
/// holds the test binary (cargo builds a package's binaries before its integration tests).
pub fn gapscope() -> Command {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps");
    let bin = dir.join(format!("gapscope{}", std::env::consts::EXE_SUFFIX));
    assert!(bin.exists(), "{} is not built", bin.display());
    // The developer's own defaults (docs/CLI.md, "Configuration") never reach a test.
    let mut c = Command::new(bin);
    c.env("GAPSCOPE_NO_CONFIG", "1");
    for v in [
        "GAPSCOPE_DB",
        "GAPSCOPE_HW",
        "GAPSCOPE_RULES",
        "GAPSCOPE_CONFIG",
    ] {
        c.env_remove(v);
    }
    c
}

/// Runs `gapscope` with `args` and collects its output.
pub fn run<S: AsRef<OsStr>>(args: &[S]) -> Output {
    gapscope().args(args).output().expect("runs")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Reads `r` to its end on a thread of its own (a child's stdout or stderr, read while it
/// runs so that a full pipe cannot stop it).
pub fn drain(mut r: Box<dyn std::io::Read + Send>) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = r.read_to_end(&mut v);
        v
    })
}

/// Runs with a deadline, so a hang fails the test instead of blocking it. The output is
/// read while the command runs.
pub fn run_within(args: &[&str], limit: Duration) -> Output {
    let mut child = gapscope()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("waits") {
            break s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gapscope {args:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Runs `cmd`, whose program (or one it starts) a test has just written, again while that
/// file is busy. A test thread that writes an executable holds it open for writing, and a
/// child another test thread forks meanwhile keeps that descriptor until it execs; an exec
/// of the file then fails with ETXTBSY ("Text file busy"), from `cmd` itself or reported on
/// stderr by the program that tried (`setpriv`, `gapscope gui`). The window is short: up to
/// 50 tries, 20 ms apart.
pub fn output_of_fresh_executable(cmd: &mut Command) -> Output {
    const ETXTBSY: i32 = 26;
    for _ in 0..50 {
        match cmd.output() {
            Err(e) if e.raw_os_error() == Some(ETXTBSY) => {}
            Ok(o) if !o.status.success() && stderr(&o).contains("Text file busy") => {}
            r => return r.expect("runs"),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{cmd:?}: the executable stayed busy for a second")
}

/// Makes a FIFO at `path` (with mkfifo(1)).
pub fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(ok.success(), "mkfifo {}", path.display());
}

/// Runs `cmd`, which must succeed (its stderr is the failure message); its output.
pub fn success(cmd: &mut Command) -> Output {
    let o = cmd.output().expect("runs");
    assert!(o.status.success(), "{cmd:?}: {}", stderr(&o));
    o
}

/// Runs `gapscope` with `args`, which must succeed, and parses its stdout as JSON.
pub fn json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_slice(&o.stdout).expect("valid JSON")
}

/// `gate --baseline-history 2 --db DB --current CURRENT`: the gate of `current` against the
/// last two accepted runs of a history database.
pub fn gate_history_args<'a>(db: &'a str, current: &'a str) -> Vec<&'a str> {
    let mut args = vec!["gate", "--baseline-history", "2"];
    args.extend(["--db", db, "--current", current]);
    args
}

/// Exit code 2 with exactly one line on stderr; that line.
pub fn one_line_error(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    e
}

/// The file names in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .expect("readable directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every file in a directory with its bytes and modification time: what "left unchanged"
/// compares.
pub type Snapshot = std::collections::BTreeMap<String, (Vec<u8>, std::time::SystemTime)>;

/// The [`Snapshot`] of `dir`.
pub fn snapshot(dir: &Path) -> Snapshot {
    std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| {
            let p = e.expect("entry").path();
            let m = std::fs::metadata(&p).expect("metadata");
            let name = p
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            let bytes = std::fs::read(&p).expect("read");
            (name, (bytes, m.modified().expect("mtime")))
        })
        .collect()
}

/// `data` gzip-compressed at `level`.
pub fn gzip(data: &[u8], level: flate2::Compression) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
    e.write_all(data).expect("in memory");
    e.finish().expect("in memory")
}
