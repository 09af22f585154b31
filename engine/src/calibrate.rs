//! The ceilings of the GPU the engine runs on, measured: device-to-device copy bandwidth
//! (`bench::copy_bandwidth`, the bench's own floor) and cuBLAS bf16 and int8 GEMM throughput.
//! `hw_profile` writes them as the hardware profile `gapscope roofline --hw-profile FILE`
//! reads instead of datasheet figures (`gapscope_analyzer::roofline::hw::load_profile`).
//!
//! Each figure is the median of its repeats, with min and max, timed with CUDA events on
//! seeded random data.

use crate::bench::{Span, copy_bandwidth};
use crate::cuda::{DevBuf, Device, DeviceInfo};
use crate::error::{EngineError, Result};
use cudarc::cublas::{CudaBlas, sys as blas};
use gapscope_traces::stats::Summary;

/// Bytes of each timed copy, and the copies timed.
const COPY_BYTES: usize = 1 << 30;
const COPY_REPS: usize = 20;
/// The square GEMM's size, and the GEMMs timed per dtype (after `GEMM_WARMUP`).
const GEMM_N: usize = 8192;
const GEMM_REPS: usize = 10;
const GEMM_WARMUP: usize = 3;

/// What `measure` found.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Ceilings {
    /// Bytes read plus written per second.
    pub copy_bytes_per_s: Summary,
    /// cublasGemmEx, bf16 in and out, fp32 accumulate.
    pub bf16_tflops: Summary,
    /// cublasGemmEx, int8 in, int32 accumulate and out.
    pub int8_tops: Summary,
}

/// Measures the copy bandwidth and the two GEMM throughputs on `dev`.
pub fn measure(dev: &Device) -> Result<Ceilings> {
    // cudarc panics on a missing library; check first and say which one.
    // SAFETY: is_culib_present only tries to load the library (dlopen) and reports whether it
    // could; it touches no memory of ours.
    if !unsafe { blas::is_culib_present() } {
        return Err(EngineError::Cuda(
            "no cuBLAS library (libcublas.so.13) found: add CUDA's lib directory to LD_LIBRARY_PATH"
                .into(),
        ));
    }
    let copy_bytes_per_s = copy_bandwidth(dev, COPY_BYTES, COPY_REPS)?;
    let cublas = CudaBlas::new(dev.stream.clone())?;
    let nn = GEMM_N * GEMM_N;
    use blas::cublasComputeType_t::{CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32I};
    use blas::cudaDataType_t::{CUDA_R_8I, CUDA_R_16BF, CUDA_R_32I};
    // alpha = 1, beta = 0, in each compute type.
    let (f32_scalars, i32_scalars) = ([1.0f32, 0.0], [1i32, 0]);
    let bf16 = Gemm::new(
        [CUDA_R_16BF, CUDA_R_16BF],
        2,
        CUBLAS_COMPUTE_32F,
        &f32_scalars,
    );
    let (a, b) = (random_bf16(nn, 2), random_bf16(nn, 3));
    let bf16_tflops = gemm_per_s(dev, &cublas, &bf16, &a, &b)?;
    let int8 = Gemm::new([CUDA_R_8I, CUDA_R_32I], 4, CUBLAS_COMPUTE_32I, &i32_scalars);
    let (a, b) = (random_u8(nn, 4), random_u8(nn, 5));
    let int8_tops = gemm_per_s(dev, &cublas, &int8, &a, &b)?;
    Ok(Ceilings {
        copy_bytes_per_s,
        bf16_tflops,
        int8_tops,
    })
}

/// The hardware profile `gapscope roofline --hw-profile` reads: a hardware-table entry with
/// `ceilings = "measured"`, plus each figure's spread and the method. fp8 is not measured (0).
pub fn hw_profile(info: &DeviceInfo, c: &Ceilings) -> serde_json::Value {
    serde_json::json!({
        "id": "measured",
        "name": info.name,
        "aliases": [],
        "hbm_bytes_per_s": c.copy_bytes_per_s.median,
        "bf16_tflops": c.bf16_tflops.median,
        "fp8_tflops": 0.0,
        "int8_tops": c.int8_tops.median,
        "sm_count": info.sm_count,
        "l2_bytes": info.l2_cache_bytes,
        "source": "gapscope-engine calibrate",
        "ceilings": "measured",
        "spread": {
            "copy_bytes_per_s": [c.copy_bytes_per_s.min, c.copy_bytes_per_s.max],
            "bf16_tflops": [c.bf16_tflops.min, c.bf16_tflops.max],
            "int8_tops": [c.int8_tops.min, c.int8_tops.max]
        },
        "method": format!(
            "D2D memcpy of 1 GiB x{COPY_REPS} (bytes read + written); cublasGemmEx {GEMM_N}^3 bf16 (fp32 acc) x{GEMM_REPS} and int8 (int32 acc) x{GEMM_REPS}; CUDA events; seeded random data; median"
        )
    })
}

/// One GEMM's types and scalars (alpha and beta point at values of the compute type).
struct Gemm {
    ab: blas::cudaDataType_t,
    c: blas::cudaDataType_t,
    /// Bytes of one element of C.
    c_bytes: usize,
    compute: blas::cublasComputeType_t,
    alpha: *const std::ffi::c_void,
    beta: *const std::ffi::c_void,
}

impl Gemm {
    /// `[A and B's type, C's type]`, C's element size, the compute type, and `[alpha, beta]`
    /// in the compute type (borrowed for as long as the GEMM is used).
    fn new<S>(
        [ab, c]: [blas::cudaDataType_t; 2],
        c_bytes: usize,
        compute: blas::cublasComputeType_t,
        scalars: &[S; 2],
    ) -> Self {
        Self {
            ab,
            c,
            c_bytes,
            compute,
            alpha: (&scalars[0] as *const S).cast(),
            beta: (&scalars[1] as *const S).cast(),
        }
    }
}

