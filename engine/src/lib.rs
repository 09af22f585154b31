//! The instrumented decode engine. Filled by the engine issue; the foundation only establishes the crate and its allowed dependencies (traces, kernels).
