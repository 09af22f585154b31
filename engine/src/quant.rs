//! Weight formats and their block quantizers: bf16, Q8_0 and Q4_0 (blocks of 32 values with one
//! f16 scale, as in llama.cpp), plus the q8_1 activation quantizer the int8 kernels consume.
//! These are the CPU definitions; the CUDA kernels must agree with them.

use half::{bf16, f16};

/// Values per quant block.
pub const QK: usize = 32;

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightFormat {
    Bf16,
    Q8_0,
    Q4_0,
}

impl WeightFormat {
    pub fn parse(s: &str) -> Option<Self> {
        match s.to_ascii_lowercase().as_str() {
            "bf16" => Some(Self::Bf16),
            "q8_0" | "q8" => Some(Self::Q8_0),
            "q4_0" | "q4" => Some(Self::Q4_0),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Bf16 => "bf16",
            Self::Q8_0 => "q8_0",
            Self::Q4_0 => "q4_0",
        }
    }
    /// Bytes a kernel must read for a `rows x cols` matrix in this format.
    pub fn bytes(self, rows: usize, cols: usize) -> u64 {
        let n = (rows * cols) as u64;
        match self {
            Self::Bf16 => 2 * n,
            Self::Q8_0 => n + 2 * n / QK as u64,
            Self::Q4_0 => n / 2 + 2 * n / QK as u64,
        }
    }
}

/// A weight matrix `[rows, cols]` (row-major, rows = outputs) in its storage format. Quantized
/// formats keep values and scales in separate arrays so device loads stay 16-byte aligned.
#[derive(Debug, Clone, PartialEq)]
pub enum Matrix {
    Bf16 {
        rows: usize,
        cols: usize,
        data: Vec<u16>,
    },
    Q8_0 {
        rows: usize,
        cols: usize,
        qs: Vec<i8>,
        d: Vec<u16>,
    },
    Q4_0 {
        rows: usize,
        cols: usize,
        /// Per block of 32: 16 bytes, byte j = element j (low nibble) | element j+16 (high).
        qs: Vec<u8>,
        d: Vec<u16>,
    },
}

impl Matrix {
    /// Quantizes f32 values (row-major) into `format`. `cols` must be a multiple of 32 for the
    /// quantized formats.
    pub fn from_f32(format: WeightFormat, rows: usize, cols: usize, v: &[f32]) -> Self {
        assert_eq!(v.len(), rows * cols, "matrix data length");
        match format {
            WeightFormat::Bf16 => {
                let mut data = vec![0u16; v.len()];
                par_zip(v, &mut data, cols, 1, |src, dst| {
                    for (d, &x) in dst.iter_mut().zip(src) {
                        *d = bf16::from_f32(x).to_bits();
                    }
                });
                Self::Bf16 { rows, cols, data }
            }
            WeightFormat::Q8_0 => {
                let mut qs = vec![0i8; v.len()];
                let mut d = vec![0u16; v.len() / QK];
                par_zip2(v, &mut qs, &mut d, cols, |src, q, dd| {
                    for ((blk, out), s) in src
                        .chunks_exact(QK)
                        .zip(q.chunks_exact_mut(QK))
                        .zip(dd.iter_mut())
                    {
                        *s = quantize_q8_0_block(blk, out);
                    }
                });
                Self::Q8_0 { rows, cols, qs, d }
            }
            WeightFormat::Q4_0 => {
                let mut qs = vec![0u8; v.len() / 2];
                let mut d = vec![0u16; v.len() / QK];
                par_zip2(v, &mut qs, &mut d, cols, |src, q, dd| {
                    for ((blk, out), s) in src
                        .chunks_exact(QK)
                        .zip(q.chunks_exact_mut(QK / 2))
                        .zip(dd.iter_mut())
                    {
                        *s = quantize_q4_0_block(blk, out);
                    }
                });
                Self::Q4_0 { rows, cols, qs, d }
            }
        }
    }

    pub fn rows(&self) -> usize {
        match self {
            Self::Bf16 { rows, .. } | Self::Q8_0 { rows, .. } | Self::Q4_0 { rows, .. } => *rows,
        }
    }
    pub fn cols(&self) -> usize {
        match self {
            Self::Bf16 { cols, .. } | Self::Q8_0 { cols, .. } | Self::Q4_0 { cols, .. } => *cols,
        }
    }
    pub fn format(&self) -> WeightFormat {
        match self {
            Self::Bf16 { .. } => WeightFormat::Bf16,
            Self::Q8_0 { .. } => WeightFormat::Q8_0,
            Self::Q4_0 { .. } => WeightFormat::Q4_0,
        }
    }
    pub fn bytes(&self) -> u64 {
        self.format().bytes(self.rows(), self.cols())
    }

