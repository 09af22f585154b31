//! What the recording says about its GPUs: the manifest's GPU list and the NVML samples
//! re-timed onto the CUPTI clock.

use std::collections::HashMap;

use gapscope_traces::{GpuInfo, SampleRow, SampleTable};

use super::Facts;
use crate::decode;
use crate::nvml::Telemetry;

/// The NVML samples of the GPUs this process used, re-timed onto the CUPTI clock (NVML index
/// to CUDA device id through the UUID), inside the capture windows.
pub(super) fn telemetry_samples(
    t: &Telemetry,
    facts: &Facts,
    offset: Option<i64>,
    keep: &impl Fn(u64) -> bool,
    notes: &mut Vec<String>,
) -> SampleTable {
    let mut samples = SampleTable::default();
    let by_uuid: HashMap<String, u32> = facts
        .devices
        .iter()
        // Compared case-insensitively: NVML spells "GPU-" in capitals.
        .map(|d| (decode::uuid_string(&d.uuid).to_ascii_lowercase(), d.id))
        .collect();
    let mut unmapped = 0u64;
    for smp in &t.samples {
        let uuid = t
            .gpus
            .iter()
            .find(|g| g.index == smp.index)
            .map(|g| g.uuid.to_ascii_lowercase());
        let device = match uuid.and_then(|u| by_uuid.get(&u).copied()) {
            Some(d) => d,
            None => {
                unmapped += 1;
                continue;
            }
        };
        let host_ns = smp.realtime_ns + offset.unwrap_or(0);
        if !keep(host_ns.max(0) as u64) {
            continue;
        }
        samples.push(SampleRow {
            device,
            host_ns,
            sm_clock_mhz: smp.sm_clock_mhz,
            mem_clock_mhz: smp.mem_clock_mhz,
            power_mw: smp.power_mw,
            temperature_c: smp.temperature_c,
            gpu_util_pct: smp.gpu_util_pct,
            mem_util_pct: smp.mem_util_pct,
            throttle_reasons: smp.throttle_reasons,
        });
    }
    if unmapped > 0 && !facts.devices.is_empty() {
        let cuda: Vec<String> = facts
            .devices
            .iter()
            .map(|d| format!("{} {}", d.id, decode::uuid_string(&d.uuid)))
            .collect();
        let nvml: Vec<String> = t
            .gpus
            .iter()
            .map(|g| format!("{} {}", g.index, g.uuid))
            .collect();
        notes.push(format!(
            "{unmapped} NVML samples of GPUs this process did not use were left out (CUDA devices: {}; NVML GPUs: {})",
            cuda.join(", "),
            nvml.join(", ")
        ));
    } else if unmapped > 0 {
        notes.push(format!(
            "{unmapped} NVML samples left out: CUPTI reported no device to match them to"
        ));
    }
    if offset.is_none() && !samples.is_empty() {
        notes.push(
            "NVML sample times are host realtime ns: the spool had no clock calibration".into(),
        );
    }
    samples
}

/// The manifest's GPUs: one per CUDA device the process reported, by device id.
pub(super) fn gpus_of(facts: &Facts) -> Vec<GpuInfo> {
    let mut gpus: Vec<GpuInfo> = facts
        .devices
        .iter()
        .map(|d| GpuInfo {
            device: d.id,
            name: facts.strings.get(&d.name).cloned().unwrap_or_default(),
            sm_count: Some(d.sm_count),
            total_memory_bytes: Some(d.memory_bytes),
            memory_bandwidth_bytes_per_s: (d.memory_bandwidth_kbps > 0)
                .then_some(d.memory_bandwidth_kbps as f64 * 1e3),
            compute_capability: Some(format!("{}.{}", d.cc.0, d.cc.1)),
            l2_cache_bytes: Some(d.l2_bytes as u64),
            sm_clock_khz: Some(d.core_clock_khz as u64),
            warp_size: None,
        })
        .collect();
    gpus.sort_by_key(|g| g.device);
    gpus.dedup_by_key(|g| g.device);
    gpus
}
