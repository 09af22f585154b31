// Batch-1 GEMV: a block of GEMV_B1_WARPS warps computes GEMV_B1_T outputs at a time with the
// K dimension split across its warps (each warp streams a contiguous segment of every row, two
// chunks deep, all rows' loads in flight), then reduces through shared memory in a fixed order
// (deterministic). Blocks stride over output tiles. This keeps many rows and many bytes in
// flight even for the small q|k|v and o projections, where one warp per row starves. With PDL
// each block's first weight loads are in flight before it waits for the previous kernel: on an
// H200 that took Llama-3-8B bf16 batch 1 from 4.229 to 4.165 ms/step (docs/decisions/2026-11-22-batch1-bf16-decode.md).
#define GEMV_B1_WARPS 8
#define GEMV_B1_T 4

// One K step's weight loads for a tile's rows: 16 bytes at k and, when it is inside the
// segment, at k + 256 (zeros otherwise).
template <int N>
__device__ __forceinline__ void gemv_b1_load(const bf16_t* const rows[N], int k, int k_end, uint4 w0[N], uint4 w1[N]) {
    const bool second = k + 256 < k_end;
#pragma unroll
    for (int j = 0; j < N; ++j) {
        w0[j] = ldg_stream(rows[j] + k);
        w1[j] = second ? ldg_stream(rows[j] + k + 256) : uint4_zero();
    }
}

