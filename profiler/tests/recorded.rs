//! Decoding real spools recorded on an NVIDIA H200 (CUDA 13.0, driver 580) from
//! `scripts/record/plain_cuda.cu`, whose expected activity is known from its source: the
//! decoder and the assembly are checked on CUPTI's own bytes, without a GPU.

#![allow(
    clippy::unwrap_used,
    reason = "a test fails loudly on what it did not expect"
)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use gapscope_profiler::assemble::{AssembleSettings, CaptureRange, assemble};
use gapscope_traces::{MemopKind, ReadOptions, Trace, read_trace};

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn load(spool: &str, s: &AssembleSettings) -> Trace {
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("t.gst");
    assemble(&data(spool), &out, s, None).unwrap();
    read_trace(&out, &ReadOptions::default()).unwrap()
}

fn names(t: &Trace) -> Vec<String> {
    t.kernels
        .name
        .iter()
        .map(|&n| t.strings.get(n).to_owned())
        .collect()
}

#[test]
fn plain_program_counts_kinds_bytes_graph_nodes_and_nvtx() {
    let t = load("plain-cuda13.0.spool", &AssembleSettings::default());
    assert!(!t.manifest.truncated, "{:?}", t.manifest.notes);
    assert_eq!(
        t.manifest.source_format,
        gapscope_traces::SourceFormat::Cupti
    );
    assert_eq!(t.manifest.cuda_version.as_deref(), Some("13.0"));
    assert_eq!(t.manifest.gpus[0].name, "NVIDIA H200");
    assert_eq!(t.manifest.gpus[0].sm_count, Some(132));
    let n = names(&t);
    assert_eq!(n.len(), 36);
    let count = |k: &str| n.iter().filter(|x| x.contains(k)).count();
    assert_eq!((count("scale"), count("inner"), count("add1")), (10, 7, 4));
    assert_eq!((count("g1"), count("g2"), count("g3")), (5, 5, 5));
    // The 15 replayed kernels carry one graph id and three node ids; the others none.
    let graph: Vec<usize> = (0..t.kernels.len())
        .filter(|&i| t.kernels.graph_id[i] != 0)
        .collect();
    assert_eq!(graph.len(), 15);
    assert!(graph.iter().all(|&i| n[i].starts_with('g')));
    let ids: BTreeSet<u32> = graph.iter().map(|&i| t.kernels.graph_id[i]).collect();
    let nodes: BTreeSet<u64> = graph.iter().map(|&i| t.kernels.graph_node_id[i]).collect();
    assert_eq!((ids.len(), nodes.len()), (1, 3));
    assert!(t.kernels.block_x.iter().all(|&b| b == 256));
    assert!(t.kernels.grid_x.iter().all(|&g| g == 4096));
    let mut memops: Vec<(MemopKind, u64)> = (0..t.memops.len())
        .map(|i| (MemopKind::from_code(t.memops.kind[i]), t.memops.bytes[i]))
        .collect();
    memops.sort();
    assert_eq!(
        memops,
        vec![
            (MemopKind::HtoD, 4 << 20),
            (MemopKind::DtoH, 1 << 20),
            (MemopKind::DtoD, 4 << 20),
            (MemopKind::Memset, 2 << 20)
        ]
    );
    assert_eq!(t.markers.len(), 1);
    assert_eq!(t.strings.get(t.markers.name[0]), "phase_a");
    // The NVTX range encloses the ten `scale` launches on the host clock.
    let launches: Vec<i64> = (0..t.launches.len())
        .filter(|&i| {
            t.strings
                .get(t.launches.name[i])
                .starts_with("cudaLaunchKernel")
        })
        .map(|i| t.launches.host_start_ns[i])
        .collect();
    // 21 direct launches plus the 3 made while capturing the graph (no kernel runs then).
    assert_eq!(launches.len(), 24);
    let inside = launches
        .iter()
        .filter(|&&s| s >= t.markers.host_start_ns[0] && s <= t.markers.host_end_ns[0])
        .count();
    assert_eq!(inside, 10);
    // Every kernel ends after it starts and within the run.
    assert!((0..t.kernels.len()).all(|i| t.kernels.gpu_end_ns[i] > t.kernels.gpu_start_ns[i]));
}

#[test]
fn plain_program_profiler_range_keeps_the_seven_inner_kernels() {
    let s = AssembleSettings {
        capture: CaptureRange {
            profiler_api: true,
            ..Default::default()
        },
        ..Default::default()
    };
    let t = load("plain-cuda13.0.spool", &s);
    let n = names(&t);
    assert_eq!(n.len(), 7);
    assert!(n.iter().all(|x| x.contains("inner")), "{n:?}");
    assert_eq!(t.memops.len(), 0);
}

#[test]
fn aborted_program_keeps_every_kernel_up_to_the_last_flushed_buffer() {
    let t = load("abort-cuda13.0.spool", &AssembleSettings::default());
    assert!(t.manifest.truncated);
    assert!(
        t.manifest
            .notes
            .iter()
            .any(|n| n.contains("without its final CUPTI flush")),
        "{:?}",
        t.manifest.notes
    );
    let n = names(&t);
    // 1000 launches, a pause of several flush periods, then 50 more and abort(): the first
    // 1000 were handed over before the pause; the last 50 may or may not have been.
    let scale = n.iter().filter(|x| x.contains("scale")).count();
    let add1 = n.iter().filter(|x| x.contains("add1")).count();
    assert_eq!(scale, 1000);
    assert!(add1 <= 50);
}
