//! Calibrates the latency of the per-launch timing events, so `Timing::Launch` durations
//! estimate kernel execution rather than kernel plus event records.
//!
//! A probe kernel (`kernels/cuda/timing.cu`) spins for a known time read from `%globaltimer`
//! and reports it. It is timed exactly as the recorder times a launch: inside a captured graph
//! between two external event-record nodes when the graph lever is on (decode steps are graph
//! replays then), or between two plain event records on the stream when it is off. The event
//! pair's elapsed time minus the probe's own duration is the latency of the pair; the trimmed
//! mean over the repeats goes to `Recorder::event_latency_ns` (and that of a step's first
//! launch, measured apart, to `Recorder::event_latency_first_ns`).

use super::backend::CudaBackend;
use super::device::{Arg, DevBuf};
use super::recorder::record;
use crate::error::{EngineError, Result};
use crate::stats::Spread;
use cudarc::driver::{CudaEvent, CudaGraph, sys};
use gapscope_kernels::Kernel;

/// Words of the calibration's host-to-device copy: the size of a batch-1 decode step's
/// metadata upload for Llama-3-8B (2336 bytes in a CUPTI recording).
const STEP_UPLOAD_WORDS: usize = 584;

/// Probe lengths of the optional by-length series (ns; `bench --event-latency-by-length`).
pub const PROBE_LENGTHS_NS: [i64; 7] = [1_000, 2_000, 3_000, 5_000, 10_000, 20_000, 50_000];

/// The launch shape of a calibration probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ProbeShape {
    pub grid: u32,
    pub block: u32,
}

/// The shape the calibration uses: one warp (`timing_probe`).
pub const CALIBRATION_SHAPE: ProbeShape = ProbeShape { grid: 1, block: 32 };

/// Shapes of the optional by-shape series (`bench --event-latency-by-shape`): the calibration's
/// one warp, then the shapes of the decode's own kernels (one block of 256 like the norms and
/// the embedding gather, a few small blocks like attention, one wave and several blocks per SM
/// like the GEMVs).
/// Then the calibration's probe in longer step-like sequences (`count` probes, each between
/// its own event pair, in one graph when graphs are on), as long as a decode step.
pub const PROBE_SHAPES: [(ProbeShape, usize); 9] = [
    (CALIBRATION_SHAPE, 2),
    (
        ProbeShape {
            grid: 1,
            block: 256,
        },
        2,
    ),
    (
        ProbeShape {
            grid: 8,
            block: 128,
        },
        2,
    ),
    (
        ProbeShape {
            grid: 32,
            block: 512,
        },
        2,
    ),
    (
        ProbeShape {
            grid: 132,
            block: 256,
        },
        2,
    ),
    (
        ProbeShape {
            grid: 528,
            block: 256,
        },
        2,
    ),
    (CALIBRATION_SHAPE, 8),
    (CALIBRATION_SHAPE, 32),
    (CALIBRATION_SHAPE, 200),
];
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
    /// Measured on external event-record nodes in a CUDA graph (the graph lever with
    /// `--timed-steps-in-graphs`); plain stream event records otherwise.
    pub graphs: bool,
    /// Median probe duration by `%globaltimer`, ns (the spin target is 20 µs), up to its
    /// stores being visible.
    pub probe_ns: i64,
    /// Median time of the probe's final stores and fence (t2 - t1), ns: counted as kernel
    /// time, as CUPTI counts it.
    pub store_tail_ns: i64,
    /// The later-launch latency with probes of other lengths (how it depends on a kernel's
    /// length; not used for the correction). Empty unless asked for, so start-up does not
    /// pay for a diagnostic.
    pub by_probe_length: Vec<ProbePoint>,
    /// The same with probes of other launch shapes (`PROBE_SHAPES`); empty unless asked for.
    pub by_probe_shape: Vec<ShapePoint>,
    /// The later-launch latency after a spinning or memory-streaming lead kernel
    /// (`latency_after_lead`); empty unless asked for.
    pub after_lead: Vec<LeadPoint>,
}