template <int R, bool NORM>
__device__ __forceinline__ void gemv_b1_impl(const bf16_t* __restrict__ W, const bf16_t* __restrict__ xg,
                                             float* __restrict__ y, bf16_t* __restrict__ yh,
                                             const float* __restrict__ bias, int n_out, int K, int mode,
                                             const float* __restrict__ norm_x, const float* __restrict__ norm_w,
                                             float eps, bf16_t* xs) {
    __shared__ float red[GEMV_B1_WARPS][GEMV_B1_T * R];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int seg = ((K / 8 + GEMV_B1_WARPS - 1) / GEMV_B1_WARPS) * 8;  // elements per warp
    const int k_begin = warp * seg;
    const int k_end = min(K, k_begin + seg);
    // The first tile's first K step is loaded before the PDL wait: weights depend on no kernel,
    // so they stream while the previous kernel drains. Later steps load at the end of the one
    // before (the same order as loading at the top of each step).
    int tile = blockIdx.x;
    int k = k_begin + lane * 8;
    const bf16_t* rows[GEMV_B1_T * R];
    uint4 w0[GEMV_B1_T * R], w1[GEMV_B1_T * R];
    // (Not with the fused norm: holding the loads across its prologue costs registers.)
    if (!NORM && tile * GEMV_B1_T < n_out) {
#pragma unroll
        for (int j = 0; j < GEMV_B1_T * R; ++j) {
            const int o = min(tile * GEMV_B1_T + j / R, n_out - 1);
            rows[j] = W + (i64)(o * R + j % R) * K;
        }
        if (k < k_end) gemv_b1_load<GEMV_B1_T * R>(rows, k, k_end, w0, w1);
    }
    pdl_enter();
    if (NORM) {
        rms_norm_row(norm_x, norm_w, xs, K, eps);
        __syncthreads();
    }
    const bf16_t* __restrict__ x = NORM ? xs : xg;
    for (bool first = true; tile * GEMV_B1_T < n_out; tile += gridDim.x, first = false) {
        float acc[GEMV_B1_T * R];
#pragma unroll
        for (int j = 0; j < GEMV_B1_T * R; ++j) acc[j] = 0.0f;
        if (NORM || !first) {
            k = k_begin + lane * 8;
#pragma unroll
            for (int j = 0; j < GEMV_B1_T * R; ++j) {
                const int o = min(tile * GEMV_B1_T + j / R, n_out - 1);
                rows[j] = W + (i64)(o * R + j % R) * K;
            }
            if (k < k_end) gemv_b1_load<GEMV_B1_T * R>(rows, k, k_end, w0, w1);
        }
        while (k < k_end) {
            const bool second = k + 256 < k_end;
            const uint4 xa = *reinterpret_cast<const uint4*>(x + k);
            const uint4 xb = second ? *reinterpret_cast<const uint4*>(x + k + 256) : uint4_zero();
#pragma unroll
            for (int j = 0; j < GEMV_B1_T * R; ++j) {
                float a = acc[j];
                a = fmaf(bf16_lo(w0[j].x), bf16_lo(xa.x), a);
                a = fmaf(bf16_hi(w0[j].x), bf16_hi(xa.x), a);
                a = fmaf(bf16_lo(w0[j].y), bf16_lo(xa.y), a);
                a = fmaf(bf16_hi(w0[j].y), bf16_hi(xa.y), a);
                a = fmaf(bf16_lo(w0[j].z), bf16_lo(xa.z), a);
                a = fmaf(bf16_hi(w0[j].z), bf16_hi(xa.z), a);
                a = fmaf(bf16_lo(w0[j].w), bf16_lo(xa.w), a);
                a = fmaf(bf16_hi(w0[j].w), bf16_hi(xa.w), a);
                a = fmaf(bf16_lo(w1[j].x), bf16_lo(xb.x), a);
                a = fmaf(bf16_hi(w1[j].x), bf16_hi(xb.x), a);
                a = fmaf(bf16_lo(w1[j].y), bf16_lo(xb.y), a);
                a = fmaf(bf16_hi(w1[j].y), bf16_hi(xb.y), a);
                a = fmaf(bf16_lo(w1[j].z), bf16_lo(xb.z), a);
                a = fmaf(bf16_hi(w1[j].z), bf16_hi(xb.z), a);
                a = fmaf(bf16_lo(w1[j].w), bf16_lo(xb.w), a);
                a = fmaf(bf16_hi(w1[j].w), bf16_hi(xb.w), a);
                acc[j] = a;
            }
            k += 2 * 256;
            if (k < k_end) gemv_b1_load<GEMV_B1_T * R>(rows, k, k_end, w0, w1);
        }
#pragma unroll
        for (int j = 0; j < GEMV_B1_T * R; ++j) {
            const float v = warp_sum(acc[j]);
            if (lane == 0) red[warp][j] = v;
        }
        __syncthreads();
        if (threadIdx.x < GEMV_B1_T) {
            const int o = tile * GEMV_B1_T + threadIdx.x;
            if (o < n_out) {
                float r0 = 0.0f, r1 = 0.0f;
#pragma unroll
                for (int w = 0; w < GEMV_B1_WARPS; ++w) {
                    r0 += red[w][threadIdx.x * R];
                    r1 += red[w][threadIdx.x * R + R - 1];
                }
                if (R == 2) {
                    yh[o] = f32_to_bf16(silu(r0) * r1);
                } else if (mode == OUT_ACCUMULATE) {
                    y[o] += r0;
                } else {
                    y[o] = r0 + (bias ? bias[o] : 0.0f);
                }
            }
        }
        __syncthreads();
    }
}

// block = 32 * GEMV_B1_WARPS (256 = RMS_THREADS); any grid.x, ideally the resident capacity. One
// entry per output shape (plain rows, or gate/up pairs for SwiGLU), each with its own registers.
extern "C" __global__ void __launch_bounds__(256) gemv_bf16_b1(const bf16_t* __restrict__ W, const bf16_t* __restrict__ x,
                                                              float* __restrict__ y, bf16_t* __restrict__ yh,
                                                              const float* __restrict__ bias, int n_out, int K, int mode) {
    gemv_b1_impl<1, false>(W, x, y, yh, bias, n_out, K, mode, 0, 0, 0.0f, 0);
}

