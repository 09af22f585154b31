//! The engine-metadata join (`gapscope_analyzer::join`) on hand-built engine traces and
//! recordings: library spans, resynchronisation, copies, untraced steps, warm-ups.

use gapscope_analyzer::join::*;
use gapscope_traces::{KernelRow, Manifest, MemopKind, MemopRow, Phase};
use gapscope_traces::{MarkerRow, Trace};

fn kernel(t: &mut Trace, name: &str, corr: u64, start: i64, stream: u32) {
    let name = t.strings.intern(name);
    t.kernels.push(KernelRow {
        name,
        correlation: corr,
        stream,
        gpu_start_ns: start,
        gpu_end_ns: start + 5,
        ..KernelRow::default()
    });
}

/// Engine: norm, gemv, cuBLAS, attention (one step). Recording: a foreign kernel first,
/// the same kernels with cuBLAS as two kernels, and an unrelated stream.
#[test]
fn joins_by_order_with_library_spans_and_resync() {
    let mut eng = Trace::new(Manifest::new("engine"));
    for (i, n) in [
        "rms_norm_f32",
        "gemv_bf16_b1",
        "cublasGemmEx_bf16",
        "attn_decode_bf16",
    ]
    .iter()
    .enumerate()
    {
        kernel(&mut eng, n, i as u64 + 1, 100 + 10 * i as i64, 1);
        let op = eng.strings.intern(&format!("op{i}"));
        let b = eng.strings.intern(&format!("bucket{i}"));
        eng.kernels.op[i] = op;
        eng.kernels.bucket[i] = b;
        eng.kernels.layer[i] = 7;
        eng.kernels.bytes[i] = 1000 * (i as i64 + 1);
        eng.kernels.flops[i] = 10;
    }
    let dname = eng.strings.intern("decode");
    eng.markers.push(MarkerRow {
        name: dname,
        phase: Phase::Decode as u8,
        gpu_start_ns: 90,
        gpu_end_ns: 200,
        step: 4,
        batch_size: 1,
        tokens: 1,
        ..MarkerRow::default()
    });

    let mut rec = Trace::new(Manifest::new("cupti"));
    kernel(&mut rec, "other_stream_kernel", 1, 0, 9);
    for (i, n) in [
        "memset_kernel",
        "rms_norm_f32",
        "gemv_bf16_b1",
        "nvjet_a",
        "splitk_reduce",
        "attn_decode_bf16",
    ]
    .iter()
    .enumerate()
    {
        kernel(&mut rec, n, 10 + i as u64, 5000 + 100 * i as i64, 13);
    }
    kernel(&mut rec, "other_stream_kernel", 2, 1, 9);

    let rep = join_engine_metadata(&eng, &mut rec, JoinSettings::default());
    assert_eq!(rep.stream, Some((0, 13)));
    assert_eq!(rep.joined, 5);
    assert_eq!((rep.library_calls, rep.library_kernels), (1, 2));
    // The foreign kernel before the engine's launches is left alone, not skipped.
    assert_eq!(rep.skipped_recorded, 0);
    assert_eq!((rep.recorded_before, rep.recorded_after), (1, 0));
    assert_eq!(rep.unmatched_engine, 0);
    let k = &rec.kernels;
    let bucket = |i: usize| rec.strings.get(k.bucket[i]).to_owned();
    assert_eq!(bucket(2), "bucket0"); // rms_norm
    assert_eq!(bucket(4), "bucket2"); // nvjet_a from the cuBLAS call
    assert_eq!(bucket(5), "bucket2"); // splitk_reduce too
    assert_eq!((k.bytes[4], k.bytes[5]), (3000, 0)); // the call's bytes counted once
    assert_eq!(k.layer[6], 7);
    assert_eq!(bucket(1), ""); // the foreign memset kernel keeps no metadata
    // The step, re-timed on the recording's clock.
    assert_eq!(rep.steps, 1);
    let m = rec.markers.row(0);
    assert_eq!((m.gpu_start_ns, m.gpu_end_ns, m.step), (5100, 5505, 4));
}

fn memop(t: &mut Trace, kind: MemopKind, corr: u64, start: i64, stream: u32) {
    t.memops.push(MemopRow {
        kind: kind as u8,
        correlation: corr,
        stream,
        bytes: 4,
        gpu_start_ns: start,
        gpu_end_ns: start + 3,
        ..MemopRow::default()
    });
}

