//! llama-batched-bench-style runs on the CUDA backend: npl sequences, a prompt of npp tokens,
//! a prefill, then ntg decode steps; S_PP, S_TG, TTFT and TPOT with their spread over repeats,
//! per-bucket ms/step, the md5 of the greedy tokens, and the weight-read floor.

use crate::cuda::{CudaBackend, DevBuf, Device, LatencyCalibration, Timing};
use crate::error::{EngineError, Result};
use crate::model::Batch;
use crate::records::StepRecord;
use crate::rng;
use cudarc::driver::sys;
use gapscope_traces::Phase;
use gapscope_traces::stats::Summary;
use md5::{Digest, Md5};
use std::collections::BTreeMap;

#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchSettings {
    pub npl: Vec<usize>,
    pub npp: usize,
    pub ntg: usize,
    pub reps: usize,
    pub warmup: usize,
    pub seed: u64,
    /// Tokenized prompt text, tiled to npp for every sequence; seeded random ids when absent.
    #[serde(skip)]
    pub prompt: Option<Vec<i32>>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchRow {
    pub npl: usize,
    pub s_pp: Summary,
    pub s_tg: Summary,
    pub ttft_ms: Summary,
    pub tpot_ms: Summary,
    /// md5 of the greedy tokens (prefill's then each decode step's, sequence-major).
    pub md5: String,
    /// Every repeat produced the same tokens.
    pub md5_stable: bool,
    /// Median decode ms/step per bucket (needs per-launch timing).
    pub bucket_ms: BTreeMap<String, f64>,
    /// Which kernel family the linears used at this batch.
    pub linear_path: String,
    /// Weights read per decode step and the floor that implies at the measured bandwidth.
    pub weight_bytes_per_step: u64,
    pub weight_floor_ms: Option<f64>,
    pub pct_of_weight_floor: Option<f64>,
}

/// A GPU timer from two events around enqueued work.
pub(crate) struct Span {
    a: cudarc::driver::CudaEvent,
    b: cudarc::driver::CudaEvent,
}

impl Span {
    pub(crate) fn new(dev: &Device) -> Result<Self> {
        let ev = || {
            dev.ctx
                .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))
        };
        Ok(Self { a: ev()?, b: ev()? })
    }
    pub(crate) fn start(&self, dev: &Device) -> Result<()> {
        self.a.record(&dev.stream)?;
        Ok(())
    }
    pub(crate) fn stop_ms(&self, dev: &Device) -> Result<f64> {
        self.b.record(&dev.stream)?;
        self.b.synchronize()?;
        Ok(f64::from(self.a.elapsed_ms(&self.b)?))
    }
}

/// Device-to-device copy bandwidth (bytes read + written per second), median of `reps`
/// copies of `bytes`, measured with CUDA events. The floor the bench reports against.
pub fn copy_bandwidth(dev: &Device, bytes: usize, reps: usize) -> Result<Summary> {
    let src = DevBuf::alloc(bytes)?;
    let dst = DevBuf::alloc(bytes)?;
    // Non-zero, seeded contents (a pattern fill would do as well for a copy).
    let pattern: Vec<u32> = (0..bytes / 4)
        .map(|i| rng::uniform(1, 2, i as u64).to_bits())
        .collect();
    src.write(&pattern, &dev.stream)?;
    let span = Span::new(dev)?;
    dev.memcpy_dtod(dst.ptr, src.ptr, bytes)?; // warm-up
    let mut bw = Vec::new();
    for _ in 0..reps {
        span.start(dev)?;
        dev.memcpy_dtod(dst.ptr, src.ptr, bytes)?;
        let ms = span.stop_ms(dev)?;
        bw.push(2.0 * bytes as f64 / (ms * 1e-3));
    }
    Ok(Summary::of(&bw))
}

/// Repeats of the event-latency calibration the bench runs.
pub const EVENT_LATENCY_REPS: usize = 200;

