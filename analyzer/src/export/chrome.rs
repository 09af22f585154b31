//! Chrome trace-event JSON that Perfetto and chrome://tracing load: one process per GPU with
//! a thread per stream plus a marker thread, one process per host process. It is written
//! the way Kineto writes (categories, `deviceProperties`, GPU markers as
//! `gpu_user_annotation`, host markers as `user_annotation`, host scopes as `cpu_op` and
//! `python_function`, launch-to-kernel flows as `ac2g`), with every time exact to the
//! nanosecond, so gapscope reads it back with its GPUs, markers, host scopes and steps: the
//! same report as the trace it came from.
//!
//! What Kineto's format has no place for travels beside it, where Perfetto shows it or
//! ignores it: NVML telemetry as counter tracks (`ph: C`, category `gpu_telemetry`), a
//! marker's source, step, batch and tokens as its arguments, engine-declared bytes and FLOPs
//! as a kernel's, and the recording's facts (GPUs in full, the capture tool's overhead,
//! dropped records, model and engine configs) as the top-level `gapscopeManifest`. The
//! importer reads them back, so a native recording round-trips too.

use std::io::{BufWriter, Write};
use std::path::Path;

use gapscope_traces::{MemopKind, OutputFile, Trace};

use crate::analysis::prepared::Prepared;
use crate::bucket::Bucket;
use crate::error::{AnalyzerError, Result};
use crate::rules::RuleSet;

/// pid offset for host processes, so they never collide with GPU ids.
const HOST_PID_BASE: u64 = 1_000_000;
/// tid of the GPU marker thread inside each GPU process (no CUDA stream id is this large).
const MARKER_TID: u64 = u32::MAX as u64;

/// Nanoseconds as microseconds with three decimals, exactly (a float would round times
/// past 2^53 / 1000 µs, where traces' epoch clocks live).
struct Us(i64);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let a = self.0.unsigned_abs();
        write!(f, "{sign}{}.{:03}", a / 1000, a % 1000)
    }
}

fn us(ns: i64) -> Us {
    Us(ns)
}

/// Writes `trace` as a Chrome JSON object to `out`, which may not be one of `inputs`
/// (written beside it and renamed into place: `gapscope_traces::OutputFile`).
pub fn write_chrome(trace: &Trace, rules: &RuleSet, out: &Path, inputs: &[&Path]) -> Result<()> {
    let mut f = OutputFile::create(out, inputs)?;
    let mut w = BufWriter::with_capacity(1 << 20, f.file());
    write_chrome_to(trace, rules, &mut w)
        .and_then(|()| w.flush())
        .map_err(|e| AnalyzerError::io(out, e))?;
    drop(w);
    Ok(f.commit()?)
}