extern "C" __global__ void __launch_bounds__(256) gemv_bf16_b1_swiglu(const bf16_t* __restrict__ W,
                                                                     const bf16_t* __restrict__ x, float* __restrict__ y,
                                                                     bf16_t* __restrict__ yh, const float* __restrict__ bias,
                                                                     int n_out, int K, int mode) {
    gemv_b1_impl<2, false>(W, x, y, yh, bias, n_out, K, mode, 0, 0, 0.0f, 0);
}

// The same with the preceding RMSNorm fused in: x is not an argument; every block computes
// rms_norm(norm_x, norm_w) itself into shared memory (K <= GEMV_NORM_MAX) with rms_norm_f32's
// code and block size, so the bits are those of the separate kernel, one launch fewer per norm.
#define GEMV_NORM_MAX 8192

extern "C" __global__ void __launch_bounds__(256) gemv_bf16_b1_norm(const bf16_t* __restrict__ W,
                                                                   const float* __restrict__ norm_x,
                                                                   const float* __restrict__ norm_w, float eps,
                                                                   float* __restrict__ y, bf16_t* __restrict__ yh,
                                                                   const float* __restrict__ bias, int n_out, int K,
                                                                   int mode) {
    __shared__ __align__(16) bf16_t xs[GEMV_NORM_MAX];
    gemv_b1_impl<1, true>(W, 0, y, yh, bias, n_out, K, mode, norm_x, norm_w, eps, xs);
}

extern "C" __global__ void __launch_bounds__(256) gemv_bf16_b1_swiglu_norm(const bf16_t* __restrict__ W,
                                                                          const float* __restrict__ norm_x,
                                                                          const float* __restrict__ norm_w, float eps,
                                                                          float* __restrict__ y, bf16_t* __restrict__ yh,
                                                                          const float* __restrict__ bias, int n_out,
                                                                          int K, int mode) {
    __shared__ __align__(16) bf16_t xs[GEMV_NORM_MAX];
    gemv_b1_impl<2, true>(W, 0, y, yh, bias, n_out, K, mode, norm_x, norm_w, eps, xs);
}

// bf16 linears of 2 to 16 rows: one tensor-core kernel in two tilings, batch-invariant by
// construction, so the dispatch threshold (GEMV below it, GEMM above) never changes a bit.
//
// A block of MMA_WARPS warps owns a 16-row tile of W; the K dimension is split into MMA_WARPS
// fixed slices (one per warp, the same for every batch), each walked in 32-wide steps of two
// bf16 mma.sync m16n8k16 per 8-column tile, accumulating in f32; the slices are then summed in
// warp order through shared memory. Every output (row, column) therefore sees the same
// products in the same order whatever the number of columns, the column tiles per launch, or
// the rows around it: the tensor core computes each output element from its own row and
// column only. `gemv_bf16` takes one 8-column tile per launch (the engine launches it once per
// 8 rows, re-reading the weights, as the GEMV side of the threshold does); `gemm_bf16_small`
// takes up to MMA_MAX_TILES tiles per launch and reads the weights once.
//
// Loads: lane (g = lane / 4, t = lane % 4) reads 16 contiguous bytes of W rows g and g + 8 and
// of activation column g at k + 8t. The k order inside a step is permuted the same way for A
// and B (logical k 2t, 2t+1, 2t+8, 2t+9 of the first MMA are physical 8t+0..3, of the second
// 8t+4..7), which a sum over k allows.
#define MMA_WARPS 8
#define MMA_ROWS 16
#define MMA_MAX_TILES 2
#define MMA_UNROLL 4
#define MMA_UNROLL_WIDE 2

