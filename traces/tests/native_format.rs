//! Native format: round trip, golden fixtures per version (tested forever), truncation.

use std::path::{Path, PathBuf};

use gapscope_traces::*;

/// The deterministic content of the v1 golden fixture. Never change it: the fixture on disk
/// was written from it and must keep loading to exactly this.
fn golden_v1() -> Trace {
    let mut m = Manifest::new("synthetic");
    m.tool_version = "golden".into();
    m.gpus.push(GpuInfo {
        device: 0,
        name: "NVIDIA H100 80GB HBM3".into(),
        sm_count: Some(132),
        memory_bandwidth_bytes_per_s: Some(3.35e12),
        ..Default::default()
    });
    m.notes.push("golden fixture v1".into());
    let mut t = Trace::new(m);
    let gemv = t.strings.intern("mul_mat_vec_q");
    let attn = t.strings.intern("flash_attn_ext");
    let bucket = t.strings.intern("gemv");
    let step = t.strings.intern("decode_step");
    let copy = t.strings.intern("Memcpy DtoD (Device -> Device)");
    let launch = t.strings.intern("cudaLaunchKernel");
    for i in 0..4i64 {
        t.kernels.push(KernelRow {
            stream: 7,
            correlation: 100 + i as u64,
            name: if i % 2 == 0 { gemv } else { attn },
            gpu_start_ns: 1_000 + i * 100,
            gpu_end_ns: 1_050 + i * 100,
            grid_x: 32,
            block_x: 256,
            registers_per_thread: 40,
            bucket: if i % 2 == 0 { bucket } else { NO_STR },
            bytes: if i % 2 == 0 { 1 << 20 } else { -1 },
            flops: -1,
            layer: i as i32,
            graph_id: if i == 3 { 5 } else { 0 },
            graph_node_id: if i == 3 { 9 } else { 0 },
            ..Default::default()
        });
        t.launches.push(LaunchRow {
            pid: 1,
            tid: 2,
            correlation: 100 + i as u64,
            name: launch,
            api: LaunchApi::Runtime as u8,
            host_start_ns: 900 + i * 100,
            host_end_ns: 910 + i * 100,
        });
    }
    t.memops.push(MemopRow {
        stream: 7,
        correlation: 200,
        name: copy,
        kind: MemopKind::DtoD as u8,
        bytes: 4096,
        gpu_start_ns: 1_500,
        gpu_end_ns: 1_520,
        ..Default::default()
    });
    t.markers.push(MarkerRow {
        name: step,
        source: MarkerSource::Engine as u8,
        phase: Phase::Decode as u8,
        gpu_start_ns: 1_000,
        gpu_end_ns: 1_400,
        step: 0,
        batch_size: 1,
        tokens: 1,
        ..Default::default()
    });
    t.samples.push(SampleRow {
        host_ns: 1_000,
        sm_clock_mhz: 1980,
        mem_clock_mhz: 2619,
        power_mw: 350_000,
        temperature_c: 50,
        gpu_util_pct: 99,
        mem_util_pct: 80,
        throttle_reasons: 0,
        device: 0,
    });
    t
}

fn golden_dir(version: u32) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/golden/v{version}.gst"))
}

fn assert_same(a: &Trace, b: &Trace) {
    assert_eq!(a.strings.values(), b.strings.values());
    assert_eq!(a.kernels.len(), b.kernels.len());
    for i in 0..a.kernels.len() {
        assert_eq!(a.kernels.row(i), b.kernels.row(i), "kernel row {i}");
    }
    for i in 0..a.memops.len() {
        assert_eq!(a.memops.row(i), b.memops.row(i));
    }
    for i in 0..a.launches.len() {
        assert_eq!(a.launches.row(i), b.launches.row(i));
    }
    assert_eq!(a.markers.len(), b.markers.len());
    for i in 0..a.markers.len() {
        assert_eq!(a.markers.row(i), b.markers.row(i));
    }
    assert_eq!(a.samples.row(0), b.samples.row(0));
    assert_eq!(a.manifest.gpus, b.manifest.gpus);
}

#[expect(
    clippy::disallowed_methods,
    reason = "a test reads its environment (GAPSCOPE_BLESS)"
)]
#[test]
fn golden_v1_fixture_loads_forever() {
    let dir = golden_dir(1);
    if std::env::var_os("GAPSCOPE_BLESS").is_some() && !dir.exists() {
        write_trace(&dir, &golden_v1()).unwrap();
    }
    let t = read_trace(&dir, &ReadOptions::default()).expect("golden v1 fixture must load");
    assert_eq!(t.manifest.format_version, 1);
    assert!(t.manifest.complete);
    assert!(!t.manifest.truncated, "{:?}", t.manifest.notes);
    assert_same(&t, &golden_v1());
}

