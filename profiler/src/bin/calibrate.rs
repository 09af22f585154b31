//! `gapscope-calibrate`: measures the ceilings of the GPU it runs on (device-to-device copy
//! bandwidth, cuBLAS bf16 and int8 GEMM throughput) and writes a hardware profile that
//! `gapscope roofline --hw-profile FILE` uses instead of datasheet figures.
//!
//! Small on purpose (cudarc with dynamic loading, no polars/sqlx/tokio) so it runs on the GPU
//! machine from a binary built elsewhere. Timing uses CUDA events around repeated launches on
//! seeded random data; each figure is the median of the repeats, with min and max.

use std::process::ExitCode;
use std::sync::Arc;

use cudarc::cublas::sys as blas;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

type Res<T> = Result<T, String>;

struct Stats {
    median: f64,
    min: f64,
    max: f64,
}

fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(|a, b| a.total_cmp(b));
    Stats {
        median: v[v.len() / 2],
        min: v[0],
        max: v[v.len() - 1],
    }
}

/// Times `f` (which enqueues work on `stream`) with CUDA events: warm-up, then `reps` runs.
fn time_ms(stream: &Arc<CudaStream>, reps: usize, mut f: impl FnMut() -> Res<()>) -> Res<Vec<f64>> {
    for _ in 0..3 {
        f()?;
    }
    stream.synchronize().map_err(|e| e.to_string())?;
    let mut out = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| e.to_string())?;
        f()?;
        let b = stream
            .record_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
            .map_err(|e| e.to_string())?;
        b.synchronize().map_err(|e| e.to_string())?;
        out.push(a.elapsed_ms(&b).map_err(|e| e.to_string())? as f64);
    }
    Ok(out)
}

fn random_u8(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// bf16 values in [-1, 1) from seeded bits.
fn random_bf16(n: usize, seed: u64) -> Vec<u16> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let f = ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
            (f.to_bits() >> 16) as u16
        })
        .collect()
}

fn check(s: blas::cublasStatus_t, what: &str) -> Res<()> {
    if s == blas::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what}: {s:?}"))
    }
}

#[allow(clippy::too_many_arguments)]
fn gemm_ex<A, C>(
    stream: &Arc<CudaStream>,
    handle: blas::cublasHandle_t,
    n: i32,
    a: &CudaSlice<A>,
    b: &CudaSlice<A>,
    c: &mut CudaSlice<C>,
    ab_type: blas::cudaDataType_t,
    c_type: blas::cudaDataType_t,
    compute: blas::cublasComputeType_t,
    alpha: *const std::ffi::c_void,
    beta: *const std::ffi::c_void,
) -> Res<()> {
    let (pa, _ga) = a.device_ptr(stream);
    let (pb, _gb) = b.device_ptr(stream);
    let (pc, _gc) = c.device_ptr_mut(stream);
    // SAFETY: the buffers hold n*n elements of the declared types and live across the call.
    let s = unsafe {
        blas::cublasGemmEx(
            handle,
            blas::cublasOperation_t::CUBLAS_OP_T,
            blas::cublasOperation_t::CUBLAS_OP_N,
            n,
            n,
            n,
            alpha,
            pa as *const _,
            ab_type,
            n,
            pb as *const _,
            ab_type,
            n,
            beta,
            pc as *mut _,
            c_type,
            n,
            compute,
            blas::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
        )
    };
    check(s, "cublasGemmEx")
}

