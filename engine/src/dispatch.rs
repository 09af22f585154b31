//! The engine's levers and its kernel-dispatch policy. Every lever is a switch that keeps
//! greedy output identical (checked by md5 of the generated tokens; MMQ's activation layout by
//! the selftest, which compares the two layouts' outputs bitwise).

use crate::quant::WeightFormat;

/// Which kernel family computes a linear layer for a given number of rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct DispatchPolicy {
    /// Largest batch that runs as a GEMV (bf16) or MMVQ (quantized), as llama.cpp's
    /// `MMVQ_MAX_BATCH_SIZE`; larger batches use a GEMM: MMQ (quantized), or for bf16 the
    /// small tensor-core GEMM up to `BF16_SMALL_GEMM_MAX_BATCH` rows and cuBLAS above. A value
    /// above 8 runs the GEMV kernels in chunks of 8 rows, re-reading the weights per chunk.
    /// Either side gives the same bits for bf16 up to 16 rows and for the quantized formats at
    /// any batch, so moving the threshold keeps greedy output identical.
    pub mmvq_max_batch: usize,
    /// MMQ reads k-major activations (`quantize_q8_1_bf16_kmajor`: one quant block of 8 adjacent
    /// columns in 256 contiguous bytes, which relieves the L1 traffic MMQ is bound by), except
    /// for linears with K above `mmq_k_major_max_k` at batches in `mmq_row_major_batches`
    /// (inclusive), which read row-major. Both layouts give the same bits.
    pub mmq_k_major_max_k: usize,
    /// The batches (inclusive) at which linears with K above `mmq_k_major_max_k` read
    /// row-major activations.
    pub mmq_row_major_batches: (usize, usize),
    /// Batch-1 Q8_0 linears with K at least this large and no more rows than K use the K-split
    /// MMVQ entry (`linear::b1_entry`); same bits.
    pub mmvq_b1_k_split_min_k: usize,
    /// Batch-1 Q8_0 linears with at least this many rows per column of K (and no K-split)
    /// use the contiguous-load MMVQ entry (`linear::b1_entry`); same bits.
    pub mmvq_b1_pair_min_rows_per_k: usize,
    /// Pins decode attention to `(key lanes, splits)` instead of the per-batch choice of
    /// `attention_shape::decode_shape` (tuning runs only; `None`, the default, chooses). Same
    /// bits only where the split count is unchanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_shape: Option<(usize, usize)>,
    /// Which kernel a one-row bf16 linear runs (`--dispatch bf16_batch1=gemv|mma`).
    #[serde(default, skip_serializing_if = "Bf16Batch1::is_default")]
    pub bf16_batch1: Bf16Batch1,
}

/// The kernel of a one-row bf16 linear.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Bf16Batch1 {
    /// The batch-1 GEMV (`gemv_bf16_b1`: K split across warps, f32 FMA; the fastest at one
    /// row). Its sums are ordered differently from the multi-row kernel's, so a sequence's row
    /// in a batch of several (a speculative verify) can round differently from its one-row
    /// step.
    #[default]
    Gemv,
    /// The multi-row tensor-core kernel (`gemv_bf16`) at one row: every bf16 linear of 1 to 16
    /// rows then gives each row the same bits, so argmax speculation reproduces plain greedy
    /// decode bit for bit (the engine's batch-invariant mode).
    Mma,
}

impl Bf16Batch1 {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }

    fn parse(s: &str) -> Result<Self, String> {
        match s {
            "gemv" => Ok(Self::Gemv),
            "mma" => Ok(Self::Mma),
            _ => Err(format!("expected gemv or mma, got {s:?}")),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Gemv => "gemv",
            Self::Mma => "mma",
        }
    }
}

