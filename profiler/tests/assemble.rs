//! Spool-to-trace assembly on spools built frame by frame, with answers known by
//! construction: counts, names, memop kinds, graph ids, NVTX ranges, capture ranges,
//! telemetry re-timing and truncation.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::path::Path;

use gapscope_profiler::assemble::{AssembleSettings, CaptureRange, assemble};
use gapscope_profiler::decode::{blank_record, put};
use gapscope_profiler::driver_devices::DeviceInfo;
use gapscope_profiler::layout::{
    api, device, kernel, kind, marker, marker_flag, memcpy, memset, overhead,
};
use gapscope_profiler::nvml::{GpuFacts, Sample, Telemetry};
use gapscope_profiler::spool::{FrameBuf, SpoolEnd, SpoolHeader, tag};
use gapscope_traces::{MemopKind, ReadOptions, read_trace};

const T0: u64 = 1_000_000_000; // CUPTI ns of the first kernel
const OFFSET: i64 = 500_000_000; // CUPTI minus realtime
const UUID: [u8; 16] = [0xab; 16];

fn api_name(fb: &mut FrameBuf, cbid: u32, name: &str) {
    let mut p = 2u32.to_le_bytes().to_vec();
    p.extend_from_slice(&cbid.to_le_bytes());
    p.extend_from_slice(name.as_bytes());
    fb.frame(tag::API_NAME, &p);
}

fn api_rec(fb: &mut FrameBuf, cbid: u32, start: u64, end: u64, corr: u32) {
    let mut r = blank_record(kind::RUNTIME);
    put(&mut r, api::CBID, cbid.to_le_bytes());
    put(&mut r, api::START, start.to_le_bytes());
    put(&mut r, api::END, end.to_le_bytes());
    put(&mut r, api::PROCESS, 42u32.to_le_bytes());
    put(&mut r, api::THREAD, 7u32.to_le_bytes());
    put(&mut r, api::CORRELATION, corr.to_le_bytes());
    fb.frame(tag::RECORD, &r);
}

/// Five kernels 1 µs apart (500 ns each; the third from graph 9), a D2D copy, a memset,
/// five launches plus a cudaGetDevice, a profiler range around kernels 1-3, one NVTX range.
fn spool(with_end: bool) -> Vec<u8> {
    let mut fb = FrameBuf::spool_start();
    fb.json(
        tag::HEADER,
        &SpoolHeader {
            pid: 42,
            cupti_api_version: 130001,
            command_line: "./app".into(),
            rank: Some(1),
            local_rank: Some(1),
            world_size: Some(2),
            ..Default::default()
        },
    );
    fb.calibration(T0, T0 as i64 - OFFSET, 0);
    fb.string(1, b"gemv_bf16");
    fb.string(2, b"NVIDIA H200");
    fb.string(3, b"decode_step");
    api_name(&mut fb, 1, "cudaProfilerStart_v4000");
    api_name(&mut fb, 2, "cudaProfilerStop_v4000");
    api_name(&mut fb, 3, "cudaLaunchKernel_v7000");
    api_name(&mut fb, 4, "cudaGetDevice_v3020");
    let mut d = blank_record(kind::DEVICE);
    put(&mut d, device::NAME, 2u64.to_le_bytes());
    put(&mut d, device::SM_COUNT, 132u32.to_le_bytes());
    put(&mut d, device::UUID, UUID);
    fb.frame(tag::RECORD, &d);
    api_rec(&mut fb, 1, T0 - 100, T0 - 50, 0);
    for i in 0..5u64 {
        let start = T0 + i * 1000;
        api_rec(&mut fb, 3, start - 40, start - 20, 100 + i as u32);
        let mut k = blank_record(kind::CONCURRENT_KERNEL);
        put(&mut k, kernel::START, start.to_le_bytes());
        put(&mut k, kernel::END, (start + 500).to_le_bytes());
        put(&mut k, kernel::STREAM, 7u32.to_le_bytes());
        put(&mut k, kernel::CORRELATION, (100 + i as u32).to_le_bytes());
        put(&mut k, kernel::NAME, 1u64.to_le_bytes());
        put(&mut k, kernel::GRID_X, 132i32.to_le_bytes());
        put(&mut k, kernel::BLOCK_X, 256i32.to_le_bytes());
        if i == 2 {
            put(&mut k, kernel::GRAPH, 9u32.to_le_bytes());
            put(&mut k, kernel::GRAPH_NODE, 3u64.to_le_bytes());
        }
        fb.frame(tag::RECORD, &k);
    }
    api_rec(&mut fb, 4, T0 + 2600, T0 + 2700, 0);
    api_rec(&mut fb, 2, T0 + 2800, T0 + 2900, 0);
    let mut c = blank_record(kind::MEMCPY);
    put(&mut c, memcpy::COPY_KIND, [8u8]);
    put(&mut c, memcpy::BYTES, 4096u64.to_le_bytes());
    put(&mut c, memcpy::START, (T0 + 5000).to_le_bytes());
    put(&mut c, memcpy::END, (T0 + 5100).to_le_bytes());
    fb.frame(tag::RECORD, &c);
    let mut s = blank_record(kind::MEMSET);
    put(&mut s, memset::BYTES, 64u64.to_le_bytes());
    put(&mut s, memset::START, (T0 + 5200).to_le_bytes());
    put(&mut s, memset::END, (T0 + 5300).to_le_bytes());
    fb.frame(tag::RECORD, &s);
    for (flags, ts) in [(marker_flag::START, T0), (marker_flag::END, T0 + 3000)] {
        let mut m = blank_record(kind::MARKER);
        put(&mut m, marker::FLAGS, flags.to_le_bytes());
        put(&mut m, marker::TIMESTAMP, ts.to_le_bytes());
        put(&mut m, marker::ID, 1u32.to_le_bytes());
        put(
            &mut m,
            marker::NAME,
            if flags == marker_flag::START { 3u64 } else { 0 }.to_le_bytes(),
        );
        fb.frame(tag::RECORD, &m);
    }
    // CUPTI's own time: 700 ns of "command buffer full" (kind 393216).
    let mut o = blank_record(kind::OVERHEAD);
    put(&mut o, overhead::OVERHEAD_KIND, 393_216u32.to_le_bytes());
    put(&mut o, overhead::START, (T0 + 100).to_le_bytes());
    put(&mut o, overhead::END, (T0 + 800).to_le_bytes());
    fb.frame(tag::RECORD, &o);
    fb.buffer_end(4096, 18, 0);
    if with_end {
        fb.json(
            tag::END,
            &SpoolEnd {
                buffers: 1,
                records: 18,
                skipped: 0,
            },
        );
    }
    fb.bytes
}

