//! NVML telemetry over the analysed steps. A step that is slow because the GPU was power- or
//! thermally limited, or ran at a lowered clock, is the hardware's doing, not the engine's;
//! the report says so next to the step times so nobody chases a launch gap that is a clock.
//!
//! Samples are compared by `host_ns` with the steps' GPU times: the recorder writes them
//! already converted onto the kernels' timeline.

use gapscope_traces::SampleTable;
use serde::Serialize;

use super::stats::percentile_sorted;
use super::steps::Step;

/// An SM clock below this fraction of the highest SM clock seen in the window is a clock
/// drop. Boost clocks wander by a few percent under steady load; 10% is a real drop.
pub const CLOCK_DROP_FRACTION: f64 = 0.90;

/// NVML clocks-event reason bits (nvml.h `nvmlClocksEventReason*`) and their names.
const REASONS: [(u64, &str); 10] = [
    (0x1, "GpuIdle"),
    (0x2, "ApplicationsClocksSetting"),
    (0x4, "SwPowerCap"),
    (0x8, "HwSlowdown"),
    (0x10, "SyncBoost"),
    (0x20, "SwThermalSlowdown"),
    (0x40, "HwThermalSlowdown"),
    (0x80, "HwPowerBrakeSlowdown"),
    (0x100, "DisplayClockSetting"),
    (1 << 63, "Unknown"),
];

/// Reasons that lower the clock without the hardware limiting the work: nothing is running
/// (GpuIdle), or someone chose the clocks (application or display clock settings).
pub const BENIGN_REASONS: u64 = 0x1 | 0x2 | 0x100;

/// The time range samples are taken from, on the kernels' timeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TelemetryWindow {
    pub scope: TelemetryScope,
    pub start_ns: i64,
    pub end_ns: i64,
}

/// What the window covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TelemetryScope {
    /// First to last decode step.
    DecodeSteps,
    /// First to last step, when no step is a decode step.
    Steps,
    /// First to last kernel of the device, when there are no steps.
    KernelSpan,
}

impl TelemetryScope {
    /// Words for warnings and tables.
    pub fn describe(self) -> &'static str {
        match self {
            Self::DecodeSteps => "the decode steps",
            Self::Steps => "the steps",
            Self::KernelSpan => "the kernel span",
        }
    }
}

/// Minimum, median and maximum of one quantity over the in-window samples.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct MinMedianMax {
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl MinMedianMax {
    /// `None` for no values.
    fn of(mut v: Vec<f64>) -> Option<Self> {
        v.sort_by(|a, b| a.total_cmp(b));
        Some(Self {
            min: *v.first()?,
            median: percentile_sorted(&v, 50.0),
            max: *v.last()?,
        })
    }
}

/// The SM clock fell below [`CLOCK_DROP_FRACTION`] of its in-window maximum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClockDrop {
    pub min_mhz: f64,
    pub max_mhz: f64,
    pub threshold_mhz: f64,
    pub samples_below: usize,
}

/// NVML telemetry of the steps' device during the analysed window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TelemetryReport {
    /// The device compared (the one the steps refer to); `None` takes every device.
    pub device: Option<u32>,
    /// `None` when the trace has no steps and no kernels to compare with.
    pub window: Option<TelemetryWindow>,
    /// Samples in the trace, all devices.
    pub samples_total: usize,
    /// Samples of `device` inside the window; the figures below cover these.
    pub samples_in_steps: usize,
    /// Zero readings (the sampler could not read the value) are left out of these.
    pub sm_clock_mhz: Option<MinMedianMax>,
    pub mem_clock_mhz: Option<MinMedianMax>,
    pub power_w: Option<MinMedianMax>,
    pub temperature_c_max: Option<u32>,
    /// Samples with any reason bit outside [`BENIGN_REASONS`] set.
    pub throttled_samples: usize,
    /// Names of the throttling (non-benign) reasons seen, in bit order.
    pub throttle_reasons_seen: Vec<String>,
    pub clock_drop: Option<ClockDrop>,
}

