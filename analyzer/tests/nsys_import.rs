//! Nsight Systems SQLite import over the fixtures in tests/data/nsys (faithful fixtures
//! built from the documented schema by scripts/fixtures/make-nsys-fixtures.py; see the
//! README there). Every fixture holds the same workload, so the expected numbers below
//! are known by construction:
//! - prefill: HtoD copy, rms_norm + gemv launches, a memset, a stream sync;
//! - decode step: one cudaGraphLaunch (correlation 6) replaying rms_norm, gemv and
//!   flash_fwd plus a DtoD copy node, then argmax and a DtoH copy of the token;
//! - NVTX: `prefill` (push/pop, inline text), `decode_step` (start/end, registered
//!   string) and one mark that is not a range.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use gapscope_analyzer::analysis::host::{ChargeKind, IdleCause};
use gapscope_analyzer::analysis::{AnalysisSettings, analyze};
use gapscope_analyzer::import::nsys::import_nsys;
use gapscope_analyzer::import::{
    ImportOptions, ImportProgress, Imported, NoProgress, import_trace,
};
use gapscope_analyzer::{AnalyzerError, RuleSet};
use gapscope_traces::{LaunchApi, MarkerSource, MemopKind, Trace};
use rusqlite::{Connection, OpenFlags};

mod common;

const RMS_NORM: &str =
    "void gapscope::rms_norm_f32<256>(const float *, const float *, float *, int, float)";
const GEMV: &str = "void gemv_bf16_kernel<128, 4>(const __nv_bfloat16 *, const __nv_bfloat16 *, float *, int, int)";
const FLASH_PREFIX: &str = "void flash_fwd_splitkv_kernel<";
const GRAPH_CORRELATION: u64 = 6;
const PID: u32 = 4242;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/nsys")
        .join(name)
}

fn import(name: &str) -> Trace {
    let path = fixture(name);
    match import_nsys(&path, &NoProgress) {
        Ok(t) => t,
        Err(e) => panic!("{name} should import: {e}"),
    }
}

fn kernel_names(t: &Trace) -> Vec<&str> {
    t.kernels.name.iter().map(|&id| t.strings.get(id)).collect()
}

fn memops_by_kind(t: &Trace) -> BTreeMap<MemopKind, usize> {
    let mut m = BTreeMap::new();
    for &k in &t.memops.kind {
        *m.entry(MemopKind::from_code(k)).or_default() += 1;
    }
    m
}

fn launch_names(t: &Trace) -> Vec<&str> {
    t.launches
        .name
        .iter()
        .map(|&id| t.strings.get(id))
        .collect()
}

