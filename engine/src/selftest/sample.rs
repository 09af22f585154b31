//! Greedy sampling (`argmax_f32`), launched through the backend's `ArgmaxArgs`.

use super::Ctx;
use crate::cpu::ops;
use crate::cuda::launch::{ARGMAX_MAX_SLICES, ArgmaxArgs};
use crate::error::Result;
use gapscope_kernels::Kernel;

/// argmax with a planted tie resolved to the lower index across two slices, in one block per
/// row and in slices combined by the last block (twice, so the tickets reset).
pub(super) fn argmax(c: &mut Ctx<'_>) -> Result<()> {
    let (rows, v) = (4usize, 128_256usize);
    let mut l = c.randf(rows * v, 5.0);
    l[v + 1000] = 100.0;
    l[v + 90_000] = 100.0;
    l[2 * v + 7] = f32::NAN;
    let want: Vec<f32> = (0..rows)
        .map(|r| ops::argmax(&l[r * v..(r + 1) * v]) as f32)
        .collect();
    let lb = c.up(&l)?;
    let (pv, pi) = (
        c.poisoned(rows * ARGMAX_MAX_SLICES * 4)?,
        c.poisoned(rows * ARGMAX_MAX_SLICES * 4)?,
    );
    let counters = c.up(&vec![0i32; rows])?;
    for (slices, rep) in [(1usize, 0), (32, 0), (32, 1), (64, 0)] {
        let ob = c.poisoned(rows * 4)?;
        let (grid, block, args) = ArgmaxArgs {
            logits: lb.ptr,
            vocab: v,
            out: ob.ptr,
            slice_values: pv.ptr,
            slice_indices: pi.ptr,
            counters: counters.ptr,
        }
        .launch(rows, slices);
        c.dev.launch(Kernel::ArgmaxF32, grid, block, &args)?;
        let got: Vec<f32> = ob
            .read::<i32>(rows, &c.dev.stream)?
            .iter()
            .map(|&x| x as f32)
            .collect();
        c.check(
            format!("argmax_f32 slices={slices} launch={rep}"),
            &got,
            &want,
            0.0,
        );
    }
    Ok(())
}