/// Writes `trace` as a Chrome JSON object to any writer (stdout for `--chrome -`).
#[expect(
    clippy::too_many_lines,
    reason = "writes each event kind in the order Kineto writes them, one section per kind, in one pass over one writer"
)]
pub fn write_chrome_to(trace: &Trace, rules: &RuleSet, w: &mut impl Write) -> std::io::Result<()> {
    let p = Prepared::new(trace, rules);
    let s = &trace.strings;
    let q = |x: &str| serde_json::to_string(x).unwrap_or_else(|_| "\"\"".into());
    let props: Vec<serde_json::Value> = trace
        .manifest
        .gpus
        .iter()
        .map(|g| {
            let (major, minor) = g
                .compute_capability
                .as_deref()
                .and_then(|c| c.split_once('.'))
                .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
                .unzip();
            serde_json::json!({
                "id": g.device,
                "name": g.name,
                "numSms": g.sm_count,
                "totalGlobalMem": g.total_memory_bytes,
                "computeMajor": major,
                "computeMinor": minor,
            })
        })
        .collect();
    let facts = serde_json::to_string(&trace.manifest).unwrap_or_else(|_| "null".into());
    writeln!(
        w,
        "{{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"deviceProperties\":{},\"gapscopeManifest\":{facts},\"traceEvents\":[",
        serde_json::Value::Array(props)
    )?;
    let mut first = true;
    let mut sep = |w: &mut dyn Write| -> std::io::Result<()> {
        if !first {
            w.write_all(b",\n")?;
        }
        first = false;
        Ok(())
    };
    for &(d, _) in &p.devices {
        let name = trace
            .manifest
            .gpu(d)
            .map(|g| format!("GPU {d}: {}", g.name))
            .unwrap_or_else(|| format!("GPU {d}"));
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"M","name":"process_name","pid":{d},"args":{{"name":{}}}}}"#,
            q(&name)
        )?;
    }
    let marker_devices: std::collections::BTreeSet<u32> = (0..trace.markers.len)
        .filter(|&i| trace.markers.gpu_start_ns[i] != i64::MIN)
        .map(|i| trace.markers.device[i])
        .collect();
    for d in marker_devices {
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"M","name":"thread_name","pid":{d},"tid":{MARKER_TID},"args":{{"name":"step markers"}}}}"#
        )?;
    }
    let k = &trace.kernels;
    for i in 0..k.len {
        sep(w)?;
        let b = Bucket::ALL[p.kernel_bucket[i] as usize];
        write!(
            w,
            r#"{{"ph":"X","cat":"kernel","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{"bucket":"{}","correlation":{}"#,
            q(s.get(k.name[i])),
            k.device[i],
            k.stream[i],
            us(k.gpu_start_ns[i]),
            us((k.gpu_end_ns[i] - k.gpu_start_ns[i]).max(0)),
            b,
            k.correlation[i],
        )?;
        if k.grid_x.len() == k.len {
            write!(
                w,
                r#","grid":[{},{},{}],"block":[{},{},{}],"registers per thread":{}"#,
                k.grid_x[i],
                k.grid_y[i],
                k.grid_z[i],
                k.block_x[i],
                k.block_y[i],
                k.block_z[i],
                k.registers_per_thread[i]
            )?;
        }
        if k.graph_id.len() == k.len && k.graph_id[i] != 0 {
            write!(w, r#","graph id":{}"#, k.graph_id[i])?;
        }
        if k.bytes.len() == k.len && k.bytes[i] >= 0 {
            write!(w, r#","bytes":{}"#, k.bytes[i])?;
        }
        if k.flops.len() == k.len && k.flops[i] >= 0 {
            write!(w, r#","flops":{}"#, k.flops[i])?;
        }
        w.write_all(b"}}")?;
    }
    let m = &trace.memops;
    for i in 0..m.len {
        sep(w)?;
        let kind = MemopKind::from_code(m.kind[i]);
        let cat = if kind == MemopKind::Memset {
            "gpu_memset"
        } else {
            "gpu_memcpy"
        };
        write!(
            w,
            r#"{{"ph":"X","cat":"{cat}","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{"kind":"{}","bytes":{},"correlation":{}}}}}"#,
            q(s.get(m.name[i])),
            m.device[i],
            m.stream[i],
            us(m.gpu_start_ns[i]),
            us((m.gpu_end_ns[i] - m.gpu_start_ns[i]).max(0)),
            kind.as_str(),
            m.bytes[i],
            m.correlation[i],
        )?;
    }
    let l = &trace.launches;
    for i in 0..l.len {
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"X","cat":"cuda_runtime","name":{},"pid":{},"tid":{},"ts":{},"dur":{},"args":{{"correlation":{}}}}}"#,
            q(s.get(l.name[i])),
            HOST_PID_BASE + l.pid[i] as u64,
            l.tid[i],
            us(l.host_start_ns[i]),
            us((l.host_end_ns[i] - l.host_start_ns[i]).max(0)),
            l.correlation[i],
        )?;
    }
    let mk = &trace.markers;
    for i in 0..mk.len {
        let gpu = mk.gpu_start_ns[i] != i64::MIN;
        let (start, end, cat, pid, tid) = if gpu {
            (
                mk.gpu_start_ns[i],
                mk.gpu_end_ns[i],
                "gpu_user_annotation",
                mk.device[i] as u64,
                MARKER_TID,
            )
        } else {
            (
                mk.host_start_ns[i],
                mk.host_end_ns[i],
                "user_annotation",
                HOST_PID_BASE,
                mk.tid[i],
            )
        };
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"X","cat":"{cat}","name":{},"pid":{pid},"tid":{tid},"ts":{},"dur":{},"args":{{"device":{},"phase":"{}","step":{},"batch size":{},"tokens":{},"marker source":"{}"}}}}"#,
            q(s.get(mk.name[i])),
            us(start),
            us((end - start).max(0)),
            mk.device[i],
            gapscope_traces::Phase::from_code(mk.phase[i]).as_str(),
            mk.step[i],
            mk.batch_size[i],
            mk.tokens[i],
            gapscope_traces::MarkerSource::from_code(mk.source[i]).as_str(),
        )?;
    }
    write_telemetry(trace, w, &mut sep)?;
    write_scopes(trace, w, &mut sep)?;
    write_flows(trace, w, &mut sep)?;
    write_names(trace, w, &mut sep)?;
    w.write_all(b"\n]}\n")
}

