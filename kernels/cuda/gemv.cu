// bf16 GEMV for small batches (nb <= 8): one warp per output, 16-byte weight loads, four loads
// in flight per lane. Activations are bf16 [nb, K]; K must be a multiple of 8.

#define GEMV_WARPS 4

template <int NB, int R>
__device__ __forceinline__ void gemv_chunk(const uint4 w[R], const bf16_t* __restrict__ x, int K, int k,
                                           float acc[R][NB]) {
#pragma unroll
    for (int b = 0; b < NB; ++b) {
        const uint4 xv = *reinterpret_cast<const uint4*>(x + (i64)b * K + k);
        const float x0 = bf16_lo(xv.x), x1 = bf16_hi(xv.x), x2 = bf16_lo(xv.y), x3 = bf16_hi(xv.y);
        const float x4 = bf16_lo(xv.z), x5 = bf16_hi(xv.z), x6 = bf16_lo(xv.w), x7 = bf16_hi(xv.w);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            float a = acc[r][b];
            a = fmaf(bf16_lo(w[r].x), x0, a);
            a = fmaf(bf16_hi(w[r].x), x1, a);
            a = fmaf(bf16_lo(w[r].y), x2, a);
            a = fmaf(bf16_hi(w[r].y), x3, a);
            a = fmaf(bf16_lo(w[r].z), x4, a);
            a = fmaf(bf16_hi(w[r].z), x5, a);
            a = fmaf(bf16_lo(w[r].w), x6, a);
            a = fmaf(bf16_hi(w[r].w), x7, a);
            acc[r][b] = a;
        }
    }
}

template <int NB, int R>
__device__ __forceinline__ void gemv_impl(const bf16_t* __restrict__ W, const bf16_t* __restrict__ x,
                                          float* __restrict__ y, bf16_t* __restrict__ yh,
                                          const float* __restrict__ bias, int n_out, int K, int mode) {
    pdl_enter();
    const int lane = threadIdx.x & 31;
    // Grid-stride over outputs: a grid sized to the resident capacity leaves no tail wave.
    for (int o = blockIdx.x * GEMV_WARPS + (threadIdx.x >> 5); o < n_out; o += gridDim.x * GEMV_WARPS) {
    const bf16_t* rows[R];
#pragma unroll
    for (int r = 0; r < R; ++r) rows[r] = W + (i64)(o * R + r) * K;
    float acc[R][NB];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int b = 0; b < NB; ++b) acc[r][b] = 0.0f;

    int k = lane * 8;
    // Eight 16-byte loads per row in flight per lane (4 KB per warp) before any math.
    for (; k + 7 * 256 < K; k += 8 * 256) {
        uint4 w[8][R];
#pragma unroll
        for (int u = 0; u < 8; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r) w[u][r] = ldg_stream(rows[r] + k + u * 256);
#pragma unroll
        for (int u = 0; u < 8; ++u) gemv_chunk<NB, R>(w[u], x, K, k + u * 256, acc);
    }
    for (; k < K; k += 256) {
        uint4 w0[R];
#pragma unroll
        for (int r = 0; r < R; ++r) w0[r] = ldg_stream(rows[r] + k);
        gemv_chunk<NB, R>(w0, x, K, k, acc);
    }
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int b = 0; b < NB; ++b) acc[r][b] = warp_sum(acc[r][b]);
    if (lane == 0) {
#pragma unroll
        for (int b = 0; b < NB; ++b) {
            if (R == 2) {
                yh[(i64)b * n_out + o] = f32_to_bf16(silu(acc[0][b]) * acc[R - 1][b]);
            } else if (mode == OUT_ACCUMULATE) {
                y[(i64)b * n_out + o] += acc[0][b];
            } else {
                y[(i64)b * n_out + o] = acc[0][b] + (bias ? bias[o] : 0.0f);
            }
        }
    }
    }
}

#define GEMV_CASES(R)                                                         \
    switch (nb) {                                                             \
        case 1: gemv_impl<1, R>(W, x, y, yh, bias, n_out, K, mode); break;    \
        case 2: gemv_impl<2, R>(W, x, y, yh, bias, n_out, K, mode); break;    \
        case 3: gemv_impl<3, R>(W, x, y, yh, bias, n_out, K, mode); break;    \
        case 4: gemv_impl<4, R>(W, x, y, yh, bias, n_out, K, mode); break;    \
        case 5: gemv_impl<5, R>(W, x, y, yh, bias, n_out, K, mode); break;    \
        case 6: gemv_impl<6, R>(W, x, y, yh, bias, n_out, K, mode); break;    \
        case 7: gemv_impl<7, R>(W, x, y, yh, bias, n_out, K, mode); break;    \
        default: gemv_impl<8, R>(W, x, y, yh, bias, n_out, K, mode); break;   \
    }

// Batch-1 GEMV: a block of GEMV_B1_WARPS warps computes GEMV_B1_T outputs at a time with the
// K dimension split across its warps (each warp streams a contiguous segment of every row, two
// chunks deep, all rows' loads in flight), then reduces through shared memory in a fixed order
// (deterministic). Blocks stride over output tiles. This keeps many rows and many bytes in
// flight even for the small q|k|v and o projections, where one warp per row starves. With PDL
// each block's first weight loads are in flight before it waits for the previous kernel: on an
// H200 that took Llama-3-8B bf16 batch 1 from 4.229 to 4.165 ms/step (docs/BENCHMARKS.md §8).
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

// W: [n_rows, K] bf16 row-major; x: [nb, K] bf16; mode OUT_*; for OUT_SWIGLU n_out = n_rows / 2
// and the output goes to yh [nb, n_out] bf16, otherwise to y [nb, n_out] f32.
// block = 32 * GEMV_WARPS; any grid.x (warps stride over outputs), ideally the resident capacity.
extern "C" __global__ void __launch_bounds__(128) gemv_bf16(const bf16_t* __restrict__ W, const bf16_t* __restrict__ x,
                                                           float* __restrict__ y, bf16_t* __restrict__ yh,
                                                           const float* __restrict__ bias, int n_out, int K, int nb,
                                                           int mode) {
    if (mode == OUT_SWIGLU) {
        GEMV_CASES(2)
    } else {
        GEMV_CASES(1)
    }
}
