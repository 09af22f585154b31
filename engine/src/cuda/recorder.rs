//! Per-launch timing with CUDA events. Each step gets a pool of events: one at the step's start
//! and end, and (in `Timing::Launch`) one pair per launch. Pools alternate so the events of step
//! t are read while step t+1 runs; a CUDA graph captures its pool's events as external event
//! record nodes, so replays are timed too.
//!
//! An event pair around a launch measures the kernel plus the latency of the event records
//! themselves (about 3 µs per launch for external event nodes on an H200, against CUPTI's
//! kernel durations), which would make a 3.6 µs norm look 80% slower. `event_latency_ns`, the
//! latency calibrated at run time on a probe kernel of known duration
//! (`CudaBackend::calibrate_event_latency`), is taken off each timed launch: half from its
//! start, half from its end, so the launch stays centred where the events put it. Step start
//! and end (the step pair) stay raw: they bound the whole step, not one launch.

use crate::error::{EngineError, Result};
use crate::records::{LaunchMeta, StepRecord, TimedLaunch};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream, sys};
use gapscope_traces::Phase;
use std::sync::Arc;

/// How much the engine times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Timing {
    /// No events at all (the throughput baseline).
    Off,
    /// One event pair per step.
    Step,
    /// One event pair per launch, plus the step pair.
    Launch,
}

/// The events of one step.
pub struct Pool {
    start: CudaEvent,
    end: CudaEvent,
    pairs: Vec<(CudaEvent, CudaEvent)>,
}

/// What a step is, as its marker will say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepInfo {
    /// The marker's name (`records::phase_marker` for plain prefill and decode).
    pub marker: &'static str,
    pub phase: Phase,
    pub step: i64,
    pub batch: u32,
    pub tokens: u32,
    /// The CUDA graph that replays it, 0 when issued eagerly.
    pub graph_id: u32,
}

/// A step whose events are enqueued but not read yet.
struct Pending {
    pool: usize,
    timing: Timing,
    info: StepInfo,
    metas: Vec<LaunchMeta>,
}

pub struct Recorder {
    pub timing: Timing,
    /// With `Timing::Launch`, time every launch of one decode step in this many (prefill
    /// always); the others get a step event pair. Event record nodes cost about 2 µs each in
    /// a graph, so timing every step of a 260-launch decode costs far more than sampling.
    pub sample_every: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    origin: Option<CudaEvent>,
    pools: Vec<Pool>,
    free: Vec<usize>,
    pending: std::collections::VecDeque<Pending>,
    /// The step being issued.
    current: Option<Pending>,
    /// While capturing a graph, events become external record nodes.
    pub capturing: bool,
    pub done: Vec<StepRecord>,
    /// Latency of one launch's event pair (ns), taken off each `Timing::Launch` launch in
    /// `harvest`; 0 = not calibrated (raw event times).
    pub event_latency_ns: i64,
    /// The same for the first launch of a step (its pair follows the step's start event).
    pub event_latency_first_ns: i64,
}

/// Moves a launch's event times inward by half the event latency each, so `end - start`
/// estimates the kernel alone. Never inverts the interval: a launch that measured shorter than
/// the latency collapses to its midpoint (zero length) rather than going negative.
pub fn corrected_launch(start_ns: i64, end_ns: i64, latency_ns: i64) -> (i64, i64) {
    if latency_ns <= 0 || end_ns < start_ns {
        return (start_ns, end_ns);
    }
    if end_ns - start_ns <= latency_ns {
        let mid = start_ns + (end_ns - start_ns) / 2;
        return (mid, mid);
    }
    let head = latency_ns / 2;
    (start_ns + head, end_ns - (latency_ns - head))
}

/// Records `ev` on `stream`; `external` makes it an external event-record node while the
/// stream is being captured (how a graph replay keeps timing its launches).
pub(crate) fn record(ev: &CudaEvent, stream: &CudaStream, external: bool) -> Result<()> {
    // SAFETY: both handles are live; the event belongs to the stream's context.
    let r = unsafe {
        if external {
            sys::cuEventRecordWithFlags(
                ev.cu_event(),
                stream.cu_stream(),
                sys::CUevent_record_flags::CU_EVENT_RECORD_EXTERNAL as u32,
            )
        } else {
            sys::cuEventRecord(ev.cu_event(), stream.cu_stream())
        }
    };
    Ok(r.result()?)
}

