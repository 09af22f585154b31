//! Step detection: from markers when present (engine, NVTX, Kineto annotations), otherwise
//! from the periodic kernel sequence.

use std::collections::HashMap;

use gapscope_traces::{MarkerSource, Phase};
use regex::Regex;
use serde::Serialize;

use super::prepared::Prepared;
use crate::bucket::Bucket;
use crate::import::kineto::phase_from_name;

/// Default marker-name pattern for steps.
pub const DEFAULT_STEP_REGEX: &str = r"(?i)decode|prefill|step|forward|generate";

/// How steps are found.
#[derive(Debug, Clone)]
pub struct StepSettings {
    /// Marker names that delimit steps.
    pub regex: Regex,
    /// Ignore markers and detect steps from the kernel sequence.
    pub ignore_markers: bool,
}

impl Default for StepSettings {
    fn default() -> Self {
        Self {
            regex: Regex::new(DEFAULT_STEP_REGEX).expect("constant regex"),
            ignore_markers: false,
        }
    }
}

/// One step's window on the GPU timeline of the primary device.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Step {
    pub phase: Phase,
    pub gpu_start_ns: i64,
    pub gpu_end_ns: i64,
}

impl Step {
    /// Whether the step counts as decode work: marked decode, or of unknown phase (a
    /// matching marker name that says neither prefill nor decode).
    pub fn is_decode(&self) -> bool {
        self.phase == Phase::Decode || self.phase == Phase::Unknown
    }
}

/// Detected steps and how they were found.
#[derive(Debug, Clone, Serialize)]
pub struct Steps {
    pub steps: Vec<Step>,
    /// Human-readable origin, e.g. `markers: gpu_user_annotation "decode_step"`.
    pub source: String,
    pub device: Option<u32>,
    /// True when windows tile the timeline (auto detection): a step runs to the next start.
    pub contiguous: bool,
}

/// Finds the steps of a prepared trace.
pub fn detect(p: &Prepared, settings: &StepSettings) -> Steps {
    let device = p.primary_device();
    if !settings.ignore_markers {
        if let Some(s) = from_gpu_markers(p, settings, device) {
            return s;
        }
        if let Some(s) = from_host_markers(p, settings, device) {
            return s;
        }
    }
    if let Some(d) = device
        && let Some(s) = auto_detect(p, d)
    {
        return s;
    }
    Steps {
        steps: Vec::new(),
        source: if p.trace.kernels.is_empty() {
            "none: the trace has no kernels".into()
        } else {
            "none: no step markers and no periodic kernel sequence".into()
        },
        device,
        contiguous: false,
    }
}

struct Range {
    name: u32,
    phase: Phase,
    start: i64,
    end: i64,
}

/// Keeps the innermost ranges: a range that contains another candidate is a wrapper
/// (ProfilerStep around decode_step, generate around its steps).
fn leaves(mut r: Vec<Range>) -> Vec<Range> {
    r.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    let mut keep = vec![true; r.len()];
    for i in 0..r.len() {
        // Any later range starting before this one ends and ending inside it is nested.
        let mut j = i + 1;
        while j < r.len() && r[j].start < r[i].end {
            if r[j].end <= r[i].end {
                keep[i] = false;
                break;
            }
            j += 1;
        }
    }
    r.into_iter()
        .zip(keep)
        .filter_map(|(x, k)| k.then_some(x))
        .collect()
}

fn phase_of(p: &Prepared, name: u32, code: u8) -> Phase {
    match Phase::from_code(code) {
        Phase::Unknown => match phase_from_name(p.trace.strings.get(name)) {
            Phase::Unknown => Phase::Decode,
            ph => ph,
        },
        ph => ph,
    }
}

fn describe(p: &Prepared, what: &str, ranges: &[Range]) -> String {
    let mut names: Vec<&str> = ranges.iter().map(|r| p.trace.strings.get(r.name)).collect();
    names.sort_unstable();
    names.dedup();
    let shown: Vec<String> = names.iter().take(4).map(|n| format!("{n:?}")).collect();
    format!("markers: {what} {}", shown.join(", "))
}

