//! Decode attention over a paged cache with a shuffled block table, through the backend's
//! `AttnArgs`: one key lane with split 1, split 4 and split 13 (combined in the kernel, as production runs), key
//! lanes combined on chip, both at once; then the decode entries with RoPE and the KV append
//! fused in, which must give the same bits as `rope_kv_append_f32` followed by attention.

use super::{Ctx, TOL_BF16, to_bf16_bits};
use crate::cpu::ops;
use crate::cuda::attention_args::{AttnArgs, RopeArgs};
use crate::cuda::attention_shape;
use crate::cuda::{DevBuf, Device};
use crate::error::Result;
use crate::quant::round_bf16;

/// (query heads, KV heads, head dim).
const HEADS: [(usize, usize, usize); 5] = [
    (32, 8, 128),
    (8, 2, 64),
    (28, 4, 128),
    (14, 2, 64),
    (8, 2, 256),
];
/// Sequences (one decode row each).
const NSEQ: usize = 3;
/// Positions per cache block.
const BS: usize = 16;
/// Blocks per sequence in the block table.
const MAX_BLOCKS: usize = 8;
/// Sequence lengths: one position, a partial block, the whole table.
const LENS: [usize; NSEQ] = [1, 37, 128];
/// Split-K partial buffers are sized for this many splits.
const MAX_SPLITS: usize = 13;

pub(super) fn attention(c: &mut Ctx<'_>) -> Result<()> {
    for (nq, nkv, hd) in HEADS {
        let p = Paged::new(c, nq, nkv, hd)?;
        let q = c.randf(NSEQ * nq * hd, 1.0);
        let qb = c.up(&q)?;
        let want = p.want(&q, nq * hd, &p.k, &p.v);
        let max_kw = attention_shape::max_key_lanes(hd);
        let shapes = [
            (1usize, 1usize),
            (1, 4),
            (1, 13),
            (2, 1),
            (max_kw, 1),
            (4, 2),
        ];
        for (kw, splits) in shapes {
            let ob = c.poisoned(NSEQ * nq * hd * 2)?;
            let read = (p.kb.ptr, p.vb.ptr);
            let run = Run {
                qkv: qb.ptr,
                stride: nq * hd,
                read,
                write: (0, 0),
                rope: false,
                out: ob.ptr,
            };
            p.launch(c.dev, &run, kw, splits)?;
            let got = c.read_bf16(&ob, NSEQ * nq * hd)?;
            c.check(
                format!(
                    "attn_decode_bf16 nq={nq} nkv={nkv} hd={hd} key_lanes={kw} splits={splits}"
                ),
                &got,
                &want,
                TOL_BF16,
            );
        }
        fused_rope(c, &p, max_kw)?;
    }
    Ok(())
}

/// A paged cache of random bf16 K and V rows behind a permuted block table, the rows'
/// metadata and the kernels' scratch buffers, for one head shape.
struct Paged {
    nq: usize,
    nkv: usize,
    hd: usize,
    k: Vec<f32>,
    v: Vec<f32>,
    table: Vec<i32>,
    row_pos: Vec<i32>,
    row_slot: Vec<i32>,
    inv: Vec<f32>,
    kb: DevBuf,
    vb: DevBuf,
    tb: DevBuf,
    rsb: DevBuf,
    rpb: DevBuf,
    rlb: DevBuf,
    fb: DevBuf,
    counters: DevBuf,
    pa: DevBuf,
    pm: DevBuf,
}

/// The cache slot of sequence `s`'s position `pos` through the block table.
fn slot_of(table: &[i32], s: usize, pos: usize) -> usize {
    table[s * MAX_BLOCKS + pos / BS] as usize * BS + pos % BS
}

/// The inputs and output of one attention launch: (qkv, its row stride), the caches read and
/// (with `rope`) written, and the bf16 output.
struct Run {
    qkv: u64,
    stride: usize,
    read: (u64, u64),
    write: (u64, u64),
    rope: bool,
    out: u64,
}