/// Each step ends with the engine's token copy; the recording also holds a bench's own
/// copy right after it and the next step's upload. The engine's copies land on the first
/// copy after their step's last kernel, and the steps are re-timed to include them.
#[test]
fn joins_engine_copies_between_their_kernels() {
    let mut eng = Trace::new(Manifest::new("engine"));
    kernel(&mut eng, "argmax_f32", 1, 100, 1);
    memop(&mut eng, MemopKind::DtoD, 2, 110, 1);
    kernel(&mut eng, "get_rows_bf16", 3, 200, 1);
    kernel(&mut eng, "argmax_f32", 4, 210, 1);
    memop(&mut eng, MemopKind::DtoD, 5, 220, 1);
    let dname = eng.strings.intern("decode");
    for (step, (a, b)) in [(90, 125), (190, 230)].into_iter().enumerate() {
        eng.markers.push(MarkerRow {
            name: dname,
            phase: Phase::Decode as u8,
            gpu_start_ns: a,
            gpu_end_ns: b,
            step: step as i64,
            ..MarkerRow::default()
        });
    }
    let mut rec = Trace::new(Manifest::new("cupti"));
    kernel(&mut rec, "argmax_f32", 10, 1000, 13);
    memop(&mut rec, MemopKind::DtoD, 11, 1010, 13); // the engine's copy
    memop(&mut rec, MemopKind::DtoD, 12, 1020, 13); // the bench's own copy
    memop(&mut rec, MemopKind::HtoD, 13, 1900, 13); // the next step's upload
    kernel(&mut rec, "get_rows_bf16", 14, 2000, 13);
    kernel(&mut rec, "argmax_f32", 15, 2100, 13);
    memop(&mut rec, MemopKind::DtoD, 16, 2110, 13);
    memop(&mut rec, MemopKind::DtoD, 17, 2120, 13);
    memop(&mut rec, MemopKind::DtoD, 18, 2130, 9); // another stream
    let rep = join_engine_metadata(&eng, &mut rec, JoinSettings::default());
    assert_eq!(rep.joined, 3);
    assert_eq!((rep.engine_memops, rep.joined_memops), (2, 2));
    let spans: Vec<(i64, i64)> = (0..rec.markers.len())
        .map(|i| (rec.markers.gpu_start_ns[i], rec.markers.gpu_end_ns[i]))
        .collect();
    // Step 0 ends with the copy at 1010 (not the bench's at 1020); step 1 with 2110's.
    assert_eq!(spans, vec![(1000, 1013), (2000, 2113)]);
}

/// Sampled timing: the engine traced decode steps 0 and 3 of four identical ones. The
/// walk passes over the two untraced steps in the recording, so step 0's metadata lands
/// on the recording's first step, not on the third (whose kernels have the same names).
#[test]
fn passes_over_untraced_steps_between_traced_ones() {
    let names = ["rms_norm_f32", "gemv_bf16_b1", "argmax_f32"];
    let mut eng = Trace::new(Manifest::new("engine"));
    let dname = eng.strings.intern("decode");
    for (i, step) in [0i64, 3].into_iter().enumerate() {
        let t0 = 1000 * step;
        for (j, n) in names.iter().enumerate() {
            kernel(&mut eng, n, (10 * i + j) as u64, t0 + 10 * j as i64, 1);
            eng.kernels.layer[3 * i + j] = step as i32;
        }
        eng.markers.push(MarkerRow {
            name: dname,
            phase: Phase::Decode as u8,
            gpu_start_ns: t0,
            gpu_end_ns: t0 + 100,
            step,
            ..MarkerRow::default()
        });
    }
    let mut rec = Trace::new(Manifest::new("cupti"));
    for step in 0..4i64 {
        for (j, n) in names.iter().enumerate() {
            kernel(
                &mut rec,
                n,
                (10 * step + j as i64) as u64,
                50_000 + 500 * step + 10 * j as i64,
                13,
            );
        }
    }
    let rep = join_engine_metadata(&eng, &mut rec, JoinSettings::default());
    assert_eq!(rep.joined, 6);
    assert_eq!((rep.untraced_steps, rep.untraced_kernels), (2, 6));
    let layers: Vec<i32> = rec.kernels.layer.clone();
    assert_eq!(layers, vec![0, 0, 0, -1, -1, -1, -1, -1, -1, 3, 3, 3]);
    let spans: Vec<(i64, i64)> = (0..rec.markers.len())
        .map(|i| (rec.markers.gpu_start_ns[i], rec.markers.gpu_end_ns[i]))
        .collect();
    assert_eq!(spans, vec![(50_000, 50_025), (51_500, 51_525)]);
}