/// Defaults of the MMQ layout policy, from `gapscope-engine kbench`'s layout table and the
/// decode A/B on the H200 (docs/decisions/2026-11-22-mmq-k-major-band.md): k-major won at K = 4096 at every batch
/// from 16 to 128; at K = 14336 (ffn_down) it lost 36-39% in the kernel table at batch 24-32
/// (also 14% at 16 and 16% at 96), and the whole decode at npl 24 and 32 ran 6-9% faster
/// row-major, while npl 16 and 48-128 ran 7-11% faster k-major. The band follows the decode;
/// batches it did not measure (33-47, 49-63, 65-127) take the nearest measured choice, which
/// at 96 goes against the kernel table.
pub const MMQ_K_MAJOR_MAX_K: usize = 8192;
pub const MMQ_ROW_MAJOR_BATCHES: (usize, usize) = (17, 47);

/// Default of the batch-1 K-split: on the H200 it took the 4096x14336 Q8_0 MMVQ from 70-72% to
/// 76-78% of copy bandwidth, and lost on 14336x4096 (59% vs 74-75%); K = 4096 linears keep the
/// one-warp-per-row entry (docs/decisions/2026-11-22-batch1-mmvq-entries.md).
pub const MMVQ_B1_K_SPLIT_MIN_K: usize = 8192;

/// Default of the contiguous-load batch-1 entry: it won on 14336x4096 (76.8-78.1% against
/// 73.6-75.1%) and lost on 4096-row linears, where its 6 blocks per SM (against 9) leave rows
/// waiting; ffn_up (3.5 rows per column) and the LM head qualify, q/k/v/o do not.
pub const MMVQ_B1_PAIR_MIN_ROWS_PER_K: usize = 2;

/// Largest bf16 batch above the threshold that runs the small tensor-core GEMM
/// (`gemm_bf16_small`) instead of cuBLAS. It computes every output with the multi-row GEMV's
/// exact products and order (`gemv.cu`), so up to this many rows the GEMV/GEMM threshold
/// changes no bit; cuBLAS, whose reduction order is its own, takes larger batches at any
/// threshold. 16 is the largest threshold the determinism check moves (4/8/16).
pub const BF16_SMALL_GEMM_MAX_BATCH: usize = 16;