/// Everything the three versioned fixtures share.
fn check_workload(t: &Trace) {
    assert_eq!(
        t.manifest.source_format,
        gapscope_traces::SourceFormat::NsysSqlite
    );

    // Kernels: names from demangledName, in file order.
    let names = kernel_names(t);
    assert_eq!(names.len(), 6, "kernels: {names:?}");
    assert_eq!(names[0], RMS_NORM);
    assert_eq!(names[1], GEMV);
    assert_eq!(names[2], RMS_NORM);
    assert_eq!(names[3], GEMV);
    assert!(names[4].starts_with(FLASH_PREFIX), "{}", names[4]);
    assert_eq!(names[5], "argmax_f32");
    let gemv = t.kernels.row(1);
    assert_eq!((gemv.gpu_start_ns, gemv.gpu_end_ns), (1_125_000, 1_300_000));
    assert_eq!((gemv.grid_x, gemv.grid_y, gemv.grid_z), (2048, 1, 1));
    assert_eq!((gemv.block_x, gemv.block_y, gemv.block_z), (128, 1, 1));
    assert_eq!(gemv.registers_per_thread, 40);
    assert_eq!((gemv.static_smem_bytes, gemv.dynamic_smem_bytes), (0, 8192));
    assert_eq!((gemv.device, gemv.context, gemv.stream), (0, 1, 7));
    assert_eq!(gemv.correlation, 3);
    assert_eq!(gemv.graph_node_id, 0);

    // The CUDA-graph replay: one launch, three kernels sharing its correlation id.
    let replay: Vec<_> = (0..t.kernels.len())
        .map(|i| t.kernels.row(i))
        .filter(|k| k.correlation == GRAPH_CORRELATION)
        .collect();
    assert_eq!(replay.len(), 3);
    let nodes: Vec<u64> = replay.iter().map(|k| k.graph_node_id).collect();
    assert_eq!(nodes, vec![1001, 1002, 1003]);
    let graph_launches: Vec<_> = (0..t.launches.len())
        .map(|i| t.launches.row(i))
        .filter(|l| l.correlation == GRAPH_CORRELATION)
        .collect();
    assert_eq!(graph_launches.len(), 1);
    assert_eq!(t.strings.get(graph_launches[0].name), "cudaGraphLaunch");

    // Memops: kinds from copyKind, memsets as Memset.
    let kinds = memops_by_kind(t);
    let want: BTreeMap<MemopKind, usize> = [
        (MemopKind::HtoD, 1),
        (MemopKind::DtoD, 1),
        (MemopKind::DtoH, 1),
        (MemopKind::Memset, 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(kinds, want);
    let htod = (0..t.memops.len())
        .map(|i| t.memops.row(i))
        .find(|m| m.kind == MemopKind::HtoD as u8)
        .expect("an HtoD copy");
    assert_eq!(htod.bytes, 1_048_576);
    assert_eq!((htod.stream, htod.correlation), (13, 1));
    // `import_trace` names memops from their kind (one name across sources) and keeps
    // nsys's own spelling in the manifest; the nsys importer alone keeps nsys's.
    let name = t.strings.get(htod.name);
    let raw = t.manifest.raw_names.get(name).map_or(name, String::as_str);
    assert_eq!(raw, "[CUDA memcpy Host-to-Device]");
    assert!(name == raw || name == "Memcpy HtoD", "{name}");
    let dtod = (0..t.memops.len())
        .map(|i| t.memops.row(i))
        .find(|m| m.kind == MemopKind::DtoD as u8)
        .expect("a DtoD copy");
    assert_eq!((dtod.bytes, dtod.correlation), (262_144, GRAPH_CORRELATION));
    let memset = (0..t.memops.len())
        .map(|i| t.memops.row(i))
        .find(|m| m.kind == MemopKind::Memset as u8)
        .expect("a memset");
    assert_eq!(memset.bytes, 65_536);

    // Launches: every CUDA API call once, version suffix dropped, pid/tid from globalTid.
    let names = launch_names(t);
    assert_eq!(
        names,
        vec![
            "cudaMemcpyAsync",
            "cudaLaunchKernel",
            "cudaLaunchKernel",
            "cudaMemsetAsync",
            "cudaStreamSynchronize",
            "cudaGraphLaunch",
            "cudaLaunchKernel",
            "cudaMemcpyAsync",
        ]
    );
    for i in 0..t.launches.len() {
        let l = t.launches.row(i);
        assert_eq!((l.pid, l.tid), (PID, u64::from(PID)), "launch {i}");
        assert_eq!(l.api, LaunchApi::Runtime as u8);
        assert!(l.host_end_ns > l.host_start_ns);
    }

    // NVTX: the two ranges (inline text and registered string), not the mark.
    assert_eq!(t.markers.len(), 2);
    let prefill = t.markers.row(0);
    assert_eq!(t.strings.get(prefill.name), "prefill");
    assert_eq!(
        (prefill.host_start_ns, prefill.host_end_ns),
        (1_000_000, 1_900_000)
    );
    let decode = t.markers.row(1);
    assert_eq!(t.strings.get(decode.name), "decode_step");
    assert_eq!(
        (decode.host_start_ns, decode.host_end_ns),
        (2_000_000, 2_900_000)
    );
    for m in [prefill, decode] {
        assert_eq!(m.source, MarkerSource::Nvtx as u8);
        assert_eq!(m.tid, u64::from(PID));
        assert_eq!((m.gpu_start_ns, m.gpu_end_ns), (i64::MIN, i64::MIN));
    }

    // Nothing is reported missing.
    for n in &t.manifest.notes {
        assert!(!n.starts_with("no "), "unexpected note: {n}");
    }
}

fn assert_h100(t: &Trace) {
    let gpu = t.manifest.gpu(0).expect("GPU 0 from TARGET_INFO_GPU");
    assert_eq!(t.manifest.gpus.len(), 1);
    assert_eq!(gpu.name, "NVIDIA H100 80GB HBM3");
    assert_eq!(gpu.memory_bandwidth_bytes_per_s, Some(3_352_320_000_000.0));
    assert_eq!(gpu.sm_count, Some(132));
    assert_eq!(gpu.total_memory_bytes, Some(85_029_158_912));
    assert_eq!(gpu.l2_cache_bytes, Some(52_428_800));
    assert_eq!(gpu.sm_clock_khz, Some(1_980_000));
    assert_eq!(gpu.compute_capability.as_deref(), Some("9.0"));
}

/// An Nsight Systems export of the fixture workload: its version note first and the graph
/// ids of its graph kernels.
fn import_export(file: &str, version_note: &str, graph: [u32; 3]) -> Trace {
    let t = import(file);
    check_workload(&t);
    assert_eq!(t.manifest.notes[0], version_note);
    assert_eq!(graph_ids(&t), graph);
    t
}

fn graph_ids(t: &Trace) -> Vec<u32> {
    (0..t.kernels.len())
        .map(|i| t.kernels.row(i))
        .filter(|k| k.correlation == GRAPH_CORRELATION)
        .map(|k| k.graph_id)
        .collect()
}

#[test]
fn nsys_2023_1_export_meta_data_era() {
    // No graphId column before 2025: graph kernels keep their node ids only.
    let t = import_export(
        "nsys-2023.1.sqlite",
        "Nsight Systems 2023.1.1.127 export (export schema 2.13.1, EXPORT_META_DATA)",
        [0, 0, 0],
    );
    let gpu = t.manifest.gpu(0).expect("GPU 0");
    assert_eq!(gpu.name, "NVIDIA A100-SXM4-80GB");
    assert_eq!(gpu.memory_bandwidth_bytes_per_s, Some(2_039_000_000_000.0));
    assert_eq!(gpu.sm_count, Some(108));
    assert_eq!(gpu.compute_capability.as_deref(), Some("8.0"));
    assert_eq!(t.manifest.notes.len(), 1, "{:?}", t.manifest.notes);
}

#[test]
fn nsys_2024_4_meta_data_export_and_backtraces() {
    let t = import_export(
        "nsys-2024.4.sqlite",
        "Nsight Systems 2024.4.1.61 export (export schema 3.14.1, META_DATA_EXPORT)",
        [0, 0, 0],
    );
    assert_h100(&t);
    assert!(
        t.manifest.notes.contains(
            &"1 CUDA backtrace rows (stacks repeating an API call) were not counted as launches"
                .to_owned()
        ),
        "{:?}",
        t.manifest.notes
    );
}

#[test]
fn nsys_2025_3_has_graph_ids() {
    let t = import_export(
        "nsys-2025.3.sqlite",
        "Nsight Systems 2025.3.1.90 export (export schema 3.19.2, META_DATA_EXPORT)",
        [7, 7, 7],
    );
    assert_h100(&t);
}

#[test]
fn kernels_only_export_imports_with_notes() {
    let t = import("nsys-kernels-only.sqlite");
    assert_eq!(kernel_names(&t), vec![RMS_NORM, GEMV]);
    assert!(t.memops.is_empty() && t.launches.is_empty() && t.markers.is_empty());
    assert!(t.manifest.gpus.is_empty());
    let notes = &t.manifest.notes;
    for want in [
        "no META_DATA_EXPORT or EXPORT_META_DATA table: Nsight Systems version unknown",
        "no TARGET_INFO_GPU table: GPU name, SM count and peak memory bandwidth unknown",
        "no CUPTI_ACTIVITY_KIND_MEMCPY table: the capture recorded no memory copies",
        "no CUPTI_ACTIVITY_KIND_MEMSET table: the capture recorded no memory sets",
        "no CUPTI_ACTIVITY_KIND_RUNTIME table: the capture recorded no CUDA API calls, so launch gaps cannot be attributed",
        "no NVTX_EVENTS table: no NVTX ranges to mark steps",
    ] {
        assert!(
            notes.iter().any(|n| n == want),
            "missing {want:?} in {notes:?}"
        );
    }
    assert!(
        !notes
            .iter()
            .any(|n| n.contains("CUPTI_ACTIVITY_KIND_KERNEL"))
    );
}

/// The error a user sees: one line naming the file.
fn one_line_naming(e: &AnalyzerError, path: &Path) -> String {
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "not one line: {msg:?}");
    assert!(
        msg.contains(&path.display().to_string()),
        "does not name {}: {msg}",
        path.display()
    );
    msg
}

#[test]
fn unrelated_sqlite_database_is_not_an_nsys_export() {
    let path = fixture("not-nsys.sqlite");
    let e = import_nsys(&path, &NoProgress).expect_err("not an nsys export");
    assert!(matches!(e, AnalyzerError::Unsupported { .. }), "{e:?}");
    let msg = one_line_naming(&e, &path);
    assert!(msg.contains("not an Nsight Systems export"), "{msg}");
}

#[test]
fn truncated_export_is_a_one_line_error() {
    let bytes = std::fs::read(fixture("nsys-2025.3.sqlite")).expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cut.sqlite");
    std::fs::write(&path, &bytes[..bytes.len() / 2]).expect("write");
    let e = import_nsys(&path, &NoProgress).expect_err("truncated");
    let msg = one_line_naming(&e, &path);
    assert!(msg.contains("truncated SQLite file"), "{msg}");
}

#[test]
fn corrupt_pages_are_a_one_line_error_not_a_panic() {
    let mut bytes = std::fs::read(fixture("nsys-2025.3.sqlite")).expect("fixture");
    let half = bytes.len() / 2;
    for (i, b) in bytes[half..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(151).wrapping_add(7);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("corrupt.sqlite");
    std::fs::write(&path, &bytes).expect("write");
    let e = import_nsys(&path, &NoProgress).expect_err("corrupt");
    assert!(matches!(e, AnalyzerError::Sqlite { .. }), "{e:?}");
    one_line_naming(&e, &path);
}

#[test]
fn corrupt_kernel_table_is_a_one_line_error_naming_the_table() {
    // Garbage over just the kernel table's root page: the schema still reads, the scan
    // of that table must fail cleanly.
    let src = fixture("nsys-2025.3.sqlite");
    let conn =
        Connection::open_with_flags(&src, OpenFlags::SQLITE_OPEN_READ_ONLY).expect("open fixture");
    let root: i64 = conn
        .query_row(
            "SELECT rootpage FROM sqlite_master WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'",
            [],
            |r| r.get(0),
        )
        .expect("rootpage");
    conn.close().expect("close");
    let mut bytes = std::fs::read(&src).expect("fixture");
    let page_size = usize::from(u16::from_be_bytes([bytes[16], bytes[17]]));
    let start = (usize::try_from(root).expect("page number") - 1) * page_size;
    for (i, b) in bytes[start..start + page_size].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(151).wrapping_add(7);
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad-kernels.sqlite");
    std::fs::write(&path, &bytes).expect("write");
    let e = import_nsys(&path, &NoProgress).expect_err("corrupt kernel table");
    assert!(matches!(e, AnalyzerError::Sqlite { .. }), "{e:?}");
    let msg = one_line_naming(&e, &path);
    assert!(msg.contains("CUPTI_ACTIVITY_KIND_KERNEL"), "{msg}");
    assert!(msg.contains("malformed"), "{msg}");
}

#[test]
fn missing_empty_and_non_sqlite_files_are_one_line_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("nope.sqlite");
    let e = import_nsys(&missing, &NoProgress).expect_err("missing");
    assert!(matches!(e, AnalyzerError::Io { .. }), "{e:?}");
    one_line_naming(&e, &missing);

    let empty = dir.path().join("empty.sqlite");
    std::fs::write(&empty, b"").expect("write");
    let e = import_nsys(&empty, &NoProgress).expect_err("empty");
    assert!(one_line_naming(&e, &empty).contains("empty file"));

    let json = dir.path().join("trace.sqlite");
    std::fs::write(&json, b"{\"traceEvents\": []}").expect("write");
    let e = import_nsys(&json, &NoProgress).expect_err("not sqlite");
    assert!(one_line_naming(&e, &json).contains("not an SQLite database"));
}

/// Copies a fixture and applies `statements` to the copy, to probe how the importer
/// reads what a real export could contain.
fn edited_copy(name: &str, statements: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(name);
    std::fs::copy(fixture(name), &path).expect("copy");
    let conn = Connection::open(&path).expect("open copy");
    conn.execute_batch(statements).expect("edit copy");
    conn.close().expect("close");
    (dir, path)
}

#[test]
fn enum_ids_are_read_from_the_file() {
    // Renumber every enum the importer uses, and the rows that point at them: a reader
    // that relied on the documented numbers would lose the copies, ranges and launches.
    let (_dir, path) = edited_copy(
        "nsys-2025.3.sqlite",
        "UPDATE ENUM_CUDA_MEMCPY_OPER SET id = id + 100;
         UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET copyKind = copyKind + 100;
         UPDATE ENUM_NSYS_EVENT_TYPE SET id = id + 100;
         UPDATE NVTX_EVENTS SET eventType = eventType + 100;
         UPDATE ENUM_NSYS_EVENT_CLASS SET id = id + 100;
         UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET eventClass = eventClass + 100;",
    );
    let t = import_nsys(&path, &NoProgress).expect("import");
    check_workload(&t);
}

#[test]
fn documented_codes_apply_when_enum_tables_are_missing() {
    let (_dir, path) = edited_copy(
        "nsys-2025.3.sqlite",
        "DROP TABLE ENUM_CUDA_MEMCPY_OPER;
         DROP TABLE ENUM_NSYS_EVENT_TYPE;
         DROP TABLE ENUM_NSYS_EVENT_CLASS;",
    );
    let t = import_nsys(&path, &NoProgress).expect("import");
    assert_eq!(memops_by_kind(&t).get(&MemopKind::DtoD), Some(&1));
    assert_eq!(memops_by_kind(&t).get(&MemopKind::HtoD), Some(&1));
    assert_eq!(t.markers.len(), 2);
    assert_eq!(t.launches.len(), 8, "the backtrace row stays out");
    let notes = &t.manifest.notes;
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("no ENUM_CUDA_MEMCPY_OPER table")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("no ENUM_NSYS_EVENT_TYPE table")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("no ENUM_NSYS_EVENT_CLASS table")),
        "{notes:?}"
    );
    // Without the enum the label is the short kind name.
    let names: Vec<&str> = t.memops.name.iter().map(|&i| t.strings.get(i)).collect();
    assert!(names.contains(&"[CUDA memcpy DtoD]"), "{names:?}");
}