/// Host scopes as Kineto writes them: ops as `cpu_op`, Python frames and module calls as
/// `python_function`, annotations as `user_annotation` (those already written as host
/// markers are not written twice: the reader makes both from one event).
fn write_scopes(
    trace: &Trace,
    w: &mut impl Write,
    sep: &mut impl FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    use gapscope_traces::ScopeKind;
    let s = &trace.strings;
    let q = |x: &str| serde_json::to_string(x).unwrap_or_else(|_| "\"\"".into());
    let mk = &trace.markers;
    let host_markers: std::collections::HashSet<(u32, i64, i64)> = (0..mk.len)
        .filter(|&i| mk.gpu_start_ns[i] == i64::MIN)
        .map(|i| (mk.name[i], mk.host_start_ns[i], mk.host_end_ns[i]))
        .collect();
    let sc = &trace.scopes;
    for i in 0..sc.len {
        let cat = match ScopeKind::from_code(sc.kind[i]) {
            ScopeKind::Op | ScopeKind::Other => "cpu_op",
            ScopeKind::Module | ScopeKind::Python => "python_function",
            ScopeKind::Annotation => {
                if host_markers.contains(&(sc.name[i], sc.host_start_ns[i], sc.host_end_ns[i])) {
                    continue;
                }
                "user_annotation"
            }
        };
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"X","cat":"{cat}","name":{},"pid":{},"tid":{},"ts":{},"dur":{}}}"#,
            q(s.get(sc.name[i])),
            HOST_PID_BASE + sc.pid[i] as u64,
            sc.tid[i],
            us(sc.host_start_ns[i]),
            us((sc.host_end_ns[i] - sc.host_start_ns[i]).max(0)),
        )?;
    }
    Ok(())
}

/// NVML samples as counter tracks, one per GPU and quantity (Perfetto draws a `ph: C`
/// event's every argument as its own track).
fn write_telemetry(
    trace: &Trace,
    w: &mut impl Write,
    sep: &mut impl FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let t = &trace.samples;
    for i in 0..t.len {
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"C","cat":"gpu_telemetry","name":"GPU telemetry","pid":{},"ts":{},"args":{{"{}":{},"{}":{},"{}":{},"{}":{},"{}":{},"{}":{},"{}":{}}}}}"#,
            t.device[i],
            us(t.host_ns[i]),
            telemetry::SM_CLOCK,
            t.sm_clock_mhz[i],
            telemetry::MEM_CLOCK,
            t.mem_clock_mhz[i],
            telemetry::POWER,
            t.power_mw[i],
            telemetry::TEMPERATURE,
            t.temperature_c[i],
            telemetry::GPU_UTIL,
            t.gpu_util_pct[i],
            telemetry::MEM_UTIL,
            t.mem_util_pct[i],
            telemetry::THROTTLE,
            t.throttle_reasons[i],
        )?;
    }
    Ok(())
}