impl Default for DispatchPolicy {
    fn default() -> Self {
        Self {
            mmvq_max_batch: 8,
            mmq_k_major_max_k: MMQ_K_MAJOR_MAX_K,
            mmq_row_major_batches: MMQ_ROW_MAJOR_BATCHES,
            mmvq_b1_k_split_min_k: MMVQ_B1_K_SPLIT_MIN_K,
            mmvq_b1_pair_min_rows_per_k: MMVQ_B1_PAIR_MIN_ROWS_PER_K,
            attention_shape: None,
            bf16_batch1: Bf16Batch1::Gemv,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LinearPath {
    GemvBf16,
    GemmBf16Small,
    CublasBf16,
    Mmvq,
    Mmq,
}

impl DispatchPolicy {
    /// Whether MMQ at `rows` over a K of `k` reads k-major activations.
    pub fn mmq_k_major(&self, rows: usize, k: usize) -> bool {
        let (lo, hi) = self.mmq_row_major_batches;
        k <= self.mmq_k_major_max_k || !(lo..=hi).contains(&rows)
    }

    /// Whether a linear of `rows` rows in `format` runs a batch-1 entry (one row, unless bf16
    /// with `bf16_batch1` set to the multi-row kernel).
    pub fn batch1_entry(&self, format: WeightFormat, rows: usize) -> bool {
        rows == 1 && !(format == WeightFormat::Bf16 && self.bf16_batch1 == Bf16Batch1::Mma)
    }

    pub fn path(&self, format: WeightFormat, rows: usize) -> LinearPath {
        let small = rows <= self.mmvq_max_batch;
        match (format, small) {
            (WeightFormat::Bf16, true) => LinearPath::GemvBf16,
            (WeightFormat::Bf16, false) if rows <= BF16_SMALL_GEMM_MAX_BATCH => {
                LinearPath::GemmBf16Small
            }
            (WeightFormat::Bf16, false) => LinearPath::CublasBf16,
            (_, true) => LinearPath::Mmvq,
            (_, false) => LinearPath::Mmq,
        }
    }
}

/// The keys of `DispatchPolicy`'s `key=value` form (`--dispatch`), in field order.
pub const DISPATCH_KEYS: [&str; 7] = [
    "mmvq_max_batch",
    "mmq_k_major_max_k",
    "mmq_row_major_batches",
    "mmvq_b1_k_split_min_k",
    "mmvq_b1_pair_min_rows_per_k",
    "attention_shape",
    "bf16_batch1",
];

impl DispatchPolicy {
    /// Applies `key=value` overrides separated by commas (`mmvq_max_batch=4,
    /// mmq_row_major_batches=0:0`); the keys are the field names (`DISPATCH_KEYS`), the values
    /// batch or K sizes, and `LO:HI` for `mmq_row_major_batches`. An empty string changes
    /// nothing. On an error `self` is unchanged.
    pub fn apply(&mut self, overrides: &str) -> Result<(), String> {
        let mut p = *self;
        for item in overrides
            .split(',')
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            let (key, value) = item
                .split_once('=')
                .ok_or_else(|| format!("{item:?}: expected KEY=VALUE"))?;
            let (key, value) = (key.trim(), value.trim());
            let num = || {
                value
                    .parse::<usize>()
                    .map_err(|e| format!("{key}={value:?}: {e}"))
            };
            let in_key = |e: String| format!("{key}={value:?}: {e}");
            match key {
                "mmvq_max_batch" => p.mmvq_max_batch = num()?,
                "mmq_k_major_max_k" => p.mmq_k_major_max_k = num()?,
                "mmq_row_major_batches" => {
                    p.mmq_row_major_batches = parse_batch_range(value).map_err(in_key)?
                }
                "mmvq_b1_k_split_min_k" => p.mmvq_b1_k_split_min_k = num()?,
                "mmvq_b1_pair_min_rows_per_k" => p.mmvq_b1_pair_min_rows_per_k = num()?,
                "attention_shape" => {
                    p.attention_shape = Some(parse_pair(value, "KW:SPLITS").map_err(in_key)?)
                }
                "bf16_batch1" => p.bf16_batch1 = Bf16Batch1::parse(value).map_err(in_key)?,
                other => {
                    return Err(format!(
                        "unknown dispatch key {other:?}; the keys are {}",
                        DISPATCH_KEYS.join(", ")
                    ));
                }
            }
        }
        *self = p;
        Ok(())
    }
}

/// The default policy with `key=value,...` overrides applied (`DispatchPolicy::apply`).
impl std::str::FromStr for DispatchPolicy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = Self::default();
        p.apply(s)?;
        Ok(p)
    }
}

/// Every field as `key=value`, comma-separated: the form `FromStr` reads back.
impl std::fmt::Display for DispatchPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (lo, hi) = self.mmq_row_major_batches;
        write!(
            f,
            "mmvq_max_batch={},mmq_k_major_max_k={},mmq_row_major_batches={lo}:{hi},\
             mmvq_b1_k_split_min_k={},mmvq_b1_pair_min_rows_per_k={}",
            self.mmvq_max_batch,
            self.mmq_k_major_max_k,
            self.mmvq_b1_k_split_min_k,
            self.mmvq_b1_pair_min_rows_per_k
        )?;
        if let Some((kw, splits)) = self.attention_shape {
            write!(f, ",attention_shape={kw}:{splits}")?;
        }
        if !self.bf16_batch1.is_default() {
            write!(f, ",bf16_batch1={}", self.bf16_batch1.name())?;
        }
        Ok(())
    }
}

/// `A:B` -> (A, B), two sizes; `form` names them in the error (`LO:HI`, `KW:SPLITS`).
fn parse_pair(s: &str, form: &str) -> Result<(usize, usize), String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("expected {form} (two sizes), got {s:?}"))?;
    let num = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|e| format!("{v:?} in {s:?}: {e}"))
    };
    Ok((num(a)?, num(b)?))
}

