//! The CUPTI recorder and NVML sampler. Filled by the recorder issue; the foundation only establishes the crate and its allowed dependency (traces).
