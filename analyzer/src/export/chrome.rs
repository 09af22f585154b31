//! Chrome trace-event JSON that Perfetto and chrome://tracing load: one process per GPU with
//! a thread per stream, one process for host threads, markers as their own tracks.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use gapscope_traces::{MemopKind, Trace};

use crate::analysis::prepared::Prepared;
use crate::bucket::Bucket;
use crate::error::{AnalyzerError, Result};
use crate::rules::RuleSet;

/// pid offset for host processes, so they never collide with GPU ids.
const HOST_PID_BASE: u64 = 1_000_000;
const MARKER_PID: u64 = 999_999;

fn us(ns: i64) -> f64 {
    ns as f64 / 1000.0
}

/// Writes `trace` as a Chrome JSON object to `out`.
pub fn write_chrome(trace: &Trace, rules: &RuleSet, out: &Path) -> Result<()> {
    let f = File::create(out).map_err(|e| AnalyzerError::io(out, e))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    write_to(trace, rules, &mut w).map_err(|e| AnalyzerError::io(out, e))?;
    w.flush().map_err(|e| AnalyzerError::io(out, e))
}

fn write_to(trace: &Trace, rules: &RuleSet, w: &mut impl Write) -> std::io::Result<()> {
    let p = Prepared::new(trace, rules);
    let s = &trace.strings;
    let q = |x: &str| serde_json::to_string(x).unwrap_or_else(|_| "\"\"".into());
    w.write_all(b"{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n")?;
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
    sep(w)?;
    write!(
        w,
        r#"{{"ph":"M","name":"process_name","pid":{MARKER_PID},"args":{{"name":"markers"}}}}"#
    )?;
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
        let (start, end, tid) = if mk.gpu_start_ns[i] != i64::MIN {
            (mk.gpu_start_ns[i], mk.gpu_end_ns[i], 0)
        } else {
            (mk.host_start_ns[i], mk.host_end_ns[i], 1)
        };
        sep(w)?;
        write!(
            w,
            r#"{{"ph":"X","cat":"marker","name":{},"pid":{MARKER_PID},"tid":{tid},"ts":{:.3},"dur":{:.3},"args":{{"phase":"{}","step":{}}}}}"#,
            q(s.get(mk.name[i])),
            us(start),
            us((end - start).max(0)),
            gapscope_traces::Phase::from_code(mk.phase[i]).as_str(),
            mk.step[i],
        )?;
    }
    w.write_all(b"\n]}\n")
}