/// A spool that starts like the injection library's under `--collect late`.
fn late_spool_start() -> FrameBuf {
    let mut fb = FrameBuf::spool_start();
    fb.json(
        tag::HEADER,
        &SpoolHeader {
            pid: 42,
            cupti_api_version: 130001,
            collect: "late".into(),
            ..Default::default()
        },
    );
    fb
}

fn telemetry() -> Telemetry {
    let uuid = format!(
        "GPU-{}",
        gapscope_profiler::decode::uuid_string(&UUID)[4..].to_uppercase()
    );
    Telemetry {
        gpus: vec![
            GpuFacts {
                index: 0,
                name: "NVIDIA H200".into(),
                uuid,
                memory_bytes: 1,
            },
            GpuFacts {
                index: 1,
                name: "NVIDIA H200".into(),
                uuid: "GPU-other".into(),
                memory_bytes: 1,
            },
        ],
        samples: vec![
            Sample {
                index: 0,
                realtime_ns: T0 as i64 - OFFSET + 50,
                sm_clock_mhz: 1980,
                throttle_reasons: 4,
                ..Default::default()
            },
            Sample {
                index: 1,
                realtime_ns: T0 as i64 - OFFSET + 50,
                sm_clock_mhz: 1980,
                ..Default::default()
            },
        ],
        driver_version: Some("580.159.04".into()),
        cuda_driver_version: Some("13.0".into()),
    }
}

