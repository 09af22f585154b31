//! Calibrates the latency of the per-launch timing events, so `Timing::Launch` durations
//! estimate kernel execution rather than kernel plus event records.
//!
//! A probe kernel (`kernels/cuda/timing.cu`) spins for a known time read from `%globaltimer`
//! and reports it. It is timed exactly as the recorder times a launch: between two plain event
//! records on the stream (launch-timed steps run eagerly, also under the graph lever). The event
//! pair's elapsed time minus the probe's own duration is the latency of the pair; the trimmed
//! mean over the repeats goes to `Recorder::event_latency_ns` (and that of a step's first
//! launch, measured apart, to `Recorder::event_latency_first_ns`).

use super::backend::CudaBackend;
use super::device::{Arg, DevBuf};
use super::recorder::record;
use crate::error::{EngineError, Result};
use cudarc::driver::{CudaEvent, sys};
use gapscope_kernels::Kernel;
use gapscope_traces::stats::Summary;

/// Words of the calibration's host-to-device copy: the size of a batch-1 decode step's
/// metadata upload for Llama-3-8B (2336 bytes in a CUPTI recording).
const STEP_UPLOAD_WORDS: usize = 584;

/// How long the probe spins: long against the timers' resolution, short for the run.
const PROBE_SPIN_NS: i64 = 20_000;
/// A kernel queued ahead of each measurement, long enough for the host to enqueue the
/// measured records and probe behind it: a timed launch in a step is always queued behind
/// earlier work, never issued onto an idle GPU (where the host's enqueue time would count).
const BLOCKER_SPIN_NS: i64 = 200_000;
/// Replays discarded before measuring (first-launch and upload effects).
const WARMUP: usize = 5;
/// A latency above this is no event latency but a broken measurement (ns).
const MAX_PLAUSIBLE_NS: i64 = 20_000;

/// The calibrated latency of one launch's event pair, as the bench prints and records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LatencyCalibration {
    /// Median over the repeats of (event elapsed - probe duration), ns, for every launch of
    /// a step but the first.
    pub median_ns: i64,
    pub min_ns: i64,
    pub max_ns: i64,
    /// The trimmed mean (10% off each end) of the same samples: what is subtracted.
    pub mean_ns: i64,
    /// The trimmed mean for a step's first launch (right after the step's start event).
    pub first_mean_ns: i64,
    /// Repeats measured (after the warm-up).
    pub n: usize,
    /// Median probe duration by `%globaltimer`, ns (the spin target is 20 µs), up to its
    /// stores being visible.
    pub probe_ns: i64,
    /// Median time of the probe's final stores and fence (t2 - t1), ns: counted as kernel
    /// time, as CUPTI counts it.
    pub store_tail_ns: i64,
}

/// Median, min and max of the samples (the bench's `Summary`, in whole ns; an even count's
/// median rounds down); `None` when there are none.
pub fn summarize(samples: &[i64]) -> Option<(i64, i64, i64)> {
    if samples.is_empty() {
        return None;
    }
    let v: Vec<f64> = samples.iter().map(|&x| x as f64).collect();
    let s = Summary::of(&v);
    Some((s.median.floor() as i64, s.min as i64, s.max as i64))
}

/// Mean of the samples with the lowest and highest 10% dropped; `None` when there are none.
pub fn trimmed_mean(samples: &[i64]) -> Option<i64> {
    let mut v = samples.to_vec();
    v.sort_unstable();
    let cut = v.len() / 10;
    let kept = &v[cut..v.len() - cut];
    if kept.is_empty() {
        return None;
    }
    Some(kept.iter().sum::<i64>() / kept.len() as i64)
}

/// Rejects a latency no event pair can have: negative (the probe outlasted its own event
/// pair) or above `MAX_PLAUSIBLE_NS`.
pub fn check_plausible(latency_ns: i64) -> Result<()> {
    if (0..=MAX_PLAUSIBLE_NS).contains(&latency_ns) {
        Ok(())
    } else {
        Err(EngineError::Cuda(format!(
            "event latency calibration gave a latency of {latency_ns} ns, outside 0..={MAX_PLAUSIBLE_NS} ns: \
             the probe's %globaltimer or the events are not measuring what they should; \
             rerun with --raw-event-timing to keep the raw event times"
        )))
    }
}

