// Quantized tiled GEMM (MMQ-like) for larger batches: int8 tensor-core mma.sync m16n8k32.
// One k-step of the MMA is exactly one 32-value quant block, so every block's int32 result is
// scaled by its weight scale and activation scale before accumulating in f32.
//
// Tile: 64 weight rows x 64 batch columns per 4-warp block; each warp owns 16 rows and up to
// eight 8-column MMA tiles. Per K chunk of 4 quant blocks, the block stages the activation tile
// (64 columns x 128 int8, padded rows) and its scales in shared memory while each warp's weight
// fragments load from global. Weight layouts as in mmvq.cu; output modes STORE and ACCUMULATE.

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

#define MMQ_KB 4                      // quant blocks per K chunk (128 values)
#define MMQ_XS (MMQ_KB * 32 + 16)     // smem row stride in bytes: 36 words, conflict-free B reads

// Weight fragments and scales of one K chunk for rows r0 and r1 (zeros past the end).
template <bool Q4>
__device__ __forceinline__ void mmq_load_a(const u8* __restrict__ qw, const f16_t* __restrict__ dw, int K, int kblocks,
                                           int kc, int r0, int r1, bool v0, bool v1, int t, int a[MMQ_KB][4],
                                           float d0[MMQ_KB], float d1[MMQ_KB]) {
#pragma unroll
    for (int u = 0; u < MMQ_KB; ++u) {
        const int kb = kc + u;
        const bool in = kb < kblocks;
        const bool ok0 = in && v0, ok1 = in && v1;
        if (Q4) {
            const unsigned w0 = ok0 ? __ldg(reinterpret_cast<const unsigned*>(qw + (i64)r0 * (K >> 1) + kb * 16 + t * 4)) : 0u;
            const unsigned w1 = ok1 ? __ldg(reinterpret_cast<const unsigned*>(qw + (i64)r1 * (K >> 1) + kb * 16 + t * 4)) : 0u;
            a[u][0] = (int)(w0 & 0x0f0f0f0fu);
            a[u][2] = (int)((w0 >> 4) & 0x0f0f0f0fu);
            a[u][1] = (int)(w1 & 0x0f0f0f0fu);
            a[u][3] = (int)((w1 >> 4) & 0x0f0f0f0fu);
        } else {
            const u8* p0 = qw + (i64)r0 * K + kb * 32 + t * 4;
            const u8* p1 = qw + (i64)r1 * K + kb * 32 + t * 4;
            a[u][0] = ok0 ? __ldg(reinterpret_cast<const int*>(p0)) : 0;
            a[u][2] = ok0 ? __ldg(reinterpret_cast<const int*>(p0 + 16)) : 0;
            a[u][1] = ok1 ? __ldg(reinterpret_cast<const int*>(p1)) : 0;
            a[u][3] = ok1 ? __ldg(reinterpret_cast<const int*>(p1 + 16)) : 0;
        }
        d0[u] = ok0 ? f16_to_f32(__ldg(dw + (i64)r0 * kblocks + kb)) : 0.0f;
        d1[u] = ok1 ? f16_to_f32(__ldg(dw + (i64)r1 * kblocks + kb)) : 0.0f;
    }
}

