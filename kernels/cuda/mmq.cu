// Quantized GEMM (MMQ-like) for larger batches: int8 tensor-core mma.sync m16n8k32, one MMA
// k-step per 32-value quant block, so each block's int32 result is scaled by its weight and
// activation scales and summed in f64 exactly as MMVQ sums it (dispatch-invariant output).
//
// A block of MMQ_WARPS warps owns 16 weight rows and up to MMQ_BN (32) batch columns (NT 8-column
// MMA tiles); its warps split K into contiguous quarters and add their f64 partials through
// shared memory in warp order at the end. Split K gives every SM many independent weight streams
// (a 14336-row matrix is 3584 warps), which a decode-sized GEMM needs to reach memory bandwidth,
// and no shared-memory staging or barriers are needed inside the K loop: weights stream straight
// into registers (the next stage loads while this one computes) and the small activation matrix
// is read through L1/L2, in the layout the host picked for this batch: the _kmajor entries read
// it k-major, where one quant block of 8 adjacent columns is 256 contiguous bytes instead of 8
// scattered 32-byte pieces, which relieves L1 at large batches (docs/decisions/2026-11-22-mmq-k-major-band.md). k-major
// strides by `nb`, so `nb` must be the number of rows that were quantized (no offset subsets of
// rows, unlike row-major). Grid: x = column block (so the column blocks of one row tile run
// together and the second reads its weights from L2), y = row tile.
//
// Q8_0 fragments use a k permutation that both operands share (lane t holds bytes t*8..t*8+7 of
// a block for A and B), which turns each fragment into one 8-byte load; the int32 dot product is
// unchanged. Q4_0 keeps the natural layout, where a 4-byte load yields both nibble halves.

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

#define MMQ_WARPS 4
#define MMQ_BN 32
#define MMQ_KB 2  // quant blocks per pipeline stage

template <bool Q4>
struct MmqStage {
    int a[MMQ_KB][4];
    float d0[MMQ_KB], d1[MMQ_KB];
};

// One stage's weight fragments (rows r0, r1) and scales; blocks past `kend` load as zeros.
template <bool Q4>
__device__ __forceinline__ void mmq_load(MmqStage<Q4>& st, const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                         int K, int kblocks, int kb0, int kend, int r0, int r1, int t) {
#pragma unroll
    for (int u = 0; u < MMQ_KB; ++u) {
        const int kb = kb0 + u;
        const bool ok = kb < kend;
        if (Q4) {
            const unsigned w0 = ok ? __ldg(reinterpret_cast<const unsigned*>(qw + (i64)r0 * (K >> 1) + kb * 16 + t * 4)) : 0u;
            const unsigned w1 = ok ? __ldg(reinterpret_cast<const unsigned*>(qw + (i64)r1 * (K >> 1) + kb * 16 + t * 4)) : 0u;
            st.a[u][0] = (int)(w0 & 0x0f0f0f0fu);
            st.a[u][2] = (int)((w0 >> 4) & 0x0f0f0f0fu);
            st.a[u][1] = (int)(w1 & 0x0f0f0f0fu);
            st.a[u][3] = (int)((w1 >> 4) & 0x0f0f0f0fu);
        } else {
            const uint2 w0 = ok ? __ldg(reinterpret_cast<const uint2*>(qw + (i64)r0 * K + kb * 32 + t * 8)) : make_uint2(0u, 0u);
            const uint2 w1 = ok ? __ldg(reinterpret_cast<const uint2*>(qw + (i64)r1 * K + kb * 32 + t * 8)) : make_uint2(0u, 0u);
            st.a[u][0] = (int)w0.x;
            st.a[u][2] = (int)w0.y;
            st.a[u][1] = (int)w1.x;
            st.a[u][3] = (int)w1.y;
        }
        st.d0[u] = ok ? f16_to_f32(__ldg(dw + (i64)r0 * kblocks + kb)) : 0.0f;
        st.d1[u] = ok ? f16_to_f32(__ldg(dw + (i64)r1 * kblocks + kb)) : 0.0f;
    }
}