/// Probes in the calibration sequence: a step's first launch, then one later launch.
const PROBES: usize = 2;
/// Timer words each probe writes (t0, t1, t2; see `timing_probe`).
const WORDS: usize = 3;

/// One calibration series (see `CudaBackend::measure`), in ns.
#[derive(Default)]
struct Series {
    /// Latency of the first pair of each repeat.
    first: Vec<i64>,
    /// Latency of the later pair of each repeat.
    rest: Vec<i64>,
    /// The later probe's own time.
    probe: Vec<i64>,
    /// Every probe's store tail (t2 - t1).
    tails: Vec<i64>,
}

fn ns(ms: f32) -> i64 {
    (f64::from(ms) * 1e6).round() as i64
}

impl CudaBackend {
    /// Measures the latency of one launch's event pair over `reps` probe launches (after a
    /// warm-up), recorded the way the current levers record timed launches, and sets
    /// `rec.event_latency_ns` and `rec.event_latency_first_ns` to the trimmed means. On an
    /// implausible result it returns an error and leaves the latencies at 0 (raw event
    /// times).
    pub fn calibrate_event_latency(&mut self, reps: usize) -> Result<LatencyCalibration> {
        self.rec.event_latency_ns = 0;
        self.rec.event_latency_first_ns = 0;
        if reps == 0 {
            return Err(EngineError::invalid(
                "event latency calibration needs reps >= 1",
            ));
        }
        let m = self.measure(PROBE_SPIN_NS, reps)?;
        let (latency, first, probe, tails) = (m.rest, m.first, m.probe, m.tails);
        let (median_ns, min_ns, max_ns) = summarize(&latency)
            .ok_or_else(|| EngineError::invalid("event latency calibration took no samples"))?;
        // What is subtracted is a trimmed mean, not the median: the latency falls on a few
        // 32-ns timer ticks with more than one cluster, and a bucket's time is a sum over its
        // launches, so the mean latency is what it carries.
        let mean_ns = trimmed_mean(&latency).unwrap_or(median_ns);
        let first_mean_ns = trimmed_mean(&first).unwrap_or(mean_ns);
        check_plausible(mean_ns)?;
        check_plausible(first_mean_ns)?;
        self.rec.event_latency_ns = mean_ns;
        self.rec.event_latency_first_ns = first_mean_ns;
        Ok(LatencyCalibration {
            mean_ns,
            median_ns,
            min_ns,
            max_ns,
            first_mean_ns,
            n: latency.len(),
            probe_ns: summarize(&probe).map_or(0, |s| s.0),
            store_tail_ns: summarize(&tails).map_or(0, |s| s.0),
        })
    }