/// `LO:HI` -> (LO, HI), the inclusive batch range of `mmq_row_major_batches`.
pub fn parse_batch_range(s: &str) -> Result<(usize, usize), String> {
    let (lo, hi) = parse_pair(s, "LO:HI")?;
    if lo > hi {
        return Err(format!("{s:?}: LO is above HI"));
    }
    Ok((lo, hi))
}

/// The switches a run is configured with.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Levers {
    /// Capture each decode step once per batch size and replay it as a CUDA graph.
    pub graphs: bool,
    /// Paged KV cache with block tables; otherwise a contiguous pool in arrival order that
    /// attention reads after a per-sequence gather.
    pub paged_kv: bool,
    pub dispatch: DispatchPolicy,
    /// Programmatic dependent launch: each kernel may start while the previous one drains (MMQ
    /// warms L2 with its weight tile, the batch-1 GEMV loads its first weights, before waiting). sm_90+; off for launches timed with events,
    /// whose event nodes sit between the kernels. Results are bit-identical either way.
    pub pdl: bool,
    /// Fused decode kernels: RoPE and the KV append run inside the attention kernel (one launch
    /// per layer fewer). Prefill keeps them separate. Results are bit-identical either way.
    /// (An RMSNorm fused into the batch-1 GEMV's last block was measured and dropped: its serial
    /// tail cost more than the separate 2 us kernel, docs/decisions/2026-11-22-batch1-bf16-decode.md.)
    pub fusion: bool,
    /// The gated DeltaNet layers' levers (hybrid models; no effect elsewhere).
    pub hybrid: HybridLevers,
}

impl Default for Levers {
    fn default() -> Self {
        Self {
            graphs: true,
            paged_kv: true,
            dispatch: DispatchPolicy::default(),
            pdl: true,
            fusion: true,
            hybrid: HybridLevers::default(),
        }
    }
}

/// How a decode step writes a DeltaNet layer's new recurrent state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StateUpdate {
    /// The recurrence writes a scratch copy, and a D2D copy moves it back into the cache slots
    /// (the campaigns' slow path: the state crosses memory twice more per step).
    Copy,
    /// The recurrence writes the new state into the cache slot it read.
    #[default]
    Inplace,
}

/// How the recurrence reads each sequence's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StateRead {
    /// A row gather (`state_gather`, the get_rows of the campaigns) copies each sequence's
    /// state into scratch first; the recurrence reads the scratch.
    Gather,
    /// The recurrence reads the cache slot through the sequence ids itself.
    #[default]
    FusedIds,
}

/// The activation layout the DeltaNet output projection sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum OutProjLayout {
    /// `[dim, 1, n_seqs]`: every sequence is a batch-1 GEMV of its own (each re-reading the
    /// weight), whatever the batch; the campaigns' slow path.
    #[serde(rename = "3d")]
    ThreeD,
    /// `[dim, n_seqs]`: one linear over the batch, dispatched like every other linear.
    #[default]
    #[serde(rename = "2d")]
    TwoD,
}

/// The hybrid levers, each with the campaigns' "before" behaviour as its slow setting. Every
/// setting gives the same bits (the 2-D out_proj at bf16 only up to the GEMV/GEMM threshold
/// of `BF16_SMALL_GEMM_MAX_BATCH`, as the dispatch threshold itself).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct HybridLevers {
    pub state_update: StateUpdate,
    pub state_read: StateRead,
    pub out_proj: OutProjLayout,
}

/// Names and values of an enum lever, for `FromStr` and `name`.
macro_rules! lever_names {
    ($t:ty, $what:literal, $($name:literal => $v:expr),+ $(,)?) => {
        impl $t {
            pub const NAMES: &'static [&'static str] = &[$($name),+];
            pub fn name(self) -> &'static str {
                $(if self == $v { return $name; })+
                unreachable!()
            }
        }
        impl std::str::FromStr for $t {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s {
                    $($name => Ok($v),)+
                    other => Err(format!(
                        "{} {other:?}: expected {}",
                        $what,
                        Self::NAMES.join(" or ")
                    )),
                }
            }
        }
    };
}