impl Paged {
    fn new(c: &mut Ctx<'_>, nq: usize, nkv: usize, hd: usize) -> Result<Self> {
        let slots = NSEQ * MAX_BLOCKS * BS;
        let kv_dim = nkv * hd;
        let k = c.bf16_vals(slots * kv_dim, 1.0);
        let v = c.bf16_vals(slots * kv_dim, 1.0);
        // Physical block of (seq s, block j) = a permutation.
        let table: Vec<i32> = (0..NSEQ * MAX_BLOCKS)
            .map(|i| ((i * 7 + 3) % (NSEQ * MAX_BLOCKS)) as i32)
            .collect();
        let row_seq: Vec<i32> = (0..NSEQ as i32).collect();
        let row_pos: Vec<i32> = LENS.iter().map(|&l| l as i32 - 1).collect();
        let row_slot: Vec<i32> = (0..NSEQ)
            .map(|s| slot_of(&table, s, LENS[s] - 1) as i32)
            .collect();
        let inv: Vec<f32> = (0..hd / 2)
            .map(|i| 500000f32.powf(-((2 * i) as f32) / hd as f32))
            .collect();
        Ok(Self {
            nq,
            nkv,
            hd,
            kb: c.up(&to_bf16_bits(&k))?,
            vb: c.up(&to_bf16_bits(&v))?,
            tb: c.up(&table)?,
            rsb: c.up(&row_seq)?,
            rpb: c.up(&row_pos)?,
            rlb: c.up(&row_slot)?,
            fb: c.up(&inv)?,
            counters: c.up(&vec![0i32; NSEQ * nq.div_ceil(4)])?,
            pa: c.poisoned(NSEQ * nq * MAX_SPLITS * hd * 4)?,
            pm: c.poisoned(NSEQ * nq * MAX_SPLITS * 2 * 4)?,
            k,
            v,
            table,
            row_pos,
            row_slot,
            inv,
        })
    }

    /// The CPU's attention of each sequence's query (rows of `stride` in `q`) over its
    /// positions of the caches `k` and `v`.
    fn want(&self, q: &[f32], stride: usize, k: &[f32], v: &[f32]) -> Vec<f32> {
        let (nq, nkv, hd) = (self.nq, self.nkv, self.hd);
        let kv_dim = nkv * hd;
        let mut want = Vec::new();
        for s in 0..NSEQ {
            let mut ks = Vec::new();
            let mut vs = Vec::new();
            for p in 0..LENS[s] {
                let slot = slot_of(&self.table, s, p);
                ks.extend_from_slice(&k[slot * kv_dim..(slot + 1) * kv_dim]);
                vs.extend_from_slice(&v[slot * kv_dim..(slot + 1) * kv_dim]);
            }
            want.extend(ops::attention_row(
                &q[s * stride..s * stride + nq * hd],
                &ks,
                &vs,
                LENS[s],
                nq,
                nkv,
                hd,
                false,
            ));
        }
        want
    }

    /// One attention launch with `kw` key lanes and `splits` splits, their partials combined
    /// in the kernel by the last split to finish.
    fn launch(&self, dev: &Device, r: &Run, kw: usize, splits: usize) -> Result<()> {
        let attn = AttnArgs {
            qkv: r.qkv,
            q_stride: r.stride,
            k_read: r.read.0,
            v_read: r.read.1,
            block_table: self.tb.ptr,
            max_blocks: MAX_BLOCKS,
            block_size: BS,
            row_seq: self.rsb.ptr,
            row_pos: self.rpb.ptr,
            row_slot: self.rlb.ptr,
            inv_freq: self.fb.ptr,
            rope: r.rope,
            k_cache: r.write.0,
            v_cache: r.write.1,
            out: r.out,
            part_acc: self.pa.ptr,
            part_ml: self.pm.ptr,
            counters: self.counters.ptr,
            heads: self.nq,
            kv_heads: self.nkv,
            head_dim: self.hd,
            chunk: (MAX_BLOCKS * BS).div_ceil(splits).div_ceil(16) * 16,
        };
        let (kern, grid, block) = attn.launch(NSEQ, kw, splits)?;
        dev.launch(kern, grid, block, &attn.args())?;
        Ok(())
    }
}