    /// One measurement series of two probes spinning `spin_ns` in one step-like sequence: per
    /// repeat, the latency of the first pair and of the second, the second probe's own time
    /// and the probes' store tails.
    fn measure(&mut self, spin_ns: i64, reps: usize) -> Result<Series> {
        let ev = || {
            self.dev
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        };
        // A step records its start event, then a pair around each launch. The first pair of
        // a step follows the step's start event and is measured apart from the others:
        // `start`, then probe 0 between its pair (like a step's first launch), then probe 1
        // between its own pair (like every later launch).
        let start = ev()?;
        let mut pairs = Vec::with_capacity(PROBES);
        for _ in 0..PROBES {
            pairs.push((ev()?, ev()?));
        }
        // Per probe, its 3 words (t0, t1, t2), then the blocker's 3 words.
        let out = DevBuf::alloc((PROBES * WORDS + WORDS) * 8)?;
        let probes: Vec<(&CudaEvent, &CudaEvent, u64)> = pairs
            .iter()
            .enumerate()
            .map(|(k, (a, b))| (a, b, out.at(k * WORDS * 8)))
            .collect();
        let last = &pairs[PROBES - 1].1;
        // A step uploads its row metadata (a small pageable host-to-device copy) right before
        // its start event, outside any graph; the eager sequence does the same, so the first
        // pair follows a copy as a step's first launch does.
        let meta_host = vec![0i32; STEP_UPLOAD_WORDS];
        let meta = DevBuf::alloc(STEP_UPLOAD_WORDS * 4)?;
        let mut sr = Series::default();
        for i in 0..WARMUP + reps {
            self.probe(out.at(PROBES * WORDS * 8), BLOCKER_SPIN_NS)?;
            self.dev.memcpy_htod_async(meta.ptr, &meta_host)?;
            self.enqueue_probes(&start, &probes, spin_ns)?;
            last.synchronize()?;
            let all: Vec<u64> = out.read(PROBES * WORDS, &self.dev.stream)?;
            for (k, (a, b, _)) in probes.iter().enumerate() {
                let elapsed = ns(a.elapsed_ms(b)?);
                let t = &all[WORDS * k..WORDS * (k + 1)];
                // The probe's own time runs to t2, after its stores are visible: CUPTI counts
                // a kernel's final stores as kernel time, so they are no part of the latency.
                let spun = t[2].wrapping_sub(t[0]) as i64;
                sr.tails.push(t[2].wrapping_sub(t[1]) as i64);
                if i >= WARMUP {
                    if k == 0 {
                        sr.first.push(elapsed - spun);
                    } else {
                        sr.rest.push(elapsed - spun);
                        sr.probe.push(spun);
                    }
                }
            }
        }
        Ok(sr)
    }

    /// The calibration sequence: a step-like start event, then each probe between its pair.
    fn enqueue_probes(
        &self,
        start: &CudaEvent,
        probes: &[(&CudaEvent, &CudaEvent, u64)],
        spin_ns: i64,
    ) -> Result<()> {
        let stream = &self.dev.stream;
        record(start, stream, false)?;
        for (a, b, out) in probes {
            record(a, stream, false)?;
            self.probe(*out, spin_ns)?;
            record(b, stream, false)?;
        }
        Ok(())
    }

    /// Enqueues the probe (1 block of 32 threads) writing its timer readings at `out`.
    fn probe(&self, out: u64, spin_ns: i64) -> Result<()> {
        self.dev.launch(
            Kernel::TimingProbe,
            (1, 1, 1),
            32,
            &[Arg::Ptr(out), Arg::I64(spin_ns)],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_of_odd_and_even_counts() {
        assert_eq!(
            summarize(&[3_100, 2_900, 3_000]),
            Some((3_000, 2_900, 3_100))
        );
        assert_eq!(
            summarize(&[3_000, 2_900, 3_200, 3_100]),
            Some((3_050, 2_900, 3_200))
        );
        assert_eq!(summarize(&[-5]), Some((-5, -5, -5)));
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn trimmed_mean_drops_a_tenth_at_each_end() {
        let mut v: Vec<i64> = vec![3_072; 8];
        v.push(100_000); // an outlier high
        v.push(0); // and low
        assert_eq!(trimmed_mean(&v), Some(3_072));
        assert_eq!(trimmed_mean(&[3_000, 3_200]), Some(3_100));
        assert_eq!(trimmed_mean(&[]), None);
    }

    #[test]
    fn implausible_medians_are_rejected_with_the_way_out() {
        assert!(check_plausible(0).is_ok());
        assert!(check_plausible(3_040).is_ok());
        assert!(check_plausible(MAX_PLAUSIBLE_NS).is_ok());
        for bad in [-1, -3_000, MAX_PLAUSIBLE_NS + 1, 1_000_000] {
            let e = check_plausible(bad).expect_err("rejected").to_string();
            assert!(e.contains(&bad.to_string()), "{e}");
            assert!(e.contains("--raw-event-timing"), "{e}");
        }
    }
}
