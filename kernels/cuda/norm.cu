// RMSNorm over rows (attention and FFN norms, the final norm) and per-head RMSNorm of q and k
// (Qwen3's q_norm / k_norm).

// RMSNorm of one f32 row by the calling block: out = bf16(x * rsqrt(mean(x^2) + eps) * w).
// The sum runs in a fixed order for a given blockDim (a multiple of 32). Rows of a multiple of 4
// (every hidden size) go as float4, the first RMS_V of them per thread loaded at once and kept
// in registers for the output pass.
#define RMS_THREADS 256
#define RMS_V 4
__device__ __forceinline__ float4 ldcg4(const float* p) { return __ldcg(reinterpret_cast<const float4*>(p)); }
__device__ __forceinline__ float sumsq4(float4 v, float ss) {
    ss = fmaf(v.x, v.x, ss);
    ss = fmaf(v.y, v.y, ss);
    ss = fmaf(v.z, v.z, ss);
    return fmaf(v.w, v.w, ss);
}
__device__ __forceinline__ void norm_store4(bf16_t* out, float4 x, float4 w, float scale) {
    const unsigned int lo = (unsigned int)f32_to_bf16(__fmul_rn(__fmul_rn(x.x, scale), w.x)) |
                            ((unsigned int)f32_to_bf16(__fmul_rn(__fmul_rn(x.y, scale), w.y)) << 16);
    const unsigned int hi = (unsigned int)f32_to_bf16(__fmul_rn(__fmul_rn(x.z, scale), w.z)) |
                            ((unsigned int)f32_to_bf16(__fmul_rn(__fmul_rn(x.w, scale), w.w)) << 16);
    *reinterpret_cast<uint2*>(out) = make_uint2(lo, hi);
}
__device__ __forceinline__ void rms_norm_row(const float* x, const float* __restrict__ w, bf16_t* __restrict__ out,
                                             int n, float eps) {
    __shared__ float partial[32];
    __shared__ float total;
    const int T = blockDim.x;
    const bool vec = (n & 3) == 0;
    const int nv = vec ? n >> 2 : 0;  // float4 groups
    float4 xv[RMS_V], wv[RMS_V];
    float ss = 0.0f;
#pragma unroll
    for (int u = 0; u < RMS_V; ++u) {
        const int g = threadIdx.x + u * T;
        if (g < nv) {
            xv[u] = ldcg4(x + 4 * g);
            wv[u] = __ldg(reinterpret_cast<const float4*>(w) + g);
        }
    }
#pragma unroll
    for (int u = 0; u < RMS_V; ++u) {
        if (threadIdx.x + u * T < nv) ss = sumsq4(xv[u], ss);
    }
    for (int g = threadIdx.x + RMS_V * T; g < nv; g += T) ss = sumsq4(ldcg4(x + 4 * g), ss);
    if (!vec) {
        for (int i = threadIdx.x; i < n; i += T) {
            const float v = __ldcg(x + i);
            ss = fmaf(v, v, ss);
        }
    }
    ss = warp_sum(ss);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) partial[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        const int nw = (T + 31) >> 5;
        float v = lane < nw ? partial[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0) total = v;
    }
    __syncthreads();
    const float scale = rsqrtf(total / (float)n + eps);
#pragma unroll
    for (int u = 0; u < RMS_V; ++u) {
        const int g = threadIdx.x + u * T;
        if (g < nv) norm_store4(out + 4 * g, xv[u], wv[u], scale);
    }
    for (int g = threadIdx.x + RMS_V * T; g < nv; g += T) {
        norm_store4(out + 4 * g, ldcg4(x + 4 * g), __ldg(reinterpret_cast<const float4*>(w) + g), scale);
    }
    if (!vec) {
        for (int i = threadIdx.x; i < n; i += T) out[i] = f32_to_bf16(__fmul_rn(__fmul_rn(__ldcg(x + i), scale), w[i]));
    }
}

// out[r, :] = bf16(x[r, :] * rsqrt(mean(x^2) + eps) * w); one block of RMS_THREADS per row.
extern "C" __global__ void __launch_bounds__(RMS_THREADS) rms_norm_f32(const float* __restrict__ x,
                                                                      const float* __restrict__ w,
                                                                      bf16_t* __restrict__ out, int n, float eps) {
    pdl_enter();
    const i64 row = blockIdx.x;
    rms_norm_row(x + row * n, w, out + row * n, n, eps);
}

// In place on the fused qkv rows: heads [0, nq) use qw, heads [nq, nq + nkv) use kw.
// blockIdx = (row, head); one warp per head; hd <= 256.
extern "C" __global__ void head_rms_norm_f32(float* __restrict__ qkv, const float* __restrict__ qw,
                                            const float* __restrict__ kw, int nq, int nkv, int hd,
                                            int row_stride, float eps) {
    pdl_enter();
    const int head = blockIdx.y;
    float* v = qkv + (i64)blockIdx.x * row_stride + (i64)head * hd;
    const float* w = head < nq ? qw : kw;
    const int lane = threadIdx.x;
    float vals[8];
    float ss = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const int i = lane + 32 * e;
        vals[e] = i < hd ? v[i] : 0.0f;
        ss += vals[e] * vals[e];
    }
    ss = warp_sum(ss);
    const float scale = rsqrtf(ss / (float)hd + eps);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const int i = lane + 32 * e;
        if (i < hd) v[i] = vals[e] * scale * w[i];
    }
}