/// The latency measured with a probe of one launch shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ShapePoint {
    pub shape: ProbeShape,
    /// Probes in the step-like sequence (a decode step has about 200 launches).
    pub count: usize,
    /// Median extent of the probe by `%globaltimer` (first block's start to last block's
    /// stores), ns.
    pub probe_ns: i64,
    pub latency_ns: i64,
    pub first_latency_ns: i64,
}

/// One measurement series (see `CudaBackend::measure`).
#[derive(Default)]
struct Series {
    first: Vec<i64>,
    /// The first probe's own time (the lead's, in `latency_after_lead`).
    first_probe: Vec<i64>,
    rest: Vec<i64>,
    probe: Vec<i64>,
    tails: Vec<i64>,
}

impl Series {
    /// Median time of the later probes (0 with none).
    fn probe_ns(&self) -> i64 {
        summarize(&self.probe).map_or(0, |s| s.0)
    }

    /// Trimmed mean latency of the later pairs (0 with none).
    fn latency_ns(&self) -> i64 {
        trimmed_mean(&self.rest).unwrap_or(0)
    }

    /// Trimmed mean latency of the first pair (0 with none).
    fn first_latency_ns(&self) -> i64 {
        trimmed_mean(&self.first).unwrap_or(0)
    }
}

/// The latency measured with a probe of one length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ProbePoint {
    pub probe_ns: i64,
    pub latency_ns: i64,
    pub first_latency_ns: i64,
}

/// Median, min and max of the samples (the bench's `Spread`, in whole ns; an even count's
/// median rounds down); `None` when there are none.
pub fn summarize(samples: &[i64]) -> Option<(i64, i64, i64)> {
    if samples.is_empty() {
        return None;
    }
    let v: Vec<f64> = samples.iter().map(|&x| x as f64).collect();
    let s = Spread::of(&v);
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

/// The probe shape of one measurement and the scratch its stores go to.
#[derive(Clone, Copy)]
struct Shaped {
    shape: ProbeShape,
    scratch: u64,
    /// A different kernel in place of the sequence's first probe, so the later pairs are
    /// measured after it (`latency_after_lead`).
    lead: Option<Lead>,
}

/// The first launch of a `latency_after_lead` sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum LeadKind {
    /// `timing_probe_grid`: spins, touches no memory but its stores.
    Spin,
    /// `timing_probe_stream`: streams a buffer far larger than L2, as a GEMV does.
    Stream,
}

#[derive(Debug, Clone, Copy)]
struct Lead {
    kind: LeadKind,
    shape: ProbeShape,
    /// The streamed buffer and its length in 16-byte words (Stream only).
    src: u64,
    n16: i64,
}

/// The later-launch latency of the calibration probe right after a lead kernel
/// (`bench --event-latency-after-load`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LeadPoint {
    /// None: the calibration sequence itself.
    pub lead: Option<LeadKind>,
    pub lead_shape: ProbeShape,
    /// Median extent of the lead by `%globaltimer`, ns.
    pub lead_ns: i64,
    /// Trimmed mean latency of the calibration probe's pair after the lead, ns.
    pub latency_ns: i64,
    /// Trimmed mean latency of the lead's own pair (a step's first launch), ns.
    pub lead_latency_ns: i64,
}

/// Bytes the streaming lead reads from (4x an H200's L2, so its loads go to HBM).
const STREAM_BYTES: usize = 256 << 20;

/// One probe's (t0, t1, t2) from its blocks' words: the first block's start, the last
/// block's end of spin and the last block's visible stores.
pub fn extent(words: &[u64]) -> [u64; 3] {
    let mut t = [u64::MAX, 0, 0];
    for b in words.chunks_exact(3) {
        t[0] = t[0].min(b[0]);
        t[1] = t[1].max(b[1]);
        t[2] = t[2].max(b[2]);
    }
    if t[0] == u64::MAX {
        t[0] = 0;
    }
    t
}

