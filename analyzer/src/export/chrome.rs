//! Chrome trace-event JSON that Perfetto and chrome://tracing load: one process per GPU with
//! a thread per stream plus a marker thread, one process for host threads. It is written
//! the way Kineto writes (categories, `deviceProperties`, GPU markers as
//! `gpu_user_annotation`, host markers as `user_annotation`), so gapscope reads it back with
//! its GPUs, markers and steps.

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

fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
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
    writeln!(
        w,
        "{{\"schemaVersion\":1,\"displayTimeUnit\":\"ms\",\"deviceProperties\":{},\"traceEvents\":[",
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
            r#"{{"ph":"X","cat":"kernel","name":{},"pid":{},"tid":{},"ts":{:.3},"dur":{:.3},"args":{{"bucket":"{}","correlation":{}"#,
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
            r#"{{"ph":"X","cat":"{cat}","name":{},"pid":{},"tid":{},"ts":{:.3},"dur":{:.3},"args":{{"kind":"{}","bytes":{},"correlation":{}}}}}"#,
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
            r#"{{"ph":"X","cat":"cuda_runtime","name":{},"pid":{},"tid":{},"ts":{:.3},"dur":{:.3},"args":{{"correlation":{}}}}}"#,
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
            r#"{{"ph":"X","cat":"{cat}","name":{},"pid":{pid},"tid":{tid},"ts":{:.3},"dur":{:.3},"args":{{"device":{},"phase":"{}","step":{},"batch size":{}}}}}"#,
            q(s.get(mk.name[i])),
            us(start),
            us((end - start).max(0)),
            mk.device[i],
            gapscope_traces::Phase::from_code(mk.phase[i]).as_str(),
            mk.step[i],
            mk.batch_size[i],
        )?;
    }
    w.write_all(b"\n]}\n")
}