#[test]
fn kernel_name_falls_back_to_short_name() {
    let (_dir, path) = edited_copy(
        "nsys-2023.1.sqlite",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 999999 WHERE shortName = 10;",
    );
    let t = import_nsys(&path, &NoProgress).expect("import");
    let names = kernel_names(&t);
    assert_eq!(names[1], "gemv_bf16_kernel");
    assert_eq!(names[3], "gemv_bf16_kernel");
    assert_eq!(names[0], RMS_NORM);
}

#[test]
fn legacy_target_info_cuda_gpu_table() {
    // The nsys 2021.1-2021.2 GPU table, with CUPTI device-record names and units.
    let (_dir, path) = edited_copy(
        "nsys-2023.1.sqlite",
        "DROP TABLE TARGET_INFO_GPU;
         CREATE TABLE TARGET_INFO_CUDA_GPU (deviceId INTEGER, name TEXT,
             numMultiprocessors INTEGER, computeCapabilityMajor INTEGER,
             computeCapabilityMinor INTEGER, coreClockRate INTEGER,
             globalMemoryBandwidth INTEGER);
         INSERT INTO TARGET_INFO_CUDA_GPU VALUES
             (0, 'NVIDIA A100-SXM4-40GB', 108, 8, 0, 1410000, 1555000000);",
    );
    let t = import_nsys(&path, &NoProgress).expect("import");
    let gpu = t.manifest.gpu(0).expect("GPU 0");
    assert_eq!(gpu.name, "NVIDIA A100-SXM4-40GB");
    assert_eq!(gpu.sm_count, Some(108));
    assert_eq!(gpu.sm_clock_khz, Some(1_410_000));
    assert_eq!(gpu.memory_bandwidth_bytes_per_s, Some(1_555_000_000_000.0));
    assert_eq!(gpu.compute_capability.as_deref(), Some("8.0"));
}

