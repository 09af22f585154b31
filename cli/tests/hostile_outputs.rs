//! Hostile output paths for every single-file writer (issue 31, classes 8 and 13): a link
//! (to a file, to an input, dangling), an input itself, a path inside an input trace, a FIFO
//! without a reader, a device, a directory, the same file twice. Each is exit 2 with one line
//! on stderr, leaves every file as it was and no temporary file behind, and returns at once.
//! The corpus is made here, in a temporary folder, from copies of bundled traces.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]
#![cfg(unix)]

use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::time::Duration;

use gapscope_tests::{mkfifo, repo, run, run_within, s, stderr};

const TRACE_JSON: &str = "traces/reference/hf-qwen3-0.6b-npl1.json.gz";
const TRACE_GST: &str = "traces/reference/engine-llama3-8b-npl1.gst";
const MODEL: &str = "models/llama-3-8b.json";
const RULES: &str = "[[rule]]\nname='mine'\nregex='^nvjet'\nbucket='gemv'\n";

/// Copies of the inputs in a temporary folder, so that no test can harm the repository's.
struct Inputs {
    dir: tempfile::TempDir,
    json: PathBuf,
    gst: PathBuf,
    model: PathBuf,
    rules: PathBuf,
}

impl Inputs {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("in.json.gz");
        std::fs::copy(repo(TRACE_JSON), &json).unwrap();
        let gst = dir.path().join("in.gst");
        std::fs::create_dir(&gst).unwrap();
        for e in std::fs::read_dir(repo(TRACE_GST)).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), gst.join(e.file_name())).unwrap();
        }
        let model = dir.path().join("model.json");
        std::fs::copy(repo(MODEL), &model).unwrap();
        let rules = dir.path().join("rules.toml");
        std::fs::write(&rules, RULES).unwrap();
        Self {
            dir,
            json,
            gst,
            model,
            rules,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Every regular file under the folder (one level of subfolders), with its bytes.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut m = BTreeMap::new();
        for d in [self.dir.path(), &self.gst] {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                let meta = std::fs::symlink_metadata(&p).unwrap();
                if meta.is_file() {
                    m.insert(p.clone(), std::fs::read(&p).unwrap());
                }
            }
        }
        m
    }

    /// Names of temporary files (`.NAME.tmp.PID.N`) left in the folder or the trace.
    fn leftovers(&self) -> Vec<String> {
        [self.dir.path(), &self.gst]
            .iter()
            .flat_map(|d| std::fs::read_dir(d).unwrap())
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.') || n.contains(".tmp"))
            .collect()
    }
}

/// A writer: the command line that writes `out`, reading the trace `trace`.
struct Writer {
    name: &'static str,
    args: fn(&Inputs, &Path, &Path) -> Vec<String>,
    /// Its inputs besides the trace (each tried as the output too).
    extra_inputs: fn(&Inputs) -> Vec<PathBuf>,
}

fn owned(v: &[&str]) -> Vec<String> {
    v.iter().map(|a| (*a).to_owned()).collect()
}

fn writers() -> Vec<Writer> {
    vec![
        Writer {
            name: "export --chrome",
            args: |i, t, o| {
                owned(&[
                    "export",
                    "-q",
                    s(t),
                    "--rules",
                    s(&i.rules),
                    "--chrome",
                    s(o),
                ])
            },
            extra_inputs: |i| vec![i.rules.clone()],
        },
        Writer {
            name: "export --parquet",
            args: |i, t, o| {
                owned(&[
                    "export",
                    "-q",
                    s(t),
                    "--rules",
                    s(&i.rules),
                    "--parquet",
                    s(o),
                ])
            },
            extra_inputs: |i| vec![i.rules.clone()],
        },
        Writer {
            name: "roofline --svg",
            args: |i, t, o| {
                owned(&[
                    "roofline",
                    "-q",
                    "--model",
                    s(&i.model),
                    "--hw",
                    "h200",
                    "--ctx",
                    "160",
                    "--trace",
                    s(t),
                    "--svg",
                    s(o),
                ])
            },
            extra_inputs: |i| vec![i.model.clone()],
        },
        Writer {
            name: "gate --junit",
            args: |i, t, o| {
                owned(&[
                    "gate",
                    "-q",
                    "--baseline",
                    s(&i.gst),
                    "--current",
                    s(t),
                    "--rules",
                    s(&i.rules),
                    "--junit",
                    s(o),
                ])
            },
            extra_inputs: |i| vec![i.rules.clone()],
        },
        Writer {
            name: "report --html",
            args: |i, t, o| {
                owned(&[
                    "report",
                    "-q",
                    s(t),
                    "--rules",
                    s(&i.rules),
                    "--html",
                    s(o),
                    "--model",
                    s(&i.model),
                    "--hw",
                    "h200",
                ])
            },
            extra_inputs: |i| vec![i.rules.clone(), i.model.clone()],
        },
        Writer {
            name: "diff --html",
            args: |i, t, o| {
                owned(&[
                    "diff",
                    "-q",
                    s(t),
                    s(&i.json),
                    "--rules",
                    s(&i.rules),
                    "--html",
                    s(o),
                ])
            },
            extra_inputs: |i| vec![i.rules.clone(), i.json.clone()],
        },
    ]
}