/// Marker ranges on one clock whose names match, innermost only, with a label for where
/// they came from. `window` picks the clock pair of marker `i`, or `None` to skip it.
fn matching_ranges(
    p: &Prepared,
    s: &StepSettings,
    window: impl Fn(usize) -> Option<(i64, i64)>,
    label: impl Fn(MarkerSource) -> &'static str,
) -> Option<(Vec<Range>, &'static str)> {
    let m = &p.trace.markers;
    let mut ranges = Vec::new();
    let mut what = "";
    for i in 0..m.len {
        let Some((start, end)) = window(i) else {
            continue;
        };
        if !s.regex.is_match(p.trace.strings.get(m.name[i])) {
            continue;
        }
        what = label(MarkerSource::from_code(m.source[i]));
        ranges.push(Range {
            name: m.name[i],
            phase: phase_of(p, m.name[i], m.phase[i]),
            start,
            end,
        });
    }
    (!ranges.is_empty()).then(|| (leaves(ranges), what))
}

fn from_gpu_markers(p: &Prepared, s: &StepSettings, device: Option<u32>) -> Option<Steps> {
    let m = &p.trace.markers;
    let (ranges, what) = matching_ranges(
        p,
        s,
        |i| {
            (m.gpu_start_ns[i] != i64::MIN && device.is_none_or(|d| d == m.device[i]))
                .then(|| (m.gpu_start_ns[i], m.gpu_end_ns[i]))
        },
        |src| match src {
            MarkerSource::Engine => "engine",
            MarkerSource::KinetoGpuAnnotation => "gpu_user_annotation",
            MarkerSource::Nvtx => "NVTX (GPU projection)",
            _ => "GPU ranges",
        },
    )?;
    Some(Steps {
        source: describe(p, what, &ranges),
        steps: ranges
            .iter()
            .map(|r| Step {
                phase: r.phase,
                gpu_start_ns: r.start,
                gpu_end_ns: r.end,
            })
            .collect(),
        device,
        contiguous: false,
    })
}

/// Host ranges (user_annotation, NVTX) reach the GPU through launch correlation: a step's
/// window spans the kernels whose launch call started inside the range.
fn from_host_markers(p: &Prepared, s: &StepSettings, device: Option<u32>) -> Option<Steps> {
    let device = device?;
    let m = &p.trace.markers;
    let (ranges, what) = matching_ranges(
        p,
        s,
        |i| (m.host_start_ns[i] != i64::MIN).then(|| (m.host_start_ns[i], m.host_end_ns[i])),
        |src| match src {
            MarkerSource::KinetoUserAnnotation => "user_annotation",
            MarkerSource::Nvtx => "NVTX",
            _ => "host ranges",
        },
    )?;
    let l = &p.trace.launches;
    let mut launch_at: HashMap<u64, i64> = HashMap::with_capacity(l.len);
    for i in 0..l.len {
        launch_at
            .entry(l.correlation[i])
            .or_insert(l.host_start_ns[i]);
    }
    let k = &p.trace.kernels;
    let mut windows: Vec<(i64, i64)> = vec![(i64::MAX, i64::MIN); ranges.len()];
    for &i in p.kernels_on(device) {
        let i = i as usize;
        let Some(&t) = launch_at.get(&k.correlation[i]) else {
            continue;
        };
        let r = ranges.partition_point(|r| r.start <= t);
        if r == 0 || t >= ranges[r - 1].end {
            continue;
        }
        let w = &mut windows[r - 1];
        w.0 = w.0.min(k.gpu_start_ns[i]);
        w.1 = w.1.max(k.gpu_end_ns[i]);
    }
    let steps: Vec<Step> = ranges
        .iter()
        .zip(&windows)
        .filter(|(_, w)| w.0 < w.1)
        .map(|(r, w)| Step {
            phase: r.phase,
            gpu_start_ns: w.0,
            gpu_end_ns: w.1,
        })
        .collect();
    if steps.is_empty() {
        return None;
    }
    Some(Steps {
        source: describe(p, what, &ranges) + " (mapped to the GPU through launch correlation)",
        steps,
        device: Some(device),
        contiguous: false,
    })
}

