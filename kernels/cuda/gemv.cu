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

// Batch-1 entry: its own register allocation, so the decode-critical case is not limited by
// the occupancy of the nb = 8 instantiation.
extern "C" __global__ void __launch_bounds__(128) gemv_bf16_b1(const bf16_t* __restrict__ W, const bf16_t* __restrict__ x,
                                                              float* __restrict__ y, bf16_t* __restrict__ yh,
                                                              const float* __restrict__ bias, int n_out, int K, int mode) {
    if (mode == OUT_SWIGLU) {
        gemv_impl<1, 2>(W, x, y, yh, bias, n_out, K, mode);
    } else {
        gemv_impl<1, 1>(W, x, y, yh, bias, n_out, K, mode);
    }
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
