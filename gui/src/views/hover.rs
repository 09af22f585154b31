//! The text shown on hover and in the selection panel for what the timeline draws.

use gapscope_analyzer::Bucket;

use super::format;
use super::timeline::Hit;
use crate::loader::Loaded;

/// The hover text for a hit.
pub fn describe(l: &Loaded, h: &Hit) -> String {
    let x = &l.x;
    match h {
        Hit::Activity(a) => match x.detail(*a) {
            Some(d) => {
                let mut s = format!(
                    "{}\nbucket {} · {}\nGPU {} · stream {} · starts at {}",
                    d.name,
                    d.bucket.as_str(),
                    format::dur_ns(d.dur_ns as f64),
                    d.device,
                    d.stream,
                    format::dur_ns((d.start_ns - x.span_ns.0) as f64)
                );
                if let (Some(g), Some(b)) = (d.grid, d.block) {
                    s += &format!(
                        "\ngrid {}×{}×{} · block {}×{}×{}",
                        g[0], g[1], g[2], b[0], b[1], b[2]
                    );
                }
                if let Some(k) = &d.memop_kind {
                    s += &format!("\n{k}");
                }
                if let Some(b) = d.bytes {
                    s += &format!("\n{} moved", format::bytes(b));
                }
                if let Some(f) = d.flops {
                    s += &format!(" · {:.3} GFLOP", f as f64 / 1e9);
                }
                if let Some(g) = d.achieved_gb_per_s {
                    s += &format!("\nachieved {g:.1} GB/s");
                }
                if let Some(t) = d.achieved_tflops {
                    s += &format!(" · {t:.2} TFLOP/s");
                }
                if d.graph_id != 0 {
                    s += &format!("\nCUDA graph {} · node {}", d.graph_id, d.graph_node);
                }
                if let Some(op) = &d.op {
                    s += &format!("\nop {op}");
                }
                if let Some(layer) = d.layer {
                    s += &format!(" · layer {layer}");
                }
                if let Some(w) = super::flows::launch_of(l, *a) {
                    s += &format!("\n{}", super::flows::describe_launch(&w));
                }
                if let Some(k) = x.step_at(d.start_ns) {
                    s += &format!("\nin {}", l.step_names.label(k));
                }
                s
            }
            None => "?".to_owned(),
        },
        Hit::Run { lane, i, j } => {
            let ln = &x.lanes.gpu[*lane];
            let s = l.lods[*lane].summary(ln, *i, *j);
            let longest = x
                .detail(ln.act[s.longest])
                .map(|d| {
                    format!(
                        "{} ({})",
                        gapscope_analyzer::text::short(&d.name),
                        format::dur_ns(d.dur_ns as f64)
                    )
                })
                .unwrap_or_default();
            format!(
                "{} activities folded (zoom in to see them)\nmostly {} · {} of GPU time\nlongest: {longest}",
                format::count(s.count as u64),
                Bucket::ALL[s.dominant as usize].as_str(),
                format::dur_ns(s.time_ns as f64)
            )
        }
        Hit::Scope(n) => {
            let node = &x.forest.nodes[*n as usize];
            format!(
                "{}\n{:?} scope · {}",
                x.trace.strings.get(node.name),
                node.kind,
                format::dur_ns((node.end - node.start) as f64)
            )
        }
        Hit::Marker(i) => {
            let m = &x.trace.markers;
            let i = *i as usize;
            format!(
                "{}\nmarker · {}",
                x.trace.strings.get(m.name[i]),
                format::dur_ns((m.gpu_end_ns[i] - m.gpu_start_ns[i]) as f64)
            )
        }
        Hit::Launch(i) => match super::flows::launch_at(l, *i) {
            Some(w) => format!(
                "{}\nhost API call · {}",
                super::flows::describe_launch(&w),
                format::dur_ns((w.end_ns - w.start_ns) as f64)
            ),
            None => "?".to_owned(),
        },
        Hit::Steps { i, j } => format!(
            "{} steps folded ({} to {}; zoom in to see them)",
            j - i,
            l.step_names.label(*i),
            l.step_names.label(j.saturating_sub(1))
        ),
        Hit::Step(k) => {
            let s = &x.steps[*k];
            let mut t = format!(
                "{} · {}\nbusy {} · idle {}{}",
                l.step_names.label(*k),
                format::dur_ns((s.end_ns - s.start_ns) as f64),
                format::ms_label(s.busy_ms),
                format::ms_label(s.idle_ms),
                if s.stall { " · STALL" } else { "" }
            );
            if s.batch > 0 {
                t += &format!("\nbatch {}", s.batch);
            }
            t += "\ndouble-click to zoom to it";
            t
        }
    }
}
