//! CUDA kernel sources for the gapscope engine. Filled by the engine issue; the foundation only needs the crate to exist as a dependency-free leaf.
