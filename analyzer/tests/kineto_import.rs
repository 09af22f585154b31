//! Kineto importer over real traces (CUDA and ROCm) and hand-written edge cases.

use std::io::Write;
use std::path::{Path, PathBuf};

use gapscope_analyzer::import::{ImportOptions, Imported, NoProgress, import_trace};
use gapscope_analyzer::{Bucket, RuleSet};
use gapscope_traces::{MemopKind, Phase};

fn repo(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(p)
}

fn import(p: &Path) -> Imported {
    import_trace(p, &ImportOptions::default(), &NoProgress).expect("imports")
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn real_rocm_hipblaslt_trace() {
    let t = import(&repo(
        "analyzer/tests/data/kineto/rocm-gfx942-gemm-hipblaslt-roctracer.json",
    ))
    .trace;
    assert_eq!(t.kernels.len(), 20);
    assert_eq!(t.launches.len(), 32);
    let rules = RuleSet::builtin();
    for i in 0..t.kernels.len() {
        let name = t.strings.get(t.kernels.name[i]);
        assert!(name.starts_with("Cijk_"), "{name}");
        assert_eq!(rules.classify_kernel(name), Bucket::GemmDense, "{name}");
    }
    // No `correlation` key: External id links launch and kernel.
    let launch_corr: std::collections::HashSet<u64> =
        t.launches.correlation.iter().copied().collect();
    assert!(
        t.kernels
            .correlation
            .iter()
            .all(|c| *c != 0 && launch_corr.contains(c))
    );
    assert!(
        t.launches
            .name
            .iter()
            .any(|&n| t.strings.get(n) == "hipExtModuleLaunchKernel")
    );
}

#[test]
fn real_rocm_rocprofiler_sdk_trace() {
    let t = import(&repo(
        "analyzer/tests/data/kineto/rocm-mi300x-elementwise-add-rocprofiler-sdk.json",
    ))
    .trace;
    assert_eq!(t.kernels.len(), 10);
    assert_eq!(t.manifest.gpus.len(), 8);
    assert_eq!(t.manifest.gpus[0].name, "AMD Instinct MI300X");
    assert_eq!(t.manifest.gpus[0].sm_count, Some(304));
    assert!(t.manifest.source_base_time_ns.is_some());
    // Float microsecond timestamps keep sub-microsecond durations.
    let durs: Vec<i64> = (0..t.kernels.len())
        .map(|i| t.kernels.gpu_end_ns[i] - t.kernels.gpu_start_ns[i])
        .collect();
    assert!(durs.iter().all(|&d| d > 0));
    let name = t.strings.get(t.kernels.name[0]);
    assert!(name.ends_with("[clone .kd]"));
    assert_eq!(
        RuleSet::builtin().classify_kernel(name),
        Bucket::ActElementwise
    );
}

#[test]
fn real_trace_without_gpu_events() {
    let imp = import(&repo("traces/reference/hf-llama3.2-1b-cpuonly.json.gz"));
    assert_eq!(imp.trace.kernels.len(), 0);
    assert_eq!(imp.trace.memops.len(), 0);
    assert!(!imp.trace.launches.is_empty());
    assert!(
        imp.trace
            .manifest
            .notes
            .iter()
            .any(|n| n.contains("no GPU events"))
    );
}

#[test]
fn hf_trace_counts_and_annotations() {
    let t = import(&repo("traces/reference/hf-llama3.2-1b-npl8.json.gz")).trace;
    assert_eq!(t.kernels.len(), 21_728);
    assert_eq!(t.memops.len(), 32);
    assert!(t.memops.kind.iter().all(|&k| k == MemopKind::Memset as u8));
    let gpu_steps = (0..t.markers.len())
        .filter(|&i| t.markers.gpu_start_ns[i] != i64::MIN)
        .count();
    assert_eq!(gpu_steps, 32);
    assert!(t.markers.phase.iter().all(|&p| p == Phase::Decode as u8));
    assert_eq!(t.manifest.gpus[0].name, "NVIDIA H200");
    assert_eq!(
        t.manifest.source_base_time_ns,
        Some(1_790_857_026_000_000_000)
    );
}

#[test]
fn ns_display_unit_array_form_strings_and_rocm_graph_replay() {
    let dir = tempfile::tempdir().unwrap();
    // displayTimeUnit "ns" placed last, as the 2024 Kineto builds wrote it: values stay in us.
    let p = write(
        dir.path(),
        "ns.json",
        r#"{"traceEvents":[
          {"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":10.5,"dur":0.25,"args":{"device":0,"stream":7,"correlation":3}}
        ],"displayTimeUnit":"ns"}"#,
    );
    let imp = import(&p);
    assert_eq!(imp.trace.kernels.gpu_start_ns, vec![10_500]);
    assert_eq!(imp.trace.kernels.gpu_end_ns, vec![10_750]);
    assert!(
        imp.trace
            .manifest
            .notes
            .iter()
            .any(|n| n.contains("displayTimeUnit"))
    );

    // Synthetic ROCm graph replay (no real text trace with hipGraphLaunch was found): three
    // kernels share the launch's correlation. Bare array form, no closing bracket (allowed by
    // the trace-event format), string pid/tid, integer timestamps.
    let p = write(
        dir.path(),
        "graph.json",
        r#"[
          {"ph":"X","cat":"cuda_runtime","name":"hipGraphLaunch","pid":"host","tid":"thread 9","ts":100,"dur":5,"args":{"correlation":42}},
          {"ph":"X","cat":"kernel","name":"Cijk_Alik_Bljk_HHS_BH_MT64x64","pid":2,"tid":"stream 1","ts":110,"dur":10,"args":{"correlation":42}},
          {"ph":"X","cat":"kernel","name":"Cijk_Alik_Bljk_HHS_BH_MT64x64","pid":2,"tid":"stream 1","ts":121,"dur":10,"args":{"correlation":42}},
          {"ph":"X","cat":"kernel","name":"wvSplitK_hf_","pid":2,"tid":"stream 1","ts":132,"dur":4,"args":{"correlation":42}},
          {"ph":"X","cat":"gpu_memcpy","name":"CopyDeviceToDevice","pid":2,"tid":1,"ts":140,"dur":1,"args":{"bytes":4096}},"#,
    );
    let t = import(&p).trace;
    assert_eq!(t.kernels.len(), 3);
    assert!(t.kernels.correlation.iter().all(|&c| c == 42));
    assert_eq!(t.kernels.stream, vec![1, 1, 1]);
    assert_eq!(t.kernels.device, vec![2, 2, 2]);
    assert_eq!(t.memops.kind, vec![MemopKind::DtoD as u8]);
    assert_eq!(t.memops.bytes, vec![4096]);
    assert_eq!(t.strings.get(t.launches.name[0]), "hipGraphLaunch");
    assert_eq!(t.launches.tid, vec![9]);
}

