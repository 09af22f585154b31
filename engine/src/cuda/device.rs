//! The CUDA device: context, one stream, kernels compiled by NVRTC (cached on disk by source
//! hash and GPU arch), and raw device buffers.

use crate::error::{EngineError, Result};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, result, sys};
use cudarc::nvrtc::{CompileOptions, Ptx};
use gapscope_kernels::{Kernel, MODULES, source_hash};
use std::collections::HashMap;
use std::ffi::c_void;
use std::path::PathBuf;
use std::sync::Arc;

/// An owned device allocation, freed on drop. Raw pointers keep launches free of cudarc's
/// per-argument event bookkeeping.
pub struct DevBuf {
    pub ptr: u64,
    pub bytes: usize,
}

impl DevBuf {
    pub fn alloc(bytes: usize) -> Result<Self> {
        let bytes = bytes.max(16);
        // SAFETY: plain allocation on the current context, freed in Drop.
        let ptr = unsafe { result::malloc_sync(bytes) }?;
        Ok(Self { ptr, bytes })
    }

    pub fn upload<T: Copy>(data: &[T], stream: &CudaStream) -> Result<Self> {
        let b = Self::alloc(std::mem::size_of_val(data))?;
        b.write(data, stream)?;
        Ok(b)
    }

    /// Copies `data` to the start of the buffer, synchronously with respect to `stream`.
    pub fn write<T: Copy>(&self, data: &[T], stream: &CudaStream) -> Result<()> {
        assert!(
            std::mem::size_of_val(data) <= self.bytes,
            "upload larger than buffer"
        );
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: the destination holds at least size_of_val(data) bytes; we synchronize
        // before `data` can go away.
        unsafe {
            result::memcpy_htod_async(self.ptr, data, stream.cu_stream())?;
        }
        stream.synchronize()?;
        Ok(())
    }

    pub fn read<T: Copy + Default>(&self, n: usize, stream: &CudaStream) -> Result<Vec<T>> {
        assert!(
            n * std::mem::size_of::<T>() <= self.bytes,
            "read past buffer"
        );
        let mut out = vec![T::default(); n];
        stream.synchronize()?;
        // SAFETY: the source holds n elements of T; the copy completes before returning.
        unsafe {
            result::memcpy_dtoh_async(&mut out, self.ptr, stream.cu_stream())?;
        }
        stream.synchronize()?;
        Ok(out)
    }

    /// Byte offset into the buffer, as a device pointer.
    pub fn at(&self, byte_offset: usize) -> u64 {
        debug_assert!(byte_offset <= self.bytes);
        self.ptr + byte_offset as u64
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // SAFETY: allocated by malloc_sync and not freed elsewhere.
        unsafe {
            let _ = result::free_sync(self.ptr);
        }
    }
}

/// A kernel argument, kept alive until the launch call returns.
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    Ptr(u64),
    I32(i32),
    I64(i64),
    F32(f32),
}

impl Arg {
    fn as_param(&self) -> *mut c_void {
        match self {
            Arg::Ptr(p) => p as *const u64 as *mut c_void,
            Arg::I32(v) => v as *const i32 as *mut c_void,
            Arg::I64(v) => v as *const i64 as *mut c_void,
            Arg::F32(v) => v as *const f32 as *mut c_void,
        }
    }
}

/// Threads per block of the grid-stride kernels (the block size their occupancy assumes).
pub fn launch_block(k: Kernel) -> u32 {
    match k {
        Kernel::GemvBf16B1
        | Kernel::GemvBf16B1Swiglu
        | Kernel::GemvBf16B1Norm
        | Kernel::GemvBf16B1SwigluNorm
        | Kernel::GemvBf16
        | Kernel::GemmBf16Small
        | Kernel::MmvqQ8_0B1KSplit => 256,
        _ => 128,
    }
}

/// Facts about the GPU that reports and traces name.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DeviceInfo {
    pub name: String,
    pub sm_count: u32,
    pub compute_capability: (i32, i32),
    pub total_memory_bytes: u64,
    pub l2_cache_bytes: u64,
    pub driver_version: i32,
}