/// The counter names of [`write_telemetry`], which the importer reads back.
pub mod telemetry {
    pub const SM_CLOCK: &str = "SM clock (MHz)";
    pub const MEM_CLOCK: &str = "memory clock (MHz)";
    pub const POWER: &str = "power (mW)";
    pub const TEMPERATURE: &str = "temperature (C)";
    pub const GPU_UTIL: &str = "GPU utilisation (%)";
    pub const MEM_UTIL: &str = "memory utilisation (%)";
    pub const THROTTLE: &str = "clocks-event reasons (NVML bit mask)";
}

/// Launch-to-kernel flows (`ac2g`, as Kineto links them): an arrow from each launch call to
/// the kernel or copy it issued, which Perfetto draws.
fn write_flows(
    trace: &Trace,
    w: &mut impl Write,
    sep: &mut impl FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let l = &trace.launches;
    let launch_of: std::collections::HashMap<u64, usize> =
        (0..l.len).map(|i| (l.correlation[i], i)).collect();
    let (k, m) = (&trace.kernels, &trace.memops);
    let gpu = (0..k.len)
        .map(|i| {
            (
                k.correlation[i],
                k.device[i],
                k.stream[i],
                k.gpu_start_ns[i],
            )
        })
        .chain((0..m.len).map(|i| {
            (
                m.correlation[i],
                m.device[i],
                m.stream[i],
                m.gpu_start_ns[i],
            )
        }));
    let mut seen = std::collections::HashSet::new();
    for (corr, device, stream, start) in gpu {
        // One arrow per launch: a graph launch's replayed kernels share its correlation.
        let Some(&li) = launch_of.get(&corr) else {
            continue;
        };
        if corr == 0 || !seen.insert(corr) {
            continue;
        }
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"s","id":{corr},"pid":{},"tid":{},"ts":{},"cat":"ac2g","name":"ac2g"}}"#,
            HOST_PID_BASE + l.pid[li] as u64,
            l.tid[li],
            us(l.host_start_ns[li]),
        )?;
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"f","id":{corr},"pid":{device},"tid":{stream},"ts":{},"cat":"ac2g","name":"ac2g","bp":"e"}}"#,
            us(start),
        )?;
    }
    Ok(())
}

/// Names for every track: each GPU stream, each host process and thread.
fn write_names(
    trace: &Trace,
    w: &mut impl Write,
    sep: &mut impl FnMut(&mut dyn Write) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let mut streams = std::collections::BTreeSet::new();
    let (k, m) = (&trace.kernels, &trace.memops);
    streams.extend((0..k.len).map(|i| (k.device[i], k.stream[i])));
    streams.extend((0..m.len).map(|i| (m.device[i], m.stream[i])));
    for (d, st) in streams {
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"M","name":"thread_name","pid":{d},"tid":{st},"args":{{"name":"stream {st}"}}}}"#
        )?;
    }
    let mut threads = std::collections::BTreeSet::new();
    let (l, sc) = (&trace.launches, &trace.scopes);
    threads.extend((0..l.len).map(|i| (l.pid[i], l.tid[i])));
    threads.extend((0..sc.len).map(|i| (sc.pid[i], sc.tid[i])));
    let mut processes = std::collections::BTreeSet::new();
    for (pid, tid) in threads {
        if processes.insert(pid) {
            sep(w)?;
            write!(
                w,
                r#"{{"ph":"M","name":"process_name","pid":{},"args":{{"name":"host process {pid}"}}}}"#,
                HOST_PID_BASE + pid as u64
            )?;
        }
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"M","name":"thread_name","pid":{},"tid":{tid},"args":{{"name":"thread {tid}"}}}}"#,
            HOST_PID_BASE + pid as u64
        )?;
    }
    Ok(())
}
