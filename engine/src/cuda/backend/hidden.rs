//! Capturing hidden states (`logits --hidden`): with capture on, each decoder layer ends with
//! a copy of the residual stream's logit rows into a device buffer the host reads after the
//! step. Off (every benchmark), `layer_output` returns at once: no launch, no copy, no
//! synchronisation.

use super::CudaBackend;
use crate::cuda::device::DevBuf;
use crate::cuda::launch;
use crate::error::Result;
use gapscope_kernels::Kernel;

impl CudaBackend {
    /// Turns hidden-state capture on or off for the steps that follow. On, each layer ends
    /// with a copy of the residual stream's logit rows into a device buffer that
    /// `read_hidden` reads back; captured graphs are dropped on a change (the copies are
    /// part of them).
    pub fn set_capture_hidden(&mut self, on: bool) -> Result<()> {
        if on == self.hidden.is_some() {
            return Ok(());
        }
        self.graphs.clear();
        self.hidden = if on {
            let per_layer = self.cap.max_seqs * self.cfg.hidden;
            Some(DevBuf::alloc(self.cfg.layers * per_layer * 4)?)
        } else {
            None
        };
        Ok(())
    }

    /// With capture on: per layer, the residual stream after it at the last step's logit
    /// rows (`[logit_rows, hidden]` each; waits for the step). `None` when off.
    pub fn read_hidden(&self) -> Result<Option<Vec<Vec<f32>>>> {
        let Some(buf) = &self.hidden else {
            return Ok(None);
        };
        let per_layer = self.cap.max_seqs * self.cfg.hidden;
        let all: Vec<f32> = buf.read(self.cfg.layers * per_layer, &self.dev.stream)?;
        let n = self.logit_rows * self.cfg.hidden;
        Ok(Some(
            all.chunks_exact(per_layer)
                .map(|l| l[..n].to_vec())
                .collect(),
        ))
    }

    /// `Backend::layer_output`: with capture on, the residual stream's logit rows after
    /// `layer` into the capture buffer (a gather by the out-row ids in a prefill, one D2D copy
    /// in a decode); with it off, nothing.
    pub(super) fn capture_layer_output(&mut self, layer: usize, rows: usize) -> Result<()> {
        let Some(dst) = self
            .hidden
            .as_ref()
            .map(|b| b.at(layer * self.cap.max_seqs * self.cfg.hidden * 4))
        else {
            return Ok(());
        };
        self.flush_norm()?;
        let h = self.cfg.hidden;
        if self.prefill {
            // The prefill's logit rows: gathered from `X` by the out-row ids, as `gather_last`.
            let n = self.logit_rows;
            let ids = self.meta_ptr(self.layout.out_rows);
            let (grid, block, args) = launch::get_rows_launch(self.a.x.ptr, ids, dst, n, h);
            self.kernel(
                Kernel::GetRowsF32,
                "capture_hidden",
                layer as i32,
                "embed_gather",
                grid,
                block,
                (n * h * 8) as u64,
                0,
                &args,
            )
        } else {
            let x = self.a.x.ptr;
            self.d2d_layer("capture_hidden", layer as i32, dst, x, rows * h * 4)
        }
    }
}
