//! The CUDA backend (cudarc, dynamically loaded: it builds with no CUDA toolkit and fails with
//! a clear message at run time on a machine without a GPU).
pub mod attention_args;
pub mod attention_shape;
pub mod backend;
pub mod device;
pub mod event_latency;
pub mod launch;
pub mod linear;
pub mod recorder;
pub mod weights;

pub use backend::{Capacity, CudaBackend, StepSpec};
pub use device::{DevBuf, Device, DeviceInfo, KernelSource};
pub use event_latency::LatencyCalibration;
pub use recorder::Timing;