template <bool Q4, int NT, bool KMAJOR>
__device__ __forceinline__ void mmq_impl(const u8* __restrict__ qw, const f16_t* __restrict__ dw,
                                         const i8* __restrict__ qx, const float* __restrict__ dx,
                                         const float* __restrict__ sx, float* __restrict__ y,
                                         const float* __restrict__ bias, int N, int K, int nb, int mode,
                                         double (*red)[MMQ_BN / 2][32]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * MMQ_BN;
    const int m0 = blockIdx.y * 16;
    const int kblocks = K >> 5;
    // Rows past N load row N-1 (valid memory) and are never stored.
    const int r0 = min(m0 + g, N - 1), r1 = min(m0 + g + 8, N - 1);
    const int kper = (kblocks + MMQ_WARPS - 1) / MMQ_WARPS;
    const int kbeg = min(kblocks, warp * kper), kend = min(kblocks, kbeg + kper);
    {
        const i64 row_bytes = Q4 ? (K >> 1) : K;
        const i64 rows = min(16, N - m0);
        prefetch_l2(qw + (i64)m0 * row_bytes, rows * row_bytes);
    }
    pdl_enter();
    // Columns this lane reads (B fragments: column n0 + nt*8 + g) and owns (C: + t*2, + t*2+1),
    // clamped to the last column; out-of-range columns are never stored.
    double acc[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0;
    MmqStage<Q4> cur, nxt;
    if (kbeg < kend) mmq_load<Q4>(cur, qw, dw, K, kblocks, kbeg, kend, r0, r1, t);
    for (int kb0 = kbeg; kb0 < kend; kb0 += MMQ_KB) {
        const bool more = kb0 + MMQ_KB < kend;
        if (more) mmq_load<Q4>(nxt, qw, dw, K, kblocks, kb0 + MMQ_KB, kend, r0, r1, t);
#pragma unroll
        for (int u = 0; u < MMQ_KB; ++u) {
            const int kb = kb0 + u;
            if (kb >= kend) break;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                const int cb = min(n0 + nt * 8 + g, nb - 1);
                const int ca = min(n0 + nt * 8 + t * 2, nb - 1), cc = min(n0 + nt * 8 + t * 2 + 1, nb - 1);
                int b0, b1;
                if (Q4) {
                    const i8* xp = KMAJOR ? qx + ((i64)kb * nb + cb) * 32 + t * 4 : qx + (i64)cb * K + kb * 32 + t * 4;
                    b0 = __ldg(reinterpret_cast<const int*>(xp));
                    b1 = __ldg(reinterpret_cast<const int*>(xp + 16));
                } else {
                    const i8* xp = KMAJOR ? qx + ((i64)kb * nb + cb) * 32 + t * 8 : qx + (i64)cb * K + kb * 32 + t * 8;
                    const uint2 xv = __ldg(reinterpret_cast<const uint2*>(xp));
                    b0 = (int)xv.x;
                    b1 = (int)xv.y;
                }
                // Scales of this lane's two columns, [K/32, nb] (k-major) or [nb, K/32].
                const i64 ia = KMAJOR ? (i64)kb * nb + ca : (i64)ca * kblocks + kb;
                const i64 ic = KMAJOR ? (i64)kb * nb + cc : (i64)cc * kblocks + kb;
                const float xa = __ldg(dx + ia), xb = __ldg(dx + ic);
                int c[4] = {0, 0, 0, 0};
                if (Q4) {
                    mma_u8s8(c, cur.a[u][0], cur.a[u][1], cur.a[u][2], cur.a[u][3], b0, b1);
                    const float sa = __ldg(sx + ia), sb = __ldg(sx + ic);
                    acc[nt][0] += (double)block_term_q4(cur.d0[u], xa, sa, c[0]);
                    acc[nt][1] += (double)block_term_q4(cur.d0[u], xb, sb, c[1]);
                    acc[nt][2] += (double)block_term_q4(cur.d1[u], xa, sa, c[2]);
                    acc[nt][3] += (double)block_term_q4(cur.d1[u], xb, sb, c[3]);
                } else {
                    mma_s8s8(c, cur.a[u][0], cur.a[u][1], cur.a[u][2], cur.a[u][3], b0, b1);
                    acc[nt][0] += (double)block_term_q8(cur.d0[u], xa, c[0]);
                    acc[nt][1] += (double)block_term_q8(cur.d0[u], xb, c[1]);
                    acc[nt][2] += (double)block_term_q8(cur.d1[u], xa, c[2]);
                    acc[nt][3] += (double)block_term_q8(cur.d1[u], xb, c[3]);
                }
            }
        }
        if (more) cur = nxt;
    }
    // Split-K reduction in warp order.
    if (warp > 0) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 4; ++i) red[warp - 1][nt * 4 + i][lane] = acc[nt][i];
    }
    __syncthreads();
    if (warp != 0) return;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            double v = acc[nt][i];
