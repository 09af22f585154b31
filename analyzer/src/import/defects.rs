//! What makes an imported trace unfit to vouch for its figures: it ends early, events lost
//! their times, a GPU clock runs backwards, several processes' timelines share one device,
//! or its GPU list contradicts itself. Found once at import, on the times as the source
//! wrote them; the report warns of each and the gate never passes a trace that has one.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use gapscope_traces::Trace;
use serde::Serialize;

/// A GPU start that comes this much before the previous start on its stream, in launch
/// order, is a clock that jumped back: work on one stream runs in launch order, and
/// programmatic dependent launch moves a start before the previous kernel's *end*, never
/// before its start. The slack covers timestamp rounding in converted clocks.
pub const CLOCK_JUMP_SLACK_NS: i64 = 2_000;

/// One defect of an imported trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SourceDefect {
    /// The input ended early; `detail` says where, per table or stream, when known.
    Truncated { detail: Vec<String> },
    /// Events left out because their `ts` or `dur` was missing or not a number.
    UntimedEvents { count: u64 },
    /// GPU starts that go back in time on a stream, in launch order.
    ClockJumpsBack {
        count: u64,
        worst_ns: i64,
        device: u32,
        stream: u32,
    },
    /// More host processes launch GPU work than there are devices: the file merges several
    /// processes (ranks) whose local device ids collide.
    MergedProcesses { processes: usize, devices: usize },
    /// The trace's own metadata says it holds more than one rank.
    SeveralRanks { ranks: Vec<u32> },
    /// One device listed twice with different names.
    ConflictingGpuNames { device: u32, names: Vec<String> },
    /// More steps than the analysis takes: only the first `kept` of `found` are analysed.
    StepsCut { kept: usize, found: usize },
}

impl SourceDefect {
    /// A predicate after "the trace", for a report or the gate (the source's strings are
    /// escaped at output).
    pub fn describe(&self) -> String {
        match self {
            Self::Truncated { detail } if detail.is_empty() => {
                "is truncated: the tables hold only what could be read".to_owned()
            }
            Self::Truncated { detail } => format!("is truncated ({})", listed(detail, 4)),
            Self::UntimedEvents { count } => {
                format!("left out {count} events whose ts or dur is missing or not a number")
            }
            Self::ClockJumpsBack {
                count,
                worst_ns,
                device,
                stream,
            } => format!(
                "has a GPU clock that goes back {count} times (by up to {:.3} ms, first on device \
                 {device} stream {stream}): work on a stream starts before work launched \
                 earlier",
                *worst_ns as f64 / 1e6
            ),
            Self::MergedProcesses { processes, devices } => format!(
                "has {processes} processes launching GPU work onto {devices} device id(s): it \
                 seems to merge several processes' (ranks') traces, whose calls per step and \
                 times then mix; analyse one file per rank"
            ),
            Self::SeveralRanks { ranks } => format!(
                "names several ranks in its distributedInfo ({}): analyse one file per rank",
                listed(&ranks.iter().map(u32::to_string).collect::<Vec<_>>(), 8)
            ),
            Self::StepsCut { kept, found } => format!(
                "has {found} steps, more than the {kept} analysed (--max-steps): the figures \
                 cover its first {kept} steps"
            ),
            Self::ConflictingGpuNames { device, names } => format!(
                "names GPU {device} differently in different places ({}), so the GPU \
                 cannot be checked",
                listed(names, 4)
            ),
        }
    }
}

/// At most `n` items joined, then how many more: a hostile manifest cannot make one
/// warning line of megabytes.
fn listed(items: &[String], n: usize) -> String {
    let mut s = items
        .iter()
        .take(n)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("; ");
    if items.len() > n {
        s.push_str(&format!("; and {} more", items.len() - n));
    }
    s
}

/// The defects of `t`, on its times as imported (before any adjustment).
pub fn find(t: &Trace) -> Vec<SourceDefect> {
    let m = &t.manifest;
    let mut out = Vec::new();
    if m.truncated {
        out.push(SourceDefect::Truncated {
            detail: m.truncation.clone(),
        });
    }
    if m.untimed_events > 0 {
        out.push(SourceDefect::UntimedEvents {
            count: m.untimed_events,
        });
    }
    if m.ranks.len() > 1 {
        out.push(SourceDefect::SeveralRanks {
            ranks: m.ranks.clone(),
        });
    }
    if let Some(d) = merged_processes(t) {
        out.push(d);
    } else if let Some(d) = clock_jumps(t) {
        // Merged processes interleave their launch orders; a jump is only meaningful in one.
        out.push(d);
    }
    let mut names: BTreeMap<u32, BTreeSet<&str>> = BTreeMap::new();
    for g in &m.gpus {
        if !g.name.is_empty() {
            names.entry(g.device).or_default().insert(g.name.as_str());
        }
    }
    for (device, set) in names {
        if set.len() > 1 {
            out.push(SourceDefect::ConflictingGpuNames {
                device,
                names: set.into_iter().map(str::to_owned).collect(),
            });
        }
    }
    out
}

