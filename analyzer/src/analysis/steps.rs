//! Step detection: from markers when present (engine, NVTX, Kineto annotations), otherwise
//! from the periodic kernel sequence (`auto_steps`).

use std::collections::HashMap;

use gapscope_traces::{MarkerSource, Phase};
use regex::Regex;
use serde::Serialize;

use super::prepared::Prepared;
#[cfg(test)]
use crate::bucket::Bucket;
use crate::import::kineto::phase_from_name;

mod auto_steps;
use auto_steps::auto_detect;

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

#[cfg(test)]
mod tests {
    use gapscope_traces::{KernelRow, Manifest, Trace};

    use super::*;
    use crate::rules::RuleSet;

    /// One forward pass: kernel names and durations (ns), as an engine would run them.
    type Pass = Vec<(&'static str, i64)>;

    /// A decode step of a two-layer model: gemv matmuls, decode attention.
    fn decode() -> Pass {
        let mut s = vec![("get_rows_bf16", 10)];
        for _ in 0..2 {
            s.extend([
                ("rms_norm_f32", 20),
                ("gemv_bf16_b1", 100),
                ("attn_decode_bf16", 50),
                ("gemv_bf16_b1", 100),
            ]);
        }
        s.extend([("gemv_bf16_b1", 100), ("argmax_f32", 10)]);
        s
    }

    /// The same pass with its matmuls in `gemm`, `factor` times longer (a prompt of
    /// several tokens).
    fn prefill_with(gemm: &'static str, factor: i64) -> Pass {
        decode()
            .into_iter()
            .map(|(n, d)| match n {
                "gemv_bf16_b1" => (gemm, d * factor),
                "attn_decode_bf16" => (n, d * factor),
                _ => (n, d),
            })
            .collect()
    }

    fn prefill() -> Pass {
        prefill_with("cublasGemmEx_bf16", 2)
    }

    /// Kernels back to back with 5 ns launch gaps, passes 200 ns apart, all on device 0.
    fn trace(passes: &[Pass]) -> Trace {
        let mut t = Trace::new(Manifest::new("test"));
        let mut now = 1_000;
        for pass in passes {
            for &(name, dur) in pass {
                let name = t.strings.intern(name);
                t.kernels.push(KernelRow {
                    name,
                    gpu_start_ns: now,
                    gpu_end_ns: now + dur,
                    ..KernelRow::default()
                });
                now += dur + 5;
            }
            now += 200;
        }
        t
    }

    fn auto(t: &Trace) -> Steps {
        let p = Prepared::new(t, &RuleSet::builtin());
        let s = StepSettings {
            ignore_markers: true,
            ..StepSettings::default()
        };
        detect(&p, &s)
    }

    fn phases(s: &Steps) -> String {
        s.steps
            .iter()
            .map(|s| match s.phase {
                Phase::Prefill => 'P',
                Phase::Decode => 'D',
                _ => '?',
            })
            .collect()
    }

    fn passes(pattern: &str) -> Vec<Pass> {
        pattern
            .chars()
            .map(|c| if c == 'P' { prefill() } else { decode() })
            .collect()
    }

    #[test]
    fn builtin_rules_file_the_test_kernels_as_assumed() {
        let r = RuleSet::builtin();
        for (name, b) in [
            ("gemv_bf16_b1", Bucket::Gemv),
            ("cublasGemmEx_bf16", Bucket::GemmDense),
            ("attn_decode_bf16", Bucket::Attention),
            ("flash_fwd_splitkv_kernel", Bucket::Attention),
            ("get_rows_bf16", Bucket::EmbedGather),
            ("argmax_f32", Bucket::Sampling),
        ] {
            assert_eq!(r.classify_kernel(name), b, "{name}");
        }
    }

    #[test]
    fn prefill_that_starts_with_the_anchor_is_a_prefill() {
        let s = auto(&trace(&passes("PDDDDDDDD")));
        assert_eq!(phases(&s), "PDDDDDDDD", "{}", s.source);
        assert!(
            s.source.contains("1 odd segment taken as prefill"),
            "{}",
            s.source
        );
        // The prefill window runs from its first kernel to the first decode step.
        assert_eq!(s.steps[0].gpu_start_ns, 1_000);
        assert_eq!(s.steps[0].gpu_end_ns, s.steps[1].gpu_start_ns);
    }

    #[test]
    fn second_prefill_between_decode_steps_is_a_prefill() {
        let s = auto(&trace(&passes("PDDDDDDDDPDDDDDDDD")));
        assert_eq!(phases(&s), "PDDDDDDDDPDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn trailing_prefill_is_a_prefill() {
        let s = auto(&trace(&passes("DDDDDDDDDP")));
        assert_eq!(phases(&s), "DDDDDDDDDP", "{}", s.source);
    }

    #[test]
    fn one_prefill_per_request_is_found_for_every_request() {
        let s = auto(&trace(&passes("PDDDDDPDDDDDPDDDDDPDDDDD")));
        assert_eq!(phases(&s), "PDDDDDPDDDDDPDDDDDPDDDDD", "{}", s.source);
        assert!(s.source.contains("4 odd segments"), "{}", s.source);
    }

    #[test]
    fn prefill_on_the_decode_kernels_is_a_prefill_when_much_longer() {
        // Same matmul kernels, one extra copy, three times the GEMM/attention time.
        let mut long = prefill_with("gemv_bf16_b1", 3);
        long.insert(1, ("copy_f32", 30));
        let mut ps = vec![long];
        ps.extend(passes("DDDDDDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "PDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn attention_kernel_switch_halfway_stays_decode() {
        // Past some context length the engine switches attention kernels; same time.
        let split: Pass = decode()
            .into_iter()
            .map(|(n, d)| match n {
                "attn_decode_bf16" => ("flash_fwd_splitkv_kernel", d),
                _ => (n, d),
            })
            .collect();
        let mut ps = passes("DDDDDD");
        ps.extend(std::iter::repeat_n(split, 6));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn decode_step_with_an_extra_small_kernel_stays_decode() {
        let mut odd = decode();
        odd.insert(3, ("copy_f32", 40));
        let mut ps = passes("DDDD");
        ps.push(odd);
        ps.extend(passes("DDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn slow_decode_step_on_the_same_kernels_stays_decode() {
        // A throttled step: the same kernels, three times slower. A stall to report, not a
        // prefill to hide.
        let slow: Pass = decode().into_iter().map(|(n, d)| (n, 3 * d)).collect();
        let mut ps = passes("DDDD");
        ps.push(slow);
        ps.extend(passes("DDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDDD", "{}", s.source);
    }

    #[test]
    fn recording_that_starts_mid_step_has_no_prefill() {
        // The tail of a decode step (matmuls included) before the first anchor.
        let d = decode();
        let mut ps = vec![d[d.len() - 4..].to_vec()];
        ps.extend(passes("DDDDDDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "DDDDDDDD", "{}", s.source);
    }

    #[test]
    fn prefill_before_the_first_anchor_is_a_prefill() {
        // A prefill whose kernels differ from the start: no anchor inside it.
        let p: Pass = vec![
            ("rms_norm_f32", 20),
            ("cublasGemmEx_bf16", 400),
            ("attn_decode_bf16", 100),
            ("cublasGemmEx_bf16", 400),
        ];
        let mut ps = vec![p];
        ps.extend(passes("DDDDDDDD"));
        let s = auto(&trace(&ps));
        assert_eq!(phases(&s), "PDDDDDDDD", "{}", s.source);
        assert_eq!(s.steps[0].gpu_end_ns, s.steps[1].gpu_start_ns);
    }

    #[test]
    fn periodic_trace_has_only_decode_steps() {
        let s = auto(&trace(&passes("DDDDDDDDDDDDDDDD")));
        assert_eq!(phases(&s), "DDDDDDDDDDDDDDDD", "{}", s.source);
        assert!(s.source.starts_with("auto: "), "{}", s.source);
        assert!(!s.source.contains("prefill"), "{}", s.source);
    }
}