/// Calibrates the per-launch event latency once, when a mode times launches and `raw` (the
/// `--raw-event-timing` flag) does not ask for raw event times; `None` when not calibrated.
pub fn calibrate_event_latency(
    be: &mut CudaBackend,
    modes: &[Timing],
    raw: bool,
) -> Result<Option<LatencyCalibration>> {
    if raw || !modes.contains(&Timing::Launch) {
        return Ok(None);
    }
    be.calibrate_event_latency(EVENT_LATENCY_REPS).map(Some)
}

/// The line the bench prints about the calibration.
pub fn event_latency_line(c: &LatencyCalibration) -> String {
    format!(
        "event latency: {:.2} us mean, {:.2} us median ({:.2}-{:.2}, n={}, stream records; {:.2} us for a step's first launch), subtracted from each timed launch",
        us(c.mean_ns),
        us(c.median_ns),
        us(c.min_ns),
        us(c.max_ns),
        c.n,
        us(c.first_mean_ns)
    )
}

/// ns as us.
fn us(ns: i64) -> f64 {
    ns as f64 / 1e3
}

/// Prompt tokens for sequence `s` of repeat `rep`.
pub fn prompts(seed: u64, rep: usize, npl: usize, npp: usize, vocab: usize) -> Vec<Vec<i32>> {
    (0..npl)
        .map(|s| rng::tokens(seed, (rep * 1_000_003 + s) as u64, npp, vocab))
        .collect()
}

/// One prefill plus `ntg` decode steps; returns (prefill ms, decode ms, tokens).
pub fn run_once(
    be: &mut CudaBackend,
    prompts: &[Vec<i32>],
    ntg: usize,
    step0: i64,
) -> Result<(f64, f64, Vec<i32>)> {
    let npl = prompts.len();
    let npp = prompts[0].len();
    be.reset();
    let history = DevBuf::alloc((ntg + 1) * npl * 4)?;
    let span = Span::new(&be.dev)?;
    let pre = Batch::prefill(prompts);
    be.set_tokens(&pre.tokens)?;
    span.start(&be.dev)?;
    be.step(&pre, Phase::Prefill, step0)?;
    let t_pp = span.stop_ms(&be.dev)?;
    be.dev.memcpy_dtod(history.ptr, be.sampled_ptr(), npl * 4)?;
    span.start(&be.dev)?;
    for i in 0..ntg {
        let b = Batch::decode(vec![0; npl], vec![(npp + i) as i32; npl]);
        be.step(&b, Phase::Decode, step0 + 1 + i as i64)?;
        be.dev
            .memcpy_dtod(history.at((i + 1) * npl * 4), be.sampled_ptr(), npl * 4)?;
    }
    let t_tg = span.stop_ms(&be.dev)?;
    be.finish_steps()?;
    let h: Vec<i32> = history.read((ntg + 1) * npl, &be.dev.stream)?;
    // Reorder step-major -> sequence-major for the md5.
    let mut tokens = Vec::with_capacity(h.len());
    for s in 0..npl {
        for step in 0..=ntg {
            tokens.push(h[step * npl + s]);
        }
    }
    Ok((t_pp, t_tg, tokens))
}