#pragma unroll
            for (int w = 0; w < MMQ_WARPS - 1; ++w) v += red[w][nt * 4 + i][lane];
            const int row = m0 + g + (i >> 1) * 8;
            const int col = n0 + nt * 8 + t * 2 + (i & 1);
            if (row < N && col < nb) {
                float* dst = y + (i64)col * N + row;
                if (mode == OUT_ACCUMULATE) {
                    *dst += (float)v;
                } else {
                    *dst = (float)v + (bias ? bias[row] : 0.0f);
                }
            }
        }
    }
}

#define MMQ_NT_CASES(Q4, KM)                                                                    \
    switch (min(MMQ_BN / 8, (nb - (int)blockIdx.x * MMQ_BN + 7) >> 3)) {                       \
        case 1: mmq_impl<Q4, 1, KM>(qw, dw, qx, dx, sx, y, bias, N, K, nb, mode, red); break;  \
        case 2: mmq_impl<Q4, 2, KM>(qw, dw, qx, dx, sx, y, bias, N, K, nb, mode, red); break;  \
        case 3: mmq_impl<Q4, 3, KM>(qw, dw, qx, dx, sx, y, bias, N, K, nb, mode, red); break;  \
        default: mmq_impl<Q4, 4, KM>(qw, dw, qx, dx, sx, y, bias, N, K, nb, mode, red); break; \
    }

// Activations row-major (qx [nb, K], dx and sx [nb, K/32], from quantize_q8_1_bf16), or k-major
// in the _kmajor entries (qx [K/32, nb, 32], dx and sx [K/32, nb], quantize_q8_1_bf16_kmajor);
// separate entries, so each layout gets its own register allocation.
// y [nb, N] f32. grid = (ceil(nb / MMQ_BN), ceil(N / 16)), block = 32 * MMQ_WARPS. K % 32 == 0.
// Q4: the weights are Q4_0 (else Q8_0); KM: the activations are k-major.
#define MMQ_ENTRY(NAME, Q4, KM)                                                                 \
    extern "C" __global__ void __launch_bounds__(128) NAME(                                     \
        const u8* __restrict__ qw, const f16_t* __restrict__ dw, const i8* __restrict__ qx,     \
        const float* __restrict__ dx, const float* __restrict__ sx, float* __restrict__ y,      \
        const float* __restrict__ bias, int N, int K, int nb, int mode) {                       \
        __shared__ double red[MMQ_WARPS - 1][MMQ_BN / 2][32]; /* split-K partials of warps 1..3 */ \
        MMQ_NT_CASES(Q4, KM)                                                                    \
    }

MMQ_ENTRY(mmq_q8_0, false, false)
MMQ_ENTRY(mmq_q4_0, true, false)
MMQ_ENTRY(mmq_q8_0_kmajor, false, true)
MMQ_ENTRY(mmq_q4_0_kmajor, true, true)