    /// The values the kernels compute with, as f32 (the CPU reference's view of the weight).
    pub fn dequantize(&self) -> Vec<f32> {
        match self {
            Self::Bf16 { data, .. } => data.iter().map(|&b| bf16::from_bits(b).to_f32()).collect(),
            Self::Q8_0 { qs, d, .. } => qs
                .chunks_exact(QK)
                .zip(d)
                .flat_map(|(q, &s)| {
                    let s = f16::from_bits(s).to_f32();
                    q.iter().map(move |&x| f32::from(x) * s)
                })
                .collect(),
            Self::Q4_0 { qs, d, .. } => {
                let mut out = Vec::with_capacity(qs.len() * 2);
                for (q, &s) in qs.chunks_exact(QK / 2).zip(d) {
                    let s = f16::from_bits(s).to_f32();
                    let mut blk = [0f32; QK];
                    for (j, &byte) in q.iter().enumerate() {
                        blk[j] = (f32::from(byte & 0x0f) - 8.0) * s;
                        blk[j + QK / 2] = (f32::from(byte >> 4) - 8.0) * s;
                    }
                    out.extend_from_slice(&blk);
                }
                out
            }
        }
    }
}

fn threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Rows of `src` (width `cols`) mapped into `dst` (width `cols / ratio`) on all cores.
fn par_zip<D: Send>(
    src: &[f32],
    dst: &mut [D],
    cols: usize,
    ratio: usize,
    f: impl Fn(&[f32], &mut [D]) + Sync,
) {
    let rows = src.len() / cols.max(1);
    let per = rows.div_ceil(threads()).max(1);
    if src.len() < (1 << 20) {
        return f(src, dst);
    }
    std::thread::scope(|s| {
        for (a, b) in src
            .chunks(per * cols)
            .zip(dst.chunks_mut(per * cols / ratio))
        {
            let f = &f;
            s.spawn(move || f(a, b));
        }
    });
}

/// Like `par_zip` with two outputs: quantized values and per-block scales.
fn par_zip2<Q: Send>(
    src: &[f32],
    q: &mut [Q],
    d: &mut [u16],
    cols: usize,
    f: impl Fn(&[f32], &mut [Q], &mut [u16]) + Sync,
) {
    let rows = src.len() / cols.max(1);
    if src.len() < (1 << 20) {
        return f(src, q, d);
    }
    let per = rows.div_ceil(threads()).max(1);
    let qr = q.len() / rows; // values per row in the output
    std::thread::scope(|s| {
        for ((a, b), c) in src
            .chunks(per * cols)
            .zip(q.chunks_mut(per * qr))
            .zip(d.chunks_mut(per * cols / QK))
        {
            let f = &f;
            s.spawn(move || f(a, b, c));
        }
    });
}

/// Q8_0: scale = max|x| / 127, values rounded to nearest. Returns the f16 scale bits.
pub fn quantize_q8_0_block(x: &[f32], out: &mut [i8]) -> u16 {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v * id).round() as i8;
    }
    f16::from_f32(d).to_bits()
}

/// Q4_0 as llama.cpp: scale = (value of largest magnitude) / -8, q = clamp(x / d + 8.5, 0, 15).
pub fn quantize_q4_0_block(x: &[f32], out: &mut [u8]) -> u16 {
    let mut amax = 0f32;
    let mut max = 0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -8.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for j in 0..QK / 2 {
        let q0 = ((x[j] * id + 8.5) as i32).clamp(0, 15) as u8;
        let q1 = ((x[j + QK / 2] * id + 8.5) as i32).clamp(0, 15) as u8;
        out[j] = q0 | (q1 << 4);
    }
    f16::from_f32(d).to_bits()
}

/// Activations quantized per 32-value block for the int8 kernels: values, scale and scaled sum.
#[derive(Debug, Clone, PartialEq)]
pub struct Q8_1 {
    pub qs: Vec<i8>,
    pub d: Vec<f32>,
    pub s: Vec<f32>,
}

/// The CPU definition of the `quantize_q8_1_bf16` kernel.
pub fn quantize_q8_1(x: &[f32]) -> Q8_1 {
    let mut qs = vec![0i8; x.len()];
    let mut d = Vec::with_capacity(x.len() / QK);
    let mut s = Vec::with_capacity(x.len() / QK);
    for (blk, out) in x.chunks_exact(QK).zip(qs.chunks_exact_mut(QK)) {
        let amax = blk.iter().fold(0f32, |m, v| m.max(v.abs()));
        let db = amax / 127.0;
        let mut sum = 0i32;
        for (o, &v) in out.iter_mut().zip(blk) {
            let q = if amax == 0.0 {
                0
            } else {
                (v / db).round() as i32
            };
            *o = q as i8;
            sum += q;
        }
        d.push(db);
        s.push(db * sum as f32);
    }
    Q8_1 { qs, d, s }
}

