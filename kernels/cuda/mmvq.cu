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

// Batch-1 entries, one per output shape (plain rows, or gate/up pairs for the SwiGLU
// epilogue), so each gets its own register allocation and occupancy (see gemv_bf16_b1).
extern "C" __global__ void __launch_bounds__(128) mmvq_q8_0_b1(const i8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                              const i8* __restrict__ qx, const float* __restrict__ dx,
                                                              const float* __restrict__ sx, float* __restrict__ y,
                                                              bf16_t* __restrict__ yh, const float* __restrict__ bias,
                                                              int n_out, int K, int nb, int mode) {
    CALL_Q8(1, 1);
}

extern "C" __global__ void __launch_bounds__(128) mmvq_q8_0_b1_swiglu(const i8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                                     const i8* __restrict__ qx, const float* __restrict__ dx,
                                                                     const float* __restrict__ sx, float* __restrict__ y,
                                                                     bf16_t* __restrict__ yh, const float* __restrict__ bias,
                                                                     int n_out, int K, int nb, int mode) {
    CALL_Q8(1, 2);
}

extern "C" __global__ void __launch_bounds__(128) mmvq_q4_0_b1(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                              const i8* __restrict__ qx, const float* __restrict__ dx,
                                                              const float* __restrict__ sx, float* __restrict__ y,
                                                              bf16_t* __restrict__ yh, const float* __restrict__ bias,
                                                              int n_out, int K, int nb, int mode) {
    CALL_Q4(1, 1);
}

extern "C" __global__ void __launch_bounds__(128) mmvq_q4_0_b1_swiglu(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                                     const i8* __restrict__ qx, const float* __restrict__ dx,
                                                                     const float* __restrict__ sx, float* __restrict__ y,
                                                                     bf16_t* __restrict__ yh, const float* __restrict__ bias,
                                                                     int n_out, int K, int nb, int mode) {
    CALL_Q4(1, 2);
}

// block = 32 * MMVQ_WARPS, any grid.x (warps stride over outputs); output modes as gemv_bf16.
extern "C" __global__ void __launch_bounds__(128) mmvq_q8_0(const i8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                           const i8* __restrict__ qx, const float* __restrict__ dx,
                                                           const float* __restrict__ sx, float* __restrict__ y,
                                                           bf16_t* __restrict__ yh, const float* __restrict__ bias,
                                                           int n_out, int K, int nb, int mode) {
    if (mode == OUT_SWIGLU) {
        MMVQ_CASES(CALL_Q8, 2)
    } else {
        MMVQ_CASES(CALL_Q8, 1)
    }
}

extern "C" __global__ void __launch_bounds__(128) mmvq_q4_0(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                           const i8* __restrict__ qx, const float* __restrict__ dx,
                                                           const float* __restrict__ sx, float* __restrict__ y,
                                                           bf16_t* __restrict__ yh, const float* __restrict__ bias,
                                                           int n_out, int K, int nb, int mode) {
    if (mode == OUT_SWIGLU) {
        MMVQ_CASES(CALL_Q4, 2)
    } else {
        MMVQ_CASES(CALL_Q4, 1)
    }
}
