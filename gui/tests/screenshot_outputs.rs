//! `--screenshot OUT.png` with hostile output paths (issue 31, classes 8 and 13): a link, an
//! input, a path inside the input trace, a FIFO, a directory. Each is refused before a window
//! opens (so no display is needed): exit 2, one line on stderr, every file as it was.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TRACE_GST: &str = "traces/reference/engine-llama3-8b-npl1.gst";

/// Runs the explorer with `args`, killed after a minute (a FIFO must not block it); exit
/// code and stderr.
fn run(args: &[&Path]) -> (Option<i32>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_gapscope-gui"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gapscope-gui {args:?} ran past a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut e = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut e).unwrap();
    (status.code(), e)
}

fn files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::symlink_metadata(p).unwrap().is_file())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    v
}

#[test]
fn hostile_screenshot_paths_are_refused_before_a_window_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let gst = d.join("in.gst");
    std::fs::create_dir(&gst).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for e in std::fs::read_dir(root.join(TRACE_GST)).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), gst.join(e.file_name())).unwrap();
    }
    let model = d.join("model.json");
    std::fs::copy(root.join("models/llama-3-8b.json"), &model).unwrap();
    let victim = d.join("victim.png");
    std::fs::write(&victim, b"precious").unwrap();
    let link = d.join("link.png");
    symlink(&victim, &link).unwrap();
    let dangling = d.join("dangling.png");
    symlink(d.join("nowhere.png"), &dangling).unwrap();
    let fifo = d.join("out.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let dir = d.join("out.d");
    std::fs::create_dir(&dir).unwrap();
    let before = (files(d), files(&gst));
    for (out, what) in [
        (link.clone(), "symbolic link"),
        (dangling.clone(), "symbolic link"),
        (model.clone(), "is the input"),
        (gst.join("manifest.json"), "native trace"),
        (gst.join("shot.png"), "native trace"),
        (fifo.clone(), "FIFO"),
        (dir.clone(), "directory"),
        (PathBuf::from("/dev/null"), "a device"),
    ] {
        let args: [&Path; 6] = [
            &gst,
            "--model".as_ref(),
            &model,
            "--view".as_ref(),
            "roofline".as_ref(),
            "--screenshot".as_ref(),
        ];
        let mut all = args.to_vec();
        all.push(&out);
        let (code, e) = run(&all);
        assert_eq!(code, Some(2), "{}: {e}", out.display());
        assert_eq!(e.lines().count(), 1, "{e}");
        assert!(e.starts_with("gapscope-gui: error: "), "{e}");
        assert!(e.contains(what), "{e}");
        assert!(
            before == (files(d), files(&gst)),
            "{}: a file changed",
            out.display()
        );
    }
    assert!(!d.join("nowhere.png").exists());
}
