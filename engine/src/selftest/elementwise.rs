//! The embedding gather (`get_rows_bf16`) and SwiGLU (`swiglu_f32`), launched as the backend
//! launches them (`cuda::launch`).

use super::{Ctx, TOL_BF16, to_bf16_bits};
use crate::cpu::ops;
use crate::cuda::launch;
use crate::error::Result;
use crate::rng;
use gapscope_kernels::Kernel;

/// Rows of a bf16 table gathered into f32: exact.
pub(super) fn get_rows(c: &mut Ctx<'_>) -> Result<()> {
    let (v, h, rows) = (50usize, 256usize, 7usize);
    let table = c.bf16_vals(v * h, 1.0);
    let ids: Vec<i32> = rng::tokens(c.seed, 1, rows, v);
    let (tb, ib, ob) = (
        c.up(&to_bf16_bits(&table))?,
        c.up(&ids)?,
        c.poisoned(rows * h * 4)?,
    );
    let (grid, block, args) = launch::get_rows_launch(tb.ptr, ib.ptr, ob.ptr, rows, h);
    c.dev.launch(Kernel::GetRowsBf16, grid, block, &args)?;
    let want: Vec<f32> = ids
        .iter()
        .flat_map(|&i| table[i as usize * h..(i as usize + 1) * h].to_vec())
        .collect();
    let got = c.read_f32(&ob, rows * h)?;
    c.check("get_rows_bf16", &got, &want, 0.0);
    Ok(())
}

/// Interleaved gate/up pairs into bf16 `silu(g) * u`.
pub(super) fn swiglu(c: &mut Ctx<'_>) -> Result<()> {
    let n = 3 * 1000;
    let gu = c.randf(2 * n, 3.0);
    let (gb, hb) = (c.up(&gu)?, c.poisoned(n * 2)?);
    let (grid, block, args) = launch::swiglu_launch(gb.ptr, hb.ptr, n);
    c.dev.launch(Kernel::SwigluF32, grid, block, &args)?;
    let got = c.read_bf16(&hb, n)?;
    c.check("swiglu_f32", &got, &ops::swiglu(&gu), TOL_BF16);
    Ok(())
}