#[test]
fn odd_values_are_kept_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "odd.json",
        r#"{"traceEvents":[
          {"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":10,"dur":-2,"args":{}},
          {"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"ts":20,"dur":10,"args":{}},
          {"ph":"X","cat":"kernel","name":"c","pid":0,"tid":7,"ts":25,"dur":10,"args":{}},
          {"ph":"X","cat":"kernel","name":"d","pid":0,"tid":8,"ts":1e300,"dur":1,"args":{}}
        ]}"#,
    );
    let imp = import(&p);
    assert_eq!(imp.trace.kernels.len(), 4);
    let w = imp.warnings.join("\n");
    assert!(
        w.contains("1 kernels and 0 memops have negative durations"),
        "{w}"
    );
    assert!(
        w.contains("1 kernels start before an earlier kernel"),
        "{w}"
    );
    assert!(
        imp.trace
            .manifest
            .notes
            .iter()
            .any(|n| n.contains("overflowed"))
    );
}

#[test]
fn truncation_is_an_error_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let full = std::fs::read(repo("traces/reference/hf-llama3.2-1b-npl8.json.gz")).unwrap();
    let p = dir.path().join("cut.json.gz");
    std::fs::File::create(&p)
        .unwrap()
        .write_all(&full[..full.len() * 3 / 4])
        .unwrap();
    let e = import_trace(&p, &ImportOptions::default(), &NoProgress)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cut.json.gz") && e.contains("truncated"), "{e}");
    assert!(!e.contains('\n'));
    let opts = ImportOptions {
        allow_truncated: true,
        ..Default::default()
    };
    let imp = import_trace(&p, &opts, &NoProgress).unwrap();
    assert!(imp.trace.manifest.truncated);
    assert!(imp.trace.kernels.len() > 1000 && imp.trace.kernels.len() < 21_728);
    assert!(imp.warnings[0].contains("truncated"));
}
