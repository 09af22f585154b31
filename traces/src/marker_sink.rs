//! The seam through which the engine reports step and phase ranges to whatever records the
//! run (the native writer, or NVTX under the CUPTI recorder) without depending on it.

use crate::tables::Phase;

/// One step or phase range as the engine sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct StepMarker {
    pub name: String,
    pub phase: Phase,
    pub step: i64,
    pub batch_size: u32,
    pub tokens: u32,
    pub gpu_start_ns: i64,
    pub gpu_end_ns: i64,
}

/// Receives markers; implementors decide where they go.
pub trait MarkerSink {
    fn marker(&mut self, marker: StepMarker);
}

/// A sink that keeps markers in memory, for tests and for the engine's own trace writer.
#[derive(Debug, Default)]
pub struct VecMarkerSink {
    pub markers: Vec<StepMarker>,
}

impl MarkerSink for VecMarkerSink {
    fn marker(&mut self, marker: StepMarker) {
        self.markers.push(marker);
    }
}