/// Settings for a run under `--capture-range cudaProfilerApi`, nothing else set.
fn profiler_api_settings() -> AssembleSettings {
    AssembleSettings {
        capture: CaptureRange {
            profiler_api: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn run(
    bytes: &[u8],
    s: &AssembleSettings,
    dir: &Path,
) -> (
    gapscope_profiler::assemble::AssembleSummary,
    gapscope_traces::Trace,
) {
    let sp = dir.join("42.spool");
    std::fs::write(&sp, bytes).unwrap();
    let out = dir.join("out.gst");
    let _ = std::fs::remove_dir_all(&out);
    let sum = assemble(&sp, &out, s, Some(&telemetry())).unwrap();
    let t = read_trace(&out, &ReadOptions::default()).unwrap();
    (sum, t)
}

#[test]
fn whole_run_is_assembled_with_names_kinds_graphs_markers_and_samples() {
    let d = tempfile::tempdir().unwrap();
    let (sum, t) = run(&spool(true), &AssembleSettings::default(), d.path());
    assert_eq!(
        (
            sum.kernels,
            sum.memops,
            sum.launches,
            sum.markers,
            sum.samples
        ),
        (5, 2, 7, 1, 1)
    );
    assert!(!sum.truncated);
    // The process's RANK, LOCAL_RANK and WORLD_SIZE reach the manifest.
    assert_eq!(
        (
            &t.manifest.ranks,
            t.manifest.world_size,
            t.manifest.local_rank
        ),
        (&vec![1], Some(2), Some(1))
    );
    assert_eq!(t.kernels.len(), 5);
    assert!(
        t.kernels
            .name
            .iter()
            .all(|&n| t.strings.get(n) == "gemv_bf16")
    );
    assert_eq!(t.kernels.gpu_start_ns[1] - t.kernels.gpu_start_ns[0], 1000);
    assert_eq!(t.kernels.gpu_end_ns[0] - t.kernels.gpu_start_ns[0], 500);
    assert_eq!((t.kernels.graph_id[2], t.kernels.graph_node_id[2]), (9, 3));
    assert_eq!(t.kernels.graph_id[0], 0);
    assert_eq!(
        (
            t.kernels.stream[0],
            t.kernels.correlation[4],
            t.kernels.grid_x[0],
            t.kernels.block_x[0]
        ),
        (7, 104, 132, 256)
    );
    let kinds: Vec<_> = t
        .memops
        .kind
        .iter()
        .map(|&k| MemopKind::from_code(k))
        .collect();
    assert_eq!(kinds, vec![MemopKind::DtoD, MemopKind::Memset]);
    assert_eq!(t.memops.bytes, vec![4096, 64]);
    let launches: Vec<&str> = t.launches.name.iter().map(|&n| t.strings.get(n)).collect();
    assert_eq!(
        launches
            .iter()
            .filter(|n| n.starts_with("cudaLaunchKernel"))
            .count(),
        5
    );
    assert!(!launches.iter().any(|n| n.starts_with("cudaGetDevice")));
    assert_eq!(t.markers.len(), 1);
    assert_eq!(t.strings.get(t.markers.name[0]), "decode_step");
    assert_eq!(t.markers.host_end_ns[0] - t.markers.host_start_ns[0], 3000);
    // The GPU-0 sample lands on the CUPTI clock 50 ns after the first kernel; GPU 1 is not
    // one this process used.
    assert_eq!(t.samples.len(), 1);
    assert_eq!(t.samples.host_ns[0], T0 as i64 + 50);
    assert_eq!(t.samples.throttle_reasons[0], 4);
    assert_eq!(t.manifest.gpus[0].name, "NVIDIA H200");
    assert_eq!(t.manifest.gpus[0].sm_count, Some(132));
    assert_eq!(t.manifest.cuda_version.as_deref(), Some("13.0"));
    assert_eq!(
        t.manifest.source_format,
        gapscope_traces::SourceFormat::Cupti
    );
    assert_eq!(
        t.manifest.capture_overhead_ns.get("command buffer full"),
        Some(&700)
    );
    assert!(!t.manifest.truncated);
    assert!(
        t.manifest
            .notes
            .iter()
            .any(|n| n.contains("1 host API calls other than")),
        "{:?}",
        t.manifest.notes
    );
}

#[test]
fn profiler_api_range_keeps_only_what_starts_inside_it() {
    let d = tempfile::tempdir().unwrap();
    let s = profiler_api_settings();
    let (sum, t) = run(&spool(true), &s, d.path());
    // Start ends at T0-50, stop begins at T0+2800: kernels 0, 1 and 2.
    assert_eq!(t.kernels.len(), 3);
    assert_eq!(sum.memops, 0);
    assert_eq!(t.kernels.graph_id[2], 9);
    assert!(sum.outside_capture >= 4, "{}", sum.outside_capture);
}

#[test]
fn collection_marks_decide_the_window_over_the_api_records() {
    // Under --collect range the injection library marks where it switched collection on and
    // off; those marks, not the API records, bound what is kept.
    let d = tempfile::tempdir().unwrap();
    let mut bytes = spool(true);
    let mut fb = FrameBuf::default();
    fb.collect_mark(true, T0 + 500);
    fb.collect_mark(false, T0 + 3500);
    bytes.extend_from_slice(&fb.bytes);
    let s = profiler_api_settings();
    let (sum, t) = run(&bytes, &s, d.path());
    // Kernels 1, 2 and 3 start in [T0+500, T0+3500).
    assert_eq!(t.kernels.len(), 3);
    assert_eq!(t.kernels.gpu_start_ns[0], T0 as i64 + 1000);
    assert!(sum.outside_capture >= 2, "{}", sum.outside_capture);
    // An "on" with no "off" keeps everything after it, whatever the API records say.
    let mut bytes = spool(true);
    let mut fb = FrameBuf::default();
    fb.collect_mark(true, T0 + 3500);
    bytes.extend_from_slice(&fb.bytes);
    let (_, t) = run(&bytes, &s, d.path());
    assert_eq!(t.kernels.len(), 1);
    assert_eq!(t.memops.len(), 2);
}

#[test]
fn driver_device_facts_stand_in_when_cupti_reported_no_device() {
    // --collect late: CUPTI attached after the context existed and wrote no DEVICE record;
    // the injection library's DEVICE_INFO frame names the GPU and lets NVML samples match.
    let d = tempfile::tempdir().unwrap();
    let mut fb = late_spool_start();
    fb.calibration(T0, T0 as i64 - OFFSET, 0);
    fb.json(
        tag::DEVICE_INFO,
        &DeviceInfo {
            id: 0,
            name: "NVIDIA H200".into(),
            sm_count: 132,
            memory_bytes: 150 << 30,
            l2_bytes: 60 << 20,
            core_clock_khz: 1_980_000,
            cc: (9, 0),
            uuid: UUID,
        },
    );
    fb.collect_mark(true, T0 - 10);
    fb.string(1, b"gemv_bf16");
    let mut k = blank_record(kind::CONCURRENT_KERNEL);
    put(&mut k, kernel::START, T0.to_le_bytes());
    put(&mut k, kernel::END, (T0 + 500).to_le_bytes());
    put(&mut k, kernel::NAME, 1u64.to_le_bytes());
    fb.frame(tag::RECORD, &k);
    fb.collect_mark(false, T0 + 1000);
    let s = profiler_api_settings();
    let (sum, t) = run(&fb.bytes, &s, d.path());
    assert_eq!(t.kernels.len(), 1);
    assert_eq!(t.manifest.gpus.len(), 1);
    assert_eq!(t.manifest.gpus[0].name, "NVIDIA H200");
    assert_eq!(t.manifest.gpus[0].sm_count, Some(132));
    assert_eq!(
        t.manifest.gpus[0].compute_capability.as_deref(),
        Some("9.0")
    );
    // The GPU-0 sample (50 ns after T0) is inside the window and matched by UUID.
    assert_eq!(sum.samples, 1, "{:?}", sum.notes);
}

#[test]
fn late_collection_that_never_started_says_why() {
    let d = tempfile::tempdir().unwrap();
    let fb = late_spool_start();
    let s = profiler_api_settings();
    let (sum, t) = run(&fb.bytes, &s, d.path());
    assert_eq!(t.kernels.len(), 0);
    assert!(
        sum.notes
            .iter()
            .any(|n| n.contains("--collect late") && n.contains("--collect range")),
        "{:?}",
        sum.notes
    );
}

#[test]
fn delay_and_duration_cut_on_the_launcher_clock() {
    let d = tempfile::tempdir().unwrap();
    // The launcher started the child 1 µs of CUPTI time before the first kernel.
    let s = AssembleSettings {
        launch_realtime_ns: T0 as i64 - OFFSET - 1000,
        capture: CaptureRange {
            delay_ns: Some(2500),
            duration_ns: Some(2000),
            profiler_api: false,
        },
        ..Default::default()
    };
    let (_, t) = run(&spool(true), &s, d.path());
    // Window [T0+1500, T0+3500): kernels 2 and 3.
    assert_eq!(t.kernels.len(), 2);
    assert_eq!(t.kernels.gpu_start_ns[0], T0 as i64 + 2000);
}

#[test]
fn a_spool_cut_mid_frame_loads_what_it_can_and_is_truncated() {
    let d = tempfile::tempdir().unwrap();
    let full = spool(false);
    // Cut inside the memset record: the kernels and the copy survive.
    let cut = full.len() - 300;
    let (sum, t) = run(&full[..cut], &AssembleSettings::default(), d.path());
    assert!(sum.truncated && t.manifest.truncated);
    assert_eq!(t.kernels.len(), 5);
    assert!(
        t.manifest
            .notes
            .iter()
            .any(|n| n.contains("ends inside a frame")),
        "{:?}",
        t.manifest.notes
    );
    assert!(
        t.manifest
            .notes
            .iter()
            .any(|n| n.contains("without its final CUPTI flush"))
    );
    // Whole frames but no END (killed between buffers): still truncated.
    let (sum, _) = run(&full, &AssembleSettings::default(), d.path());
    assert!(sum.truncated);
    // A crash reported by the launcher marks it even with an END frame.
    let s = AssembleSettings {
        crashed: true,
        exit: Some("killed by SIGSEGV".into()),
        ..Default::default()
    };
    let (sum, t) = run(&spool(true), &s, d.path());
    assert!(sum.truncated);
    assert!(
        t.manifest
            .notes
            .iter()
            .any(|n| n.contains("killed by SIGSEGV"))
    );
}