pub fn md5_hex(tokens: &[i32]) -> String {
    let mut m = Md5::new();
    for t in tokens {
        m.update(t.to_le_bytes());
    }
    m.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

/// Median decode ms/step per bucket over the given steps.
pub fn bucket_ms(steps: &[StepRecord]) -> BTreeMap<String, f64> {
    let decode: Vec<&StepRecord> = steps
        .iter()
        .filter(|s| s.phase == Phase::Decode && s.launch_timed)
        .collect();
    let mut per: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for s in &decode {
        let mut acc: BTreeMap<&str, f64> = BTreeMap::new();
        for l in &s.launches {
            *acc.entry(l.meta.bucket).or_default() += (l.gpu_end_ns - l.gpu_start_ns) as f64 / 1e6;
        }
        for (k, v) in acc {
            per.entry(k.to_owned()).or_default().push(v);
        }
    }
    per.into_iter()
        .map(|(k, v)| (k, Summary::of(&v).median))
        .collect()
}

/// Runs the sweep. `on_step_records` receives each repeat's step records (for the trace).
pub fn run(
    be: &mut CudaBackend,
    s: &BenchSettings,
    copy_bw: Option<f64>,
    mut on_records: impl FnMut(&[StepRecord]) -> Result<()>,
    mut progress: impl FnMut(&str),
) -> Result<Vec<BenchRow>> {
    let vocab = be.cfg.vocab;
    let mut rows = Vec::new();
    let mut step0 = 0i64;
    be.rec.start_run()?;
    for &npl in &s.npl {
        if npl > be.cap.max_seqs {
            return Err(EngineError::invalid(format!(
                "npl {npl} exceeds the allocated {} sequences",
                be.cap.max_seqs
            )));
        }
        let (mut pp, mut tg, mut ttft, mut tpot) = (vec![], vec![], vec![], vec![]);
        let mut md5s: Vec<String> = Vec::new();
        let mut buckets: Vec<BTreeMap<String, f64>> = Vec::new();
        for rep in 0..s.warmup + s.reps {
            // The same prompts every repeat, so the greedy md5 must repeat too.
            let p = match &s.prompt {
                Some(t) if !t.is_empty() => {
                    vec![t.iter().copied().cycle().take(s.npp).collect::<Vec<_>>(); npl]
                }
                _ => prompts(s.seed, 0, npl, s.npp, vocab),
            };
            be.rec.done.clear();
            let (t_pp, t_tg, tokens) = run_once(be, &p, s.ntg, step0)?;
            step0 += 1 + s.ntg as i64;
            let records = std::mem::take(&mut be.rec.done);
            if rep < s.warmup {
                continue;
            }
            md5s.push(md5_hex(&tokens));
            pp.push((npl * s.npp) as f64 / (t_pp * 1e-3));
            tg.push((npl * s.ntg) as f64 / (t_tg * 1e-3));
            ttft.push(t_pp);
            tpot.push(t_tg / s.ntg as f64);
            if be.rec.timing == Timing::Launch {
                buckets.push(bucket_ms(&records));
            }
            on_records(&records)?;
            progress(&format!(
                "npl {npl} rep {}/{}: S_TG {:.1} t/s, TPOT {:.3} ms",
                rep + 1 - s.warmup,
                s.reps,
                tg.last().copied().unwrap_or(0.0),
                tpot.last().copied().unwrap_or(0.0)
            ));
        }
        let mut bucket_ms = BTreeMap::new();
        if let Some(first) = buckets.first() {
            for k in first.keys() {
                let v: Vec<f64> = buckets.iter().filter_map(|b| b.get(k).copied()).collect();
                bucket_ms.insert(k.clone(), Summary::of(&v).median);
            }
        }
        let tpot_s = Summary::of(&tpot);
        let wbytes = be.weight_bytes_per_step(npl);
        let floor = copy_bw.map(|bw| wbytes as f64 / bw * 1e3);
        rows.push(BenchRow {
            npl,
            s_pp: Summary::of(&pp),
            s_tg: Summary::of(&tg),
            ttft_ms: Summary::of(&ttft),
            tpot_ms: tpot_s,
            md5_stable: md5s.windows(2).all(|w| w[0] == w[1]),
            md5: md5s.into_iter().next().unwrap_or_default(),
            bucket_ms,
            linear_path: format!("{:?}", be.levers.dispatch.path(be.w_format(), npl)),
            weight_bytes_per_step: wbytes,
            weight_floor_ms: floor,
            pct_of_weight_floor: floor.map(|f| 100.0 * f / tpot_s.median),
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A calibration as the bench prints it.
    fn calibration() -> LatencyCalibration {
        LatencyCalibration {
            median_ns: 3_040,
            min_ns: 2_910,
            max_ns: 3_220,
            n: 50,
            probe_ns: 20_000,
            store_tail_ns: 0,
            first_mean_ns: 2_800,
            mean_ns: 3_050,
        }
    }

    #[test]
    fn event_latency_line_reads_in_microseconds() {
        let c = calibration();
        assert_eq!(
            event_latency_line(&c),
            "event latency: 3.05 us mean, 3.04 us median (2.91-3.22, n=50, stream records; 2.80 us for a step's first launch), subtracted from each timed launch"
        );
    }
}