impl Recorder {
    pub fn new(ctx: Arc<CudaContext>, stream: Arc<CudaStream>, timing: Timing) -> Self {
        Self {
            timing,
            sample_every: 1,
            ctx,
            stream,
            origin: None,
            pools: Vec::new(),
            free: Vec::new(),
            pending: Default::default(),
            current: None,
            capturing: false,
            done: Vec::new(),
            event_latency_ns: 0,
            event_latency_first_ns: 0,
        }
    }

    fn event(&self) -> Result<CudaEvent> {
        Ok(self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?)
    }

    /// Records the run's time origin (call once, before the first step).
    pub fn start_run(&mut self) -> Result<()> {
        if self.timing == Timing::Off {
            return Ok(());
        }
        let ev = self.event()?;
        record(&ev, &self.stream, false)?;
        self.origin = Some(ev);
        Ok(())
    }

    /// A pool to use for the next step; `reserved` pins one (a graph owns its pool).
    pub fn take_pool(&mut self) -> Result<usize> {
        if let Some(p) = self.free.pop() {
            return Ok(p);
        }
        self.pools.push(Pool {
            start: self.event()?,
            end: self.event()?,
            pairs: Vec::new(),
        });
        Ok(self.pools.len() - 1)
    }

    /// The timing a step gets under the current mode and sampling.
    pub fn step_timing(&self, phase: Phase, step: i64) -> Timing {
        match self.timing {
            Timing::Launch
                if phase == Phase::Prefill
                    || step.rem_euclid(self.sample_every.max(1) as i64) == 0 =>
            {
                Timing::Launch
            }
            Timing::Launch => Timing::Step,
            t => t,
        }
    }

    pub fn begin_step(&mut self, pool: usize, timing: Timing, info: StepInfo) -> Result<()> {
        if timing != Timing::Off {
            record(&self.pools[pool].start, &self.stream, self.capturing)?;
        }
        self.current = Some(Pending {
            pool,
            timing,
            info,
            metas: Vec::new(),
        });
        Ok(())
    }

    /// Call before issuing a launch; returns its index in the step.
    /// Whether the current step puts an event pair around every launch.
    pub fn times_launches(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|c| c.timing == Timing::Launch)
    }

    pub fn before_launch(&mut self) -> Result<usize> {
        let cur = self
            .current
            .as_ref()
            .ok_or_else(|| EngineError::invalid("launch outside a step"))?;
        let i = cur.metas.len();
        let pool = cur.pool;
        if cur.timing == Timing::Launch {
            while self.pools[pool].pairs.len() <= i {
                let pair = (self.event()?, self.event()?);
                self.pools[pool].pairs.push(pair);
            }
            record(&self.pools[pool].pairs[i].0, &self.stream, self.capturing)?;
        }
        Ok(i)
    }

    pub fn after_launch(&mut self, i: usize, meta: LaunchMeta) -> Result<()> {
        let cur = self
            .current
            .as_mut()
            .ok_or_else(|| EngineError::invalid("launch outside a step"))?;
        debug_assert_eq!(cur.metas.len(), i);
        cur.metas.push(meta);
        if cur.timing == Timing::Launch {
            record(
                &self.pools[cur.pool].pairs[i].1,
                &self.stream,
                self.capturing,
            )?;
        }
        Ok(())
    }

    /// Ends the step being issued. Returns its launch list (what a graph capture replays).
    pub fn end_step(&mut self) -> Result<Vec<LaunchMeta>> {
        let cur = self
            .current
            .take()
            .ok_or_else(|| EngineError::invalid("end_step without begin_step"))?;
        if cur.timing != Timing::Off {
            record(&self.pools[cur.pool].end, &self.stream, self.capturing)?;
        }
        let metas = cur.metas.clone();
        if !self.capturing {
            self.pending.push_back(cur);
        }
        Ok(metas)
    }

    /// Registers a replayed graph step: its events were recorded by the graph's nodes.
    pub fn replayed(
        &mut self,
        pool: usize,
        timing: Timing,
        info: StepInfo,
        metas: Vec<LaunchMeta>,
    ) {
        self.pending.push_back(Pending {
            pool,
            timing,
            info,
            metas,
        });
    }

    /// Reads finished steps, keeping at most `keep` pending (so the GPU stays busy).
    pub fn harvest(&mut self, keep: usize, graph_pools: &[usize]) -> Result<()> {
        while self.pending.len() > keep {
            let Some(p) = self.pending.pop_front() else {
                break;
            };
            let mut rec = StepRecord {
                marker: p.info.marker,
                phase: p.info.phase,
                step: p.info.step,
                batch: p.info.batch,
                tokens: p.info.tokens,
                gpu_start_ns: 0,
                gpu_end_ns: 0,
                launches: Vec::with_capacity(p.metas.len()),
                graph_id: p.info.graph_id,
                launch_timed: p.timing == Timing::Launch,
            };
            if p.timing != Timing::Off {
                let pool = &self.pools[p.pool];
                pool.end.synchronize()?;
                let origin = self
                    .origin
                    .as_ref()
                    .ok_or_else(|| EngineError::invalid("start_run was not called"))?;
                let base_ms = f64::from(origin.elapsed_ms(&pool.start)?);
                let ns = |ms: f64| (ms * 1e6).round() as i64;
                rec.gpu_start_ns = ns(base_ms);
                rec.gpu_end_ns = ns(base_ms + f64::from(pool.start.elapsed_ms(&pool.end)?));
                for (i, meta) in p.metas.into_iter().enumerate() {
                    let (s, e) = if p.timing == Timing::Launch {
                        let (a, b) = &pool.pairs[i];
                        (
                            base_ms + f64::from(pool.start.elapsed_ms(a)?),
                            base_ms + f64::from(pool.start.elapsed_ms(b)?),
                        )
                    } else {
                        (base_ms, base_ms)
                    };
                    let (s, e) = if p.timing == Timing::Launch {
                        let latency = if i == 0 {
                            self.event_latency_first_ns
                        } else {
                            self.event_latency_ns
                        };
                        corrected_launch(ns(s), ns(e), latency)
                    } else {
                        (ns(s), ns(e))
                    };
                    rec.launches.push(TimedLaunch {
                        meta,
                        gpu_start_ns: s,
                        gpu_end_ns: e,
                    });
                }
            } else {
                rec.launches = p
                    .metas
                    .into_iter()
                    .map(|meta| TimedLaunch {
                        meta,
                        gpu_start_ns: 0,
                        gpu_end_ns: 0,
                    })
                    .collect();
            }
            if !graph_pools.contains(&p.pool) && !self.free.contains(&p.pool) {
                self.free.push(p.pool);
            }
            self.done.push(rec);
        }
        Ok(())
    }

    /// Reads everything still pending (end of a run).
    pub fn flush(&mut self, graph_pools: &[usize]) -> Result<()> {
        self.stream.synchronize()?;
        self.harvest(0, graph_pools)
    }
}