/// Fused RoPE + KV append: an unrotated qkv block; the unfused reference runs
/// rope_kv_append_f32 on a copy and then attention over the cache it wrote.
fn fused_rope(c: &mut Ctx<'_>, p: &Paged, max_kw: usize) -> Result<()> {
    let (nq, nkv, hd) = (p.nq, p.nkv, p.hd);
    let (kv_dim, slots) = (nkv * hd, NSEQ * MAX_BLOCKS * BS);
    let stride = (nq + 2 * nkv) * hd;
    let qkv = c.randf(NSEQ * stride, 1.0);
    let want_fused = want_fused(p, &qkv, stride);
    for (kw, splits) in [(1usize, 1usize), (1, 4), (max_kw, 1), (4, 2)] {
        // Unfused: rope_kv_append_f32, then attention over the cache.
        let (ka, va, qa) = (
            c.up(&to_bf16_bits(&p.k))?,
            c.up(&to_bf16_bits(&p.v))?,
            c.up(&qkv)?,
        );
        let rope = RopeArgs {
            qkv: qa.ptr,
            pos: p.rpb.ptr,
            slots: p.rlb.ptr,
            inv_freq: p.fb.ptr,
            k_cache: ka.ptr,
            v_cache: va.ptr,
            heads: nq,
            kv_heads: nkv,
            head_dim: hd,
            row_stride: stride,
            rope_dim: hd,
        };
        c.rope_kv_append(&rope, NSEQ)?;
        let oa = c.poisoned(NSEQ * nq * hd * 2)?;
        let unfused = Run {
            qkv: qa.ptr,
            stride,
            read: (ka.ptr, va.ptr),
            write: (0, 0),
            rope: false,
            out: oa.ptr,
        };
        p.launch(c.dev, &unfused, kw, splits)?;
        // Fused: the same inputs in one launch.
        let (kf, vf, qf) = (
            c.up(&to_bf16_bits(&p.k))?,
            c.up(&to_bf16_bits(&p.v))?,
            c.up(&qkv)?,
        );
        let of = c.poisoned(NSEQ * nq * hd * 2)?;
        let fused = Run {
            qkv: qf.ptr,
            stride,
            read: (kf.ptr, vf.ptr),
            write: (kf.ptr, vf.ptr),
            rope: true,
            out: of.ptr,
        };
        p.launch(c.dev, &fused, kw, splits)?;
        let name = format!(
            "attention+rope fused nq={nq} nkv={nkv} hd={hd} key_lanes={kw} splits={splits}"
        );
        let (ga, gf) = (
            c.read_bf16(&oa, NSEQ * nq * hd)?,
            c.read_bf16(&of, NSEQ * nq * hd)?,
        );
        c.check(format!("{name} vs CPU"), &gf, &want_fused, TOL_BF16);
        c.check(format!("{name} vs unfused (bitwise)"), &gf, &ga, 0.0);
        let (cka, ckf) = (
            c.read_bf16(&ka, slots * kv_dim)?,
            c.read_bf16(&kf, slots * kv_dim)?,
        );
        let (cva, cvf) = (
            c.read_bf16(&va, slots * kv_dim)?,
            c.read_bf16(&vf, slots * kv_dim)?,
        );
        c.check(
            format!("{name} K cache vs unfused (bitwise)"),
            &ckf,
            &cka,
            0.0,
        );
        c.check(
            format!("{name} V cache vs unfused (bitwise)"),
            &cvf,
            &cva,
            0.0,
        );
    }
    Ok(())
}

/// The CPU's result of the fused launch: each row of the unrotated `qkv` rotated, its k and v
/// written to copies of the caches at its slot, then attention over those.
fn want_fused(p: &Paged, qkv: &[f32], stride: usize) -> Vec<f32> {
    let (nq, nkv, hd) = (p.nq, p.nkv, p.hd);
    let kv_dim = nkv * hd;
    let mut roped = qkv.to_vec();
    let (mut k2, mut v2) = (p.k.clone(), p.v.clone());
    for r in 0..NSEQ {
        let row = &mut roped[r * stride..(r + 1) * stride];
        for h in 0..nq + nkv {
            ops::rope(&mut row[h * hd..(h + 1) * hd], &p.inv, p.row_pos[r]);
        }
        let sl = p.row_slot[r] as usize * kv_dim;
        for i in 0..kv_dim {
            k2[sl + i] = round_bf16(row[nq * hd + i]);
            v2[sl + i] = round_bf16(row[(nq + nkv) * hd + i]);
        }
    }
    p.want(&roped, stride, &k2, &v2)
}
