//! Running a forward as a step: eagerly, or (decode with the graphs lever) captured once per
//! (rows, parity, timing) as a CUDA graph and replayed, with the launch list it recorded
//! restated for the replayed step.

use super::CudaBackend;
use crate::cuda::recorder::{StepInfo, Timing};
use crate::error::{EngineError, Result};
use crate::model::{self, Backend, Batch};
use crate::records::{LaunchMeta, phase_marker};
use cudarc::driver::{CudaGraph, sys};
use gapscope_traces::Phase;

/// What one forward is: its phase, step number and marker name, and how many of the model's
/// layers it runs (fewer for a self-speculative draft: the first `layers`, then the final
/// norm and the LM head).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSpec {
    pub phase: Phase,
    pub step: i64,
    pub marker: &'static str,
    pub layers: usize,
}

/// Graphs are keyed by (rows, sequences, layers, parity, timing): the attention layout follows
/// the sequences, so a verify's rows and as many one-row sequences are different graphs.
pub(super) type GraphKey = (usize, usize, usize, usize, Timing);

/// One captured decode step: the graph, the recorder's event pool its launches record into,
/// the launch list it recorded and its id in the trace.
pub(super) struct GraphEntry {
    graph: CudaGraph,
    pub(super) pool: usize,
    metas: Vec<LaunchMeta>,
    id: u32,
}

impl CudaBackend {
    /// Runs one forward of `batch` as a prefill or a decode step, as a CUDA graph replay when
    /// the lever is on and the step is a decode. Launch-timed decode steps run eagerly with
    /// stream event records: graph event nodes timed every kernel 0.17-0.34 us short of CUPTI
    /// on an H200, a bias no probe calibration matched
    /// (docs/decisions/2026-11-23-event-latency-calibration.md).
    pub fn step(&mut self, batch: &Batch, phase: Phase, step: i64) -> Result<()> {
        let layers = self.cfg.layers;
        self.step_as(
            batch,
            StepSpec {
                phase,
                step,
                marker: phase_marker(phase),
                layers,
            },
        )
    }

    /// `step` with the marker name and layer count `spec` gives. A forward through fewer
    /// layers runs the same ops on the first `spec.layers` layers; its graph is its own.
    pub fn step_as(&mut self, batch: &Batch, spec: StepSpec) -> Result<()> {
        let StepSpec {
            phase,
            step,
            marker,
            layers,
        } = spec;
        if layers == 0 || layers > self.cfg.layers {
            return Err(EngineError::invalid(format!(
                "a forward through {layers} layers of a {}-layer model",
                self.cfg.layers
            )));
        }
        self.begin(batch)?;
        let rows = batch.rows();
        let mut cfg = self.cfg.clone();
        cfg.layers = layers;
        let info = StepInfo {
            marker,
            phase,
            step,
            batch: batch.logit_rows() as u32,
            tokens: rows as u32,
            graph_id: 0,
        };
        let timing = self.rec.step_timing(phase, step);
        let graphed = self.levers.graphs && phase == Phase::Decode && timing != Timing::Launch;
        if !graphed {
            let pool = self.rec.take_pool()?;
            self.rec.begin_step(pool, timing, info)?;
            model::forward(self, &cfg, batch)?;
            self.rec.end_step()?;
        } else {
            let key: GraphKey = (rows, self.seqs, layers, self.parity, timing);
            if !self.graphs.contains_key(&key) {
                let pool = self.rec.take_pool()?;
                let id = self.next_graph_id;
                self.next_graph_id += 1;
                self.dev
                    .stream
                    .begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
                self.rec.capturing = true;
                let captured = (|| {
                    self.rec.begin_step(
                        pool,
                        timing,
                        StepInfo {
                            graph_id: id,
                            ..info
                        },
                    )?;
                    model::forward(self, &cfg, batch)?;
                    self.rec.end_step()
                })();
                self.rec.capturing = false;
                let graph = self
                    .dev
                    .stream
                    .end_capture(sys::CUgraphInstantiate_flags(0));
                let metas = captured?;
                let graph = graph?
                    .ok_or_else(|| EngineError::Cuda("stream capture produced no graph".into()))?;
                graph.upload()?;
                self.graphs.insert(
                    key,
                    GraphEntry {
                        graph,
                        pool,
                        metas,
                        id,
                    },
                );
            }
            let e = &self.graphs[&key];
            e.graph.launch()?;
            let (pool, mut metas, id) = (e.pool, e.metas.clone(), e.id);
            self.refresh_costs(&mut metas, rows);
            self.rec.replayed(
                pool,
                timing,
                StepInfo {
                    graph_id: id,
                    ..info
                },
                metas,
            );
            self.parity ^= 1;
        }
        let pools: Vec<usize> = self.graphs.values().map(|g| g.pool).collect();
        self.rec.harvest(1, &pools)
    }

    /// Waits for the GPU and reads every pending step's events.
    pub fn finish_steps(&mut self) -> Result<()> {
        let pools: Vec<usize> = self.graphs.values().map(|g| g.pool).collect();
        self.rec.flush(&pools)
    }
}