lever_names!(StateUpdate, "state update", "copy" => StateUpdate::Copy, "inplace" => StateUpdate::Inplace);
lever_names!(StateRead, "state read", "gather" => StateRead::Gather, "fused_ids" => StateRead::FusedIds);
lever_names!(OutProjLayout, "out_proj layout", "3d" => OutProjLayout::ThreeD, "2d" => OutProjLayout::TwoD);

impl HybridLevers {
    /// Every lever on its slow setting.
    pub const SLOW: Self = Self {
        state_update: StateUpdate::Copy,
        state_read: StateRead::Gather,
        out_proj: OutProjLayout::ThreeD,
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hybrid_lever_names_round_trip() {
        for n in StateUpdate::NAMES {
            assert_eq!(n.parse::<StateUpdate>().unwrap().name(), *n);
        }
        for n in StateRead::NAMES {
            assert_eq!(n.parse::<StateRead>().unwrap().name(), *n);
        }
        for n in OutProjLayout::NAMES {
            assert_eq!(n.parse::<OutProjLayout>().unwrap().name(), *n);
        }
        let err = "4d".parse::<OutProjLayout>().unwrap_err();
        assert!(err.contains("3d or 2d"), "{err}");
        assert_eq!(HybridLevers::default().state_read, StateRead::FusedIds);
        assert_eq!(HybridLevers::SLOW.out_proj, OutProjLayout::ThreeD);
    }

    #[test]
    fn mmq_layout_follows_k_then_batch() {
        let p = DispatchPolicy::default();
        // Llama-3-8B: K = 4096 linears always k-major; ffn_down (K = 14336) row-major at 17-47.
        assert!(p.mmq_k_major(32, 4096));
        assert!(p.mmq_k_major(16, 14336));
        assert!(!p.mmq_k_major(17, 14336));
        assert!(!p.mmq_k_major(47, 14336));
        assert!(p.mmq_k_major(48, 14336));
        assert!(p.mmq_k_major(128, 14336));
        let rows_only = DispatchPolicy {
            mmq_k_major_max_k: 0,
            mmq_row_major_batches: (0, usize::MAX),
            ..p
        };
        assert!(!rows_only.mmq_k_major(128, 4096));
    }

    #[test]
    fn threshold_switches_gemv_to_gemm() {
        let p = DispatchPolicy::default();
        assert_eq!(p.path(WeightFormat::Q8_0, 8), LinearPath::Mmvq);
        assert_eq!(p.path(WeightFormat::Q8_0, 9), LinearPath::Mmq);
        assert_eq!(p.path(WeightFormat::Bf16, 1), LinearPath::GemvBf16);
        assert_eq!(p.path(WeightFormat::Bf16, 8), LinearPath::GemvBf16);
        assert_eq!(p.path(WeightFormat::Bf16, 9), LinearPath::GemmBf16Small);
        assert_eq!(p.path(WeightFormat::Bf16, 16), LinearPath::GemmBf16Small);
        assert_eq!(p.path(WeightFormat::Bf16, 17), LinearPath::CublasBf16);
        let sixteen = DispatchPolicy {
            mmvq_max_batch: 16,
            ..DispatchPolicy::default()
        };
        assert_eq!(sixteen.path(WeightFormat::Bf16, 16), LinearPath::GemvBf16);
        assert_eq!(sixteen.path(WeightFormat::Bf16, 17), LinearPath::CublasBf16);
        let never = DispatchPolicy {
            mmvq_max_batch: 0,
            ..DispatchPolicy::default()
        };
        assert_eq!(never.path(WeightFormat::Q4_0, 1), LinearPath::Mmq);
    }

    #[test]
    fn batch_range_default_matches_the_policy_and_bad_input_says_why() {
        assert_eq!(parse_batch_range("17:47"), Ok(MMQ_ROW_MAJOR_BATCHES));
        assert_eq!(parse_batch_range("0:0"), Ok((0, 0)));
        assert!(parse_batch_range("47").unwrap_err().contains("LO:HI"));
        assert!(parse_batch_range("9:x").unwrap_err().contains("\"x\""));
        assert!(parse_batch_range("48:17").unwrap_err().contains("above"));
    }

    #[test]
    fn overrides_set_only_their_keys() {
        let d = DispatchPolicy::default();
        assert_eq!("".parse::<DispatchPolicy>(), Ok(d));
        let p: DispatchPolicy = "mmvq_max_batch=16, mmq_row_major_batches=0:0"
            .parse()
            .unwrap();
        assert_eq!(
            p,
            DispatchPolicy {
                mmvq_max_batch: 16,
                mmq_row_major_batches: (0, 0),
                ..d
            }
        );
        let p: DispatchPolicy =
            "mmq_k_major_max_k=0,mmvq_b1_k_split_min_k=0,mmvq_b1_pair_min_rows_per_k=3"
                .parse()
                .unwrap();
        assert_eq!(
            (
                p.mmq_k_major_max_k,
                p.mmvq_b1_k_split_min_k,
                p.mmvq_b1_pair_min_rows_per_k
            ),
            (0, 0, 3)
        );
        // The printed form reads back to the same policy.
        assert_eq!(p.to_string().parse::<DispatchPolicy>(), Ok(p));
        assert_eq!(d.to_string().parse::<DispatchPolicy>(), Ok(d));
        // A later key wins; apply keeps what it does not name.
        let mut q = p;
        q.apply("mmvq_max_batch=4,mmvq_max_batch=0").unwrap();
        assert_eq!(
            q,
            DispatchPolicy {
                mmvq_max_batch: 0,
                ..p
            }
        );
    }

    #[test]
    fn bf16_batch1_picks_the_one_row_entry_and_reads_back() {
        let d = DispatchPolicy::default();
        assert!(d.batch1_entry(WeightFormat::Bf16, 1));
        assert!(!d.batch1_entry(WeightFormat::Bf16, 2));
        let p: DispatchPolicy = "bf16_batch1=mma".parse().unwrap();
        assert_eq!(p.bf16_batch1, Bf16Batch1::Mma);
        assert!(!p.batch1_entry(WeightFormat::Bf16, 1));
        // Quantized formats keep their batch-1 entries (already the multi-row entry's bits).
        assert!(p.batch1_entry(WeightFormat::Q8_0, 1));
        assert_eq!(p.to_string().parse::<DispatchPolicy>(), Ok(p));
        assert!(p.to_string().ends_with(",bf16_batch1=mma"));
        assert!(!d.to_string().contains("bf16_batch1"));
        let e = "bf16_batch1=tensor".parse::<DispatchPolicy>().unwrap_err();
        assert!(e.contains("gemv or mma"), "{e}");
    }

    #[test]
    fn bad_overrides_name_the_problem_and_change_nothing() {
        let e = "mmvq_batch=4".parse::<DispatchPolicy>().unwrap_err();
        assert!(e.contains("\"mmvq_batch\""), "{e}");
        for k in DISPATCH_KEYS {
            assert!(e.contains(k), "{e}");
        }
        let e = "mmvq_max_batch".parse::<DispatchPolicy>().unwrap_err();
        assert!(e.contains("KEY=VALUE"), "{e}");
        let e = "mmvq_max_batch=eight"
            .parse::<DispatchPolicy>()
            .unwrap_err();
        assert!(e.contains("mmvq_max_batch") && e.contains("eight"), "{e}");
        let e = "mmq_row_major_batches=47:17"
            .parse::<DispatchPolicy>()
            .unwrap_err();
        assert!(e.contains("above"), "{e}");
        let mut p = DispatchPolicy::default();
        assert!(p.apply("mmvq_max_batch=4,nope=1").is_err());
        assert_eq!(p, DispatchPolicy::default());
    }
}