#[test]
fn gpu_facts_follow_the_cuda_ordinal_map() {
    // Under CUDA_VISIBLE_DEVICES the kernels' deviceId 0 is TARGET_INFO_GPU id 3.
    let (_dir, path) = edited_copy(
        "nsys-2025.3.sqlite",
        "UPDATE TARGET_INFO_GPU SET id = 3;
         CREATE TABLE TARGET_INFO_CUDA_DEVICE (gpuId INTEGER, cudaId INTEGER NOT NULL,
             pid INTEGER NOT NULL, uuid TEXT, numMultiprocessors INTEGER);
         INSERT INTO TARGET_INFO_CUDA_DEVICE VALUES (3, 0, 4242, NULL, 132);",
    );
    let t = import_nsys(&path, &NoProgress).expect("import");
    assert_eq!(t.manifest.gpus.len(), 1);
    assert_h100(&t);
}

#[derive(Default)]
struct Recorder {
    total: Mutex<Option<u64>>,
    advanced: Mutex<u64>,
    finished: Mutex<bool>,
}

impl ImportProgress for Recorder {
    fn start(&self, total: Option<u64>) {
        *self.total.lock().expect("lock") = total;
    }
    fn advance(&self, n: u64) {
        *self.advanced.lock().expect("lock") += n;
    }
    fn finish(&self) {
        *self.finished.lock().expect("lock") = true;
    }
}

