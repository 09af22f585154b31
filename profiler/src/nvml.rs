//! NVML telemetry in the launcher: a thread samples clocks, power, temperature,
//! utilisation and throttle reasons at a fixed interval while the child runs. The source is
//! a trait so the sampler is tested with a fake; without NVML the recorder still records
//! kernels and says "no NVML" in the trace.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One telemetry reading of one GPU, on the host's realtime clock.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// The source's device index (NVML index).
    pub index: u32,
    pub realtime_ns: i64,
    pub sm_clock_mhz: u32,
    pub mem_clock_mhz: u32,
    pub power_mw: u32,
    pub temperature_c: u32,
    pub gpu_util_pct: u32,
    pub mem_util_pct: u32,
    pub throttle_reasons: u64,
}

/// Static facts about one GPU the source sees.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GpuFacts {
    pub index: u32,
    pub name: String,
    pub uuid: String,
    pub memory_bytes: u64,
}

/// Something that can read GPU telemetry.
pub trait SampleSource: Send {
    fn gpus(&self) -> Vec<GpuFacts>;
    /// Reads every GPU once; a GPU that fails to read is left out of this round.
    fn sample(&mut self, realtime_ns: i64) -> Vec<Sample>;
    fn driver_version(&self) -> Option<String>;
    fn cuda_driver_version(&self) -> Option<String>;
}

/// NVML through nvml-wrapper (which dlopens libnvidia-ml.so.1).
pub struct NvmlSource {
    nvml: nvml_wrapper::Nvml,
    count: u32,
}

impl NvmlSource {
    /// Opens NVML; the error text is what the trace's "no NVML" note says.
    pub fn open() -> Result<Self, String> {
        let nvml = nvml_wrapper::Nvml::init().map_err(|e| format!("no NVML: {e}"))?;
        let count = nvml
            .device_count()
            .map_err(|e| format!("no NVML: device count: {e}"))?;
        Ok(Self { nvml, count })
    }
}

impl SampleSource for NvmlSource {
    fn gpus(&self) -> Vec<GpuFacts> {
        (0..self.count)
            .filter_map(|i| {
                let d = self.nvml.device_by_index(i).ok()?;
                Some(GpuFacts {
                    index: i,
                    name: d.name().unwrap_or_default(),
                    uuid: d.uuid().unwrap_or_default(),
                    memory_bytes: d.memory_info().map(|m| m.total).unwrap_or(0),
                })
            })
            .collect()
    }

    fn sample(&mut self, realtime_ns: i64) -> Vec<Sample> {
        use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
        (0..self.count)
            .filter_map(|i| {
                let d = self.nvml.device_by_index(i).ok()?;
                let util = d.utilization_rates().ok();
                Some(Sample {
                    index: i,
                    realtime_ns,
                    sm_clock_mhz: d.clock_info(Clock::SM).unwrap_or(0),
                    mem_clock_mhz: d.clock_info(Clock::Memory).unwrap_or(0),
                    power_mw: d.power_usage().unwrap_or(0),
                    temperature_c: d.temperature(TemperatureSensor::Gpu).unwrap_or(0),
                    gpu_util_pct: util.as_ref().map(|u| u.gpu).unwrap_or(0),
                    mem_util_pct: util.as_ref().map(|u| u.memory).unwrap_or(0),
                    throttle_reasons: d.current_throttle_reasons().map(|r| r.bits()).unwrap_or(0),
                })
            })
            .collect()
    }

    fn driver_version(&self) -> Option<String> {
        self.nvml.sys_driver_version().ok()
    }

    fn cuda_driver_version(&self) -> Option<String> {
        let v = self.nvml.sys_cuda_driver_version().ok()?;
        Some(format!("{}.{}", v / 1000, (v % 1000) / 10))
    }
}

/// What the sampler hands back when stopped.
#[derive(Debug, Default)]
pub struct Telemetry {
    pub gpus: Vec<GpuFacts>,
    pub samples: Vec<Sample>,
    pub driver_version: Option<String>,
    pub cuda_driver_version: Option<String>,
}

/// A running sampler thread.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Telemetry>,
}

/// Realtime clock in ns (the clock the injection library's calibration pairs use).
pub fn realtime_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

impl Sampler {
    /// Samples `source` every `interval` until [`Sampler::stop`]; the first sample is taken
    /// at once. Memory grows by one row per GPU per interval (about 2 MB per GPU-hour at
    /// 100 ms).
    pub fn start(mut source: Box<dyn SampleSource>, interval: Duration) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let mut t = Telemetry {
                gpus: source.gpus(),
                driver_version: source.driver_version(),
                cuda_driver_version: source.cuda_driver_version(),
                samples: Vec::new(),
            };
            let mut next = Instant::now();
            loop {
                t.samples.extend(source.sample(realtime_ns()));
                if flag.load(Ordering::Relaxed) {
                    break;
                }
                next += interval;
                // Sleep in short slices so stopping is prompt even at long intervals.
                while Instant::now() < next && !flag.load(Ordering::Relaxed) {
                    std::thread::sleep((next - Instant::now()).min(Duration::from_millis(10)));
                }
                if Instant::now() > next + interval {
                    next = Instant::now(); // fell behind (suspended); do not burst
                }
            }
            t
        });
        Self { stop, handle }
    }

    /// Takes one last sample and returns everything gathered.
    pub fn stop(self) -> Telemetry {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A fake GPU whose SM clock steps down after a few samples.
    pub struct FakeSource {
        pub n: u32,
    }

    impl SampleSource for FakeSource {
        fn gpus(&self) -> Vec<GpuFacts> {
            vec![GpuFacts {
                index: 0,
                name: "Fake GPU".into(),
                uuid: "GPU-00000000-0000-0000-0000-000000000001".into(),
                memory_bytes: 1 << 30,
            }]
        }
        fn sample(&mut self, realtime_ns: i64) -> Vec<Sample> {
            self.n += 1;
            vec![Sample {
                index: 0,
                realtime_ns,
                sm_clock_mhz: if self.n > 3 { 1200 } else { 1980 },
                throttle_reasons: if self.n > 3 { 0x4 } else { 0 },
                ..Default::default()
            }]
        }
        fn driver_version(&self) -> Option<String> {
            Some("580.00".into())
        }
        fn cuda_driver_version(&self) -> Option<String> {
            None
        }
    }

    #[test]
    fn sampler_samples_at_its_interval_and_stops_promptly() {
        let s = Sampler::start(Box::new(FakeSource { n: 0 }), Duration::from_millis(20));
        std::thread::sleep(Duration::from_millis(210));
        let t0 = Instant::now();
        let t = s.stop();
        assert!(
            t0.elapsed() < Duration::from_millis(200),
            "stop took {:?}",
            t0.elapsed()
        );
        // About 11 samples plus the final one; a loaded CI machine may fall behind.
        assert!(
            (5..=14).contains(&t.samples.len()),
            "{} samples",
            t.samples.len()
        );
        assert!(
            t.samples
                .windows(2)
                .all(|w| w[0].realtime_ns <= w[1].realtime_ns)
        );
        assert_eq!(t.samples[4].throttle_reasons, 0x4);
        assert_eq!(t.gpus[0].name, "Fake GPU");
        assert_eq!(t.driver_version.as_deref(), Some("580.00"));
    }
}