/// Runs `args` (with a deadline: a FIFO must not block it), which must be refused: exit 2,
/// one line on stderr; that line. Nothing in the folder changed and nothing is left behind.
fn refused(i: &Inputs, what: &str, args: &[String]) -> String {
    let before = i.snapshot();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run_within(&args, Duration::from_secs(60));
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{what}: {args:?}: {e}");
    assert_eq!(e.lines().count(), 1, "{what}: {e}");
    assert!(e.starts_with("gapscope: error: "), "{what}: {e}");
    assert!(before == i.snapshot(), "{what}: a file changed: {args:?}");
    assert!(i.leftovers().is_empty(), "{what}: {:?}", i.leftovers());
    e
}

#[test]
fn links_are_never_written_through() {
    let i = Inputs::new();
    let victim = i.path("victim.txt");
    std::fs::write(&victim, b"precious").unwrap();
    let to_victim = i.path("to-victim");
    symlink(&victim, &to_victim).unwrap();
    let to_input = i.path("to-input");
    symlink(&i.json, &to_input).unwrap();
    let to_manifest = i.path("to-manifest");
    symlink(i.gst.join("manifest.json"), &to_manifest).unwrap();
    let dangling = i.path("dangling");
    symlink(i.path("nowhere.json"), &dangling).unwrap();
    for w in writers() {
        for (trace, link) in [
            (&i.gst, &to_victim),
            (&i.json, &to_input),
            (&i.gst, &to_manifest),
            (&i.gst, &dangling),
        ] {
            let e = refused(&i, w.name, &(w.args)(&i, trace, link));
            assert!(e.contains("symbolic link"), "{}: {e}", w.name);
            assert!(e.contains(s(link)), "{}: {e}", w.name);
        }
        assert!(!i.path("nowhere.json").exists(), "{}", w.name);
    }
}

#[test]
fn inputs_and_trace_folders_are_never_outputs() {
    let i = Inputs::new();
    // The input as it was given, through a linked folder, and inside the input trace.
    let alias = i.path("alias");
    symlink(i.dir.path(), &alias).unwrap();
    for w in writers() {
        for (trace, out) in [
            (&i.json, i.json.clone()),
            (&i.json, alias.join("in.json.gz")),
            (&i.gst, i.gst.join("manifest.json")),
            (&i.gst, i.gst.join("kernels.arrows")),
            (&i.gst, i.gst.join("new.json")),
        ] {
            let e = refused(&i, w.name, &(w.args)(&i, trace, &out));
            assert!(
                e.contains("is the input") || e.contains("native trace"),
                "{}: {e}",
                w.name
            );
        }
        for extra in (w.extra_inputs)(&i) {
            let e = refused(&i, w.name, &(w.args)(&i, &i.gst, &extra));
            assert!(e.contains("is the input"), "{}: {e}", w.name);
        }
        // The trace folder itself is a directory, never an output file.
        let e = refused(&i, w.name, &(w.args)(&i, &i.gst, &i.gst));
        assert!(e.contains("directory"), "{}: {e}", w.name);
    }
}

