//! Spool to native trace. Runs in the launcher after the child exits: three streaming
//! passes over a process's spool (names and facts; capture windows; rows), appending rows to
//! the trace in chunks so memory stays bounded by the chunk size plus the interned names,
//! whatever the spool's size.

mod devices;
mod windows;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gapscope_traces::native::CHUNK_ROWS;
use gapscope_traces::{
    KernelRow, KernelTable, LaunchApi, LaunchRow, LaunchTable, Manifest, MarkerRow, MarkerSource,
    MarkerTable, MemopKind, MemopRow, MemopTable, SourceFormat, StrId, StringTable, TraceWriter,
};

use crate::collect_range::{is_profiler_start, is_profiler_stop};
use crate::decode::{self, Activity};
use crate::driver_devices::DeviceInfo;
use crate::error::Result;
use crate::layout::{api_domain, cuda_release_of, marker_flag};
use crate::nvml::Telemetry;
use crate::spool::{SpoolEnd, SpoolHeader, SpoolReader, rd_i64, rd_u32, rd_u64, tag};

/// Which part of the run to keep.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaptureRange {
    /// Skip this long after the launcher started the child.
    pub delay_ns: Option<i64>,
    /// Keep this long after the delay.
    pub duration_ns: Option<i64>,
    /// Keep only what starts between cudaProfilerStart and cudaProfilerStop (or the driver's
    /// cuProfilerStart/Stop).
    pub profiler_api: bool,
}

/// Everything assembly needs besides the spool.
#[derive(Debug, Default)]
pub struct AssembleSettings {
    pub capture: CaptureRange,
    /// When the launcher started the child, on the realtime clock.
    pub launch_realtime_ns: i64,
    /// The child's command line as the user gave it.
    pub command_line: String,
    /// How the recorded process ended, when known ("exit 0", "killed by SIGSEGV").
    pub exit: Option<String>,
    /// The process ended abnormally (signal or abort): mark the trace truncated.
    pub crashed: bool,
    /// Why there is no telemetry, when there is none.
    pub no_nvml: Option<String>,
}

/// What was written, for the launcher's summary and tests.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct AssembleSummary {
    pub output: PathBuf,
    pub pid: u32,
    pub kernels: u64,
    pub memops: u64,
    pub launches: u64,
    pub markers: u64,
    pub samples: u64,
    pub dropped: u64,
    pub truncated: bool,
    /// Records outside the capture range.
    pub outside_capture: u64,
    pub notes: Vec<String>,
}

/// Facts gathered in the first pass.
#[derive(Default)]
struct Facts {
    header: Option<SpoolHeader>,
    end: Option<SpoolEnd>,
    strings: HashMap<u64, String>,
    api_names: HashMap<(u32, u32), String>,
    /// (cupti_ns, realtime_ns) pairs.
    calibration: Vec<(u64, i64)>,
    /// (on, cupti_ns): where `--collect range` switched collection, in spool order.
    collect_marks: Vec<(bool, u64)>,
    devices: Vec<decode::Device>,
    dropped: u64,
    notes: Vec<String>,
    torn_tail: bool,
    skipped_undecodable: u64,
    overhead_ns: HashMap<u32, u64>,
}