/// Finds the repeating unit of the kernel-name sequence. Every name occurring at least three
/// times is a candidate step anchor; a candidate qualifies when the name sequences between
/// its consecutive occurrences are identical in at least 90% of neighbouring pairs. The
/// qualifying candidate with the fewest occurrences is the step (a per-layer kernel repeats
/// more often, and its segments break at every step boundary); among equals, the one after
/// the largest idle gap marks the step start.
fn auto_detect(p: &Prepared, device: u32) -> Option<Steps> {
    let order = p.kernels_on(device);
    let k = &p.trace.kernels;
    let n = order.len();
    if n < 6 {
        return None;
    }
    let names: Vec<u32> = order.iter().map(|&i| k.name[i as usize]).collect();
    let mut gap_before = vec![0i64; n];
    let mut max_end = i64::MIN;
    for (j, &i) in order.iter().enumerate() {
        let i = i as usize;
        gap_before[j] = if max_end == i64::MIN {
            0
        } else {
            (k.gpu_start_ns[i] - max_end).max(0)
        };
        max_end = max_end.max(k.gpu_end_ns[i]);
    }
    let mut positions: HashMap<u32, Vec<usize>> = HashMap::new();
    for (j, &nm) in names.iter().enumerate() {
        positions.entry(nm).or_default().push(j);
    }
    // Prefix hashes let each segment compare in O(1).
    let mut prefix = vec![0u64; n + 1];
    let mut pow = vec![1u64; n + 1];
    const B: u64 = 0x100_0000_01b3;
    for j in 0..n {
        prefix[j + 1] = prefix[j].wrapping_mul(B).wrapping_add(names[j] as u64 + 1);
        pow[j + 1] = pow[j].wrapping_mul(B);
    }
    let seg_hash = |a: usize, b: usize| prefix[b].wrapping_sub(prefix[a].wrapping_mul(pow[b - a]));

    let mut best: Option<(usize, i64, u32)> = None; // (count, median gap, name)
    for (&name, pos) in &positions {
        let c = pos.len();
        if c < 3 || c > n / 2 {
            continue;
        }
        let seg: Vec<(usize, usize)> = pos.windows(2).map(|w| (w[0], w[1])).collect();
        let comparisons = seg.len() - 1;
        if comparisons == 0 {
            continue;
        }
        let same = seg
            .windows(2)
            .filter(|w| {
                let (a, b) = (w[0], w[1]);
                b.1 - b.0 == a.1 - a.0 && seg_hash(a.0, a.1) == seg_hash(b.0, b.1)
            })
            .count();
        if (same as f64) < 0.9 * comparisons as f64 {
            continue;
        }
        // The periodic region must be most of the trace, not a short burst.
        if (pos[c - 1] - pos[0]) * c < n * (c - 1) / 2 {
            continue;
        }
        let mut gaps: Vec<i64> = pos.iter().map(|&j| gap_before[j]).collect();
        gaps.sort_unstable();
        let g = gaps[gaps.len() / 2];
        let better = match best {
            None => true,
            Some((bc, bg, bn)) => c < bc || (c == bc && (g > bg || (g == bg && name < bn))),
        };
        if better {
            best = Some((c, g, name));
        }
    }
    let (_, _, anchor) = best?;
    let pos = &positions[&anchor];
    let start_of = |j: usize| k.gpu_start_ns[order[j] as usize];
    let mut steps = Vec::with_capacity(pos.len() + 1);
    // Work before the first anchor is a prefill when it holds GEMM or attention work.
    if pos[0] >= 2 {
        let heavy = order[..pos[0]].iter().any(|&i| {
            matches!(
                Bucket::ALL[p.kernel_bucket[i as usize] as usize],
                Bucket::GemmDense | Bucket::GemmQuant | Bucket::Attention | Bucket::Gemv
            )
        });
        if heavy {
            steps.push(Step {
                phase: Phase::Prefill,
                gpu_start_ns: start_of(0),
                gpu_end_ns: start_of(pos[0]),
            });
        }
    }
    for (w, &j) in pos.iter().enumerate() {
        let end = match pos.get(w + 1) {
            Some(&next) => start_of(next),
            None => order[j..]
                .iter()
                .map(|&i| k.gpu_end_ns[i as usize])
                .max()
                .unwrap_or(start_of(j)),
        };
        steps.push(Step {
            phase: Phase::Decode,
            gpu_start_ns: start_of(j),
            gpu_end_ns: end,
        });
    }
    Some(Steps {
        source: format!(
            "auto: periodic kernel sequence, anchor {:?} ({} occurrences)",
            short(p.trace.strings.get(anchor)),
            pos.len()
        ),
        steps,
        device: Some(device),
        contiguous: true,
    })
}

/// A kernel name cut to something a table cell can hold.
pub fn short(name: &str) -> String {
    const MAX: usize = 80;
    if name.chars().count() <= MAX {
        name.to_owned()
    } else {
        let cut: String = name.chars().take(MAX - 1).collect();
        format!("{cut}…")
    }
}
