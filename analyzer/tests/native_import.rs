//! Native `.gst` traces through `import_trace` and the analysis: a `.gst` is shared like any
//! file, so its values are untrusted like a Kineto or nsys file's.

use gapscope_analyzer::import::{ImportOptions, NoProgress, import_trace};
use gapscope_traces::{KernelRow, Manifest, MarkerRow, Phase, Trace, write_trace};

mod common;

/// Point 6 of issue 18 for native traces, and the crash the native_import fuzz target
/// found (2026-11-25): byte counts near `i64::MAX` overflowed the analysis's per-bucket sums
/// ("attempt to add with overflow" in decompose.rs), and raw extreme times reached
/// `end - start`.
#[test]
fn extreme_times_and_costs_in_a_gst_are_clamped_once() {
    let mut t = Trace::new(Manifest::new("engine"));
    let name = t.strings.intern("mul_mat_vec_q");
    let step = t.strings.intern("decode");
    let rows = [
        (-10, i64::MAX, i64::MAX, 5),
        (-1, 0, i64::MAX - 1, -9),
        (i64::MIN, 5, 100, i64::MAX),
        (20, 10, 7, 3),
    ];
    // One stream each: this is about clamping, not about same-stream overlaps.
    for (stream, (s, e, bytes, flops)) in (7..).zip(rows) {
        t.kernels.push(KernelRow {
            name,
            stream,
            gpu_start_ns: s,
            gpu_end_ns: e,
            bytes,
            flops,
            ..Default::default()
        });
    }
    t.markers.push(MarkerRow {
        name: step,
        phase: Phase::Decode as u8,
        gpu_start_ns: i64::MIN + 1,
        gpu_end_ns: i64::MAX,
        ..Default::default()
    });
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("x.gst");
    write_trace(&p, &t).unwrap();

    let imp = import_trace(&p, &ImportOptions::default(), &NoProgress).unwrap();
    const L: i64 = i64::MAX / 2;
    let k = &imp.trace.kernels;
    assert_eq!(k.gpu_start_ns, vec![-10, -1, -L, 20]);
    assert_eq!(k.gpu_end_ns[1], 0);
    assert_eq!(k.gpu_end_ns[3], 20, "end before start becomes the start");
    let sum = |v: &[i64]| -> i128 { v.iter().map(|&x| i128::from(x.max(0))).sum() };
    assert!(sum(&k.bytes) <= i128::from(L));
    assert!(sum(&k.flops) <= i128::from(L));
    assert_eq!(k.flops[1], -1);
    assert_eq!(k.bytes[2], 100);
    common::assert_untrusted_times_warned(
        &imp,
        &[
            "untrusted times: 4 times beyond",
            "1 ends before their start",
            "kernel byte or FLOP counts",
        ],
    );
}