#[test]
fn progress_counts_every_scanned_row() {
    let p = Recorder::default();
    import_nsys(&fixture("nsys-2025.3.sqlite"), &p).expect("import");
    // 6 kernels + 3 memcpys + 1 memset + 9 runtime rows (one backtrace) + 3 NVTX rows.
    assert_eq!(*p.total.lock().expect("lock"), Some(22));
    assert_eq!(*p.advanced.lock().expect("lock"), 22);
    assert!(*p.finished.lock().expect("lock"));
}

#[test]
fn works_when_called_inside_a_tokio_runtime() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let t = rt.block_on(async { import_nsys(&fixture("nsys-2024.4.sqlite"), &NoProgress) });
    check_workload(&t.expect("import"));
}

/// Found by the nsys_import fuzz target: a declared column type that is not UTF-8 made
/// sqlx-sqlite (the driver before rusqlite) panic in its worker thread. It must be a
/// one-line error instead.
#[test]
fn non_utf8_declared_type_is_an_error_not_a_panic() {
    let p = fixture("fuzz-non-utf8-decltype.sqlite");
    let e = import_nsys(&p, &NoProgress).unwrap_err().to_string();
    assert!(
        e.contains("fuzz-non-utf8-decltype.sqlite") && e.contains("not UTF-8"),
        "{e}"
    );
    assert!(!e.contains('\n'));
}