impl Q8_1 {
    /// The first `rows` rows of `k` values k-major, as `quantize_q8_1_bf16_kmajor` lays them
    /// out for MMQ: block `b` of every row side by side (`qs [k/32, rows, 32]`, `d`, `s [k/32, rows]`).
    pub fn rows_k_major(&self, rows: usize, k: usize) -> Q8_1 {
        let kb = k / QK;
        let mut out = Q8_1 {
            qs: Vec::with_capacity(rows * k),
            d: Vec::with_capacity(rows * kb),
            s: Vec::with_capacity(rows * kb),
        };
        for b in 0..kb {
            for r in 0..rows {
                out.qs
                    .extend_from_slice(&self.qs[r * k + b * QK..r * k + (b + 1) * QK]);
                out.d.push(self.d[r * kb + b]);
                out.s.push(self.s[r * kb + b]);
            }
        }
        out
    }
}

/// Rounds to the nearest bf16 value (ties to even), the precision of every GEMM input.
pub fn round_bf16(x: f32) -> f32 {
    bf16::from_f32(x).to_f32()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ramp(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0)
            .collect()
    }

    #[test]
    fn k_major_puts_each_block_of_every_row_side_by_side() {
        let (rows, k) = (3, 64);
        let q = quantize_q8_1(&ramp(rows * k));
        let m = q.rows_k_major(rows, k);
        for r in 0..rows {
            for b in 0..k / QK {
                assert_eq!(m.d[b * rows + r], q.d[r * 2 + b]);
                assert_eq!(m.s[b * rows + r], q.s[r * 2 + b]);
                for j in 0..QK {
                    assert_eq!(m.qs[(b * rows + r) * QK + j], q.qs[r * k + b * QK + j]);
                }
            }
        }
    }

    #[test]
    fn q8_0_round_trip_within_half_a_step() {
        let v = ramp(64);
        let m = Matrix::from_f32(WeightFormat::Q8_0, 2, 32, &v);
        let back = m.dequantize();
        for (blk, bb) in v.chunks(32).zip(back.chunks(32)) {
            let amax = blk.iter().fold(0f32, |a, x| a.max(x.abs()));
            for (a, b) in blk.iter().zip(bb) {
                assert!(
                    (a - b).abs() <= amax / 127.0 * 0.5 + amax * 1e-3,
                    "{a} vs {b}"
                );
            }
        }
        assert_eq!(m.bytes(), 64 + 4);
    }

    #[test]
    fn q4_0_matches_llama_cpp_layout() {
        // Block whose largest-magnitude value is -1.0: d = 1/8, q = x*8 + 8.5 truncated.
        let mut v = [0f32; 32];
        v[0] = -1.0;
        v[16] = 0.5;
        v[1] = 0.875;
        let m = Matrix::from_f32(WeightFormat::Q4_0, 1, 32, &v);
        let Matrix::Q4_0 { qs, d, .. } = &m else {
            unreachable!()
        };
        assert_eq!(f16::from_bits(d[0]).to_f32(), 0.125);
        assert_eq!(qs[0] & 0x0f, 0); // -1.0 -> 0
        assert_eq!(qs[0] >> 4, 12); // 0.5 -> 12
        assert_eq!(qs[1] & 0x0f, 15); // 0.875 -> 15
        let back = m.dequantize();
        assert_eq!(back[0], -1.0);
        assert_eq!(back[16], 0.5);
        assert_eq!(back[1], 0.875);
        assert_eq!(m.bytes(), 16 + 2);
    }

    #[test]
    fn q8_1_sum_and_scale() {
        let v = ramp(64);
        let q = quantize_q8_1(&v);
        for b in 0..2 {
            let sum: i32 = q.qs[b * 32..b * 32 + 32]
                .iter()
                .map(|&x| i32::from(x))
                .sum();
            assert!((q.s[b] - q.d[b] * sum as f32).abs() < 1e-6);
            let amax = v[b * 32..b * 32 + 32]
                .iter()
                .fold(0f32, |a, x| a.max(x.abs()));
            assert!((q.d[b] - amax / 127.0).abs() < 1e-9);
        }
        let zero = quantize_q8_1(&[0.0; 32]);
        assert!(zero.qs.iter().all(|&x| x == 0) && zero.d[0] == 0.0);
    }

    #[test]
    fn parallel_conversion_equals_serial() {
        let (rows, cols) = (1024, 2048); // above the parallel threshold
        let v: Vec<f32> = (0..rows * cols)
            .map(|i| ((i * 7919 % 1000) as f32 - 500.0) / 300.0)
            .collect();
        for fmt in [WeightFormat::Bf16, WeightFormat::Q8_0, WeightFormat::Q4_0] {
            let par = Matrix::from_f32(fmt, rows, cols, &v);
            let serial = Matrix::from_f32(fmt, 1, 2048, &v[..2048]);
            let pd = par.dequantize();
            assert_eq!(&pd[..2048], &serial.dequantize()[..]);
            let last = Matrix::from_f32(fmt, 1, 2048, &v[v.len() - 2048..]);
            assert_eq!(&pd[pd.len() - 2048..], &last.dequantize()[..]);
        }
    }

    #[test]
    fn bf16_matrix_is_rounded() {
        let m = Matrix::from_f32(WeightFormat::Bf16, 1, 2, &[1.0 + 1.0 / 512.0, 3.0]);
        assert_eq!(m.dequantize(), vec![1.0, 3.0]);
    }
}