fn ns(ms: f32) -> i64 {
    (f64::from(ms) * 1e6).round() as i64
}

impl CudaBackend {
    /// Whether launch-timed decode steps replay a graph of external event-record nodes (and
    /// so the calibration measures those), or run eagerly with stream records.
    pub fn timed_in_graph(&self) -> bool {
        self.levers.graphs && self.timed_steps_in_graphs
    }

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
        let graphs = self.timed_in_graph();
        let m = self.measure(PROBE_SPIN_NS, reps, CALIBRATION_SHAPE, 2, None)?;
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
            graphs,
            probe_ns: summarize(&probe).map_or(0, |s| s.0),
            store_tail_ns: summarize(&tails).map_or(0, |s| s.0),
            by_probe_length: Vec::new(),
            by_probe_shape: Vec::new(),
            after_lead: Vec::new(),
        })
    }

    /// One measurement series with `count` (at least 2) probes of `shape` spinning `spin_ns`
    /// in one step-like sequence: per repeat, the latency of the first pair and of each later
    /// pair, the later probes' own times and the probes' store tails.
    fn measure(
        &mut self,
        spin_ns: i64,
        reps: usize,
        shape: ProbeShape,
        count: usize,
        lead: Option<Lead>,
    ) -> Result<Series> {
        let graphs = self.timed_in_graph();
        let ev = || {
            self.dev
                .ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        };
        // A step records its start event, then a pair around each launch. The first pair of
        // a step follows the step's start event and is measured apart from the others:
        // `start`, then probe 0 between its pair (like a step's first launch), then the
        // others, each between its own pair (like every later launch).
        let count = count.max(2);
        let start = ev()?;
        let mut pairs = Vec::with_capacity(count);
        for _ in 0..count {
            pairs.push((ev()?, ev()?));
        }
        // Per probe, 3 words (t0, t1, t2) for each block, then the blocker's 3 words; the
        // shaped probe's other stores go to `scratch`.
        let lead_shape = lead.map_or(shape, |l| l.shape);
        let per = 3 * shape.grid.max(lead_shape.grid) as usize;
        let out = DevBuf::alloc((count * per + 3) * 8)?;
        let threads = |s: ProbeShape| s.grid as usize * s.block as usize;
        let scratch = DevBuf::alloc(threads(shape).max(threads(lead_shape)) * 8)?;
        let probes: Vec<(&CudaEvent, &CudaEvent, u64)> = pairs
            .iter()
            .enumerate()
            .map(|(k, (a, b))| (a, b, out.at(k * per * 8)))
            .collect();
        let last = &pairs[count - 1].1;
        let shaped = Shaped {
            shape,
            scratch: scratch.ptr,
            lead,
        };
        let graph = if graphs {
            Some(self.capture_probes(&start, &probes, spin_ns, shaped)?)
        } else {
            None
        };
        // A step uploads its row metadata (a small pageable host-to-device copy) right before
        // its start event, outside any graph; the eager sequence does the same, so the first
        // pair follows a copy as a step's first launch does.
        let meta_host = vec![0i32; STEP_UPLOAD_WORDS];
        let meta = DevBuf::alloc(STEP_UPLOAD_WORDS * 4)?;
        let mut sr = Series::default();
        for i in 0..WARMUP + reps {
            self.probe(out.at(count * per * 8), BLOCKER_SPIN_NS)?;
            match &graph {
                Some(g) => g.launch()?,
                None => {
                    self.dev.memcpy_htod_async(meta.ptr, &meta_host)?;
                    self.enqueue_probes(&start, &probes, false, spin_ns, shaped)?
                }
            }
            last.synchronize()?;
            let all: Vec<u64> = out.read(count * per, &self.dev.stream)?;
            for (k, (a, b, _)) in probes.iter().enumerate() {
                let elapsed = ns(a.elapsed_ms(b)?);
                let grid = if k == 0 { lead_shape.grid } else { shape.grid } as usize;
                let t = extent(&all[per * k..per * k + 3 * grid]);
                // The probe's own time runs to t2, after its stores are visible: CUPTI counts
                // a kernel's final stores as kernel time, so they are no part of the latency.
                let spun = t[2].wrapping_sub(t[0]) as i64;
                sr.tails.push(t[2].wrapping_sub(t[1]) as i64);
                if i >= WARMUP {
                    if k == 0 {
                        sr.first.push(elapsed - spun);
                        sr.first_probe.push(spun);
                    } else {
                        sr.rest.push(elapsed - spun);
                        sr.probe.push(spun);
                    }
                }
            }
        }
        Ok(sr)
    }

    /// The later-launch latency (trimmed mean) for probes of several lengths, to see how the
    /// latency depends on a kernel's length. Recorded with the calibration, not used by it.
    pub fn latency_by_probe_length(
        &mut self,
        spins_ns: &[i64],
        reps: usize,
    ) -> Result<Vec<ProbePoint>> {
        let mut v = Vec::with_capacity(spins_ns.len());
        for &spin in spins_ns {
            let m = self.measure(spin, reps, CALIBRATION_SHAPE, 2, None)?;
            v.push(ProbePoint {
                probe_ns: m.probe_ns(),
                latency_ns: m.latency_ns(),
                first_latency_ns: m.first_latency_ns(),
            });
        }
        Ok(v)
    }

    /// The later-launch latency (trimmed mean) for probes of several launch shapes, to see how
    /// the latency depends on a kernel's grid and block. Recorded with the calibration, not
    /// used by it.
    pub fn latency_by_probe_shape(
        &mut self,
        shapes: &[(ProbeShape, usize)],
        reps: usize,
    ) -> Result<Vec<ShapePoint>> {
        let mut v = Vec::with_capacity(shapes.len());
        for &(shape, count) in shapes {
            let m = self.measure(PROBE_SPIN_NS, reps, shape, count, None)?;
            v.push(ShapePoint {
                shape,
                count,
                probe_ns: m.probe_ns(),
                latency_ns: m.latency_ns(),
                first_latency_ns: m.first_latency_ns(),
            });
        }
        Ok(v)
    }

    /// The calibration probe's latency right after a lead kernel of the decode GEMVs' shape
    /// (528 blocks of 256 threads) that spins or streams memory, against the calibration
    /// sequence itself: whether the latency a launch sees depends on the memory traffic of the
    /// kernel before it. Recorded with the calibration, not used by it.
    pub fn latency_after_lead(&mut self, reps: usize) -> Result<Vec<LeadPoint>> {
        let src = DevBuf::alloc(STREAM_BYTES)?;
        // Seeded bytes, not whatever the allocation held.
        let words: Vec<u32> = (0..STREAM_BYTES / 4)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761))
            .collect();
        self.dev.memcpy_htod_async(src.ptr, &words)?;
        self.dev.stream.synchronize()?;
        let gemv = ProbeShape {
            grid: 528,
            block: 256,
        };
        let mut v = Vec::new();
        for lead in [None, Some(LeadKind::Spin), Some(LeadKind::Stream)] {
            let l = lead.map(|kind| Lead {
                kind,
                shape: gemv,
                src: src.ptr,
                n16: (STREAM_BYTES / 16) as i64,
            });
            let m = self.measure(PROBE_SPIN_NS, reps, CALIBRATION_SHAPE, 2, l)?;
            v.push(LeadPoint {
                lead,
                lead_shape: l.map_or(CALIBRATION_SHAPE, |l| l.shape),
                lead_ns: summarize(&m.first_probe).map_or(0, |s| s.0),
                latency_ns: m.latency_ns(),
                lead_latency_ns: m.first_latency_ns(),
            });
        }
        Ok(v)
    }

    /// The calibration sequence: a step-like start event, then each probe between its pair.
    fn enqueue_probes(
        &self,
        start: &CudaEvent,
        probes: &[(&CudaEvent, &CudaEvent, u64)],
        external: bool,
        spin_ns: i64,
        shaped: Shaped,
    ) -> Result<()> {
        let stream = &self.dev.stream;
        record(start, stream, external)?;
        for (k, (a, b, out)) in probes.iter().enumerate() {
            record(a, stream, external)?;
            if let (0, Some(l)) = (k, shaped.lead) {
                let args = [Arg::Ptr(*out), Arg::Ptr(shaped.scratch)];
                match l.kind {
                    LeadKind::Spin => self.dev.launch(
                        Kernel::TimingProbeGrid,
                        (l.shape.grid, 1, 1),
                        l.shape.block,
                        &[args[0], args[1], Arg::I64(spin_ns)],
                    )?,
                    LeadKind::Stream => self.dev.launch(
                        Kernel::TimingProbeStream,
                        (l.shape.grid, 1, 1),
                        l.shape.block,
                        &[
                            args[0],
                            args[1],
                            Arg::Ptr(l.src),
                            Arg::I64(l.n16),
                            Arg::I64(spin_ns),
                        ],
                    )?,
                }
            } else if shaped.shape == CALIBRATION_SHAPE {
                self.probe(*out, spin_ns)?;
            } else {
                let s = shaped.shape;
                self.dev.launch(
                    Kernel::TimingProbeGrid,
                    (s.grid, 1, 1),
                    s.block,
                    &[Arg::Ptr(*out), Arg::Ptr(shaped.scratch), Arg::I64(spin_ns)],
                )?;
            }
            record(b, stream, external)?;
        }
        Ok(())
    }

    /// Enqueues the probe (1 block of 32 threads) writing its two timer readings at `out`.
    fn probe(&self, out: u64, spin_ns: i64) -> Result<()> {
        self.dev.launch(
            Kernel::TimingProbe,
            (1, 1, 1),
            32,
            &[Arg::Ptr(out), Arg::I64(spin_ns)],
        )
    }

    /// The calibration sequence as a graph of external event-record nodes and probes,
    /// captured the way `step()` captures a decode step.
    fn capture_probes(
        &self,
        start: &CudaEvent,
        probes: &[(&CudaEvent, &CudaEvent, u64)],
        spin_ns: i64,
        shaped: Shaped,
    ) -> Result<CudaGraph> {
        let stream = &self.dev.stream;
        stream.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        let captured = self.enqueue_probes(start, probes, true, spin_ns, shaped);
        // End the capture even when a node failed, so the stream is usable afterwards.
        let graph = stream.end_capture(sys::CUgraphInstantiate_flags(0));
        captured?;
        let graph = graph?.ok_or_else(|| {
            EngineError::Cuda("stream capture of the timing probe produced no graph".into())
        })?;
        graph.upload()?;
        Ok(graph)
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
    fn a_probes_extent_spans_its_blocks() {
        // One block: its own words.
        assert_eq!(extent(&[100, 20_100, 20_400]), [100, 20_100, 20_400]);
        // Blocks starting and ending at different times: first start, last ends.
        assert_eq!(
            extent(&[
                150, 20_150, 20_300, 100, 20_100, 20_500, 130, 20_200, 20_250
            ]),
            [100, 20_200, 20_500]
        );
        assert_eq!(extent(&[]), [0, 0, 0]);
    }

    #[test]
    fn the_shape_series_starts_with_the_calibrations_own() {
        assert_eq!(PROBE_SHAPES[0], (CALIBRATION_SHAPE, 2));
        assert!(
            PROBE_SHAPES
                .iter()
                .all(|(s, n)| s.grid >= 1 && s.block % 32 == 0 && *n >= 2)
        );
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
