// Quantized GEMV (MMVQ-like) for small batches: int8 dot products (dp4a) between Q8_0 / Q4_0
// weight blocks and q8_1-quantized activations. One warp per output; nb <= 8.
//
// Weight layouts (structure of arrays, so every load is 16-byte aligned):
//   Q8_0: qs int8 [N, K], d f16 [N, K/32]
//   Q4_0: qs u8 [N, K/2] (block of 16 bytes: byte j holds element j in its low nibble and
//         element j + 16 in its high nibble, values offset by 8), d f16 [N, K/32]

#define MMVQ_WARPS 4

template <int NB, int R>
__device__ __forceinline__ void mmvq_store(double acc[R][NB], float* __restrict__ y, bf16_t* __restrict__ yh,
                                           const float* __restrict__ bias, int o, int n_out, int mode) {
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int b = 0; b < NB; ++b) acc[r][b] = warp_sum_f64(acc[r][b]);
    if ((threadIdx.x & 31) != 0) return;
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        if (R == 2) {
            yh[(i64)b * n_out + o] = f32_to_bf16(silu((float)acc[0][b]) * (float)acc[R - 1][b]);
        } else if (mode == OUT_ACCUMULATE) {
            y[(i64)b * n_out + o] += (float)acc[0][b];
        } else {
            y[(i64)b * n_out + o] = (float)acc[0][b] + (bias ? bias[o] : 0.0f);
        }
    }
}

// Each lane takes whole quant blocks (lane, lane + 32, ...), four blocks' loads in flight;
// warps stride over outputs so a resident-sized grid has no tail wave.
template <int NB, int R>
__device__ __forceinline__ void mmvq_q8_0_impl(const i8* __restrict__ qw, const f16_t* __restrict__ dw,
                                               const i8* __restrict__ qx, const float* __restrict__ dx,
                                               float* __restrict__ y, bf16_t* __restrict__ yh,
                                               const float* __restrict__ bias, int n_out, int K, int mode) {
    pdl_enter();
    const int lane = threadIdx.x & 31;
    const int kblocks = K >> 5;
    for (int o = blockIdx.x * MMVQ_WARPS + (threadIdx.x >> 5); o < n_out; o += gridDim.x * MMVQ_WARPS) {
        double acc[R][NB];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int b = 0; b < NB; ++b) acc[r][b] = 0.0;
        for (int b0 = lane; b0 < kblocks; b0 += 4 * 32) {
            uint4 w[4][R][2];
            float d[4][R];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int blk = b0 + u * 32;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const i64 row = (i64)(o * R + r);
                    const bool ok = blk < kblocks;
                    w[u][r][0] = ok ? ldg_stream(qw + row * K + blk * 32) : uint4_zero();
                    w[u][r][1] = ok ? ldg_stream(qw + row * K + blk * 32 + 16) : uint4_zero();
                    d[u][r] = ok ? f16_to_f32(__ldg(dw + row * kblocks + blk)) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int blk = b0 + u * 32;
                if (blk >= kblocks) break;
#pragma unroll
                for (int b = 0; b < NB; ++b) {
                    const int4 x0 = *reinterpret_cast<const int4*>(qx + (i64)b * K + blk * 32);
                    const int4 x1 = *reinterpret_cast<const int4*>(qx + (i64)b * K + blk * 32 + 16);
                    const float db = dx[(i64)b * kblocks + blk];
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const uint4 a = w[u][r][0], c = w[u][r][1];
                        int s = dp4a_ss((int)a.x, x0.x, 0);
                        s = dp4a_ss((int)a.y, x0.y, s);
                        s = dp4a_ss((int)a.z, x0.z, s);
                        s = dp4a_ss((int)a.w, x0.w, s);
                        s = dp4a_ss((int)c.x, x1.x, s);
                        s = dp4a_ss((int)c.y, x1.y, s);
                        s = dp4a_ss((int)c.z, x1.z, s);
                        s = dp4a_ss((int)c.w, x1.w, s);
                        acc[r][b] += (double)block_term_q8(d[u][r], db, s);
                    }
                }
            }
        }
        mmvq_store<NB, R>(acc, y, yh, bias, o, n_out, mode);
    }
}