pub struct Device {
    pub ctx: Arc<CudaContext>,
    pub stream: Arc<CudaStream>,
    pub info: DeviceInfo,
    funcs: HashMap<Kernel, CudaFunction>,
    _modules: Vec<Arc<CudaModule>>,
    /// How many modules came from the on-disk cache (the rest were compiled now).
    pub cached_modules: usize,
    /// Modules whose source came (wholly or in part) from `KernelSource::dir`; the binary says
    /// so on stderr.
    pub modules_from_dir: Vec<&'static str>,
    /// Resident blocks per SM, per kernel at its `launch_block` size (grid-stride sizing).
    occupancy: HashMap<Kernel, u32>,
    /// Registers per thread and static shared memory per block, as compiled for this GPU.
    attrs: HashMap<Kernel, (u32, u32)>,
}

/// Where the kernels' CUDA source and compiled PTX come from. The library reads no environment:
/// the binary fills this from its flags and environment (`gapscope-engine`'s `EnvVars`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KernelSource {
    /// A directory whose `{module}.cu` and `common.cuh` replace the built-in sources where it
    /// has them (kernel A/B runs compare a variant without rebuilding); `None`: built-in only.
    pub dir: Option<PathBuf>,
    /// The on-disk PTX cache, keyed by source hash and GPU arch; `None` compiles every module
    /// on each open.
    pub cache: Option<PathBuf>,
}

impl KernelSource {
    /// The cache directory when none is named: `$XDG_CACHE_HOME/gapscope/kernels`, else
    /// `$HOME/.cache/gapscope/kernels`, else `gapscope-kernels` in the system temp directory.
    /// The caller passes the two variables' values.
    pub fn default_cache(xdg_cache_home: Option<PathBuf>, home: Option<PathBuf>) -> PathBuf {
        if let Some(d) = xdg_cache_home {
            return d.join("gapscope/kernels");
        }
        home.map(|h| h.join(".cache/gapscope/kernels"))
            .unwrap_or_else(|| std::env::temp_dir().join("gapscope-kernels"))
    }
}

impl Device {
    /// Opens GPU `ordinal` with the built-in kernel sources, cached in the system temp
    /// directory (`KernelSource::default_cache(None, None)`). Library callers and tests use
    /// this; the binary opens with the source its flags and environment choose (`open_with`).
    pub fn open(ordinal: usize) -> Result<Self> {
        Self::open_with(
            ordinal,
            &KernelSource {
                dir: None,
                cache: Some(KernelSource::default_cache(None, None)),
            },
        )
    }