fn run(out: Option<String>) -> Res<String> {
    // cudarc panics on a missing library; check first and say so.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("no CUDA driver library (libcuda.so) found: is this a GPU machine?".into());
    }
    if !unsafe { blas::is_culib_present() } {
        return Err(
            "no cuBLAS library found (add the CUDA lib directory to LD_LIBRARY_PATH)".into(),
        );
    }
    let ctx = CudaContext::new(0).map_err(|e| format!("CUDA device 0: {e}"))?;
    let stream = ctx.default_stream();
    let name = ctx.name().map_err(|e| e.to_string())?;
    let sms = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .map_err(|e| e.to_string())?;
    let l2 = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .map_err(|e| e.to_string())?;
    let e = |e: cudarc::driver::DriverError| e.to_string();

    // 1. Device-to-device copy, 1 GiB, counting bytes read plus written.
    let bytes = 1usize << 30;
    let src = stream.clone_htod(&random_u8(bytes, 1)).map_err(e)?;
    let mut dst = stream.alloc_zeros::<u8>(bytes).map_err(e)?;
    let copy = time_ms(&stream, 20, || {
        stream
            .memcpy_dtod(&src, &mut dst)
            .map_err(|x| x.to_string())
    })?;
    let copy_bps = stats(
        copy.iter()
            .map(|ms| 2.0 * bytes as f64 / (ms / 1e3))
            .collect(),
    );
    drop((src, dst));

    let blas_h = cudarc::cublas::CudaBlas::new(stream.clone()).map_err(|e| e.to_string())?;
    let handle = *blas_h.handle();
    let n: i32 = 8192;
    let nn = (n as usize) * (n as usize);
    let flops = 2.0 * (n as f64).powi(3);

    // 2. bf16 GEMM (fp32 accumulate).
    let a = stream.clone_htod(&random_bf16(nn, 2)).map_err(e)?;
    let b = stream.clone_htod(&random_bf16(nn, 3)).map_err(e)?;
    let mut c = stream.alloc_zeros::<u16>(nn).map_err(e)?;
    let (one, zero) = (1.0f32, 0.0f32);
    let bf16 = time_ms(&stream, 10, || {
        gemm_ex(
            &stream,
            handle,
            n,
            &a,
            &b,
            &mut c,
            blas::cudaDataType_t::CUDA_R_16BF,
            blas::cudaDataType_t::CUDA_R_16BF,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            &one as *const f32 as *const _,
            &zero as *const f32 as *const _,
        )
    })?;
    let bf16 = stats(bf16.iter().map(|ms| flops / (ms / 1e3) / 1e12).collect());
    drop((a, b, c));

    // 3. int8 GEMM (int32 accumulate).
    let a = stream.clone_htod(&random_u8(nn, 4)).map_err(e)?;
    let b = stream.clone_htod(&random_u8(nn, 5)).map_err(e)?;
    let mut c = stream.alloc_zeros::<i32>(nn).map_err(e)?;
    let (one, zero) = (1i32, 0i32);
    let int8 = time_ms(&stream, 10, || {
        gemm_ex(
            &stream,
            handle,
            n,
            &a,
            &b,
            &mut c,
            blas::cudaDataType_t::CUDA_R_8I,
            blas::cudaDataType_t::CUDA_R_32I,
            blas::cublasComputeType_t::CUBLAS_COMPUTE_32I,
            &one as *const i32 as *const _,
            &zero as *const i32 as *const _,
        )
    })?;
    let int8 = stats(int8.iter().map(|ms| flops / (ms / 1e3) / 1e12).collect());

    let profile = serde_json::json!({
        "id": "measured",
        "name": name,
        "aliases": [],
        "hbm_bytes_per_s": copy_bps.median,
        "bf16_tflops": bf16.median,
        "fp8_tflops": 0.0,
        "int8_tops": int8.median,
        "sm_count": sms,
        "l2_bytes": l2,
        "source": "gapscope-calibrate",
        "ceilings": "measured",
        "spread": {
            "copy_bytes_per_s": [copy_bps.min, copy_bps.max],
            "bf16_tflops": [bf16.min, bf16.max],
            "int8_tops": [int8.min, int8.max]
        },
        "method": "D2D memcpy of 1 GiB x20 (bytes read + written); cublasGemmEx 8192^3 bf16 (fp32 acc) x10 and int8 (int32 acc) x10; CUDA events; seeded random data; median"
    });
    let text = serde_json::to_string_pretty(&profile).map_err(|e| e.to_string())? + "\n";
    if let Some(p) = out {
        std::fs::write(&p, &text).map_err(|e| format!("{p}: {e}"))?;
    }
    Ok(format!(
        "{name} ({sms} SMs)\n  copy  {:.3} TB/s (min {:.3}, max {:.3})\n  bf16  {:.1} TFLOP/s (min {:.1}, max {:.1})\n  int8  {:.1} TOP/s (min {:.1}, max {:.1})\n",
        copy_bps.median / 1e12,
        copy_bps.min / 1e12,
        copy_bps.max / 1e12,
        bf16.median,
        bf16.min,
        bf16.max,
        int8.median,
        int8.min,
        int8.max
    ))
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let out = match (args.next().as_deref(), args.next()) {
        (Some("-o"), Some(p)) => Some(p),
        (None, _) => None,
        _ => {
            eprintln!("usage: gapscope-calibrate [-o PROFILE.json]");
            return ExitCode::from(2);
        }
    };
    match run(out) {
        Ok(s) => {
            print!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gapscope-calibrate: error: {e}");
            ExitCode::from(2)
        }
    }
}