template <bool Q4>
__device__ __forceinline__ void mmq_impl(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                         const i8* __restrict__ qx, const float* __restrict__ dx,
                                         const float* __restrict__ sx, float* __restrict__ y,
                                         const float* __restrict__ bias, int N, int K, int nb, int mode) {
    __shared__ __align__(16) unsigned char x_s[MMQ_BN * MMQ_XS];
    __shared__ float dx_s[MMQ_BN][MMQ_KB];
    __shared__ float sx_s[MMQ_BN][MMQ_KB];
    const int tid = threadIdx.x;
    const int warp = tid >> 5, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.x * MMQ_BM + warp * 16;
    const int n0 = blockIdx.y * MMQ_BN;
    const int kblocks = K >> 5;
    const int r0 = m0 + g, r1 = m0 + g + 8;
    const bool v0 = r0 < N, v1 = r1 < N;
    const int ntiles = min(8, (nb - n0 + 7) >> 3);
    double acc[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0;

    // Software pipeline: the next chunk's weight fragments load into registers while this
    // chunk computes, so global latency overlaps the MMAs.
    int a[MMQ_KB][4], an[MMQ_KB][4];
    float d0[MMQ_KB], d1[MMQ_KB], d0n[MMQ_KB], d1n[MMQ_KB];
    mmq_load_a<Q4>(qw, dw, K, kblocks, 0, r0, r1, v0, v1, t, a, d0, d1);
    for (int kc = 0; kc < kblocks; kc += MMQ_KB) {
        const int nkb = min(MMQ_KB, kblocks - kc);
        __syncthreads();  // the previous chunk's tile is no longer read
        for (int p = tid; p < MMQ_BN * MMQ_KB * 2; p += blockDim.x) {
            const int col = p / (MMQ_KB * 2), piece = p % (MMQ_KB * 2);
            const int gc = n0 + col;
            int4 v = int4_zero();
            if (gc < nb && (piece >> 1) < nkb) v = *reinterpret_cast<const int4*>(qx + (i64)gc * K + kc * 32 + piece * 16);
            *reinterpret_cast<int4*>(x_s + col * MMQ_XS + piece * 16) = v;
        }
        for (int p = tid; p < MMQ_BN * MMQ_KB; p += blockDim.x) {
            const int col = p / MMQ_KB, u = p % MMQ_KB;
            const int gc = n0 + col;
            const bool ok = gc < nb && u < nkb;
            dx_s[col][u] = ok ? dx[(i64)gc * kblocks + kc + u] : 0.0f;
            sx_s[col][u] = (ok && Q4) ? sx[(i64)gc * kblocks + kc + u] : 0.0f;
        }
        __syncthreads();
        if (kc + MMQ_KB < kblocks) {
            mmq_load_a<Q4>(qw, dw, K, kblocks, kc + MMQ_KB, r0, r1, v0, v1, t, an, d0n, d1n);
        }
#pragma unroll
        for (int u = 0; u < MMQ_KB; ++u) {
            if (u >= nkb) break;
#pragma unroll
            for (int nt = 0; nt < 8; ++nt) {
                if (nt >= ntiles) break;
                const int* xr = reinterpret_cast<const int*>(x_s + (nt * 8 + g) * MMQ_XS + u * 32 + t * 4);
                const int b0 = xr[0], b1 = xr[4];
                int c[4] = {0, 0, 0, 0};
                if (Q4) {
                    mma_u8s8(c, a[u][0], a[u][1], a[u][2], a[u][3], b0, b1);
                } else {
                    mma_s8s8(c, a[u][0], a[u][1], a[u][2], a[u][3], b0, b1);
                }
                const int cc = nt * 8 + t * 2;
                const float xa = dx_s[cc][u], xb = dx_s[cc + 1][u];
                if (Q4) {
                    const float sa = sx_s[cc][u], sb = sx_s[cc + 1][u];
                    acc[nt][0] += (double)block_term_q4(d0[u], xa, sa, c[0]);
                    acc[nt][1] += (double)block_term_q4(d0[u], xb, sb, c[1]);
                    acc[nt][2] += (double)block_term_q4(d1[u], xa, sa, c[2]);
                    acc[nt][3] += (double)block_term_q4(d1[u], xb, sb, c[3]);
                } else {
                    acc[nt][0] += (double)block_term_q8(d0[u], xa, c[0]);
                    acc[nt][1] += (double)block_term_q8(d0[u], xb, c[1]);
                    acc[nt][2] += (double)block_term_q8(d1[u], xa, c[2]);
                    acc[nt][3] += (double)block_term_q8(d1[u], xb, c[3]);
                }
            }
        }
#pragma unroll
        for (int u = 0; u < MMQ_KB; ++u) {
#pragma unroll
            for (int i = 0; i < 4; ++i) a[u][i] = an[u][i];
            d0[u] = d0n[u];
            d1[u] = d1n[u];
        }
    }
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
        if (nt >= ntiles) break;
        const int cc = n0 + nt * 8 + t * 2;
        if (v0 && cc < nb) mmq_out(y, bias, N, r0, cc, (float)acc[nt][0], mode);
        if (v0 && cc + 1 < nb) mmq_out(y, bias, N, r0, cc + 1, (float)acc[nt][1], mode);
        if (v1 && cc < nb) mmq_out(y, bias, N, r1, cc, (float)acc[nt][2], mode);
        if (v1 && cc + 1 < nb) mmq_out(y, bias, N, r1, cc + 1, (float)acc[nt][3], mode);
    }
}

// y [nb, N] f32. grid = (ceil(N / 64), ceil(nb / 64)), block = 128. K % 32 == 0.
extern "C" __global__ void __launch_bounds__(128, 3) mmq_q8_0(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                          const i8* __restrict__ qx, const float* __restrict__ dx,
                                                          const float* __restrict__ sx, float* __restrict__ y,
                                                          const float* __restrict__ bias, int N, int K, int nb,
                                                          int mode) {
    mmq_impl<false>(qw, dw, qx, dx, sx, y, bias, N, K, nb, mode);
}

extern "C" __global__ void __launch_bounds__(128, 3) mmq_q4_0(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                                          const i8* __restrict__ qx, const float* __restrict__ dx,
                                                          const float* __restrict__ sx, float* __restrict__ y,
                                                          const float* __restrict__ bias, int N, int K, int nb,
                                                          int mode) {
    mmq_impl<true>(qw, dw, qx, dx, sx, y, bias, N, K, nb, mode);
}
