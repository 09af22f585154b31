//! `--graph-capture`: a CUDA-graph decode's replayed kernels put on their modules through the
//! trace written while the graph was captured (traces/reference/graph-capture/README.md).

use gapscope_tests::{repo, run, s, stderr, stdout};

#[test]
fn by_module_reads_the_capture_and_a_mismatching_capture_is_refused() {
    let dir = repo("traces/reference/graph-capture");
    let replay = dir.join("replay.json.gz");
    let o = run(&["report", "-q", s(&replay), "--by", "module"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("replayed from CUDA graphs"),
        "{}",
        stdout(&o)
    );
    let with_capture = |capture: &str| {
        let capture = dir.join(capture);
        run(&[
            "report",
            "-q",
            s(&replay),
            "--by",
            "module",
            "--graph-capture",
            s(&capture),
        ])
    };
    let o = with_capture("capture_bs8.json.gz");
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("LlamaAttention"), "{out}");
    assert!(out.contains("10 of 10 graph launches"), "{out}");
    let o = with_capture("capture_l2.json.gz");
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert_eq!(e.trim().lines().count(), 1, "{e}");
    assert!(e.contains("refused"), "{e}");
}