#[cfg(test)]
mod tests {
    use super::corrected_launch;

    #[test]
    fn uncalibrated_latency_changes_nothing() {
        assert_eq!(corrected_launch(1_000, 5_000, 0), (1_000, 5_000));
        assert_eq!(corrected_launch(1_000, 5_000, -300), (1_000, 5_000));
    }

    #[test]
    fn latency_comes_off_both_ends_by_half() {
        // 6.6 µs measured, 3.0 µs latency: 3.6 µs of kernel, centred where the events were.
        assert_eq!(corrected_launch(10_000, 16_600, 3_000), (11_500, 15_100));
        // An odd latency is still taken off in full.
        let (s, e) = corrected_launch(0, 10_000, 3_001);
        assert_eq!(e - s, 10_000 - 3_001);
        assert_eq!((s, e), (1_500, 8_499));
    }

    #[test]
    fn a_launch_shorter_than_the_latency_collapses_to_its_midpoint() {
        assert_eq!(corrected_launch(2_000, 4_000, 3_000), (3_000, 3_000));
        assert_eq!(corrected_launch(2_000, 5_000, 3_000), (3_500, 3_500));
        assert_eq!(corrected_launch(7, 7, 3_000), (7, 7));
        // Odd length: the midpoint rounds toward the start, end never precedes start.
        let (s, e) = corrected_launch(0, 3, 3_000);
        assert_eq!((s, e), (1, 1));
    }

    #[test]
    fn end_never_precedes_start() {
        for len in [0i64, 1, 2, 999, 1_000, 1_001, 2_999, 3_000, 3_001, 50_000] {
            for lat in [0i64, 1, 2, 1_000, 2_999, 3_000, 3_001, 20_000] {
                let (s, e) = corrected_launch(123_456, 123_456 + len, lat);
                assert!(e >= s, "len {len} latency {lat}: {s}..{e}");
                assert!(
                    s >= 123_456 && e <= 123_456 + len,
                    "stays inside the raw interval"
                );
            }
        }
    }

    #[test]
    fn an_already_inverted_interval_is_left_alone() {
        assert_eq!(corrected_launch(5_000, 4_000, 3_000), (5_000, 4_000));
    }
}
