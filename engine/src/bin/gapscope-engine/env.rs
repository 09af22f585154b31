//! The environment `gapscope-engine` reads, each variable named once (the library reads
//! none), and the device opened with the settings it gives.

use gapscope_engine::Result;
use gapscope_engine::cuda::{Device, KernelSource};
use std::path::PathBuf;

/// The environment variables `gapscope-engine` reads.
pub struct EnvVars;

impl EnvVars {
    /// Directory of the on-disk NVRTC cache (default: `$XDG_CACHE_HOME/gapscope/kernels`, else
    /// `$HOME/.cache/gapscope/kernels`, else the system temp directory).
    pub const GAPSCOPE_KERNEL_CACHE: &str = "GAPSCOPE_KERNEL_CACHE";
    /// A directory whose `{module}.cu` / `common.cuh` replace the built-in kernel sources
    /// (kernel A/B runs without a rebuild).
    pub const GAPSCOPE_KERNEL_DIR: &str = "GAPSCOPE_KERNEL_DIR";
    /// `KW:SPLITS`: pins decode attention's key lanes and splits, as
    /// `--dispatch attention_shape=KW:SPLITS` does (which wins when both are given).
    pub const GAPSCOPE_ATTENTION_SHAPE: &str = "GAPSCOPE_ATTENTION_SHAPE";
    /// Base of the default kernel cache.
    pub const XDG_CACHE_HOME: &str = "XDG_CACHE_HOME";
    /// Base of the default kernel cache when `XDG_CACHE_HOME` is unset.
    pub const HOME: &str = "HOME";
}

/// The kernel sources and cache this run uses, from the environment.
#[expect(
    clippy::disallowed_methods,
    reason = "the binary reads its environment and hands the library typed settings"
)]
fn kernel_source() -> KernelSource {
    let var = |k: &str| std::env::var_os(k).map(PathBuf::from);
    KernelSource {
        dir: var(EnvVars::GAPSCOPE_KERNEL_DIR),
        cache: Some(var(EnvVars::GAPSCOPE_KERNEL_CACHE).unwrap_or_else(|| {
            KernelSource::default_cache(var(EnvVars::XDG_CACHE_HOME), var(EnvVars::HOME))
        })),
    }
}

/// GAPSCOPE_ATTENTION_SHAPE, if set: a `--dispatch` override (`attention_shape=VALUE`).
#[expect(
    clippy::disallowed_methods,
    reason = "the binary reads its environment and hands the library typed settings"
)]
pub fn attention_shape_override() -> Option<String> {
    std::env::var(EnvVars::GAPSCOPE_ATTENTION_SHAPE)
        .ok()
        .map(|v| format!("attention_shape={v}"))
}

/// Opens GPU `ordinal` with the kernel source of `kernel_source()`, naming any module read from
/// `GAPSCOPE_KERNEL_DIR`.
pub fn open_device(ordinal: usize) -> Result<Device> {
    let source = kernel_source();
    let dev = Device::open_with(ordinal, &source)?;
    if let Some(dir) = &source.dir {
        for m in &dev.modules_from_dir {
            eprintln!("kernels: {m} from {}", dir.display());
        }
    }
    Ok(dev)
}