#[test]
fn fifos_devices_directories_and_missing_folders_are_refused_at_once() {
    let i = Inputs::new();
    let fifo = i.path("out.fifo");
    mkfifo(&fifo);
    let dir = i.path("out.d");
    std::fs::create_dir(&dir).unwrap();
    for w in writers() {
        let e = refused(&i, w.name, &(w.args)(&i, &i.gst, &fifo));
        assert!(e.contains("FIFO"), "{}: {e}", w.name);
        let e = refused(&i, w.name, &(w.args)(&i, &i.gst, &dir));
        assert!(e.contains("directory"), "{}: {e}", w.name);
        let e = refused(&i, w.name, &(w.args)(&i, &i.gst, Path::new("/dev/null")));
        assert!(e.contains("a device"), "{}: {e}", w.name);
        let e = refused(&i, w.name, &(w.args)(&i, &i.gst, &i.path("no/such/out")));
        assert!(e.contains("no/such"), "{}: {e}", w.name);
    }
    assert!(std::fs::symlink_metadata(&dir).unwrap().is_dir());
}

#[test]
fn chrome_and_parquet_may_not_name_one_file() {
    let i = Inputs::new();
    let out = i.path("out.bin");
    let alias = i.path("alias");
    symlink(i.dir.path(), &alias).unwrap();
    for (chrome, parquet) in [
        (out.clone(), out.clone()),
        (out.clone(), alias.join("out.bin")),
    ] {
        let args = owned(&[
            "export",
            "-q",
            s(&i.gst),
            "--chrome",
            s(&chrome),
            "--parquet",
            s(&parquet),
        ]);
        let e = refused(&i, "same file", &args);
        assert!(e.contains("same file"), "{e}");
        assert!(!out.exists());
    }
}

/// Runs `args`, which must succeed.
fn succeeds(args: &[String]) {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
}

#[test]
fn outputs_are_written_and_regular_files_replaced_whole() {
    use std::os::unix::fs::PermissionsExt;
    let i = Inputs::new();
    let (chrome, parquet) = (i.path("out.json"), i.path("out.parquet"));
    let export = owned(&[
        "export",
        "-q",
        s(&i.gst),
        "--chrome",
        s(&chrome),
        "--parquet",
        s(&parquet),
    ]);
    succeeds(&export);
    let first = std::fs::read(&chrome).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&first).expect("Chrome JSON");
    assert!(v["traceEvents"].as_array().is_some_and(|e| e.len() > 1000));
    assert!(std::fs::read(&parquet).unwrap().starts_with(b"PAR1"));

    // Existing regular outputs are replaced by a new file (renamed into place): a hard link
    // to the old one keeps the old bytes, and the permissions stay.
    let mut old = BTreeMap::new();
    for w in writers() {
        let out = i.path(&format!("{}.out", w.name.replace([' ', '-'], "")));
        std::fs::write(&out, b"old").unwrap();
        std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
        let keep = i.path(&format!("{}.keep", w.name.replace([' ', '-'], "")));
        std::fs::hard_link(&out, &keep).unwrap();
        let code = run(&(w.args)(&i, &i.gst, &out)).status.code();
        assert!(matches!(code, Some(0 | 1)), "{}: exit {code:?}", w.name);
        let new = std::fs::read(&out).unwrap();
        assert!(new.len() > 100, "{}: {} bytes", w.name, new.len());
        assert_eq!(std::fs::read(&keep).unwrap(), b"old", "{}", w.name);
        let mode = std::fs::metadata(&out).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640, "{}", w.name);
        old.insert(w.name, new);
    }
    assert!(old["gate --junit"].starts_with(b"<?xml"));
    assert!(
        old["roofline --svg"].starts_with(b"<svg") || old["roofline --svg"].starts_with(b"<?xml")
    );
    // Again over the outputs of the first run: the same bytes.
    succeeds(&export);
    assert_eq!(std::fs::read(&chrome).unwrap(), first);
    assert!(i.leftovers().is_empty(), "{:?}", i.leftovers());

    // `-` is still standard output for --chrome.
    let o = run(&["export", "-q", s(&i.gst), "--chrome", "-"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(o.stdout, first);
}