    /// Opens GPU `ordinal` and compiles (or loads from `source.cache`) every kernel module.
    pub fn open_with(ordinal: usize, source: &KernelSource) -> Result<Self> {
        // cudarc panics on a missing library; check first and say which one.
        // SAFETY: is_culib_present only tries to load the library (dlopen) and reports whether it
        // could; it touches no memory of ours.
        if !unsafe { sys::is_culib_present() } {
            return Err(EngineError::Cuda(
                "no CUDA driver library (libcuda.so.1) found: is this a GPU machine?".into(),
            ));
        }
        // SAFETY: is_culib_present only tries to load the library (dlopen) and reports whether it
        // could; it touches no memory of ours.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return Err(EngineError::Cuda(
                "no NVRTC library (libnvrtc.so.13) found: add CUDA's lib directory to LD_LIBRARY_PATH"
                    .into(),
            ));
        }
        let ctx = CudaContext::new(ordinal)?;
        // SAFETY: the engine uses one stream and synchronizes explicitly.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream()?;
        let attr = |a| ctx.attribute(a).map(|v| v as i64);
        let cc = ctx.compute_capability()?;
        let mut driver_version = 0i32;
        // SAFETY: plain query into a local.
        unsafe { sys::cuDriverGetVersion(&mut driver_version) }.result()?;
        let info = DeviceInfo {
            name: ctx.name()?,
            sm_count: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?
                as u32,
            compute_capability: cc,
            total_memory_bytes: ctx.total_mem()? as u64,
            l2_cache_bytes: attr(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?
                as u64,
            driver_version,
        };
        let arch: &'static str = Box::leak(format!("sm_{}{}", cc.0, cc.1).into_boxed_str());
        let mut funcs = HashMap::new();
        let mut modules = Vec::new();
        let mut cached = 0;
        let mut from_dir = Vec::new();
        for m in MODULES {
            let src = match &source.dir {
                Some(dir) => {
                    let (src, used) = m
                        .source_from(dir)
                        .map_err(|e| EngineError::io(dir.join(format!("{}.cu", m.name)), e))?;
                    if used {
                        from_dir.push(m.name);
                    }
                    src
                }
                None => m.full_source(),
            };
            let key = source_hash(&[&src, arch, "v1"]);
            let path = source
                .cache
                .as_ref()
                .map(|dir| dir.join(format!("{}-{arch}-{key:016x}.ptx", m.name)));
            let ptx = match path.as_ref().map(std::fs::read_to_string) {
                Some(Ok(text)) if text.contains(".entry") => {
                    cached += 1;
                    Ptx::from_src(text)
                }
                _ => {
                    let opts = CompileOptions {
                        arch: Some(arch),
                        options: vec!["--std=c++17".into()],
                        ..Default::default()
                    };
                    let ptx = cudarc::nvrtc::compile_ptx_with_opts(&src, opts).map_err(|e| {
                        EngineError::Compile {
                            module: m.name,
                            source: e,
                        }
                    })?;
                    // The cache is an optimisation: a read-only home just compiles each run.
                    if let (Some(dir), Some(path)) = (&source.cache, &path)
                        && std::fs::create_dir_all(dir).is_ok()
                    {
                        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
                        if std::fs::write(&tmp, ptx.to_src()).is_ok() {
                            let _ = std::fs::rename(&tmp, path);
                        }
                    }
                    ptx
                }
            };
            let module = ctx.load_module(ptx)?;
            for &k in m.kernels {
                funcs.insert(k, module.load_function(k.name())?);
            }
            modules.push(module);
        }
        let mut occupancy = HashMap::new();
        let mut attrs = HashMap::new();
        for (&k, f) in &funcs {
            let (mut regs, mut smem) = (0i32, 0i32);
            // SAFETY: plain queries on a loaded function.
            unsafe {
                sys::cuFuncGetAttribute(
                    &mut regs,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS,
                    f.cu_function(),
                )
                .result()?;
                sys::cuFuncGetAttribute(
                    &mut smem,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                    f.cu_function(),
                )
                .result()?;
            }
            attrs.insert(k, (regs.max(0) as u32, smem.max(0) as u32));
            let mut n = 0i32;
            // SAFETY: a plain query on a loaded function.
            unsafe {
                sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                    &mut n,
                    f.cu_function(),
                    launch_block(k) as i32,
                    0,
                )
            }
            .result()?;
            occupancy.insert(k, n.max(1) as u32);
        }
        Ok(Self {
            ctx,
            stream,
            info,
            funcs,
            _modules: modules,
            cached_modules: cached,
            modules_from_dir: from_dir,
            occupancy,
            attrs,
        })
    }

    /// (registers per thread, static shared memory bytes) of a kernel on this GPU.
    pub fn attrs(&self, kernel: Kernel) -> (u32, u32) {
        self.attrs.get(&kernel).copied().unwrap_or((0, 0))
    }

    /// Resident blocks per SM at the kernel's `launch_block` size.
    pub fn occupancy(&self, kernel: Kernel) -> u32 {
        self.occupancy.get(&kernel).copied().unwrap_or(0)
    }

    /// A grid for a grid-stride kernel (blocks of `launch_block(kernel)` threads): see
    /// `balanced_grid`, with the resident capacity of this kernel on this GPU.
    pub fn stride_grid(&self, kernel: Kernel, work: usize, per_block: usize) -> u32 {
        let resident = self.occupancy.get(&kernel).copied().unwrap_or(1) as usize
            * self.info.sm_count as usize;
        balanced_grid(work, per_block, resident)
    }

    /// Enqueues `kernel` on the stream.
    pub fn launch(
        &self,
        kernel: Kernel,
        grid: (u32, u32, u32),
        block: u32,
        args: &[Arg],
    ) -> Result<()> {
        self.launch_ex(kernel, grid, block, args, false)
    }

    /// Whether this GPU can overlap a kernel with the one before it (programmatic dependent
    /// launch, compute capability 9.0 and later).
    pub fn supports_pdl(&self) -> bool {
        self.info.compute_capability.0 >= 9
    }

    /// Enqueues `kernel`; with `pdl` it may start before the previous kernel on the stream
    /// finishes (every engine kernel waits in `pdl_wait` before touching that kernel's data).
    pub fn launch_ex(
        &self,
        kernel: Kernel,
        grid: (u32, u32, u32),
        block: u32,
        args: &[Arg],
        pdl: bool,
    ) -> Result<()> {
        let f = self
            .funcs
            .get(&kernel)
            .ok_or_else(|| EngineError::Cuda(format!("kernel {} not loaded", kernel.name())))?;
        let mut params: Vec<*mut c_void> = args.iter().map(Arg::as_param).collect();
        if !pdl {
            // SAFETY: argument types and order follow the kernel's extern "C" signature (the
            // callers in backend.rs mirror kernels/cuda/*.cu), and `args` outlives the call.
            unsafe {
                result::launch_kernel(
                    f.cu_function(),
                    grid,
                    (block, 1, 1),
                    0,
                    self.stream.cu_stream(),
                    &mut params,
                )?;
            }
            return Ok(());
        }
        // SAFETY: an all-zero attribute is a valid value of this plain C union.
        let mut attr: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
        attr.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr.value.programmaticStreamSerializationAllowed = 1;
        let config = sys::CUlaunchConfig {
            gridDimX: grid.0,
            gridDimY: grid.1,
            gridDimZ: grid.2,
            blockDimX: block,
            blockDimY: 1,
            blockDimZ: 1,
            sharedMemBytes: 0,
            hStream: self.stream.cu_stream(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        // SAFETY: as in the plain launch; `config` and `attr` outlive the call.
        unsafe {
            sys::cuLaunchKernelEx(
                &config,
                f.cu_function(),
                params.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()?;
        Ok(())
    }

    pub fn memcpy_dtod(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        // SAFETY: callers pass pointers into live DevBufs with at least `bytes` bytes.
        unsafe { result::memcpy_dtod_async(dst, src, bytes, self.stream.cu_stream()) }?;
        Ok(())
    }

    /// Asynchronous host-to-device copy from pinned-or-not host memory; the caller keeps
    /// `data` alive and unchanged until the stream passes this point.
    pub fn memcpy_htod_async<T>(&self, dst: u64, data: &[T]) -> Result<()> {
        // SAFETY: dst holds at least size_of_val(data) bytes (checked by callers).
        unsafe { result::memcpy_htod_async(dst, data, self.stream.cu_stream()) }?;
        Ok(())
    }
}

/// Blocks for `work` units taken `per_block` at a time by a grid-stride kernel, at most
/// `resident` blocks (what fits at once), and no more blocks than the fewest passes need: with
/// 14336 rows, 4 per block and 1188 resident blocks, 896 blocks each take exactly 4 passes,
/// where 1188 blocks would leave 64 warps a fourth row after every other warp had finished
/// (a tail of about one row's latency on a 20 us GEMV).
pub fn balanced_grid(work: usize, per_block: usize, resident: usize) -> u32 {
    let units = work.div_ceil(per_block.max(1)).max(1);
    let passes = units.div_ceil(resident.max(1));
    units.div_ceil(passes) as u32
}

#[cfg(test)]
mod grid_tests {
    use super::balanced_grid;

    #[test]
    fn every_block_takes_the_same_number_of_passes_where_it_can() {
        // 8B ffn_up/gate rows on an H200 with MMVQ at 9 blocks/SM.
        assert_eq!(balanced_grid(14336, 4, 9 * 132), 896);
        // Fits in one pass: one block per unit.
        assert_eq!(balanced_grid(4096, 4, 9 * 132), 1024);
        assert_eq!(balanced_grid(3, 4, 100), 1);
        // Never more than resident, never zero.
        assert_eq!(balanced_grid(128256, 4, 1188), 1188);
        assert_eq!(balanced_grid(0, 4, 10), 1);
        assert_eq!(balanced_grid(10, 4, 0), 1);
        for (work, resident) in [(14336, 1188), (6144, 1188), (28672, 528), (100, 7)] {
            let g = balanced_grid(work, 4, resident) as usize;
            let units = work.div_ceil(4);
            assert!(g <= resident.max(1));
            // The fewest passes any grid within the resident limit allows.
            assert_eq!(units.div_ceil(g), units.div_ceil(resident));
        }
    }
}