// The int8 dot product of 16 weight bytes with 16 activation bytes, summed over the lane pair.
__device__ __forceinline__ int mmvq_b1_pair_dot(uint4 w, int4 x) {
    int s = dp4a_ss((int)w.x, x.x, 0);
    s = dp4a_ss((int)w.y, x.y, s);
    s = dp4a_ss((int)w.z, x.z, s);
    s = dp4a_ss((int)w.w, x.w, s);
    return s + __shfl_xor_sync(0xffffffffu, s, 1);
}

// Batch-1 Q8_0 rows with contiguous loads: in each chunk of 32 blocks a lane pair covers
// blocks m and m + 16 (lane 2m the first 16 bytes of each, lane 2m + 1 the last), so one warp
// load instruction reads 512 contiguous bytes where mmvq_q8_0_impl's reads 16 of every 32.
// The pair's int8 sums meet by a shuffle (exact); lane 2m adds block m's term, lane 2m + 1
// block m + 16's, in f64 as before, so the bits are the same. It needs 78 registers (6 blocks
// per SM against 9): on the H200 it took 14336x4096 from 73.6-75.1% to 76.8-78.1% of copy
// bandwidth, but 4096-row linears ran slower and the 8B decode at batch 1 lost 2.5% with it
// on every plain row, so dispatch gives it only linears with many rows (docs/decisions/
// 2026-11-22-batch1-mmvq-entries.md). The gate/up pairs keep mmvq_q8_0_impl (this layout needed 119 registers there).
template <int R>
__device__ __forceinline__ void mmvq_q8_0_b1_pair_impl(const i8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                       const i8* __restrict__ qx, const float* __restrict__ dx,
                                                       float* __restrict__ y, bf16_t* __restrict__ yh,
                                                       const float* __restrict__ bias, int n_out, int K, int mode) {
    pdl_enter();
    const int lane = threadIdx.x & 31;
    const int half = (lane & 1) * 16, m = lane >> 1, mine = (lane & 1) * 16;
    const int kblocks = K >> 5;
    for (int o = blockIdx.x * MMVQ_WARPS + (threadIdx.x >> 5); o < n_out; o += gridDim.x * MMVQ_WARPS) {
        double acc[R][1];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r][0] = 0.0;
        for (int base = 0; base < kblocks; base += 4 * 32) {
            uint4 w[4][R][2];
            float d[4][R];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int cb = base + u * 32;
                const int b0 = cb + m, b1 = cb + 16 + m, bt = cb + mine + m;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const i64 row = (i64)(o * R + r);
                    w[u][r][0] = b0 < kblocks ? ldg_stream(qw + row * K + b0 * 32 + half) : uint4_zero();
                    w[u][r][1] = b1 < kblocks ? ldg_stream(qw + row * K + b1 * 32 + half) : uint4_zero();
                    d[u][r] = bt < kblocks ? f16_to_f32(__ldg(dw + row * kblocks + bt)) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int cb = base + u * 32;
                if (cb >= kblocks) break;  // the same in every lane
                const int b0 = cb + m, b1 = cb + 16 + m, bt = cb + mine + m;
                const int4 x0 = b0 < kblocks ? *reinterpret_cast<const int4*>(qx + b0 * 32 + half) : make_int4(0, 0, 0, 0);
                const int4 x1 = b1 < kblocks ? *reinterpret_cast<const int4*>(qx + b1 * 32 + half) : make_int4(0, 0, 0, 0);
                const float db = bt < kblocks ? dx[bt] : 0.0f;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int s0 = mmvq_b1_pair_dot(w[u][r][0], x0);
                    const int s1 = mmvq_b1_pair_dot(w[u][r][1], x1);
                    if (bt < kblocks) acc[r][0] += (double)block_term_q8(d[u][r], db, (lane & 1) ? s1 : s0);
                }
            }
        }
        mmvq_store<1, R>(acc, y, yh, bias, o, n_out, mode);
    }
}