/// The window to compare samples with: first start to last end of the decode steps (of all
/// steps when none is a decode step); without steps, the device's kernel span.
pub fn window(steps: &[Step], kernel_span: Option<(i64, i64)>) -> Option<TelemetryWindow> {
    let span = |it: &mut dyn Iterator<Item = &Step>| {
        it.fold(None, |acc: Option<(i64, i64)>, s| {
            let (lo, hi) = acc.unwrap_or((s.gpu_start_ns, s.gpu_end_ns));
            Some((lo.min(s.gpu_start_ns), hi.max(s.gpu_end_ns)))
        })
    };
    let (scope, (start_ns, end_ns)) =
        if let Some(w) = span(&mut steps.iter().filter(|s| s.is_decode())) {
            (TelemetryScope::DecodeSteps, w)
        } else if let Some(w) = span(&mut steps.iter()) {
            (TelemetryScope::Steps, w)
        } else {
            (TelemetryScope::KernelSpan, kernel_span?)
        };
    Some(TelemetryWindow {
        scope,
        start_ns,
        end_ns,
    })
}

/// Names of the reason bits set in `mask`, in bit order; unnamed bits as hex.
pub fn reason_names(mask: u64) -> Vec<String> {
    let named: u64 = REASONS.iter().map(|r| r.0).fold(0, |a, b| a | b);
    let mut v: Vec<String> = REASONS
        .iter()
        .filter(|(bit, _)| mask & bit != 0)
        .map(|(_, n)| (*n).to_owned())
        .collect();
    for b in 0..64 {
        let bit = 1u64 << b;
        if mask & bit != 0 && named & bit == 0 {
            v.push(format!("{bit:#x}"));
        }
    }
    v
}

/// Telemetry of `device` inside `window`, with its warnings pushed onto `warnings`. `None`
/// when the trace has no samples: traces from other tools carry none, and that is no news.
pub fn telemetry(
    samples: &SampleTable,
    device: Option<u32>,
    window: Option<TelemetryWindow>,
    warnings: &mut Vec<String>,
) -> Option<TelemetryReport> {
    if samples.is_empty() {
        return None;
    }
    let on_device = |i: usize| {
        samples
            .device
            .get(i)
            .is_some_and(|&d| device.is_none_or(|want| want == d))
    };
    let inside: Vec<usize> = match window {
        Some(w) => (0..samples.len())
            .filter(|&i| on_device(i))
            .filter(|&i| {
                samples
                    .host_ns
                    .get(i)
                    .is_some_and(|&t| w.start_ns <= t && t <= w.end_ns)
            })
            .collect(),
        None => Vec::new(),
    };
    // Non-zero readings of one column over the in-window samples.
    let col = |c: &[u32]| -> Vec<f64> {
        inside
            .iter()
            .filter_map(|&i| c.get(i).copied())
            .filter(|&v| v > 0)
            .map(f64::from)
            .collect()
    };
    let sm = col(&samples.sm_clock_mhz);
    let sm_clock_mhz = MinMedianMax::of(sm.clone());
    let power_w = MinMedianMax::of(
        col(&samples.power_mw)
            .into_iter()
            .map(|mw| mw / 1e3)
            .collect(),
    );
    let temperature_c_max = inside
        .iter()
        .filter_map(|&i| samples.temperature_c.get(i).copied())
        .filter(|&t| t > 0)
        .max();
    let throttle_masks: Vec<u64> = inside
        .iter()
        .filter_map(|&i| samples.throttle_reasons.get(i).copied())
        .map(|m| m & !BENIGN_REASONS)
        .filter(|&m| m != 0)
        .collect();
    let seen = throttle_masks.iter().fold(0, |a, &m| a | m);
    let clock_drop = sm_clock_mhz.and_then(|s| {
        let threshold_mhz = CLOCK_DROP_FRACTION * s.max;
        (s.min < threshold_mhz).then(|| ClockDrop {
            min_mhz: s.min,
            max_mhz: s.max,
            threshold_mhz,
            samples_below: sm.iter().filter(|&&v| v < threshold_mhz).count(),
        })
    });
    let report = TelemetryReport {
        device,
        window,
        samples_total: samples.len(),
        samples_in_steps: inside.len(),
        sm_clock_mhz,
        mem_clock_mhz: MinMedianMax::of(col(&samples.mem_clock_mhz)),
        power_w,
        temperature_c_max,
        throttled_samples: throttle_masks.len(),
        throttle_reasons_seen: reason_names(seen),
        clock_drop,
    };
    warn(
        &report,
        (0..samples.len()).filter(|&i| on_device(i)).count(),
        warnings,
    );
    Some(report)
}

