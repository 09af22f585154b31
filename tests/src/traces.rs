//! Real traces made broken, incomparable or slower in one known way, for the tests of the
//! analysis (`analyzer/tests/verdicts.rs`) and of the commands that report on it
//! (`cli/tests/e2e.rs`); and native traces of decode steps built to a plan, for the
//! explorer's tests and the CLI's.

use std::path::{Path, PathBuf};

use gapscope_traces::{
    KernelRow, KernelTable, Manifest, MarkerRow, MarkerSource, MarkerTable, Phase, StringTable,
    Trace, TraceWriter, write_trace,
};

/// `t` written as the native trace `dir/name`; its path.
pub fn save(dir: &Path, name: &str, t: &Trace) -> PathBuf {
    let p = dir.join(name);
    write_trace(&p, t).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    p
}

/// Every timestamp moved `factor` times further from the first kernel, every duration
/// kept: a pure host or launch-overhead regression with the same kernels.
pub fn stretched(t: &Trace, factor: f64) -> Trace {
    let mut t = t.clone();
    let t0 = *t.kernels.gpu_start_ns.iter().min().expect("kernels");
    let at = |v: i64| t0 + ((v - t0) as f64 * factor) as i64;
    let k = &mut t.kernels;
    for i in 0..k.len {
        let d = k.gpu_end_ns[i] - k.gpu_start_ns[i];
        k.gpu_start_ns[i] = at(k.gpu_start_ns[i]);
        k.gpu_end_ns[i] = k.gpu_start_ns[i] + d;
    }
    let m = &mut t.memops;
    for i in 0..m.len {
        let d = m.gpu_end_ns[i] - m.gpu_start_ns[i];
        m.gpu_start_ns[i] = at(m.gpu_start_ns[i]);
        m.gpu_end_ns[i] = m.gpu_start_ns[i] + d;
    }
    let mk = &mut t.markers;
    for v in [
        &mut mk.gpu_start_ns,
        &mut mk.gpu_end_ns,
        &mut mk.host_start_ns,
        &mut mk.host_end_ns,
    ] {
        v.iter_mut()
            .filter(|x| **x != i64::MIN)
            .for_each(|x| *x = at(*x));
    }
    let l = &mut t.launches;
    for v in [&mut l.host_start_ns, &mut l.host_end_ns] {
        v.iter_mut().for_each(|x| *x = at(*x));
    }
    t
}

/// The trace with only the kernels `keep` accepts (by index and name).
pub fn kernels_kept(t: &Trace, keep: impl Fn(usize, &str) -> bool) -> Trace {
    let mut out = t.clone();
    out.kernels = Default::default();
    for i in 0..t.kernels.len {
        if keep(i, t.strings.get(t.kernels.name[i])) {
            out.kernels.push(t.kernels.row(i));
        }
    }
    out
}

/// The trace whose step markers cover only the first tenth of each step: implausible steps.
pub fn short_markers(t: &Trace) -> Trace {
    let mut out = t.clone();
    let m = &mut out.markers;
    for i in 0..m.len {
        for (s, e) in [
            (&mut m.gpu_start_ns, &mut m.gpu_end_ns),
            (&mut m.host_start_ns, &mut m.host_end_ns),
        ] {
            if s[i] != i64::MIN {
                e[i] = s[i] + (e[i] - s[i]) / 10;
            }
        }
    }
    out
}

/// Writes a native trace of decode steps at `path`: per step, kernels `(name, duration)`
/// back to back on stream 7 with `inner_gap` between them, `outer_gap` between steps, one
/// engine decode marker per step from its first kernel's start to its last one's end.
/// Returns the step windows.
pub fn write_decode_steps(
    path: &Path,
    steps: &[&[(&str, i64)]],
    inner_gap: i64,
    outer_gap: i64,
) -> Vec<(i64, i64)> {
    let mut strings = StringTable::new();
    let mut kernels = KernelTable::default();
    let mut markers = MarkerTable::default();
    let decode = strings.intern("decode");
    let mut now = 1_000_000i64;
    let mut windows = Vec::new();
    let mut corr = 0;
    for (k, step) in steps.iter().enumerate() {
        let start = now;
        for (i, &(name, dur)) in step.iter().enumerate() {
            if i > 0 {
                now += inner_gap;
            }
            corr += 1;
            kernels.push(KernelRow {
                stream: 7,
                correlation: corr,
                name: strings.intern(name),
                gpu_start_ns: now,
                gpu_end_ns: now + dur,
                grid_x: 132,
                block_x: 256,
                ..Default::default()
            });
            now += dur;
        }
        markers.push(MarkerRow {
            name: decode,
            source: MarkerSource::Engine as u8,
            phase: Phase::Decode as u8,
            gpu_start_ns: start,
            gpu_end_ns: now,
            step: k as i64,
            batch_size: 1,
            tokens: 1,
            ..Default::default()
        });
        windows.push((start, now));
        now += outer_gap;
    }
    let mut w = TraceWriter::create(path, Manifest::new("test")).unwrap();
    w.append_strings(&strings).unwrap();
    w.append_kernels(&kernels).unwrap();
    w.append_markers(&markers).unwrap();
    w.finish().unwrap();
    windows
}