fn import_all(path: &Path) -> Imported {
    import_trace(path, &ImportOptions::default(), &NoProgress).expect("imports")
}

/// Point 6 of issue 18: an nsys export with extreme start/end values. Before, the raw
/// values reached `end - start` in the odd-value check and the analysis (an overflow panic
/// in builds with overflow checks, wrapped figures in release).
#[test]
fn extreme_start_and_end_values_are_clamped_once() {
    let (_dir, path) = edited_copy(
        "nsys-2025.3.sqlite",
        "UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -10, end = 9223372036854775807 WHERE rowid = 1;
         UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -1, end = 0 WHERE rowid = 2;
         UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = -9223372036854775808, end = 5 WHERE rowid = 3;
         UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 100 WHERE rowid = 4;
         UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = 9223372036854775807 WHERE rowid = 1;
         UPDATE NVTX_EVENTS SET start = -9223372036854775808 WHERE text = 'prefill';",
    );
    let imp = import_all(&path);
    const L: i64 = i64::MAX / 2;
    let k = &imp.trace.kernels;
    assert_eq!(k.len(), 6);
    assert_eq!(k.gpu_start_ns[0], -10);
    // Inside kernel 0's span on the same stream: it counts from kernel 0's end, at most its
    // own end (see `validate::odd_values`).
    assert_eq!((k.gpu_start_ns[1], k.gpu_end_ns[1]), (0, 0));
    assert_eq!(k.gpu_start_ns[2], -L);
    assert_eq!((k.gpu_start_ns[3], k.gpu_end_ns[3]), (2_037_000, 2_037_000));
    // Kernels 0 and 2 each span about 2^62 ns: both are cut to one ceiling so that the
    // durations of all GPU activities add up to at most L.
    let dur = |i: usize| k.gpu_end_ns[i] - k.gpu_start_ns[i];
    assert_eq!(dur(0), dur(2));
    let m = &imp.trace.memops;
    let total: i128 = (0..k.len())
        .map(|i| i128::from(dur(i)))
        .chain((0..m.len()).map(|i| i128::from(m.gpu_end_ns[i] - m.gpu_start_ns[i])))
        .sum();
    // (Kernels that start inside kernel 0 on its stream then count from its end, so the total
    // falls short of the ceiling by their durations.)
    assert!(
        total <= i128::from(L) && i128::from(dur(0)) > i128::from(L) / 4,
        "{total}"
    );
    assert_eq!(imp.trace.launches.host_end_ns[0], L);
    let prefill = imp.trace.markers.row(0);
    assert_eq!(
        (prefill.host_start_ns, prefill.host_end_ns),
        (-L, 1_900_000)
    );
    common::assert_untrusted_times_warned(
        &imp,
        &[
            "untrusted times: 4 times beyond",
            "1 ends before their start",
            "2 durations cut",
        ],
    );
}

/// Before, the importer read views like tables: a tiny file whose kernel "table" is a
/// recursive view never finished. Views, virtual tables and generated columns are left out.
#[test]
fn views_and_computed_tables_are_not_read() {
    let (_dir, path) = edited_copy(
        "nsys-2025.3.sqlite",
        "DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL;
         CREATE VIEW CUPTI_ACTIVITY_KIND_KERNEL AS
           WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n)
           SELECT x AS start, x + 1 AS end, 0 AS deviceId, 1 AS contextId, 7 AS streamId,
                  x AS correlationId, 6 AS demangledName, 6 AS shortName FROM n;
         DROP TABLE CUPTI_ACTIVITY_KIND_MEMSET;
         CREATE TABLE CUPTI_ACTIVITY_KIND_MEMSET (start INTEGER, end INTEGER,
             deviceId INTEGER, bytes INTEGER GENERATED ALWAYS AS (length(zeroblob(1000000))));
         INSERT INTO CUPTI_ACTIVITY_KIND_MEMSET (start, end, deviceId) VALUES (1, 2, 0);",
    );
    let imp = import_all(&path);
    assert_eq!(imp.trace.kernels.len(), 0);
    assert_eq!(
        imp.trace.memops.len(),
        3,
        "the memcpys stay, the memset table is out"
    );
    let w = imp.warnings.join("\n");
    assert!(
        w.contains("CUPTI_ACTIVITY_KIND_KERNEL is a view, not a table"),
        "{w}"
    );
    assert!(
        w.contains("CUPTI_ACTIVITY_KIND_MEMSET has generated columns"),
        "{w}"
    );
}

