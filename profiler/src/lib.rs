//! gapscope's recorder: a CUPTI injection library that spools activity records from any
//! CUDA process, the `gapscope-record` launcher that runs the process and turns the spool
//! into a native trace, and the NVML sampler whose telemetry lands in the same trace.
//!
//! The pieces are split so that everything but the CUPTI and NVML runtime paths is tested
//! without a GPU: the spool format, record decoding (from byte fixtures), trace assembly,
//! the sampler (with a fake source) and the launcher's argument handling.

pub mod assemble;
pub mod collect_range;
pub mod cupti_lib;
pub mod decode;
pub mod driver_devices;
pub mod error;
pub mod inject;
pub mod late_attach;
pub mod layout;
pub mod nvml;
pub mod spool;

pub use error::RecordError;
