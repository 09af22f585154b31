//! What the engine records about its own work, and the native trace it writes from it.
//! Independent of CUDA so the trace layout is tested on any machine.

use crate::error::Result;
use gapscope_traces::{
    KernelRow, KernelTable, Manifest, MarkerRow, MarkerSource, MarkerTable, MemopKind, MemopRow,
    MemopTable, Phase, StringTable, TraceWriter,
};
use std::path::Path;

/// Static facts about one launch (a kernel, a cuBLAS call or a copy), known when it is issued.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchMeta {
    /// Kernel symbol, `cublasGemmEx(bf16)`, or the copy's API name.
    pub name: &'static str,
    pub op: &'static str,
    pub layer: i32,
    pub bucket: &'static str,
    pub grid: [u32; 3],
    pub block: u32,
    /// Model-derived minimum bytes moved and FLOPs computed.
    pub bytes: u64,
    pub flops: u64,
    /// Set for copies; they go to the memops table.
    pub memop: Option<MemopKind>,
    /// Registers per thread and static shared memory of the compiled kernel (0 when unknown,
    /// e.g. cuBLAS).
    pub registers: u32,
    pub static_smem: u32,
}

/// A launch with its GPU interval (ns on the run's clock: 0 is the run's first event).
#[derive(Debug, Clone, PartialEq)]
pub struct TimedLaunch {
    pub meta: LaunchMeta,
    pub gpu_start_ns: i64,
    pub gpu_end_ns: i64,
}

/// The marker name a step gets from its phase alone (`prefill`, `decode`).
pub fn phase_marker(phase: Phase) -> &'static str {
    match phase {
        Phase::Prefill => "prefill",
        Phase::Decode => "decode",
        _ => "step",
    }
}

/// One forward as a step: a prefill, a decode step, or a speculative draft or verify.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    /// The step marker's name: [`phase_marker`] unless the run names its forwards itself
    /// (`spec_draft`, `spec_verify`).
    pub marker: &'static str,
    pub phase: Phase,
    pub step: i64,
    pub batch: u32,
    pub tokens: u32,
    pub gpu_start_ns: i64,
    pub gpu_end_ns: i64,
    pub launches: Vec<TimedLaunch>,
    /// Replayed from a CUDA graph.
    pub graph_id: u32,
    /// Every launch carries its own event times (otherwise only the step is timed).
    pub launch_timed: bool,
}

/// Writes engine steps to a native trace, a batch of rows at a time so memory stays bounded.
pub struct TraceOut {
    writer: TraceWriter,
    strings: StringTable,
    kernels: KernelTable,
    memops: MemopTable,
    markers: MarkerTable,
    /// Launch order on the stream: the key a CUPTI recording of the same run joins on.
    correlation: u64,
    pub skipped_steps: u64,
}

const FLUSH_ROWS: usize = 1 << 16;

impl TraceOut {
    pub fn create(dir: &Path, manifest: Manifest) -> Result<Self> {
        Ok(Self {
            writer: TraceWriter::create(dir, manifest)?,
            strings: StringTable::new(),
            kernels: KernelTable::default(),
            memops: MemopTable::default(),
            markers: MarkerTable::default(),
            correlation: 0,
            skipped_steps: 0,
        })
    }

    pub fn manifest_mut(&mut self) -> &mut Manifest {
        self.writer.manifest_mut()
    }