template <int NB, int R>
__device__ __forceinline__ void mmvq_q4_0_impl(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                               const i8* __restrict__ qx, const float* __restrict__ dx,
                                               const float* __restrict__ sx, float* __restrict__ y,
                                               bf16_t* __restrict__ yh, const float* __restrict__ bias,
                                               int n_out, int K, int mode) {
    pdl_enter();
    const int lane = threadIdx.x & 31;
    const int kblocks = K >> 5;
    for (int o = blockIdx.x * MMVQ_WARPS + (threadIdx.x >> 5); o < n_out; o += gridDim.x * MMVQ_WARPS) {
        double acc[R][NB];
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int b = 0; b < NB; ++b) acc[r][b] = 0.0;
        for (int b0 = lane; b0 < kblocks; b0 += 4 * 32) {
            uint4 w[4][R];
            float d[4][R];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int blk = b0 + u * 32;
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const i64 row = (i64)(o * R + r);
                    const bool ok = blk < kblocks;
                    w[u][r] = ok ? ldg_stream(qw + row * (K >> 1) + blk * 16) : uint4_zero();
                    d[u][r] = ok ? f16_to_f32(__ldg(dw + row * kblocks + blk)) : 0.0f;
                }
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                const int blk = b0 + u * 32;
                if (blk >= kblocks) break;
#pragma unroll
                for (int b = 0; b < NB; ++b) {
                    const int4 xlo = *reinterpret_cast<const int4*>(qx + (i64)b * K + blk * 32);
                    const int4 xhi = *reinterpret_cast<const int4*>(qx + (i64)b * K + blk * 32 + 16);
                    const float db = dx[(i64)b * kblocks + blk];
                    const float sb = sx[(i64)b * kblocks + blk];
#pragma unroll
                    for (int r = 0; r < R; ++r) {
                        const uint4 wr = w[u][r];
                        int s = dp4a_us(wr.x & 0x0f0f0f0fu, xlo.x, 0);
                        s = dp4a_us(wr.y & 0x0f0f0f0fu, xlo.y, s);
                        s = dp4a_us(wr.z & 0x0f0f0f0fu, xlo.z, s);
                        s = dp4a_us(wr.w & 0x0f0f0f0fu, xlo.w, s);
                        s = dp4a_us((wr.x >> 4) & 0x0f0f0f0fu, xhi.x, s);
                        s = dp4a_us((wr.y >> 4) & 0x0f0f0f0fu, xhi.y, s);
                        s = dp4a_us((wr.z >> 4) & 0x0f0f0f0fu, xhi.z, s);
                        s = dp4a_us((wr.w >> 4) & 0x0f0f0f0fu, xhi.w, s);
                        acc[r][b] += (double)block_term_q4(d[u][r], db, sb, s);
                    }
                }
            }
        }
        mmvq_store<NB, R>(acc, y, yh, bias, o, n_out, mode);
    }
}

// Batch-1 Q8_0 MMVQ for few long rows (ffn_down), shaped like gemv_bf16_b1: where the rows
// fit in one pass of the one-warp-per-row kernel, each warp's whole row is a chain of
// dependent load rounds (4096x14336: 448 blocks in four rounds, the last half empty) and that
// kernel reached 70-71% of copy bandwidth; this one 75-76% (docs/decisions/2026-11-22-batch1-mmvq-entries.md).
// On many short rows (14336x4096) it is slower (59% vs 75%), so dispatch picks it by shape
// (DispatchPolicy::mmvq_b1_k_split_min_k). A block of MMVQ_B1_WARPS warps computes
// MMVQ_B1_ROWS outputs at a time with K split across its warps;
// in a warp a lane pair takes one quant block per step (16 bytes each, the pair's int8 sums
// added exactly by a shuffle), one step pair (blocks m and m + 16 of 32) in flight for all the tile's rows, the first
// before the PDL wait (weights depend on no earlier kernel). Block terms are the same f32
// values as mmvq_q8_0_impl's and are summed in f64, which is exact (so the result is the
// one-warp kernel's and MMQ's, whatever the split) unless a row's terms span more than about
// 2^20 in magnitude; the selftest compares the bits.
#define MMVQ_B1_WARPS 8
#define MMVQ_B1_ROWS 4

// Loads one step pair (blocks bb + lane/2 and bb + 16 + lane/2, this lane's half) of the tile's
// rows, which are consecutive from `row0`; zeros past the warp's segment or the last row.
__device__ __forceinline__ void mmvq_b1_load_q8(const i8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                i64 row0, int rows, int K, int kblocks, int bb, int b_end,
                                                int lane, uint4 w0[MMVQ_B1_ROWS], uint4 w1[MMVQ_B1_ROWS],
                                                unsigned int d[MMVQ_B1_ROWS]) {
    const int blk0 = bb + (lane >> 1), blk1 = blk0 + 16;
    const i8* wp = qw + row0 * K + blk0 * 32 + (lane & 1) * 16;
    const f16_t* dp = dw + row0 * kblocks + blk0;
    const bool ok0 = blk0 < b_end, ok1 = blk1 < b_end;
#pragma unroll
    for (int j = 0; j < MMVQ_B1_ROWS; ++j) {
        const bool r = j < rows;
        w0[j] = r && ok0 ? ldg_stream(wp + j * K) : uint4_zero();
        w1[j] = r && ok1 ? ldg_stream(wp + j * K + 16 * 32) : uint4_zero();
        // Both scales as raw f16 in one register (zero is +0.0).
        const unsigned int lo = r && ok0 ? __ldg(dp + j * kblocks) : 0u;
        const unsigned int hi = r && ok1 ? __ldg(dp + j * kblocks + 16) : 0u;
        d[j] = lo | (hi << 16);
    }
}

