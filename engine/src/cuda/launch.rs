//! Launch builders of the small kernels (row gathers, elementwise, the q/k head norm, argmax):
//! grid, block and the argument list in the order of their `extern "C"` signatures. The backend
//! and the selftest both launch through these (as they do through `linear::rms_norm_launch`,
//! `RopeArgs` and `AttnArgs`), so the selftest checks the call production makes.

use super::device::Arg;

/// Grid, block and arguments of one launch.
pub type Launch = ((u32, u32, u32), u32, Vec<Arg>);

/// Threads per block of the row gathers and the grid-stride elementwise kernels.
pub const ELEMENTWISE_BLOCK: u32 = 256;

/// A grid-stride elementwise kernel over `n` values: a block per 256, at most 65535 blocks.
fn elementwise_grid(n: usize) -> (u32, u32, u32) {
    (n.div_ceil(256).min(65535) as u32, 1, 1)
}

/// `get_rows_bf16` / `get_rows_f32` (the same signature): row `ids[r]` of the `cols`-wide
/// `table` into row `r` of the f32 `out`, a block per row.
pub fn get_rows_launch(table: u64, ids: u64, out: u64, rows: usize, cols: usize) -> Launch {
    let args = vec![
        Arg::Ptr(table),
        Arg::Ptr(ids),
        Arg::Ptr(out),
        Arg::I32(cols as i32),
    ];
    ((rows as u32, 1, 1), ELEMENTWISE_BLOCK, args)
}

/// `swiglu_f32`: `n` interleaved f32 gate/up pairs at `gu` into `n` bf16 values at `h`.
pub fn swiglu_launch(gu: u64, h: u64, n: usize) -> Launch {
    let args = vec![Arg::Ptr(gu), Arg::Ptr(h), Arg::I64(n as i64)];
    (elementwise_grid(n), ELEMENTWISE_BLOCK, args)
}

/// `add_bias_f32`: the `cols`-wide bias `b` added to each row of the f32 `[total / cols, cols]`
/// matrix `y`.
pub fn add_bias_launch(y: u64, b: u64, cols: usize, total: usize) -> Launch {
    let args = vec![
        Arg::Ptr(y),
        Arg::Ptr(b),
        Arg::I32(cols as i32),
        Arg::I64(total as i64),
    ];
    (elementwise_grid(total), ELEMENTWISE_BLOCK, args)
}

/// Threads per block of `head_rms_norm_f32` (a warp per head).
pub const HEAD_NORM_BLOCK: u32 = 32;

/// Device pointers and shapes of one q/k head RMSNorm launch (`head_rms_norm_f32`, and
/// `head_rms_norm_hf`, which takes the same arguments): every q and k head of each fused
/// q|k|v row normalised in place.
#[derive(Debug, Clone, Copy)]
pub struct HeadNormArgs {
    pub qkv: u64,
    pub q_weight: u64,
    pub k_weight: u64,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    /// Elements per fused q|k|v row.
    pub row_stride: usize,
    pub eps: f32,
}

impl HeadNormArgs {
    pub fn args(&self) -> Vec<Arg> {
        vec![
            Arg::Ptr(self.qkv),
            Arg::Ptr(self.q_weight),
            Arg::Ptr(self.k_weight),
            Arg::I32(self.heads as i32),
            Arg::I32(self.kv_heads as i32),
            Arg::I32(self.head_dim as i32),
            Arg::I32(self.row_stride as i32),
            Arg::F32(self.eps),
        ]
    }

    /// A block per (row, q or k head).
    pub fn grid(&self, rows: usize) -> (u32, u32, u32) {
        (rows as u32, (self.heads + self.kv_heads) as u32, 1)
    }
}

/// Argmax: threads per block, and at most this many blocks per logits row, each taking a slice
/// of about `ARGMAX_PER_THREAD` values per thread.
pub const ARGMAX_THREADS: u32 = 512;
const ARGMAX_PER_THREAD: usize = 8;
pub const ARGMAX_MAX_SLICES: usize = 64;

/// Blocks per row the backend launches `argmax_f32` with over a `vocab`-wide row.
pub fn argmax_slices(vocab: usize) -> usize {
    vocab
        .div_ceil(ARGMAX_THREADS as usize * ARGMAX_PER_THREAD)
        .clamp(1, ARGMAX_MAX_SLICES)
}