    /// Adds a step with per-launch times; steps timed only as a whole are skipped, so every
    /// step in the trace carries its kernels.
    pub fn add_step(&mut self, s: &StepRecord) -> Result<()> {
        if !s.launch_timed {
            self.skipped_steps += 1;
            return Ok(());
        }
        self.markers.push(MarkerRow {
            name: self.strings.intern(s.marker),
            source: MarkerSource::Engine as u8,
            phase: s.phase as u8,
            gpu_start_ns: s.gpu_start_ns,
            gpu_end_ns: s.gpu_end_ns,
            step: s.step,
            batch_size: s.batch,
            tokens: s.tokens,
            ..MarkerRow::default()
        });
        for l in &s.launches {
            self.correlation += 1;
            let m = &l.meta;
            if let Some(kind) = m.memop {
                self.memops.push(MemopRow {
                    stream: 1,
                    correlation: self.correlation,
                    name: self.strings.intern(m.name),
                    kind: kind as u8,
                    bytes: m.bytes,
                    gpu_start_ns: l.gpu_start_ns,
                    gpu_end_ns: l.gpu_end_ns,
                    graph_id: s.graph_id,
                    op: self.strings.intern(m.op),
                    layer: m.layer,
                    ..MemopRow::default()
                });
            } else {
                self.kernels.push(KernelRow {
                    stream: 1,
                    correlation: self.correlation,
                    name: self.strings.intern(m.name),
                    gpu_start_ns: l.gpu_start_ns,
                    gpu_end_ns: l.gpu_end_ns,
                    grid_x: m.grid[0],
                    grid_y: m.grid[1],
                    grid_z: m.grid[2],
                    block_x: m.block,
                    block_y: 1,
                    block_z: 1,
                    graph_id: s.graph_id,
                    op: self.strings.intern(m.op),
                    layer: m.layer,
                    bucket: self.strings.intern(m.bucket),
                    bytes: m.bytes as i64,
                    flops: m.flops as i64,
                    registers_per_thread: m.registers,
                    static_smem_bytes: m.static_smem,
                    ..KernelRow::default()
                });
            }
        }
        if self.kernels.len() >= FLUSH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        self.writer.append_strings(&self.strings)?;
        self.writer.append_kernels(&self.kernels)?;
        self.writer.append_memops(&self.memops)?;
        self.writer.append_markers(&self.markers)?;
        self.kernels = KernelTable::default();
        self.memops = MemopTable::default();
        self.markers = MarkerTable::default();
        Ok(())
    }

    pub fn finish(mut self) -> Result<Manifest> {
        self.flush()?;
        Ok(self.writer.finish()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapscope_traces::{ReadOptions, read_trace};

    fn launch(
        name: &'static str,
        bucket: &'static str,
        t: i64,
        memop: Option<MemopKind>,
    ) -> TimedLaunch {
        TimedLaunch {
            meta: LaunchMeta {
                name,
                op: "op",
                layer: 3,
                bucket,
                grid: [4, 1, 1],
                block: 128,
                bytes: 1000,
                flops: 2000,
                memop,
                registers: 40,
                static_smem: 0,
            },
            gpu_start_ns: t,
            gpu_end_ns: t + 10,
        }
    }

    #[test]
    fn steps_round_trip_through_the_native_format() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.gst");
        let mut out = TraceOut::create(&path, Manifest::new("engine")).unwrap();
        for step in 0..3 {
            out.add_step(&StepRecord {
                marker: phase_marker(Phase::Decode),
                phase: Phase::Decode,
                step,
                batch: 2,
                tokens: 2,
                gpu_start_ns: step * 100,
                gpu_end_ns: step * 100 + 50,
                launches: vec![
                    launch("gemv_bf16", "gemv", step * 100, None),
                    launch(
                        "cuMemcpyDtoDAsync",
                        "copy",
                        step * 100 + 20,
                        Some(MemopKind::DtoD),
                    ),
                ],
                graph_id: 0,
                launch_timed: step != 1,
            })
            .unwrap();
        }
        let m = out.finish().unwrap();
        assert!(m.complete);
        let t = read_trace(&path, &ReadOptions::default()).unwrap();
        // Step 1 was timed only as a whole and is left out.
        assert_eq!(t.kernels.len(), 2);
        assert_eq!(t.memops.len(), 2);
        assert_eq!(t.markers.len(), 2);
        let k = t.kernels.row(1);
        assert_eq!(t.strings.get(k.bucket), "gemv");
        assert_eq!((k.layer, k.bytes, k.flops), (3, 1000, 2000));
        assert_eq!(k.registers_per_thread, 40);
        assert_eq!(k.correlation, 3);
        assert_eq!(t.markers.row(1).step, 2);
        assert_eq!(t.strings.get(t.markers.row(1).name), "decode");
        let m = t.memops.row(0);
        assert_eq!(m.kind, MemopKind::DtoD as u8);
        assert_eq!((t.strings.get(m.op), m.layer), ("op", 3));
    }
}