fn pass_facts(path: &Path) -> Result<Facts> {
    let mut f = Facts::default();
    let mut driver_devices: Vec<DeviceInfo> = Vec::new();
    let mut r = SpoolReader::open(path)?;
    while let Some(fr) = r.next_frame()? {
        let p = &fr.payload;
        match fr.tag {
            tag::HEADER => f.header = serde_json::from_slice(p).ok(),
            tag::END => f.end = Some(serde_json::from_slice(p).unwrap_or_default()),
            tag::STRING if p.len() >= 8 => {
                f.strings
                    .insert(rd_u64(p, 0), String::from_utf8_lossy(&p[8..]).into_owned());
            }
            tag::API_NAME if p.len() >= 8 => {
                f.api_names.insert(
                    (rd_u32(p, 0), rd_u32(p, 4)),
                    String::from_utf8_lossy(&p[8..]).into_owned(),
                );
            }
            tag::CALIBRATION if p.len() >= 24 => f.calibration.push((rd_u64(p, 0), rd_i64(p, 8))),
            tag::DROPPED if p.len() >= 16 => f.dropped += rd_u64(p, 8),
            tag::DEVICE_INFO => {
                if let Ok(d) = serde_json::from_slice::<DeviceInfo>(p) {
                    driver_devices.push(d);
                }
            }
            tag::COLLECT if p.len() >= 12 => {
                f.collect_marks.push((rd_u32(p, 0) != 0, rd_u64(p, 4)))
            }
            tag::NOTE => f.notes.push(String::from_utf8_lossy(p).into_owned()),
            tag::RECORD => match decode::decode(p) {
                Ok(Activity::Device(d)) => f.devices.push(d),
                Ok(Activity::Overhead {
                    overhead_kind,
                    start,
                    end,
                }) => {
                    *f.overhead_ns.entry(overhead_kind).or_default() += end.saturating_sub(start);
                }
                Ok(_) => {}
                Err(_) => f.skipped_undecodable += 1,
            },
            _ => {}
        }
    }
    f.torn_tail = r.torn_tail;
    // Devices CUPTI did not report (it attached late) come from the driver's facts.
    for d in driver_devices {
        if f.devices.iter().any(|c| c.id == d.id) {
            continue;
        }
        let name_id = u64::MAX - u64::from(d.id);
        f.strings.insert(name_id, d.name.clone());
        f.devices.push(decode::Device {
            id: d.id,
            name: name_id,
            sm_count: d.sm_count,
            memory_bytes: d.memory_bytes,
            memory_bandwidth_kbps: 0,
            l2_bytes: d.l2_bytes,
            core_clock_khz: d.core_clock_khz,
            cc: d.cc,
            uuid: d.uuid,
        });
    }
    Ok(f)
}

/// CUPTI ns minus realtime ns, the median over the calibration pairs.
fn clock_offset(cal: &[(u64, i64)]) -> Option<i64> {
    let mut d: Vec<i64> = cal.iter().map(|&(c, r)| c as i64 - r).collect();
    if d.is_empty() {
        return None;
    }
    d.sort_unstable();
    Some(d[d.len() / 2])
}

/// Host API calls worth a row in the launches table: launches, copies, sets, graph calls,
/// synchronisation and the profiler range calls.
pub fn is_kept_api(name: &str) -> bool {
    [
        "Launch",
        "Memcpy",
        "Memset",
        "Graph",
        "Synchronize",
        "ProfilerSt",
    ]
    .iter()
    .any(|k| name.contains(k))
}

fn memop_kind(copy_kind: u8) -> MemopKind {
    match copy_kind {
        1 => MemopKind::HtoD,
        2 => MemopKind::DtoH,
        8 => MemopKind::DtoD,
        9 => MemopKind::HtoH,
        10 => MemopKind::PtoP,
        _ => MemopKind::Unknown,
    }
}

/// CUPTI 13.0's names of its `CUpti_ActivityOverheadKind` codes.
fn overhead_name(kind: u32) -> Option<&'static str> {
    Some(match kind {
        1 => "driver compiler",
        65536 => "CUPTI buffer flush",
        131072 => "CUPTI instrumentation",
        196608 => "CUPTI resource",
        262144 => "runtime-triggered module loading",
        327680 => "lazy function loading",
        393216 => "command buffer full",
        458752 => "activity buffer request",
        524288 => "UVM activity init",
        _ => return None,
    })
}

/// CUPTI reports kernel names as the compiler mangled them; Kineto and nsys show them
/// demangled, and the bucket rules and reports are written for that spelling. Names that do
/// not demangle are kept as they are. cpp_demangle's spelling differs from the GNU
/// demangler's in places (`(unsigned long)3` for `3ul`, return types of nested function
/// templates); the analyzer's importer turns both into one canonical form
/// (`gapscope_analyzer::import::names`), so recordings pair with Kineto and nsys traces.
pub fn demangle(name: &str) -> String {
    if !name.starts_with("_Z") {
        return name.to_owned();
    }
    cpp_demangle::Symbol::new(name.as_bytes())
        .ok()
        .and_then(|s| s.demangle().ok())
        .unwrap_or_else(|| name.to_owned())
}

