// Quantized tiled GEMM (MMQ-like) for larger batches: int8 tensor-core mma.sync m16n8k32.
// One k-step of the MMA is exactly one 32-value quant block, so every block's int32 result is
// scaled by its weight scale and activation scale before accumulating in f32.
//
// Tile: 64 weight rows x 64 batch columns per 4-warp block; each warp owns 16 rows and up to
// eight 8-column MMA tiles. Fragments are loaded straight from global memory (the activations
// are small and stay in L1/L2). Weight layouts as in mmvq.cu; output modes STORE and ACCUMULATE.

#define MMQ_BM 64
#define MMQ_BN 64

__device__ __forceinline__ void mma_s8s8(int c[4], int a0, int a1, int a2, int a3, int b0, int b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mma_u8s8(int c[4], int a0, int a1, int a2, int a3, int b0, int b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void mmq_out(float* __restrict__ y, const float* __restrict__ bias, int N, int row,
                                        int col, float v, int mode) {
    float* dst = y + (i64)col * N + row;
    if (mode == OUT_ACCUMULATE) {
        *dst += v;
    } else {
        *dst = v + (bias ? bias[row] : 0.0f);
    }
}

template <bool Q4>
__device__ __forceinline__ void mmq_impl(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                         const i8* __restrict__ qx, const float* __restrict__ dx,
                                         const float* __restrict__ sx, float* __restrict__ y,
                                         const float* __restrict__ bias, int N, int K, int nb, int mode) {
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.x * MMQ_BM + warp * 16;
    const int n0 = blockIdx.y * MMQ_BN;
    const int kblocks = K >> 5;
    const int r0 = m0 + g, r1 = m0 + g + 8;
    const bool v0 = r0 < N, v1 = r1 < N;
    const int ntiles = min(8, (nb - n0 + 7) >> 3);
    float acc[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

    for (int kb = 0; kb < kblocks; ++kb) {
        int a0, a1, a2, a3;
        if (Q4) {
            const unsigned w0 = v0 ? __ldg(reinterpret_cast<const unsigned*>(qw + (i64)r0 * (K >> 1) + kb * 16 + t * 4)) : 0u;
            const unsigned w1 = v1 ? __ldg(reinterpret_cast<const unsigned*>(qw + (i64)r1 * (K >> 1) + kb * 16 + t * 4)) : 0u;
            a0 = (int)(w0 & 0x0f0f0f0fu);
            a2 = (int)((w0 >> 4) & 0x0f0f0f0fu);
            a1 = (int)(w1 & 0x0f0f0f0fu);
            a3 = (int)((w1 >> 4) & 0x0f0f0f0fu);
        } else {
            const u8* p0 = qw + (i64)r0 * K + kb * 32 + t * 4;
            const u8* p1 = qw + (i64)r1 * K + kb * 32 + t * 4;
            a0 = v0 ? __ldg(reinterpret_cast<const int*>(p0)) : 0;
            a2 = v0 ? __ldg(reinterpret_cast<const int*>(p0 + 16)) : 0;
            a1 = v1 ? __ldg(reinterpret_cast<const int*>(p1)) : 0;
            a3 = v1 ? __ldg(reinterpret_cast<const int*>(p1 + 16)) : 0;
        }
        const float d0 = v0 ? f16_to_f32(__ldg(dw + (i64)r0 * kblocks + kb)) : 0.0f;
        const float d1 = v1 ? f16_to_f32(__ldg(dw + (i64)r1 * kblocks + kb)) : 0.0f;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
            if (nt >= ntiles) break;
            const int colb = n0 + nt * 8 + g;
            int b0 = 0, b1 = 0;
            if (colb < nb) {
                const i8* px = qx + (i64)colb * K + kb * 32 + t * 4;
                b0 = *reinterpret_cast<const int*>(px);
                b1 = *reinterpret_cast<const int*>(px + 16);
            }
            int c[4] = {0, 0, 0, 0};
            if (Q4) {
                mma_u8s8(c, a0, a1, a2, a3, b0, b1);
            } else {
                mma_s8s8(c, a0, a1, a2, a3, b0, b1);
            }
            const int cc = n0 + nt * 8 + t * 2;
            const float xa = cc < nb ? dx[(i64)cc * kblocks + kb] : 0.0f;
            const float xb = cc + 1 < nb ? dx[(i64)(cc + 1) * kblocks + kb] : 0.0f;
            if (Q4) {
                const float sa = cc < nb ? sx[(i64)cc * kblocks + kb] : 0.0f;
                const float sb = cc + 1 < nb ? sx[(i64)(cc + 1) * kblocks + kb] : 0.0f;
                acc[nt][0] = fmaf(d0, xa * (float)c[0] - 8.0f * sa, acc[nt][0]);
                acc[nt][1] = fmaf(d0, xb * (float)c[1] - 8.0f * sb, acc[nt][1]);
                acc[nt][2] = fmaf(d1, xa * (float)c[2] - 8.0f * sa, acc[nt][2]);
                acc[nt][3] = fmaf(d1, xb * (float)c[3] - 8.0f * sb, acc[nt][3]);
            } else {
                acc[nt][0] = fmaf(d0 * xa, (float)c[0], acc[nt][0]);
                acc[nt][1] = fmaf(d0 * xb, (float)c[1], acc[nt][1]);
                acc[nt][2] = fmaf(d1 * xa, (float)c[2], acc[nt][2]);
                acc[nt][3] = fmaf(d1 * xb, (float)c[3], acc[nt][3]);
            }
        }
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
        if (nt >= ntiles) break;
        const int cc = n0 + nt * 8 + t * 2;
        if (v0 && cc < nb) mmq_out(y, bias, N, r0, cc, acc[nt][0], mode);
        if (v0 && cc + 1 < nb) mmq_out(y, bias, N, r0, cc + 1, acc[nt][1], mode);
        if (v1 && cc < nb) mmq_out(y, bias, N, r1, cc, acc[nt][2], mode);
        if (v1 && cc + 1 < nb) mmq_out(y, bias, N, r1, cc + 1, acc[nt][3], mode);
    }
}

// y [nb, N] f32. grid = (ceil(N / 64), ceil(nb / 64)), block = 128. K % 32 == 0.
extern "C" __global__ void __launch_bounds__(128) mmq_q8_0(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                          const i8* __restrict__ qx, const float* __restrict__ dx,
                                                          const float* __restrict__ sx, float* __restrict__ y,
                                                          const float* __restrict__ bias, int N, int K, int nb,
                                                          int mode) {
    mmq_impl<false>(qw, dw, qx, dx, sx, y, bias, N, K, nb, mode);
}

extern "C" __global__ void __launch_bounds__(128) mmq_q4_0(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                          const i8* __restrict__ qx, const float* __restrict__ dx,
                                                          const float* __restrict__ sx, float* __restrict__ y,
                                                          const float* __restrict__ bias, int N, int K, int nb,
                                                          int mode) {
    mmq_impl<true>(qw, dw, qx, dx, sx, y, bias, N, K, nb, mode);
}