__device__ __forceinline__ void mmvq_q8_0_b1_ksplit_impl(const i8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                  const i8* __restrict__ qx, const float* __restrict__ dx,
                                                  float* __restrict__ y, bf16_t* __restrict__ yh,
                                                  const float* __restrict__ bias, int n_out, int K, int mode) {
    constexpr int T = MMVQ_B1_ROWS;  // outputs per tile (plain rows; no SwiGLU pairs)
    __shared__ double red[MMVQ_B1_WARPS][MMVQ_B1_ROWS];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int kblocks = K >> 5;
    const int seg = (kblocks + MMVQ_B1_WARPS - 1) / MMVQ_B1_WARPS;  // quant blocks per warp
    const int b_begin = min(kblocks, warp * seg);
    const int b_end = min(kblocks, b_begin + seg);
    uint4 w0[MMVQ_B1_ROWS], w1[MMVQ_B1_ROWS];
    unsigned int d[MMVQ_B1_ROWS];
    int tile = blockIdx.x;
    // The tile's first weight row, and how many of its MMVQ_B1_ROWS rows exist.
    const int n_rows = n_out;
    i64 row0 = (i64)tile * MMVQ_B1_ROWS;
    int rows = min(MMVQ_B1_ROWS, n_rows - tile * MMVQ_B1_ROWS);
    if (tile * T < n_out) mmvq_b1_load_q8(qw, dw, row0, rows, K, kblocks, b_begin, b_end, lane, w0, w1, d);
    pdl_enter();
    for (bool first = true; tile * T < n_out; tile += gridDim.x, first = false) {
        if (!first) {
            row0 = (i64)tile * MMVQ_B1_ROWS;
            rows = min(MMVQ_B1_ROWS, n_rows - tile * MMVQ_B1_ROWS);
            mmvq_b1_load_q8(qw, dw, row0, rows, K, kblocks, b_begin, b_end, lane, w0, w1, d);
        }
        double acc[MMVQ_B1_ROWS];
#pragma unroll
        for (int j = 0; j < MMVQ_B1_ROWS; ++j) acc[j] = 0.0;
        // bb is the same in every lane, so the pair shuffles always run with the full warp.
        for (int bb = b_begin; bb < b_end;) {
            const int blk0 = bb + (lane >> 1), blk1 = blk0 + 16, half = (lane & 1) * 16;
            const bool ok0 = blk0 < b_end, ok1 = blk1 < b_end;
            const int4 xa = ok0 ? *reinterpret_cast<const int4*>(qx + blk0 * 32 + half) : make_int4(0, 0, 0, 0);
            const int4 xb = ok1 ? *reinterpret_cast<const int4*>(qx + blk1 * 32 + half) : make_int4(0, 0, 0, 0);
            const float da = ok0 ? dx[blk0] : 0.0f, db = ok1 ? dx[blk1] : 0.0f;
#pragma unroll
            for (int j = 0; j < MMVQ_B1_ROWS; ++j) {
                const int s0 = mmvq_b1_pair_dot(w0[j], xa);
                const int s1 = mmvq_b1_pair_dot(w1[j], xb);
                if ((lane & 1) == 0) {
                    if (ok0) acc[j] += (double)block_term_q8(f16_to_f32((f16_t)(d[j] & 0xffffu)), da, s0);
                    if (ok1) acc[j] += (double)block_term_q8(f16_to_f32((f16_t)(d[j] >> 16)), db, s1);
                }
            }
            bb += 32;
            if (bb < b_end) mmvq_b1_load_q8(qw, dw, row0, rows, K, kblocks, bb, b_end, lane, w0, w1, d);
        }
#pragma unroll
        for (int j = 0; j < MMVQ_B1_ROWS; ++j) {
            const double v = warp_sum_f64(acc[j]);
            if (lane == 0) red[warp][j] = v;
        }
        __syncthreads();
        if (threadIdx.x < T) {
            const int o = tile * T + threadIdx.x;
            if (o < n_out) {
                double r0 = 0.0;
                for (int w = 0; w < MMVQ_B1_WARPS; ++w) r0 += red[w][threadIdx.x];
                if (mode == OUT_ACCUMULATE) {
                    y[o] += (float)r0;
                } else {
                    y[o] = (float)r0 + (bias ? bias[o] : 0.0f);
                }
            }
        }
        __syncthreads();
    }
}