__device__ __forceinline__ void mma_bf16(float c[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                         unsigned b0, unsigned b1) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// One group of U steps' loads at k (this lane's offset included): W rows g and g + 8, and
// each column tile's activation column.
template <int U, int NT>
__device__ __forceinline__ void mma_load_group(const bf16_t* w0, const bf16_t* w1, const bf16_t* const xc[NT], int k,
                                               uint4 wa[U], uint4 wb[U], uint4 xv[U][NT]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        wa[u] = ldg_stream(w0 + k + u * 32);
        wb[u] = ldg_stream(w1 + k + u * 32);
#pragma unroll
        for (int j = 0; j < NT; ++j) xv[u][j] = *reinterpret_cast<const uint4*>(xc[j] + k + u * 32);
    }
}

template <int NT>
__device__ __forceinline__ void mma_linear_impl(const bf16_t* __restrict__ W, const bf16_t* __restrict__ x,
                                                float* __restrict__ y, bf16_t* __restrict__ yh,
                                                const float* __restrict__ bias, int n_out, int K, int nb,
                                                int mode) {
    __shared__ float red[MMA_WARPS][MMA_ROWS][8 * NT];
    pdl_enter();
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int n_rows = mode == OUT_SWIGLU ? 2 * n_out : n_out;
    // Fixed K slices: a multiple of 32 elements each, independent of the batch.
    const int seg = ((K / 8 + MMA_WARPS - 1) / MMA_WARPS + 3) / 4 * 32;
    const int k_begin = min(K, warp * seg);
    const int k_end = min(K, k_begin + seg);
    const int ncols = 8 * NT;
    for (int tile = blockIdx.x; tile * MMA_ROWS < n_rows; tile += gridDim.x) {
        const int r0 = min(tile * MMA_ROWS + g, n_rows - 1);
        const int r1 = min(tile * MMA_ROWS + g + 8, n_rows - 1);
        const bf16_t* w0 = W + (i64)r0 * K;
        const bf16_t* w1 = W + (i64)r1 * K;
        const bf16_t* xc[NT];
        bool has[NT];
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            has[j] = j * 8 + g < nb;
            xc[j] = x + (i64)(has[j] ? j * 8 + g : 0) * K;
        }
        float acc[NT][4];
#pragma unroll
        for (int j = 0; j < NT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
        // Groups of U steps, software-pipelined: the next group's loads are issued before this
        // group's MMAs, so they stay in flight while it computes (ptxas sinks loads that are
        // used in the same iteration down to their MMA, leaving one step in flight). Then
        // single steps. Either way the steps run in k order, so the grouping changes no bit.
        // Columns past nb load column 0 (always valid) and use zeros.
        constexpr int U = NT == 1 ? MMA_UNROLL : MMA_UNROLL_WIDE;
        int k = k_begin;
        if (k + 32 * U <= k_end) {
            uint4 wa[U], wb[U], xv[U][NT];
            mma_load_group<U, NT>(w0, w1, xc, k + t * 8, wa, wb, xv);
            for (;;) {
                const int kn = k + 32 * U;
                const bool more = kn + 32 * U <= k_end;
                uint4 na[U], nb2[U], nx[U][NT];
                if (more) mma_load_group<U, NT>(w0, w1, xc, kn + t * 8, na, nb2, nx);
#pragma unroll
                for (int u = 0; u < U; ++u) {
#pragma unroll
                    for (int j = 0; j < NT; ++j) {
                        const uint4 b = has[j] ? xv[u][j] : uint4_zero();
                        mma_bf16(acc[j], wa[u].x, wb[u].x, wa[u].y, wb[u].y, b.x, b.y);
                        mma_bf16(acc[j], wa[u].z, wb[u].z, wa[u].w, wb[u].w, b.z, b.w);
                    }
                }
                k = kn;
                if (!more) break;
#pragma unroll
                for (int u = 0; u < U; ++u) {
                    wa[u] = na[u];
                    wb[u] = nb2[u];
#pragma unroll
                    for (int j = 0; j < NT; ++j) xv[u][j] = nx[u][j];
                }
            }
        }
        for (; k < k_end; k += 32) {
            const int kk = k + t * 8;
            const bool in = kk < k_end;
            const uint4 wa = in ? ldg_stream(w0 + kk) : uint4_zero();
            const uint4 wb = in ? ldg_stream(w1 + kk) : uint4_zero();
#pragma unroll
            for (int j = 0; j < NT; ++j) {
                const uint4 b = in && has[j] ? *reinterpret_cast<const uint4*>(xc[j] + kk) : uint4_zero();
                mma_bf16(acc[j], wa.x, wb.x, wa.y, wb.y, b.x, b.y);
                mma_bf16(acc[j], wa.z, wb.z, wa.w, wb.w, b.z, b.w);
            }
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
            red[warp][g][j * 8 + 2 * t] = acc[j][0];
            red[warp][g][j * 8 + 2 * t + 1] = acc[j][1];
            red[warp][g + 8][j * 8 + 2 * t] = acc[j][2];
            red[warp][g + 8][j * 8 + 2 * t + 1] = acc[j][3];
        }
        __syncthreads();
        // The slices in warp order, one thread per (row, column).
        for (int i = threadIdx.x; i < MMA_ROWS * ncols; i += blockDim.x) {
            const int r = i / ncols, c = i % ncols;
            float s = red[0][r][c];
#pragma unroll
            for (int w = 1; w < MMA_WARPS; ++w) s += red[w][r][c];
            red[0][r][c] = s;
        }
        __syncthreads();
        const int outs = mode == OUT_SWIGLU ? MMA_ROWS / 2 : MMA_ROWS;
        for (int i = threadIdx.x; i < outs * ncols; i += blockDim.x) {
            const int r = i / ncols, c = i % ncols;
            const int o = tile * outs + r;
            if (c >= nb || o >= n_out) continue;
            if (mode == OUT_SWIGLU) {
                yh[(i64)c * n_out + o] = f32_to_bf16(silu(red[0][2 * r][c]) * red[0][2 * r + 1][c]);
            } else if (mode == OUT_ACCUMULATE) {
                y[(i64)c * n_out + o] += red[0][r][c];
            } else {
                y[(i64)c * n_out + o] = red[0][r][c] + (bias ? bias[o] : 0.0f);
            }
        }
        __syncthreads();
    }
}

