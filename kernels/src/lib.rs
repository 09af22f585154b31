//! CUDA C++ sources of the gapscope engine, embedded for NVRTC.
//!
//! Each module under `cuda/` holds one op family; the registry below names its kernels so the
//! engine can load them by typed handle and a test can check that every name exists in the
//! source. `common.cuh` is prepended to each module before compiling, so NVRTC needs no
//! include path. The crate is a leaf: it knows sources and names, not devices.

#![forbid(unsafe_code)]

mod registry;

pub use registry::{COMMON, Kernel, MODULES, Module, module_of, source_hash};