/// Device pointers of one `argmax_f32` launch: the slice winners (`ARGMAX_MAX_SLICES` per row)
/// and the per-row completion tickets (zero between launches) of the multi-block reduction.
#[derive(Debug, Clone, Copy)]
pub struct ArgmaxArgs {
    pub logits: u64,
    pub vocab: usize,
    pub out: u64,
    pub slice_values: u64,
    pub slice_indices: u64,
    pub counters: u64,
}

impl ArgmaxArgs {
    /// `rows` logits rows in `slices` blocks each.
    pub fn launch(&self, rows: usize, slices: usize) -> Launch {
        let args = vec![
            Arg::Ptr(self.logits),
            Arg::I32(self.vocab as i32),
            Arg::Ptr(self.out),
            Arg::Ptr(self.slice_values),
            Arg::Ptr(self.slice_indices),
            Arg::Ptr(self.counters),
        ];
        ((rows as u32, slices as u32, 1), ARGMAX_THREADS, args)
    }
}

/// Test helpers that compare an argument list with its kernel's `extern "C"` signature.
#[cfg(test)]
pub(crate) mod signature {
    use super::Arg;
    use gapscope_kernels::Kernel;

    /// Pointer (true) or value (false), parameter by parameter, of `name`'s CUDA signature in
    /// the module of `kernel`. An entry declared by an entry macro (`MMVQ_ENTRY(name, ...)`)
    /// has the signature the macro's definition gives `NAME`.
    pub(crate) fn of(kernel: Kernel, name: &str) -> Vec<bool> {
        let src = gapscope_kernels::module_of(kernel).source;
        let at = match src.find(&format!(" {name}(")) {
            Some(at) => at,
            None => {
                let used = src
                    .find(&format!("_ENTRY({name},"))
                    .expect("kernel in source");
                let start = src[..used]
                    .rfind(|c: char| !(c.is_ascii_uppercase() || c == '_'))
                    .map_or(0, |i| i + 1);
                let def = src
                    .find(&format!("#define {}(", &src[start..used + "_ENTRY".len()]))
                    .expect("entry macro defined");
                def + src[def..].find(" NAME(").expect("NAME( in the entry macro")
            }
        };
        let open = at + src[at..].find('(').unwrap();
        let close = open + src[open..].find(')').unwrap();
        src[open + 1..close]
            .split(',')
            .map(|p| p.contains('*'))
            .collect()
    }

    /// Pointer (true) or value (false), argument by argument.
    pub(crate) fn kinds(args: &[Arg]) -> Vec<bool> {
        args.iter().map(|a| matches!(a, Arg::Ptr(_))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::signature::{kinds, of as signature};
    use super::*;
    use gapscope_kernels::Kernel;

    /// The argument lists follow the CUDA signatures (a mismatch is undefined behaviour).
    #[test]
    fn argument_lists_agree_with_the_cuda_source() {
        let (_, _, rows) = get_rows_launch(1, 2, 3, 4, 5);
        assert_eq!(
            kinds(&rows),
            signature(Kernel::GetRowsBf16, "get_rows_bf16")
        );
        assert_eq!(kinds(&rows), signature(Kernel::GetRowsF32, "get_rows_f32"));
        let (_, _, swiglu) = swiglu_launch(1, 2, 3);
        assert_eq!(kinds(&swiglu), signature(Kernel::SwigluF32, "swiglu_f32"));
        let (_, _, bias) = add_bias_launch(1, 2, 3, 4);
        assert_eq!(kinds(&bias), signature(Kernel::AddBiasF32, "add_bias_f32"));
        let head = HeadNormArgs {
            qkv: 1,
            q_weight: 2,
            k_weight: 3,
            heads: 8,
            kv_heads: 2,
            head_dim: 64,
            row_stride: 768,
            eps: 1e-6,
        };
        assert_eq!(
            kinds(&head.args()),
            signature(Kernel::HeadRmsNormF32, "head_rms_norm_f32")
        );
        let argmax = ArgmaxArgs {
            logits: 1,
            vocab: 2,
            out: 3,
            slice_values: 4,
            slice_indices: 5,
            counters: 6,
        };
        let (_, _, args) = argmax.launch(1, 1);
        assert_eq!(kinds(&args), signature(Kernel::ArgmaxF32, "argmax_f32"));
    }

    /// The backend's slice count: one block for a small vocabulary, at most 64.
    #[test]
    fn argmax_slices_cover_the_vocabulary() {
        assert_eq!(argmax_slices(1000), 1);
        assert_eq!(argmax_slices(128_256), 32);
        assert_eq!(argmax_slices(10_000_000), ARGMAX_MAX_SLICES);
    }
}