/// The report's warnings: no samples in the window, throttling, a clock drop.
fn warn(r: &TelemetryReport, on_device: usize, warnings: &mut Vec<String>) {
    let gpu = r
        .device
        .map(|d| format!("GPU {d}"))
        .unwrap_or("the GPU".into());
    let Some(w) = r.window else {
        warnings.push(format!(
            "the trace has {} NVML telemetry samples but no steps or kernels to compare them \
             with; throttling was not checked",
            r.samples_total
        ));
        return;
    };
    let scope = w.scope.describe();
    if r.samples_in_steps == 0 {
        let of_device = if on_device < r.samples_total {
            format!(" ({on_device} of them for {gpu})")
        } else {
            String::new()
        };
        warnings.push(format!(
            "the trace has {} NVML telemetry samples{of_device} but none inside {scope} \
             ({} to {} ns); throttling was not checked",
            r.samples_total, w.start_ns, w.end_ns
        ));
        return;
    }
    if r.throttled_samples > 0 {
        warnings.push(format!(
            "{gpu} throttled during {scope}: {} in {} of {} NVML samples ({})",
            r.throttle_reasons_seen.join(", "),
            r.throttled_samples,
            r.samples_in_steps,
            share(r.throttled_samples, r.samples_in_steps)
        ));
    }
    if let Some(d) = r.clock_drop {
        warnings.push(format!(
            "{gpu} SM clock dropped during {scope}: min {:.0} MHz, max {:.0} MHz; {} of {} \
             NVML samples below {:.0}% of the max ({:.0} MHz)",
            d.min_mhz,
            d.max_mhz,
            d.samples_below,
            r.samples_in_steps,
            CLOCK_DROP_FRACTION * 100.0,
            d.threshold_mhz
        ));
    }
}