/// The v1 fixture predates the engine's memop `op` and `layer` columns: they read as none, and
/// the loaded trace writes out again (a join or import of an old trace did panic here).
#[test]
fn a_trace_without_the_memop_op_columns_reads_as_none_and_writes_again() {
    let t = read_trace(&golden_dir(1), &ReadOptions::default()).unwrap();
    assert!(!t.memops.is_empty());
    assert!(
        (0..t.memops.len())
            .all(|i| t.memops.op[i] == gapscope_traces::NO_STR && t.memops.layer[i] == -1)
    );
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("again.gst");
    write_trace(&p, &t).unwrap();
    let back = read_trace(&p, &ReadOptions::default()).unwrap();
    assert_same(&t, &back);
}

#[test]
fn roundtrip_and_projection() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("r.gst");
    let g = golden_v1();
    write_trace(&p, &g).unwrap();
    assert!(is_native_trace(&p));
    let back = read_trace(&p, &ReadOptions::default()).unwrap();
    assert_same(&g, &back);
    let proj = read_trace(
        &p,
        &ReadOptions {
            kernel_columns: Some(vec!["gpu_start_ns".into(), "name".into()]),
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(proj.kernels.len(), 4);
    assert_eq!(proj.kernels.gpu_start_ns, vec![1000, 1100, 1200, 1300]);
    assert!(proj.kernels.grid_x.is_empty());
}

fn many_kernels(n: usize) -> Trace {
    let mut t = Trace::new(Manifest::new("synthetic"));
    let name = t.strings.intern("k");
    for i in 0..n {
        t.kernels.push(KernelRow {
            name,
            correlation: i as u64,
            gpu_start_ns: i as i64 * 10,
            gpu_end_ns: i as i64 * 10 + 5,
            ..Default::default()
        });
    }
    t
}

#[test]
fn truncated_stream_loads_complete_batches_and_is_flagged() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("t.gst");
    let n = 2 * gapscope_traces::native::CHUNK_ROWS + 1000;
    write_trace(&p, &many_kernels(n)).unwrap();
    let k = p.join("kernels.arrows");
    let len = std::fs::metadata(&k).unwrap().len();
    // Cut inside the third batch.
    let f = std::fs::OpenOptions::new().write(true).open(&k).unwrap();
    f.set_len(len - 2000).unwrap();
    let t = read_trace(&p, &ReadOptions::default()).unwrap();
    assert!(t.manifest.truncated);
    assert_eq!(t.kernels.len(), 2 * gapscope_traces::native::CHUNK_ROWS);
    assert!(
        t.manifest.notes.iter().any(|n| n.contains("kernels")),
        "{:?}",
        t.manifest.notes
    );
}

#[test]
fn unfinished_writer_is_flagged_but_loads() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("u.gst");
    let t = many_kernels(10);
    let mut w = TraceWriter::create(&p, t.manifest.clone()).unwrap();
    w.append_strings(&t.strings).unwrap();
    w.append_kernels(&t.kernels).unwrap();
    drop(w); // simulated crash: no finish()
    let r = read_trace(&p, &ReadOptions::default()).unwrap();
    assert!(r.manifest.truncated);
    assert_eq!(r.kernels.len(), 10);
}

#[test]
fn foreign_and_future_files_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let e = read_trace(tmp.path(), &ReadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("not a gapscope native trace"), "{e}");
    let p = tmp.path().join("f.gst");
    write_trace(&p, &many_kernels(1)).unwrap();
    let mp = p.join("manifest.json");
    let text = std::fs::read_to_string(&mp).unwrap();
    std::fs::write(
        &mp,
        text.replace("\"format_version\": 1", "\"format_version\": 99"),
    )
    .unwrap();
    let e = read_trace(&p, &ReadOptions::default()).unwrap_err();
    assert!(e.to_string().contains("version 99"), "{e}");
    std::fs::write(p.join("kernels.arrows"), b"garbage!garbage!").unwrap();
    std::fs::write(&mp, text).unwrap();
    let e = read_trace(&p, &ReadOptions::default());
    assert!(e.is_err());
}

#[test]
fn a_stream_missing_a_required_column_is_an_error_not_a_panic() {
    use std::sync::Arc;
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("m.gst");
    write_trace(&p, &many_kernels(3)).unwrap();
    // Rewrite kernels.arrows with only two of its columns.
    let t = many_kernels(3);
    let full = t.kernels.to_batch(0..3).unwrap();
    let keep = [
        full.schema().index_of("gpu_start_ns").unwrap(),
        full.schema().index_of("gpu_end_ns").unwrap(),
    ];
    let part = full.project(&keep).unwrap();
    let f = std::fs::File::create(p.join("kernels.arrows")).unwrap();
    let mut w = arrow_ipc::writer::StreamWriter::try_new(f, &Arc::clone(&part.schema())).unwrap();
    w.write(&part).unwrap();
    w.finish().unwrap();
    let e = read_trace(&p, &ReadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("kernels.arrows") && e.contains("missing"), "{e}");
}