/// A GPU activity as the checks below read it.
struct Activity {
    device: u32,
    stream: u32,
    /// Launch correlation id; 0 when the source gave none.
    correlation: u64,
    start: i64,
}

/// Every kernel, then every memop, in file order (rows whose columns were not loaded are
/// skipped: the checks then see fewer activities, never wrong ones).
fn activities(t: &Trace) -> impl Iterator<Item = Activity> + '_ {
    let k = &t.kernels;
    let kn = k.len.min(k.device.len()).min(k.stream.len());
    let kn = kn.min(k.correlation.len()).min(k.gpu_start_ns.len());
    let m = &t.memops;
    let mn = m.len.min(m.device.len()).min(m.stream.len());
    let mn = mn.min(m.correlation.len()).min(m.gpu_start_ns.len());
    (0..kn)
        .map(move |i| Activity {
            device: k.device[i],
            stream: k.stream[i],
            correlation: k.correlation[i],
            start: k.gpu_start_ns[i],
        })
        .chain((0..mn).map(move |i| Activity {
            device: m.device[i],
            stream: m.stream[i],
            correlation: m.correlation[i],
            start: m.gpu_start_ns[i],
        }))
}

/// Host processes whose launches started kernels or memops, against the devices those ran
/// on; a defect when there are more processes than devices.
fn merged_processes(t: &Trace) -> Option<SourceDefect> {
    let l = &t.launches;
    if l.len < 2 || l.pid.len() != l.len || l.correlation.len() != l.len {
        return None;
    }
    // One process launching (the usual trace) cannot be several.
    let mut pids = (0..l.len)
        .filter(|&i| l.correlation[i] != 0)
        .map(|i| l.pid[i]);
    let first = pids.next()?;
    if pids.all(|p| p == first) {
        return None;
    }
    let mut gpu_corr: Vec<u64> = Vec::new();
    let mut devices: BTreeSet<u32> = BTreeSet::new();
    let mut last_device = None;
    for a in activities(t) {
        if a.correlation != 0 {
            gpu_corr.push(a.correlation);
        }
        if last_device != Some(a.device) {
            devices.insert(a.device);
            last_device = Some(a.device);
        }
    }
    gpu_corr.sort_unstable();
    gpu_corr.dedup();
    let processes: BTreeSet<u32> = (0..l.len)
        .filter(|&i| l.correlation[i] != 0 && gpu_corr.binary_search(&l.correlation[i]).is_ok())
        .map(|i| l.pid[i])
        .collect();
    (processes.len() > 1 && processes.len() > devices.len()).then_some(
        SourceDefect::MergedProcesses {
            processes: processes.len(),
            devices: devices.len(),
        },
    )
}

/// Starts that go back on a stream in launch order (correlation id; kernels of one graph
/// launch share it and keep their file order). Activities without a correlation id are not
/// checked.
///
/// One pass in file order keeps, per stream, the latest start so far; a stream whose
/// correlation ids go down somewhere in file order is not in launch order, and only its
/// activities are gathered and sorted (a stable sort: the pass's order is what the sort
/// would give where ids never go down).
fn clock_jumps(t: &Trace) -> Option<SourceDefect> {
    #[derive(Clone, Copy)]
    struct Run {
        last_corr: u64,
        latest: i64,
        count: u64,
        worst: i64,
        sorted: bool,
    }
    let step = |r: &mut Run, start: i64| {
        if r.latest != i64::MIN && start < r.latest.saturating_sub(CLOCK_JUMP_SLACK_NS) {
            r.count += 1;
            r.worst = r.worst.max(r.latest.saturating_sub(start));
        }
        r.latest = r.latest.max(start);
    };
    let fresh = Run {
        last_corr: 0,
        latest: i64::MIN,
        count: 0,
        worst: 0,
        sorted: true,
    };
    let mut runs: FxMap<(u32, u32), Run> = FxMap::default();
    // Consecutive activities are mostly on one stream: its run stays out of the map until
    // the stream changes.
    let mut cur: Option<((u32, u32), Run)> = None;
    for a in activities(t).filter(|a| a.correlation != 0) {
        let key = (a.device, a.stream);
        let run = match &mut cur {
            Some((k, r)) if *k == key => r,
            slot => {
                if let Some((k, r)) = slot.take() {
                    runs.insert(k, r);
                }
                let r = runs.get(&key).copied().unwrap_or(fresh);
                &mut slot.insert((key, r)).1
            }
        };
        if !run.sorted {
            continue;
        }
        if a.correlation < run.last_corr {
            run.sorted = false;
            continue;
        }
        run.last_corr = a.correlation;
        step(run, a.start);
    }
    if let Some((k, r)) = cur {
        runs.insert(k, r);
    }
    // Streams out of launch order in the file: gathered and sorted, as launch order asks.
    let unsorted: FxMap<(u32, u32), usize> = {
        let mut keys: Vec<(u32, u32)> = runs
            .iter()
            .filter(|(_, r)| !r.sorted)
            .map(|(k, _)| *k)
            .collect();
        keys.sort_unstable();
        keys.into_iter().enumerate().map(|(i, k)| (k, i)).collect()
    };
    if !unsorted.is_empty() {
        let mut per_stream: Vec<Vec<(u64, i64)>> = vec![Vec::new(); unsorted.len()];
        for a in activities(t).filter(|a| a.correlation != 0) {
            if let Some(&i) = unsorted.get(&(a.device, a.stream)) {
                per_stream[i].push((a.correlation, a.start));
            }
        }
        for (key, &i) in &unsorted {
            let v = &mut per_stream[i];
            // Stable: activities of one graph launch keep their file order.
            v.sort_by_key(|&(c, _)| c);
            let mut r = fresh;
            for &(_, start) in v.iter() {
                step(&mut r, start);
            }
            runs.insert(*key, r);
        }
    }
    let mut count = 0u64;
    let mut worst = 0i64;
    let mut first: Option<(u32, u32)> = None;
    for (key, r) in &runs {
        if r.count > 0 {
            count += r.count;
            worst = worst.max(r.worst);
            first = Some(first.map_or(*key, |f| f.min(*key)));
        }
    }
    let (device, stream) = first?;
    Some(SourceDefect::ClockJumpsBack {
        count,
        worst_ns: worst,
        device,
        stream,
    })
}

type FxMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<gapscope_traces::strings::FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_traces::{GpuInfo, KernelRow, LaunchRow, Manifest};

    fn kernel(corr: u64, start: i64) -> KernelRow {
        KernelRow {
            correlation: corr,
            stream: 7,
            gpu_start_ns: start,
            gpu_end_ns: start + 1_000,
            ..Default::default()
        }
    }

    fn launch(pid: u32, corr: u64) -> LaunchRow {
        LaunchRow {
            pid,
            correlation: corr,
            ..Default::default()
        }
    }

    fn trace(kernels: &[KernelRow], launches: &[LaunchRow]) -> Trace {
        let mut t = Trace::new(Manifest::new("synthetic"));
        for k in kernels {
            t.kernels.push(*k);
        }
        for l in launches {
            t.launches.push(*l);
        }
        t
    }

    #[test]
    fn a_clock_that_jumps_back_is_found_and_pdl_is_not() {
        // Launch order 1..6, 10 ms apart; the last three are shown 35 ms earlier.
        let ks: Vec<KernelRow> = (1..=6)
            .map(|c| {
                kernel(
                    c,
                    if c <= 3 {
                        c as i64 * 10_000_000
                    } else {
                        c as i64 * 10_000_000 - 35_000_000
                    },
                )
            })
            .collect();
        let d = find(&trace(&ks, &[]));
        assert!(
            matches!(
                d.as_slice(),
                [SourceDefect::ClockJumpsBack {
                    count: 3,
                    worst_ns: 25_000_000,
                    ..
                }]
            ),
            "{d:?}"
        );
        // Programmatic dependent launch: the next starts before the previous ends, not
        // before it starts.
        let ks = [kernel(1, 0), kernel(2, 500), kernel(3, 1_400)];
        assert!(find(&trace(&ks, &[])).is_empty());
        // Graph kernels share a correlation id and keep file order.
        let ks = [
            kernel(5, 0),
            kernel(5, 2_000),
            kernel(5, 4_000),
            kernel(6, 9_000),
        ];
        assert!(find(&trace(&ks, &[])).is_empty());
    }

    #[test]
    fn two_processes_on_one_device_id_are_merged_ranks() {
        let ks = [
            kernel(1, 0),
            kernel(1, 300),
            kernel(2, 5_000),
            kernel(2, 5_200),
        ];
        let ls = [launch(10, 1), launch(10, 2), launch(11, 1), launch(11, 2)];
        let d = find(&trace(&ks, &ls));
        assert_eq!(
            d,
            vec![SourceDefect::MergedProcesses {
                processes: 2,
                devices: 1
            }]
        );
        // One process: nothing.
        let ls = [launch(10, 1), launch(10, 2)];
        assert!(find(&trace(&[kernel(1, 0), kernel(2, 5_000)], &ls)).is_empty());
    }

    #[test]
    fn a_hostile_manifest_cannot_make_a_long_line() {
        let d = SourceDefect::SeveralRanks {
            ranks: (0..100_000).collect(),
        };
        let line = d.describe();
        assert!(
            line.len() < 200 && line.ends_with("and 99992 more): analyse one file per rank"),
            "{line}"
        );
    }

    #[test]
    fn contradicting_gpu_names_are_a_defect() {
        let mut t = trace(&[], &[]);
        for name in ["NVIDIA H200", "NVIDIA H100", "NVIDIA H200"] {
            t.manifest.gpus.push(GpuInfo {
                device: 0,
                name: name.into(),
                ..Default::default()
            });
        }
        let d = find(&t);
        assert!(
            matches!(&d[..], [SourceDefect::ConflictingGpuNames { device: 0, names }] if names.len() == 2),
            "{d:?}"
        );
    }
}