/// Before, a repeated `StringIds` id joined twice and every kernel, call and range it
/// named was counted twice.
#[test]
fn repeated_string_ids_do_not_multiply_rows() {
    let (_dir, path) = edited_copy(
        "nsys-2025.3.sqlite",
        "CREATE TABLE s2 AS SELECT * FROM StringIds;
         DROP TABLE StringIds;
         CREATE TABLE StringIds (id INTEGER NOT NULL, value TEXT NOT NULL);
         INSERT INTO StringIds SELECT id, value FROM s2;
         INSERT INTO StringIds SELECT id, value FROM s2;
         DROP TABLE s2;",
    );
    let imp = import_all(&path);
    check_workload(&imp.trace);
    assert!(
        imp.warnings
            .iter()
            .any(|w| w.starts_with("StringIds repeats") && w.contains("counted twice")),
        "{:?}",
        imp.warnings
    );
}

/// How the `-wal` export of [`with_wal_export`] is left. (A writer still connected is
/// tested through the binary, in another process: inside one process SQLite shares the
/// writer's `-shm` mapping with every connection to the file.)
#[derive(Clone, Copy, Debug, PartialEq)]
enum WalLeft {
    /// Copies of the three files, as a killed writer leaves them.
    Killed,
    /// Copies of the file and its `-wal` only.
    NoShm,
}

/// Runs `check` on a copy of the 2025.3 fixture in WAL mode whose 2,000 extra kernels were
/// committed into its `-wal` only (automatic checkpoints off).
fn with_wal_export(left: WalLeft, check: impl FnOnce(&Path)) {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    let dst = dir.path().join("dst");
    std::fs::create_dir_all(&src).expect("mkdir");
    std::fs::create_dir_all(&dst).expect("mkdir");
    let path = src.join("live.sqlite");
    std::fs::copy(fixture("nsys-2025.3.sqlite"), &path).expect("copy");
    let conn = Connection::open(&path).expect("open copy");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0;
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT k.* FROM CUPTI_ACTIVITY_KIND_KERNEL k, n WHERE k.rowid = 6;",
    )
    .expect("insert into the WAL");
    let copy = |names: &[&str]| {
        for n in names {
            std::fs::copy(src.join(n), dst.join(n)).expect("copy");
        }
        dst.join("live.sqlite")
    };
    match left {
        WalLeft::Killed => check(&copy(&[
            "live.sqlite",
            "live.sqlite-wal",
            "live.sqlite-shm",
        ])),
        WalLeft::NoShm => check(&copy(&["live.sqlite", "live.sqlite-wal"])),
    }
    conn.execute_batch("SELECT 1")
        .expect("the writer is still connected");
    conn.close().expect("close");
}

/// Issue 31 class 3: rows committed into a `-wal` beside the export (never checkpointed into
/// it) are read, whether its writer was killed or only the file and its `-wal` were copied; the file, its `-wal` and `-shm` keep their bytes and times, and nothing is
/// created beside them.
#[test]
fn committed_rows_in_a_wal_file_are_read_and_nothing_is_written() {
    for left in [WalLeft::Killed, WalLeft::NoShm] {
        with_wal_export(left, |path| {
            let dir = path.parent().unwrap();
            let before = gapscope_tests::snapshot(dir);
            assert!(before["live.sqlite-wal"].0.len() > 100_000, "{left:?}");
            let scratch = tempfile::tempdir().expect("scratch");
            if left == WalLeft::NoShm {
                // A private copy needs a scratch directory the caller names; without one the
                // export is refused with the reason.
                let e = import_trace(path, &ImportOptions::default(), &NoProgress)
                    .expect_err("refused")
                    .to_string();
                assert!(e.contains("no scratch directory was given"), "{e}");
            }
            let opts = ImportOptions {
                scratch_dir: Some(scratch.path().to_owned()),
                ..ImportOptions::default()
            };
            let imp = import_trace(path, &opts, &NoProgress).expect("imports");
            assert_eq!(imp.trace.kernels.len(), 2_006, "{left:?}");
            assert!(
                imp.trace
                    .manifest
                    .notes
                    .iter()
                    .any(|n| n.contains("live.sqlite-wal") && n.contains("never checkpointed")),
                "{left:?}: {:?}",
                imp.trace.manifest.notes
            );
            let after = gapscope_tests::snapshot(dir);
            for (name, v) in &before {
                let same = after.get(name).map(|a| (a.0 == v.0, a.1 == v.1));
                assert_eq!(same, Some((true, true)), "{left:?}: {name} changed");
            }
            assert_eq!(after.len(), before.len(), "{left:?}: files created");
        });
    }
}