/// `part` of `whole` as a percentage, whole numbers unless that would show 0%.
fn share(part: usize, whole: usize) -> String {
    let p = 100.0 * part as f64 / whole.max(1) as f64;
    if p < 1.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

#[cfg(test)]
mod tests {
    use gapscope_traces::{Phase, SampleRow};

    use super::*;

    const SW_POWER_CAP: u64 = 0x4;
    const HW_THERMAL: u64 = 0x40;
    const GPU_IDLE: u64 = 0x1;

    /// Ten decode steps of 900 ns, one every 1000 ns from t = 1000.
    fn steps() -> Vec<Step> {
        (1..=10)
            .map(|i| Step {
                phase: Phase::Decode,
                gpu_start_ns: 1000 * i,
                gpu_end_ns: 1000 * i + 900,
            })
            .collect()
    }

    fn sample(host_ns: i64, sm_clock_mhz: u32, throttle_reasons: u64) -> SampleRow {
        SampleRow {
            device: 0,
            host_ns,
            sm_clock_mhz,
            mem_clock_mhz: 2619,
            power_mw: 350_000,
            temperature_c: 61,
            gpu_util_pct: 100,
            mem_util_pct: 40,
            throttle_reasons,
        }
    }

    /// One sample in the middle of each step, built by `f(step index)`.
    fn in_steps(f: impl Fn(usize) -> (u32, u64)) -> Vec<SampleRow> {
        (0..10)
            .map(|i| {
                let (sm, reasons) = f(i);
                sample(1000 * (i as i64 + 1) + 450, sm, reasons)
            })
            .collect()
    }

    fn run(rows: &[SampleRow], steps: &[Step]) -> (Option<TelemetryReport>, Vec<String>) {
        let mut t = SampleTable::default();
        rows.iter().for_each(|r| t.push(*r));
        let mut warnings = Vec::new();
        let r = telemetry(&t, Some(0), window(steps, None), &mut warnings);
        (r, warnings)
    }

    #[test]
    fn steady_clocks_without_reasons_do_not_warn() {
        let (r, w) = run(&in_steps(|_| (1980, 0)), &steps());
        let r = r.expect("samples present");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(r.samples_in_steps, 10);
        assert_eq!(r.throttled_samples, 0);
        assert!(r.throttle_reasons_seen.is_empty());
        assert_eq!(r.clock_drop, None);
        let sm = r.sm_clock_mhz.expect("clocks read");
        assert_eq!((sm.min, sm.median, sm.max), (1980.0, 1980.0, 1980.0));
        assert_eq!(r.power_w.map(|p| p.median), Some(350.0));
        assert_eq!(r.temperature_c_max, Some(61));
    }

    #[test]
    fn power_cap_in_three_of_ten_samples_warns_once() {
        let rows = in_steps(|i| (1980, if i < 3 { SW_POWER_CAP } else { 0 }));
        let (r, w) = run(&rows, &steps());
        let r = r.expect("samples present");
        assert_eq!(r.throttled_samples, 3);
        assert_eq!(r.throttle_reasons_seen, vec!["SwPowerCap".to_owned()]);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("SwPowerCap"), "{}", w[0]);
        assert!(w[0].contains("3 of 10"), "{}", w[0]);
        assert!(w[0].contains("30%"), "{}", w[0]);
    }

    #[test]
    fn sm_clock_dip_warns_as_a_clock_drop() {
        let (r, w) = run(
            &in_steps(|i| (if i == 4 { 1000 } else { 1980 }, 0)),
            &steps(),
        );
        let d = r.and_then(|r| r.clock_drop).expect("a clock drop");
        assert_eq!((d.min_mhz, d.max_mhz, d.samples_below), (1000.0, 1980.0, 1));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("SM clock dropped"), "{}", w[0]);
        assert!(
            w[0].contains("1000 MHz") && w[0].contains("1980 MHz"),
            "{}",
            w[0]
        );
    }

    #[test]
    fn samples_outside_the_steps_and_other_devices_are_ignored() {
        let mut rows = in_steps(|_| (1980, 0));
        // Before the first step, after the last, and inside on another device.
        rows.push(sample(500, 1000, HW_THERMAL));
        rows.push(sample(20_000, 900, SW_POWER_CAP));
        rows.push(SampleRow {
            device: 1,
            ..sample(5450, 800, SW_POWER_CAP)
        });
        let (r, w) = run(&rows, &steps());
        let r = r.expect("samples present");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(r.samples_total, 13);
        assert_eq!(r.samples_in_steps, 10);
        assert_eq!(r.throttled_samples, 0);
        assert_eq!(r.clock_drop, None);
    }

    #[test]
    fn gpu_idle_alone_is_not_throttling() {
        let (r, w) = run(&in_steps(|_| (1980, GPU_IDLE)), &steps());
        let r = r.expect("samples present");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(r.throttled_samples, 0);
        assert!(r.throttle_reasons_seen.is_empty());
    }

    #[test]
    fn no_samples_gives_no_section_and_no_warning() {
        let (r, w) = run(&[], &steps());
        assert_eq!(r, None);
        assert!(w.is_empty());
    }

    #[test]
    fn samples_none_inside_the_steps_say_so() {
        let rows = [sample(100, 1980, 0), sample(30_000, 1980, 0)];
        let (r, w) = run(&rows, &steps());
        assert_eq!(r.map(|r| r.samples_in_steps), Some(0));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(w[0].contains("2 NVML telemetry samples"), "{}", w[0]);
        assert!(w[0].contains("none inside the decode steps"), "{}", w[0]);
    }

    #[test]
    fn zero_readings_are_unread_not_a_clock_drop() {
        let (r, w) = run(&in_steps(|i| (if i == 2 { 0 } else { 1980 }, 0)), &steps());
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(r.and_then(|r| r.sm_clock_mhz).map(|s| s.min), Some(1980.0));
    }

    #[test]
    fn window_prefers_decode_steps_then_steps_then_kernels() {
        let mut s = steps();
        s.insert(
            0,
            Step {
                phase: Phase::Prefill,
                gpu_start_ns: 0,
                gpu_end_ns: 900,
            },
        );
        let w = window(&s, Some((-5, 50_000))).expect("steps");
        assert_eq!(
            (w.scope, w.start_ns, w.end_ns),
            (TelemetryScope::DecodeSteps, 1000, 10_900)
        );
        let w = window(&s[..1], None).expect("a prefill step");
        assert_eq!(
            (w.scope, w.start_ns, w.end_ns),
            (TelemetryScope::Steps, 0, 900)
        );
        let w = window(&[], Some((-5, 50_000))).expect("kernels");
        assert_eq!(w.scope, TelemetryScope::KernelSpan);
        assert_eq!(window(&[], None), None);
    }

    #[test]
    fn reason_bits_are_named() {
        assert_eq!(
            reason_names(0x4 | 0x40 | 0x200),
            vec!["SwPowerCap", "HwThermalSlowdown", "0x200"]
        );
        assert_eq!(reason_names(1 << 63), vec!["Unknown"]);
        assert!(reason_names(0).is_empty());
    }
}