/// Sampled timing without graphs: a prefill (step 10) and decode steps 11-15, of which
/// the engine traced 12 and 14. The recording holds all of them; the walk passes over 15
/// (after the last traced step, known from the run's `ntg` of 5), 13 and 11.
#[test]
fn passes_over_untraced_eager_steps_by_step_numbers() {
    let decode = ["rms_norm_f32", "gemv_bf16_b1", "argmax_f32"];
    let prefill = ["get_rows_bf16", "cublasGemmEx_bf16"];
    let mut eng = Trace::new(Manifest::new("engine"));
    eng.manifest.engine_config = Some(serde_json::json!({"settings": {"ntg": 5}}));
    let (pname, dname) = (eng.strings.intern("prefill"), eng.strings.intern("decode"));
    let mut corr = 0u64;
    for (step, phase, names) in [
        (10i64, Phase::Prefill, &prefill[..]),
        (12, Phase::Decode, &decode[..]),
        (14, Phase::Decode, &decode[..]),
    ] {
        let t0 = 1000 * step;
        for (j, n) in names.iter().enumerate() {
            kernel(&mut eng, n, corr, t0 + 10 * j as i64, 1);
            let last = eng.kernels.len() - 1;
            eng.kernels.layer[last] = step as i32;
            corr += 1;
        }
        eng.markers.push(MarkerRow {
            name: if phase == Phase::Prefill {
                pname
            } else {
                dname
            },
            phase: phase as u8,
            gpu_start_ns: t0,
            gpu_end_ns: t0 + 100,
            step,
            ..MarkerRow::default()
        });
    }
    let mut rec = Trace::new(Manifest::new("cupti"));
    let mut t = 50_000;
    for step in 10..=15i64 {
        let names: &[&str] = if step == 10 {
            &["get_rows_bf16", "nvjet_a", "splitk_reduce"]
        } else {
            &decode
        };
        for n in names {
            kernel(&mut rec, n, t as u64, t, 13);
            t += 10;
        }
    }
    let rep = join_engine_metadata(&eng, &mut rec, JoinSettings::default());
    assert_eq!(rep.unmatched_engine, 0, "{rep:?}");
    assert_eq!(
        (rep.untraced_steps, rep.untraced_kernels),
        (3, 9),
        "{rep:?}"
    );
    // Step 15, after the last traced one, is passed over, not left alone after.
    assert_eq!((rep.recorded_before, rep.recorded_after), (0, 0), "{rep:?}");
    // prefill (3 kernels), 11 untraced, 12, 13 untraced, 14, 15 untraced
    let want: Vec<i32> = [10, 10, 10]
        .into_iter()
        .chain([-1; 3])
        .chain([12; 3])
        .chain([-1; 3])
        .chain([14; 3])
        .chain([-1; 3])
        .collect();
    assert_eq!(rec.kernels.layer, want);
}

/// Sampled timing with graphs: the engine's traced steps ran eagerly, the others were
/// graph replays of the same kernels. The replays are left out, so the traced step lands
/// on its own eager kernels, not on the replay after it.
#[test]
fn leaves_graph_replays_out_when_the_engine_traced_eager_steps() {
    let names = ["rms_norm_f32", "gemv_bf16_b1", "argmax_f32"];
    let mut eng = Trace::new(Manifest::new("engine"));
    for (j, n) in names.iter().enumerate() {
        kernel(&mut eng, n, j as u64, 10 * j as i64, 1);
        eng.kernels.layer[j] = 5;
    }
    let mut rec = Trace::new(Manifest::new("cupti"));
    for (step, graph) in [(0i64, 7u32), (1, 0), (2, 7)] {
        for (j, n) in names.iter().enumerate() {
            kernel(
                &mut rec,
                n,
                (10 * step + j as i64) as u64,
                500 * step + 10 * j as i64,
                13,
            );
            let last = rec.kernels.len() - 1;
            rec.kernels.graph_id[last] = graph;
        }
    }
    let rep = join_engine_metadata(&eng, &mut rec, JoinSettings::default());
    assert_eq!((rep.joined, rep.graph_replayed), (3, 6));
    assert_eq!(rec.kernels.layer, vec![-1, -1, -1, 5, 5, 5, -1, -1, -1]);
}