// W: [n_rows, K] bf16 row-major; x: [nb, K] bf16 (K a multiple of 8); mode OUT_*; for
// OUT_SWIGLU n_out = n_rows / 2 (rows interleave gate/up) and the output goes to yh [nb, n_out]
// bf16, otherwise to y [nb, n_out] f32. block = 32 * MMA_WARPS; any grid.x (blocks stride over
// 16-row tiles), ideally the resident capacity. gemv_bf16: nb <= 8.
extern "C" __global__ void __launch_bounds__(256) gemv_bf16(const bf16_t* __restrict__ W, const bf16_t* __restrict__ x,
                                                           float* __restrict__ y, bf16_t* __restrict__ yh,
                                                           const float* __restrict__ bias, int n_out, int K, int nb,
                                                           int mode) {
    mma_linear_impl<1>(W, x, y, yh, bias, n_out, K, min(nb, 8), mode);
}

// The same for nb <= 8 * MMA_MAX_TILES in one launch; the same bits as gemv_bf16 per 8 columns.
extern "C" __global__ void __launch_bounds__(256) gemm_bf16_small(const bf16_t* __restrict__ W,
                                                                 const bf16_t* __restrict__ x, float* __restrict__ y,
                                                                 bf16_t* __restrict__ yh, const float* __restrict__ bias,
                                                                 int n_out, int K, int nb, int mode) {
    if (nb <= 8) {
        mma_linear_impl<1>(W, x, y, yh, bias, n_out, K, nb, mode);
    } else {
        mma_linear_impl<MMA_MAX_TILES>(W, x, y, yh, bias, n_out, K, min(nb, 8 * MMA_MAX_TILES), mode);
    }
}