/// A `-wal` beside the export that is not a regular file is refused in one line, not read
/// through or waited on.
#[cfg(unix)]
#[test]
fn a_wal_that_is_not_a_regular_file_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x.sqlite");
    std::fs::copy(fixture("nsys-2025.3.sqlite"), &path).expect("copy");
    let wal = dir.path().join("x.sqlite-wal");
    std::os::unix::fs::symlink("/dev/zero", &wal).expect("symlink");
    let e = import_nsys(&path, &NoProgress).expect_err("refused");
    assert!(
        one_line_naming(&e, &path).contains("not a regular file"),
        "{e}"
    );
}

/// Issue 31 class 12: an export stored as UTF-16 (before: refused, "no CUPTI tables") reads
/// as its UTF-8 original does.
#[test]
fn utf16_exports_read_like_utf8_ones() {
    for encoding in ["UTF-16le", "UTF-16be"] {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("utf16.sqlite");
        gapscope_tests::sqlite::recoded_copy(&fixture("nsys-2025.3.sqlite"), &p, encoding);
        let t = import_all(&p).trace;
        check_workload(&t);
        assert_eq!(graph_ids(&t), graph_ids(&import("nsys-2025.3.sqlite")));
        assert_h100(&t);
    }
}

/// Before: "filename passed to SQLite must be valid UTF-8".
#[cfg(target_os = "linux")]
#[test]
fn a_path_that_is_not_utf8_imports() {
    use std::os::unix::ffi::OsStrExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let sub = dir.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9"));
    std::fs::create_dir(&sub).expect("mkdir");
    let path = sub.join(std::ffi::OsStr::from_bytes(b"r\xfcn.sqlite"));
    std::fs::copy(fixture("nsys-2025.3.sqlite"), &path).expect("copy");
    let imp = import_all(&path);
    check_workload(&imp.trace);
}

#[cfg(unix)]
#[test]
fn a_fifo_is_refused_before_it_is_opened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("export.sqlite");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&path)
            .status()
            .expect("mkfifo")
            .success()
    );
    let e = import_nsys(&path, &NoProgress).expect_err("fifo");
    assert!(one_line_naming(&e, &path).contains("not a regular file"));
    let e = import_trace(&path, &ImportOptions::default(), &NoProgress).expect_err("fifo");
    assert!(one_line_naming(&e, &path).contains("FIFO"));
}

#[test]
fn the_event_limit_applies_to_nsys() {
    let path = fixture("nsys-2025.3.sqlite");
    let opts = |n| ImportOptions {
        max_events: Some(n),
        ..Default::default()
    };
    // 6 kernels, 4 memops, 8 launches and 2 NVTX ranges.
    let e = import_trace(&path, &opts(19), &NoProgress).expect_err("limit");
    assert!(
        one_line_naming(&e, &path).contains("more than 19 events"),
        "{e}"
    );
    assert!(matches!(e, AnalyzerError::Limit { .. }), "{e:?}");
    let imp = import_trace(&path, &opts(20), &NoProgress).expect("imports");
    check_workload(&imp.trace);
}

#[test]
fn nvtx_ranges_and_api_records_explain_the_idle_like_kineto_scopes() {
    // The decode step's NVTX range is a host scope; the launches link its GPU work to the
    // host thread, so the idle inside the step is attributed, not left unexplained.
    let imported = import_trace(
        &fixture("nsys-2025.3.sqlite"),
        &ImportOptions::default(),
        &NoProgress,
    )
    .unwrap();
    let r = analyze(&imported, &RuleSet::builtin(), &AnalysisSettings::default());
    let h = r
        .host_idle
        .expect("idle attribution from NVTX and API records");
    assert_eq!(h.linked_pct, 100.0);
    assert_eq!(h.scopes, 2);
    let inside = h.inside_steps;
    assert!(inside.idle_ms_per_step > 0.2, "{inside:?}");
    assert_eq!(inside.unexplained_ms_per_step, 0.0);
    let top = &h.top_scopes[0];
    let annotation = ChargeKind::Scope(gapscope_traces::ScopeKind::Annotation);
    assert_eq!((top.name.as_str(), top.kind), ("decode_step", annotation));
    // The lever names the annotation as the scope: time in no finer recorded scope.
    assert_eq!(h.lever.cause, Some(IdleCause::HostCompute), "{}", h.lever);
    let scope = h.lever.scope.as_ref().unwrap();
    assert_eq!(
        (scope.name.as_str(), scope.kind),
        ("decode_step", annotation)
    );
}