/// Names and start times of a recording's kernels on stream 13.
fn recording(names: &[&str]) -> Trace {
    let mut rec = Trace::new(Manifest::new("cupti"));
    for (i, n) in names.iter().enumerate() {
        kernel(&mut rec, n, i as u64 + 1, 1000 * i as i64, 13);
    }
    rec
}

fn engine(names: &[&str]) -> Trace {
    let mut eng = Trace::new(Manifest::new("engine"));
    for (i, n) in names.iter().enumerate() {
        kernel(&mut eng, n, i as u64 + 1, 10 * i as i64, 1);
        let b = eng.strings.intern(&format!("e{i}"));
        eng.kernels.bucket[i] = b;
    }
    eng
}

/// A bench traces its measured run, not the identical warm-up run before it (nor the
/// calibration probes before that): the metadata goes onto the last run's kernels.
#[test]
fn the_traced_run_is_the_last_not_the_identical_warm_up() {
    let run = ["get_rows", "norm", "gemv", "attn", "gemv", "argmax"];
    let eng = engine(&run);
    let mut names = vec!["timing_probe"; 5];
    names.extend(run); // warm-up
    names.extend(run); // measured
    let mut rec = recording(&names);
    let rep = join_engine_metadata(&eng, &mut rec, JoinSettings::default());
    assert_eq!(
        (rep.joined, rep.unmatched_engine, rep.skipped_recorded),
        (6, 0, 0)
    );
    assert_eq!((rep.recorded_before, rep.recorded_after), (11, 0));
    let k = &rec.kernels;
    for i in 0..11 {
        assert_eq!(
            rec.strings.get(k.bucket[i]),
            "",
            "kernel {i} is not the traced run"
        );
    }
    for i in 0..6 {
        assert_eq!(rec.strings.get(k.bucket[11 + i]), format!("e{i}"));
    }
}

/// Two traced runs at different batch sizes, each after its own untraced warm-up: the
/// walk re-anchors past the second warm-up, which is longer than `max_skip`.
#[test]
fn re_anchors_past_an_untraced_stretch() {
    let b1 = [
        "get_rows",
        "norm_gemv",
        "attn",
        "gemv",
        "norm",
        "swiglu",
        "gemv",
        "argmax",
    ];
    let b8 = [
        "get_rows", "norm", "gemv8", "attn", "gemv8", "norm", "swiglu8", "argmax",
    ];
    let mut traced = b1.to_vec();
    traced.extend(b8);
    let eng = engine(&traced);
    let mut names = Vec::new();
    names.extend(b1); // warm-up, batch 1
    names.extend(b1);
    for _ in 0..3 {
        names.extend(b8); // warm-up, batch 8, three steps: past max_skip
    }
    names.extend(b8);
    let mut rec = recording(&names);
    let s = JoinSettings {
        max_skip: 4,
        ..JoinSettings::default()
    };
    let rep = join_engine_metadata(&eng, &mut rec, s);
    assert_eq!((rep.joined, rep.unmatched_engine), (16, 0));
    assert_eq!(rep.skipped_recorded, 24);
    let k = &rec.kernels;
    let tagged: Vec<usize> = (0..names.len())
        .filter(|&i| !rec.strings.get(k.bucket[i]).is_empty())
        .collect();
    let want: Vec<usize> = (8..16).chain(40..48).collect();
    assert_eq!(tagged, want);
}

#[test]
fn empty_recording_joins_nothing() {
    let mut eng = Trace::new(Manifest::new("engine"));
    kernel(&mut eng, "gemv_bf16_b1", 1, 0, 1);
    let mut rec = Trace::new(Manifest::new("cupti"));
    let rep = join_engine_metadata(&eng, &mut rec, JoinSettings::default());
    assert_eq!((rep.joined, rep.unmatched_engine, rep.stream), (0, 1, None));
}