#define MMVQ_CASES(CALL, R)                  \
    switch (nb) {                            \
        case 1: CALL(1, R); break;           \
        case 2: CALL(2, R); break;           \
        case 3: CALL(3, R); break;           \
        case 4: CALL(4, R); break;           \
        case 5: CALL(5, R); break;           \
        case 6: CALL(6, R); break;           \
        case 7: CALL(7, R); break;           \
        default: CALL(8, R); break;          \
    }

#define CALL_Q8(NB, R) mmvq_q8_0_impl<NB, R>(qw, dw, qx, dx, y, yh, bias, n_out, K, mode)
#define CALL_Q4(NB, R) mmvq_q4_0_impl<NB, R>(qw, dw, qx, dx, sx, y, yh, bias, n_out, K, mode)

// One entry: the shared signature (weights of type QT), launch bounds BOUNDS, and the body
// that follows the macro. Every entry takes the same arguments, so the host launches any of
// them with one argument list (linear.rs).
#define MMVQ_ENTRY(NAME, QT, BOUNDS)                                                            \
    extern "C" __global__ void __launch_bounds__ BOUNDS NAME(                                   \
        const QT* __restrict__ qw, const f16_t* __restrict__ dw, const i8* __restrict__ qx,     \
        const float* __restrict__ dx, const float* __restrict__ sx, float* __restrict__ y,      \
        bf16_t* __restrict__ yh, const float* __restrict__ bias, int n_out, int K, int nb, int mode)

// Batch-1 entries, one per output shape (plain rows, or gate/up pairs for the SwiGLU
// epilogue), so each gets its own register allocation and occupancy (see gemv_bf16_b1).
MMVQ_ENTRY(mmvq_q8_0_b1, i8, (128)) { CALL_Q8(1, 1); }

MMVQ_ENTRY(mmvq_q8_0_b1_swiglu, i8, (128)) { CALL_Q8(1, 2); }

// block = 32 * MMVQ_WARPS, any grid.x (warps stride over outputs): mmvq_q8_0_b1 with contiguous
// lane-pair loads, for linears with many rows (DispatchPolicy::mmvq_b1_pair_min_rows_per_k).
MMVQ_ENTRY(mmvq_q8_0_b1_pair, i8, (128)) {
    mmvq_q8_0_b1_pair_impl<1>(qw, dw, qx, dx, y, yh, bias, n_out, K, mode);
}

// block = 32 * MMVQ_B1_WARPS, any grid.x (blocks stride over tiles of MMVQ_B1_ROWS outputs).
// At most 3 blocks per SM: the register budget of 4 (64) spills, and measured slower.
MMVQ_ENTRY(mmvq_q8_0_b1_ksplit, i8, (256, 3)) {
    mmvq_q8_0_b1_ksplit_impl(qw, dw, qx, dx, y, yh, bias, n_out, K, mode);
}

MMVQ_ENTRY(mmvq_q4_0_b1, u8, (128)) { CALL_Q4(1, 1); }

MMVQ_ENTRY(mmvq_q4_0_b1_swiglu, u8, (128)) { CALL_Q4(1, 2); }

// block = 32 * MMVQ_WARPS, any grid.x (warps stride over outputs); output modes as gemv_bf16.
MMVQ_ENTRY(mmvq_q8_0, i8, (128)) {
    if (mode == OUT_SWIGLU) {
        MMVQ_CASES(CALL_Q8, 2)
    } else {
        MMVQ_CASES(CALL_Q8, 1)
    }
}

MMVQ_ENTRY(mmvq_q4_0, u8, (128)) {
    if (mode == OUT_SWIGLU) {
        MMVQ_CASES(CALL_Q4, 2)
    } else {
        MMVQ_CASES(CALL_Q4, 1)
    }
}