/// Buffers rows and appends them to the writer a chunk at a time.
struct Sink {
    w: TraceWriter,
    strings: StringTable,
    names: HashMap<u64, StrId>,
    kernels: KernelTable,
    memops: MemopTable,
    launches: LaunchTable,
    markers: MarkerTable,
}

impl Sink {
    fn name(&mut self, facts: &Facts, id: u64) -> StrId {
        if let Some(&s) = self.names.get(&id) {
            return s;
        }
        let s = match facts.strings.get(&id) {
            Some(v) => self.strings.intern(&demangle(v)),
            None if id == 0 => self.strings.intern("<unnamed>"),
            None => self.strings.intern(&format!("<name {id} lost>")),
        };
        self.names.insert(id, s);
        s
    }

    /// One NVTX range on the host timeline.
    fn nvtx(&mut self, facts: &Facts, name: u64, tid: u32, start: u64, end: u64) {
        let name = self.name(facts, name);
        self.markers.push(MarkerRow {
            name,
            source: MarkerSource::Nvtx as u8,
            tid: tid as u64,
            host_start_ns: start as i64,
            host_end_ns: end as i64,
            ..Default::default()
        });
    }

    fn flush(&mut self, all: bool) -> Result<()> {
        let full = |n: usize| all || n >= CHUNK_ROWS;
        if !(full(self.kernels.len())
            || full(self.memops.len())
            || full(self.launches.len())
            || full(self.markers.len()))
        {
            return Ok(());
        }
        self.w.append_strings(&self.strings)?;
        // Each full, non-empty table goes out as a chunk and starts over.
        macro_rules! append_full {
            ($($rows:ident => $append:ident),*) => {$(
                if full(self.$rows.len()) && !self.$rows.is_empty() {
                    self.w.$append(&self.$rows)?;
                    self.$rows.clear();
                }
            )*};
        }
        append_full!(
            kernels => append_kernels,
            memops => append_memops,
            launches => append_launches,
            markers => append_markers
        );
        Ok(())
    }
}