/// Tera-operations per second of `GEMM_REPS` square GEMMs C = A^T B on the given inputs (after
/// `GEMM_WARMUP`), each timed between events.
fn gemm_per_s<T: Copy>(
    dev: &Device,
    cublas: &CudaBlas,
    g: &Gemm,
    a: &[T],
    b: &[T],
) -> Result<Summary> {
    let n = GEMM_N as i32;
    let (a, b) = (
        DevBuf::upload(a, &dev.stream)?,
        DevBuf::upload(b, &dev.stream)?,
    );
    let c = DevBuf::alloc(GEMM_N * GEMM_N * g.c_bytes)?;
    let run = || -> Result<()> {
        // SAFETY: a and b hold n*n elements of `g.ab`, c n*n of `g.c`; alpha and beta point at
        // live values of the compute type; all outlive the call, which the stream orders.
        let st = unsafe {
            blas::cublasGemmEx(
                *cublas.handle(),
                blas::cublasOperation_t::CUBLAS_OP_T,
                blas::cublasOperation_t::CUBLAS_OP_N,
                n,
                n,
                n,
                g.alpha,
                a.ptr as *const _,
                g.ab,
                n,
                b.ptr as *const _,
                g.ab,
                n,
                g.beta,
                c.ptr as *mut _,
                g.c,
                n,
                g.compute,
                blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        st.result().map_err(EngineError::from)
    };
    for _ in 0..GEMM_WARMUP {
        run()?;
    }
    dev.stream.synchronize()?;
    let span = Span::new(dev)?;
    let ops = 2.0 * (GEMM_N as f64).powi(3);
    let mut per_s = Vec::with_capacity(GEMM_REPS);
    for _ in 0..GEMM_REPS {
        span.start(dev)?;
        run()?;
        per_s.push(ops / (span.stop_ms(dev)? / 1e3) / 1e12);
    }
    Ok(Summary::of(&per_s))
}

/// A seeded xorshift64 stream (the seed's low bit is set: the state must not be 0).
fn xorshift(seed: u64) -> impl Iterator<Item = u64> {
    let mut x = seed | 1;
    std::iter::repeat_with(move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    })
}

/// Seeded random bytes.
fn random_u8(n: usize, seed: u64) -> Vec<u8> {
    xorshift(seed).take(n).map(|x| x as u8).collect()
}

/// bf16 values in [-1, 1) from seeded random bits.
fn random_bf16(n: usize, seed: u64) -> Vec<u16> {
    xorshift(seed)
        .take(n)
        .map(|x| {
            let f = ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            (f.to_bits() >> 16) as u16
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spread(median: f64, min: f64, max: f64) -> Summary {
        Summary {
            median,
            min,
            max,
            cv: 0.0,
            n: 10,
            ..Summary::default()
        }
    }

    /// The profile carries the keys `gapscope roofline --hw-profile` reads, with the medians,
    /// and the spreads beside them.
    #[test]
    fn the_profile_has_the_hardware_table_fields() {
        let info = DeviceInfo {
            name: "NVIDIA H200".into(),
            sm_count: 132,
            compute_capability: (9, 0),
            total_memory_bytes: 150_000_000_000,
            l2_cache_bytes: 62_914_560,
            driver_version: 13000,
        };
        let c = Ceilings {
            copy_bytes_per_s: spread(4.0e12, 3.9e12, 4.1e12),
            bf16_tflops: spread(700.0, 690.0, 710.0),
            int8_tops: spread(1400.0, 1380.0, 1410.0),
        };
        let p = hw_profile(&info, &c);
        let keys: Vec<&str> = p.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "aliases",
                "bf16_tflops",
                "ceilings",
                "fp8_tflops",
                "hbm_bytes_per_s",
                "id",
                "int8_tops",
                "l2_bytes",
                "method",
                "name",
                "sm_count",
                "source",
                "spread"
            ]
        );
        assert_eq!(p["hbm_bytes_per_s"], 4.0e12);
        assert_eq!(p["bf16_tflops"], 700.0);
        assert_eq!(p["int8_tops"], 1400.0);
        assert_eq!(p["fp8_tflops"], 0.0);
        assert_eq!(p["sm_count"], 132);
        assert_eq!(p["l2_bytes"], 62_914_560);
        assert_eq!(p["ceilings"], "measured");
        assert_eq!(
            p["spread"]["int8_tops"],
            serde_json::json!([1380.0, 1410.0])
        );
        assert!(p["method"].as_str().unwrap().contains("1 GiB x20"));
    }

    #[test]
    fn random_inputs_are_seeded_and_bf16_in_range() {
        // The same stream as gapscope-calibrate's hand-rolled loop.
        let mut x = 2u64 | 1;
        let first: Vec<u8> = (0..4)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert_eq!(random_u8(4, 2), first);
        assert_eq!(random_u8(64, 4), random_u8(64, 4));
        // The seed's low bit is forced on (xorshift needs a non-zero state), so 4 and 5 are
        // the same seed, as they were in gapscope-calibrate.
        assert_eq!(random_u8(64, 4), random_u8(64, 5));
        assert_ne!(random_u8(64, 2), random_u8(64, 4));
        for h in random_bf16(1000, 2) {
            let f = f32::from_bits(u32::from(h) << 16);
            assert!((-1.0..1.0).contains(&f), "{f}");
        }
    }
}