/// Writes the native trace `output` from the spool at `spool`, with the launcher's
/// telemetry re-timed onto the CUPTI clock.
#[expect(
    clippy::too_many_lines,
    reason = "the three streaming passes over one spool share their per-pass state; each pass is a block"
)]
pub fn assemble(
    spool: &Path,
    output: &Path,
    s: &AssembleSettings,
    telemetry: Option<&Telemetry>,
) -> Result<AssembleSummary> {
    let facts = pass_facts(spool)?;
    let offset = clock_offset(&facts.calibration);
    let mut notes: Vec<String> = facts.notes.clone();
    let windows = windows::capture_windows(spool, &facts, s, offset, &mut notes)?;
    let filtering =
        s.capture.profiler_api || !facts.collect_marks.is_empty() || !windows.is_empty();
    let keep = |t: u64| !filtering || windows.iter().any(|&(a, b)| t >= a && t < b);

    let header = facts.header.clone().unwrap_or_default();
    let mut m = Manifest::new(SourceFormat::Cupti);
    m.command_line = Some(if s.command_line.is_empty() {
        header.command_line.clone()
    } else {
        s.command_line.clone()
    });
    if header.cupti_api_version > 0 {
        m.cuda_version = Some(cuda_release_of(header.cupti_api_version));
    }
    m.ranks = header.rank.into_iter().collect();
    m.world_size = header.world_size;
    m.local_rank = header.local_rank;
    let mut sink = Sink {
        w: TraceWriter::create(output, m)?,
        strings: StringTable::new(),
        names: HashMap::new(),
        kernels: KernelTable::default(),
        memops: MemopTable::default(),
        launches: LaunchTable::default(),
        markers: MarkerTable::default(),
    };

    let mut sum = AssembleSummary {
        output: output.to_owned(),
        pid: header.pid,
        dropped: facts.dropped,
        ..Default::default()
    };
    let mut open_markers: HashMap<u32, (u64, u64, u32)> = HashMap::new(); // id -> (name, start, tid)
    let mut api_not_kept = 0u64;
    let mut api_not_kept_by_name: HashMap<String, u64> = HashMap::new();
    let mut last_ts = 0u64;
    let mut r = SpoolReader::open(spool)?;
    while let Some(fr) = r.next_frame()? {
        if fr.tag != tag::RECORD {
            continue;
        }
        let Ok(a) = decode::decode(&fr.payload) else {
            continue;
        };
        match a {
            Activity::Kernel(k) => {
                last_ts = last_ts.max(k.end);
                if !keep(k.start) {
                    sum.outside_capture += 1;
                    continue;
                }
                let name = sink.name(&facts, k.name);
                sink.kernels.push(KernelRow {
                    device: k.device,
                    context: k.context,
                    stream: k.stream,
                    correlation: k.correlation as u64,
                    name,
                    gpu_start_ns: k.start as i64,
                    gpu_end_ns: k.end as i64,
                    grid_x: k.grid[0].max(0) as u32,
                    grid_y: k.grid[1].max(0) as u32,
                    grid_z: k.grid[2].max(0) as u32,
                    block_x: k.block[0].max(0) as u32,
                    block_y: k.block[1].max(0) as u32,
                    block_z: k.block[2].max(0) as u32,
                    registers_per_thread: k.registers as u32,
                    static_smem_bytes: k.static_smem.max(0) as u32,
                    dynamic_smem_bytes: k.dynamic_smem.max(0) as u32,
                    graph_id: k.graph_id,
                    graph_node_id: k.graph_node_id,
                    ..Default::default()
                });
                sum.kernels += 1;
            }
            Activity::Memcpy(ref mo) | Activity::Memset(ref mo) => {
                last_ts = last_ts.max(mo.end);
                if !keep(mo.start) {
                    sum.outside_capture += 1;
                    continue;
                }
                let (kind, label) = match a {
                    Activity::Memset(_) => (MemopKind::Memset, "Memset".to_owned()),
                    _ => {
                        let kind = memop_kind(mo.copy_kind);
                        (kind, format!("Memcpy {}", kind.as_str()))
                    }
                };
                let name = sink.strings.intern(&label);
                sink.memops.push(MemopRow {
                    device: mo.device,
                    context: mo.context,
                    stream: mo.stream,
                    correlation: mo.correlation as u64,
                    name,
                    kind: kind as u8,
                    bytes: mo.bytes,
                    gpu_start_ns: mo.start as i64,
                    gpu_end_ns: mo.end as i64,
                    graph_id: mo.graph_id,
                    ..MemopRow::default()
                });
                sum.memops += 1;
            }
            Activity::Api(a) => {
                last_ts = last_ts.max(a.end);
                let name = facts
                    .api_names
                    .get(&(api_domain(a.runtime), a.cbid))
                    .cloned()
                    .unwrap_or_else(|| format!("cbid_{}", a.cbid));
                if !is_kept_api(&name) {
                    api_not_kept += 1;
                    *api_not_kept_by_name.entry(name).or_default() += 1;
                    continue;
                }
                if !keep(a.start) && !is_profiler_start(&name) && !is_profiler_stop(&name) {
                    sum.outside_capture += 1;
                    continue;
                }
                let id = sink.strings.intern(&name);
                sink.launches.push(LaunchRow {
                    pid: a.pid,
                    tid: a.tid as u64,
                    correlation: a.correlation as u64,
                    name: id,
                    api: if a.runtime {
                        LaunchApi::Runtime
                    } else {
                        LaunchApi::Driver
                    } as u8,
                    host_start_ns: a.start as i64,
                    host_end_ns: a.end as i64,
                });
                sum.launches += 1;
            }
            Activity::Marker(mk) => {
                last_ts = last_ts.max(mk.timestamp);
                if mk.flags & marker_flag::START != 0 {
                    open_markers.insert(mk.id, (mk.name, mk.timestamp, mk.tid));
                } else if mk.flags & marker_flag::END != 0
                    || mk.flags & marker_flag::INSTANTANEOUS != 0
                {
                    let (name, start, tid) = if mk.flags & marker_flag::END != 0 {
                        match open_markers.remove(&mk.id) {
                            Some(x) => x,
                            None => continue,
                        }
                    } else {
                        (mk.name, mk.timestamp, mk.tid)
                    };
                    if !keep(start) {
                        sum.outside_capture += 1;
                        continue;
                    }
                    sink.nvtx(&facts, name, tid, start, mk.timestamp);
                    sum.markers += 1;
                }
            }
            Activity::Overhead { .. } | Activity::Device(_) => {}
        }
        sink.flush(false)?;
    }
    // Ranges still open when the process stopped end at its last record.
    let mut open: Vec<_> = open_markers.into_iter().collect();
    open.sort_unstable_by_key(|(id, _)| *id);
    if !open.is_empty() {
        notes.push(format!(
            "{} NVTX ranges were still open at the end; they end at the last record",
            open.len()
        ));
    }
    for (_, (name, start, tid)) in open {
        if !keep(start) {
            continue;
        }
        sink.nvtx(&facts, name, tid, start, last_ts.max(start));
        sum.markers += 1;
    }

    let samples = telemetry
        .map(|t| devices::telemetry_samples(t, &facts, offset, &keep, &mut notes))
        .unwrap_or_default();
    sum.samples = samples.len() as u64;
    sink.flush(true)?;
    if !samples.is_empty() {
        sink.w.append_samples(&samples)?;
    }

    // Manifest facts.
    let truncated = facts.torn_tail || facts.end.is_none() || s.crashed;
    if facts.torn_tail {
        notes.push("the spool ends inside a frame (the process died while writing); everything before it is kept".into());
    }
    if facts.end.is_none() {
        notes.push(format!(
            "process {} ended without its final CUPTI flush{}: activity after the last completed buffer is lost",
            header.pid,
            s.exit.as_ref().map(|e| format!(" ({e})")).unwrap_or_default()
        ));
    }
    if api_not_kept > 0 {
        let mut top: Vec<(&String, &u64)> = api_not_kept_by_name.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let top: Vec<String> = top
            .iter()
            .take(5)
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        notes.push(format!(
            "{api_not_kept} host API calls other than launches, copies, sets, graph and sync calls were not kept (most: {})",
            top.join(", ")
        ));
    }
    if facts.skipped_undecodable > 0 {
        notes.push(format!(
            "{} records of kinds this build does not decode were skipped",
            facts.skipped_undecodable
        ));
    }
    if let Some(e) = &facts.end
        && e.skipped > 0
    {
        notes.push(format!(
            "{} CUPTI records of undecoded kinds were skipped in the process",
            e.skipped
        ));
    }
    if sum.outside_capture > 0 {
        notes.push(format!(
            "{} records outside the capture range were left out",
            sum.outside_capture
        ));
    }
    let mut oh: Vec<_> = facts.overhead_ns.iter().collect();
    oh.sort();
    let mut overhead = std::collections::BTreeMap::new();
    for (&k, ns) in oh {
        let what = overhead_name(k).map_or_else(|| format!("kind {k}"), str::to_owned);
        notes.push(format!(
            "CUPTI overhead ({what}): {:.3} ms",
            *ns as f64 / 1e6
        ));
        *overhead.entry(what).or_insert(0u64) += *ns;
    }
    if let Some(n) = &s.no_nvml {
        notes.push(n.clone());
    }
    if let Some(e) = &s.exit {
        notes.push(format!("recorded process {} ({e})", header.pid));
    }
    notes.push("times are CUPTI timestamps in ns; NVML samples are re-timed onto them through the injection library's clock calibration".into());
    sum.truncated = truncated;
    sum.notes = notes.clone();

    let gpus = devices::gpus_of(&facts);
    let mm = sink.w.manifest_mut();
    mm.gpus = gpus;
    mm.dropped_records = facts.dropped;
    mm.truncated = truncated;
    mm.notes = notes;
    mm.capture_overhead_ns = overhead;
    if let Some(t) = telemetry {
        mm.driver_version = t.driver_version.clone();
    }
    sink.w.finish()?;
    Ok(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_demangled_like_kineto_shows_them() {
        assert_eq!(demangle("_Z5scalePfif"), "scale(float*, int, float)");
        assert_eq!(
            demangle("_ZN2at6native13reduce_kernelILi512ELi1EEEvv"),
            "void at::native::reduce_kernel<512, 1>()"
        );
        assert_eq!(
            demangle("nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT"),
            "nvjet_sm90_tst_64x8_64x16_2x1_v_bz_TNT"
        );
        assert_eq!(demangle("_Znot a symbol"), "_Znot a symbol");
        assert_eq!(demangle("gemv_bf16_b1"), "gemv_bf16_b1");
    }
}
